package org.localpriv.client;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
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
    /** The most reports of one simulated device in {@link #perturbDevices}. */
    public static final int MAX_ROUNDS = 1_000;

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

    private void record(int[] idx, WordSource src, Ledger ledger, Double budget, String collection) {
        String time = Ledger.utcNow();
        if (!mechanism.memoized()) {
            ledger.record(Collections.singletonList(Release.of(mechanism, idx.length, collection, time, null)), budget);
            return;
        }
        Map<Integer, Long> counts = new LinkedHashMap<>();
        for (int x : idx) {
            counts.put(x, counts.getOrDefault(x, 0L) + 1);
        }
        Levels lv = mechanism.levels(); // computed once
        List<Release> plan = new ArrayList<>();
        for (Map.Entry<Integer, Long> e : counts.entrySet()) {
            Map<String, Object> memo = byIndex.get(e.getKey());
            // a memo not drawn yet has a key no stored memo has: checked before anything is drawn
            plan.add(new Release(mechanism.canonical, lv.epsilon, 0.0, e.getValue(), collection, time,
                    memo == null ? "new " + e.getKey() : Ledger.memoKey(memo), lv.epsPerm, lv.epsInst, lv.rrValues));
        }
        if (budget != null) {
            ledger.check(budget, plan);
        }
        List<Release> keyed = new ArrayList<>();
        int i = 0;
        for (Integer x : counts.keySet()) {
            Map<String, Object> memo = byIndex.get(x);
            if (memo == null) {
                memo = mechanism.memoize(x, src);
                byIndex.put(x, memo);
                memos.add(memo);
            }
            keyed.add(plan.get(i++).withMemoKey(Ledger.memoKey(memo)));
        }
        ledger.record(keyed, budget);
    }

    /**
     * Simulates many devices in one run (audits, docs/audit.md): each line is one new device, with no
     * memo, that reports its value {@code rounds} times through {@link #perturbLines(List, WordSource)}
     * of its own client (the code path of a real device), its memos kept for its reports only. Every
     * line is checked before any report is drawn.
     *
     * @param lines the devices' values, one per line
     * @param rounds reports per device, 1..{@link #MAX_ROUNDS}; at most {@link #MAX_LINES} reports in all
     * @param src the word source
     * @return the reports' JSON texts: {@code rounds} per line, device after device
     */
    public List<String> perturbDevices(List<String> lines, int rounds, WordSource src) {
        if (rounds < 1 || rounds > MAX_ROUNDS) {
            throw new IllegalArgumentException("reports per device must be an integer in 1..1,000, got " + rounds);
        }
        if ((long) lines.size() * rounds > MAX_LINES) {
            throw new IllegalArgumentException(lines.size() + " devices x " + rounds
                    + " reports is more than 1,000,000 reports in one run; split the input");
        }
        for (int i = 0; i < lines.size(); i++) {
            try {
                domain.encode(lines.get(i));
            } catch (PortableException e) {
                throw new PortableException(e.code, "line " + (i + 1) + ": " + e.detail());
            }
        }
        List<String> out = new ArrayList<>(lines.size() * rounds);
        for (String line : lines) {
            Client device = new Client(mechanism, domain);
            out.addAll(device.perturbLines(Collections.nCopies(rounds, line), src));
        }
        return out;
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
        return perturbLines(lines, src, null, null, "");
    }

    /**
     * {@link #perturbLines(List, WordSource)}, recorded in {@code ledger} before any report is drawn:
     * one release of every report, or for a memoized mechanism one release per memo with its key
     * ({@link Ledger#memoKey(Map)}). With {@code budget}, a run that would take the ledger's total
     * past it is refused first ({@link LedgerException}, one line; nothing is drawn). With a ledger,
     * the memos of new values are drawn before any report.
     *
     * @param lines the values, one per line (at most {@link #MAX_LINES})
     * @param src the word source
     * @param ledger the device's ledger, or null
     * @param budget the budget on its total (basic composition), or null
     * @param collection where the reports go (recorded in the ledger)
     * @return the reports' JSON texts, in order
     */
    public List<String> perturbLines(List<String> lines, WordSource src, Ledger ledger, Double budget, String collection) {
        if (budget != null && ledger == null) {
            throw new IllegalArgumentException("a budget needs a ledger");
        }
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
        if (ledger != null && idx.length > 0) {
            record(idx, src, ledger, budget, collection == null ? "" : collection);
        }
        List<String> out = new ArrayList<>(idx.length);
        for (int x : idx) {
            out.add(reportIndex(x, src));
        }
        return out;
    }
}
