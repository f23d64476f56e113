package org.localpriv.client;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The client's library entry point: a mechanism and a domain, then reports for values.
 *
 * <pre>
 *   Client c = Client.create("olh(eps=2.0)", "0..99");     // k from the domain
 *   String report = c.report("37", new SecureRandomSource()); // JSON text, e.g. 412873665
 * </pre>
 *
 * Memoized mechanisms keep one memo per value in {@link #memos()} (load earlier ones with
 * {@link #addMemos(List)}); store them on the device to make later reports longitudinal.
 */
public final class Client {
    /** The most values one call of {@link #perturbLines} perturbs (reports are held in memory). */
    public static final int MAX_LINES = 1_000_000;

    /** The mechanism (its {@code canonical} spec is the group's {@code mechanism}). */
    public final Mechanism mechanism;
    /** The input domain. */
    public final Domain domain;
    private final List<Object> memos = new ArrayList<>();
    private final Map<Integer, Map<String, Object>> byIndex = new HashMap<>();

    private Client(Mechanism mechanism, Domain domain) {
        this.mechanism = mechanism;
        this.domain = domain;
    }

    /** A client of a portable spec on a domain ({@code lo..hi} or {@code a,b,c}); {@link PortableException} on refusal. */
    public static Client create(String spec, String domain) {
        Domain d = Domain.parse(domain);
        return new Client(Mechanism.parse(spec, d), d);
    }

    /** Adds memos of earlier runs; those of another mechanism (or malformed) are kept but not used. */
    @SuppressWarnings("unchecked")
    public void addMemos(List<Object> earlier) {
        for (Object o : earlier) {
            memos.add(o);
            if (!(o instanceof Map)) {
                continue;
            }
            Map<String, Object> memo = (Map<String, Object>) o;
            Object idx = memo.get("index");
            if (mechanism.canonical.equals(memo.get("mechanism")) && idx instanceof Long
                    && (Long) idx >= 0 && (Long) idx < Integer.MAX_VALUE) {
                byIndex.put((int) (long) (Long) idx, memo);
            }
        }
    }

    /** Every memo: those added (kept as they were, in order) and those drawn since. */
    public List<Object> memos() {
        return memos;
    }

    /** One report (JSON text) of one value; a memoized mechanism reuses or draws the value's memo. */
    public String report(String value, WordSource src) {
        return reportIndex(domain.encode(value), src);
    }

    private String reportIndex(int x, WordSource src) {
        if (!mechanism.memoized()) {
            return mechanism.sample(x, src);
        }
        Map<String, Object> memo = byIndex.get(x);
        if (memo == null) {
            memo = mechanism.memoize(x, src);
            byIndex.put(x, memo);
            memos.add(memo);
        }
        return mechanism.sample(x, src, memo);
    }

    /**
     * The client command's contract: one report per value, every value checked before any report
     * is drawn (a bad value refuses the whole input, naming its line).
     *
     * @param lines the values, one per line (at most {@link #MAX_LINES})
     * @param src the word source
     * @return the reports' JSON texts, in order
     */
    public List<String> perturbLines(List<String> lines, WordSource src) {
        if (lines.size() > MAX_LINES) {
            throw new IllegalArgumentException("more than 1,000,000 input lines in one run; split the input");
        }
        int[] idx = new int[lines.size()];
        for (int i = 0; i < idx.length; i++) {
            try {
                idx[i] = domain.encode(lines.get(i));
            } catch (PortableException e) {
                throw new PortableException(e.code, "line " + (i + 1) + ": " + e.detail());
            }
        }
        List<String> out = new ArrayList<>(idx.length);
        for (int x : idx) {
            out.add(reportIndex(x, src));
        }
        return out;
    }
}
