package org.localpriv.client;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A client's input domain (docs/clients.md, "Domains"): an integer range {@code lo..hi}
 * ({@code -2^53 <= lo <= hi <= 2^53}, at most 10^9 values) or a label list {@code a,b,c} (labels
 * trimmed of blanks, at least 2, distinct, non-empty, at most 2^20, no {@code ..} in the text).
 */
public final class Domain {
    /** The most values of an integer range. */
    public static final long MAX_RANGE = 1_000_000_000L;
    /** The most labels of a label list. */
    public static final int MAX_LABELS = 1 << 20;
    private static final Pattern RANGE = Pattern.compile("([+-]?[0-9]+)\\.\\.([+-]?[0-9]+)");
    static final Pattern INT = Pattern.compile("[+-]?[0-9]+");
    private static final BigInteger TWO53 = BigInteger.ONE.shiftLeft(53);

    private final long lo;
    private final long hi;
    private final List<String> labels;
    private final Map<String, Integer> index;

    private Domain(long lo, long hi, List<String> labels) {
        this.lo = lo;
        this.hi = hi;
        this.labels = labels;
        this.index = new HashMap<>();
        if (labels != null) {
            for (int i = 0; i < labels.size(); i++) {
                index.put(labels.get(i), i);
            }
        }
    }

    /** {@code text} without the blanks (space, tab, CR, LF) around it. */
    public static String strip(String text) {
        int a = 0;
        int b = text.length();
        while (a < b && isBlank(text.charAt(a))) {
            a++;
        }
        while (b > a && isBlank(text.charAt(b - 1))) {
            b--;
        }
        return text.substring(a, b);
    }

    static boolean isBlank(char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
    }

    /** The domain of its text; {@code domain.syntax} when it is neither form. */
    public static Domain parse(String text) {
        String t = strip(text);
        Matcher m = RANGE.matcher(t);
        String shown = t.length() > 60 ? t.substring(0, 60) : t;
        if (m.matches()) {
            BigInteger lo = new BigInteger(m.group(1));
            BigInteger hi = new BigInteger(m.group(2));
            if (lo.compareTo(TWO53.negate()) < 0 || lo.compareTo(hi) > 0 || hi.compareTo(TWO53) > 0) {
                throw new PortableException("domain.syntax", "domain '" + shown + "': need lo <= hi within +-2^53");
            }
            if (hi.subtract(lo).longValue() + 1 > MAX_RANGE) {
                throw new PortableException("domain.syntax", "domain '" + shown + "': more than 10^9 values");
            }
            return new Domain(lo.longValue(), hi.longValue(), null);
        }
        List<String> labels = new ArrayList<>();
        for (String s : t.split(",", -1)) {
            labels.add(strip(s));
        }
        boolean ok = labels.size() >= 2 && labels.size() <= MAX_LABELS && !t.contains("..");
        if (ok) {
            java.util.Set<String> seen = new java.util.HashSet<>();
            for (String s : labels) {
                if (s.isEmpty() || !seen.add(s)) {
                    ok = false;
                    break;
                }
            }
        }
        if (!ok) {
            throw new PortableException("domain.syntax", "cannot read domain '" + shown
                    + "': expected lo..hi or distinct labels a,b,c");
        }
        return new Domain(0, 0, java.util.Collections.unmodifiableList(labels));
    }

    /** The number of values. */
    public int size() {
        return labels != null ? labels.size() : (int) (hi - lo + 1);
    }

    /** The index of one input value (blanks around it removed); {@code value.out_of_domain} if it is not in the domain. */
    public int encode(String value) {
        String v = strip(value);
        String shown = v.length() > 40 ? v.substring(0, 40) : v;
        if (labels != null) {
            Integer i = index.get(v);
            if (i == null) {
                throw new PortableException("value.out_of_domain", "'" + shown + "' is not one of the domain's labels");
            }
            return i;
        }
        if (INT.matcher(v).matches()) {
            BigInteger n = new BigInteger(v);
            if (n.compareTo(BigInteger.valueOf(lo)) >= 0 && n.compareTo(BigInteger.valueOf(hi)) <= 0) {
                return (int) (n.longValue() - lo);
            }
        }
        throw new PortableException("value.out_of_domain", "'" + shown + "' is not an integer in " + lo + ".." + hi);
    }
}
