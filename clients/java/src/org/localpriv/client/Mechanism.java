package org.localpriv.client;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * A portable mechanism read from its spec string (docs/clients.md, "Spec strings"), with its float64
 * parameters and its scalar sampler ("Samplers", "Memoized mechanisms"). Reports are returned as
 * their JSON text in the collector's wire format: an integer, a lowercase hex string in double
 * quotes, or a number ({@code pm}).
 */
public final class Mechanism {
    private static final String INT = "int";
    private static final String NUM = "number";
    private static final String WORD = "word";
    private static final long TWO32 = 1L << 32;
    private static final Map<String, String[][]> KEYS = new LinkedHashMap<>();
    private static final Set<String> MEMOIZED = new java.util.HashSet<>(Arrays.asList("lgrr", "lsue", "loue", "lsoue", "losue", "lblh",
        "lolh", "rappor"));
    private static final Set<String> MEMO_KEYS = new java.util.HashSet<>(Arrays.asList("mechanism", "index", "memo"));
    private static final Pattern KEY = Pattern.compile("[a-z_][a-z0-9_]*");
    private static final Pattern VALUE = Pattern.compile("[^ \t\r\n,()=]+");
    private static final Pattern INT_RE = Pattern.compile("[+-]?[0-9]+");
    private static final Pattern NUM_RE = Pattern.compile("[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?");
    private static final Pattern WORD_RE = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");
    private static final double SQRT_HALF = 0.7071067811865476;
    private static final double TWO_PI = 6.283185307179586;
    /** The largest grid of the planar mechanisms, in cells. */
    public static final long MAX_GRID_CELLS = 1_000_000L;

    static {
        String[][] kEps = {{"k", INT}, {"eps", NUM}};
        for (String n : new String[] {"krr", "oue", "sue", "duchi", "pm"}) {
            KEYS.put(n, kEps);
        }
        String[][] lh = {{"k", INT}, {"eps", NUM}, {"n_seeds", INT}, {"hash", WORD}};
        KEYS.put("olh", lh);
        KEYS.put("blh", lh);
        KEYS.put("ss", new String[][] {{"k", INT}, {"eps", NUM}, {"omega", INT}});
        KEYS.put("hr", new String[][] {{"k", INT}, {"eps", NUM}, {"blocks", INT}});
        KEYS.put("geometric", new String[][] {{"k", INT}, {"eps", NUM}, {"lo", INT}, {"hi", INT}});
        KEYS.put("sw", new String[][] {{"k", INT}, {"eps", NUM}, {"buckets", INT}});
        String[][] planar = {{"eps", NUM}, {"nrows", INT}, {"ncols", INT}, {"cell_km", NUM}, {"k", INT}};
        KEYS.put("planar-geometric", planar);
        KEYS.put("planar-laplace", planar);
        String[][] lon = {{"k", INT}, {"eps_perm", NUM}, {"eps_1", NUM}};
        for (String n : new String[] {"lgrr", "lsue", "loue", "lsoue", "losue"}) {
            KEYS.put(n, lon);
        }
        String[][] llh = {{"k", INT}, {"eps_perm", NUM}, {"eps_1", NUM}, {"n_seeds", INT}, {"hash", WORD}};
        KEYS.put("lblh", llh);
        KEYS.put("lolh", llh);
        KEYS.put("rappor", new String[][] {{"k", INT}, {"m", INT}, {"h", INT}, {"cohorts", INT}, {"f", NUM}, {"p", NUM},
            {"q", NUM}, {"keys", WORD}});
    }

    /** The spec name ({@code krr}, {@code planar-geometric}, ...). */
    public final String name;
    /** The canonical spec, what a group's {@code mechanism} carries. */
    public final String canonical;
    /** The input domain's size: inputs are indices 0..k-1. */
    public final int k;
    private double eps;
    private double p;
    private double q;
    private double p1;
    private double q1;
    private double p2;
    private double q2;
    private double eps2;
    private double epsPerm;
    private long g;
    private long nSeeds = TWO32;
    private int omega;
    private long blocks;
    private long width;
    private long bigK;
    private BigInteger ratioA;
    private BigInteger ratioB;
    private BigInteger lo;
    private BigInteger hi;
    private long pmN;
    private long pmW;
    private long pmD;
    private double grid;
    private long buckets;
    private double swB;
    private int nrows;
    private int ncols;
    private double cellKm;
    private long radius;
    private long planarA;
    private int m;
    private int h;
    private int cohorts;
    private double f;
    private boolean wide;
    private final Map<String, Object> derived = new LinkedHashMap<>();

    private Mechanism(String name, String canonical, int k) {
        this.name = name;
        this.canonical = canonical;
        this.k = k;
    }

    /** The spec names of the portable mechanisms (protocol version 1). */
    public static Set<String> names() {
        return KEYS.keySet();
    }

    /** Whether the mechanism keeps a memo (the longitudinal ones and RAPPOR). */
    public boolean memoized() {
        return MEMOIZED.contains(name);
    }

    /** The float64 and integer parameters the sampler uses, named as the vectors' {@code derived}. */
    public Map<String, Object> derived() {
        return derived;
    }

    /** The reference's spec size cap (10^9) on a product of sizes, refused as a bad value. */
    private static void capProduct(String what, long... factors) {
        BigInteger size = BigInteger.ONE;
        for (long f : factors) {
            size = size.multiply(BigInteger.valueOf(f));
        }
        if (size.compareTo(BigInteger.valueOf(1_000_000_000L)) > 0) {
            throw bad(what + " = " + size + " is above the cap of 1000000000 (the reference's spec size cap)");
        }
    }

    private static PortableException bad(String msg) {
        return new PortableException("spec.bad_value", msg);
    }

    private static String clip(String s, int n) {
        return "'" + (s.length() > n ? s.substring(0, n) : s) + "'";
    }

    // ------------------------------------------------------------------ spec strings
    /**
     * A portable mechanism from its spec string, checked in the protocol's order (grammar, name,
     * keys, value types, k against the domain, required keys, ranges).
     *
     * @param spec {@code NAME(key=value,...)}
     * @param domain the input domain (fills {@code k}), or null
     * @return the mechanism
     * @throws PortableException with the protocol's error code
     */
    public static Mechanism parse(String spec, Domain domain) {
        String t = Domain.strip(spec);
        int i = 0;
        while (i < t.length() && (t.charAt(i) >= 'a' && t.charAt(i) <= 'z'
                || i > 0 && (t.charAt(i) >= '0' && t.charAt(i) <= '9' || t.charAt(i) == '-'))) {
            i++;
        }
        int nameEnd = i;
        while (i < t.length() && Domain.isBlank(t.charAt(i))) {
            i++;
        }
        if (nameEnd == 0 || i >= t.length() || t.charAt(i) != '(' || !t.endsWith(")") || t.length() - 1 <= i) {
            throw new PortableException("spec.syntax", "cannot read " + clip(spec, 80) + ": expected NAME(key=value,...)");
        }
        String name = t.substring(0, nameEnd);
        String body = t.substring(i + 1, t.length() - 1);
        List<String[]> pairs = new ArrayList<>();
        if (!Domain.strip(body).isEmpty()) {
            for (String part : body.split(",", -1)) {
                int eq = part.indexOf('=');
                String key = Domain.strip(eq < 0 ? part : part.substring(0, eq));
                String value = eq < 0 ? "" : Domain.strip(part.substring(eq + 1));
                if (eq < 0 || !KEY.matcher(key).matches() || !VALUE.matcher(value).matches()) {
                    throw new PortableException("spec.syntax", "cannot read argument " + clip(Domain.strip(part), 40)
                            + ": expected key=value");
                }
                pairs.add(new String[] {key, value});
            }
        }
        String[][] keys = KEYS.get(name);
        if (keys == null) {
            throw new PortableException("spec.unknown_mechanism", clip(name, 40) + " is not a portable mechanism; known: "
                    + String.join(", ", new TreeSet<>(KEYS.keySet())));
        }
        Map<String, String> types = new LinkedHashMap<>();
        for (String[] kt : keys) {
            types.put(kt[0], kt[1]);
        }
        Map<String, String> fields = new LinkedHashMap<>();
        for (String[] kv : pairs) {
            if (!types.containsKey(kv[0])) {
                throw new PortableException("spec.unknown_key", name + ": unknown key " + clip(kv[0], 40) + "; accepted: "
                        + String.join(", ", types.keySet()));
            }
            if (fields.containsKey(kv[0])) {
                throw new PortableException("spec.duplicate_key", name + ": " + kv[0] + " given twice");
            }
            fields.put(kv[0], kv[1]);
        }
        Map<String, Object> v = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : fields.entrySet()) {
            v.put(e.getKey(), typed(name, e.getKey(), types.get(e.getKey()), e.getValue()));
        }
        if (domain != null) {
            BigInteger size = BigInteger.valueOf(domain.size());
            if (v.containsKey("k") && !v.get("k").equals(size)) {
                throw bad(name + ": k=" + v.get("k") + " but the domain has " + size + " values");
            }
            v.put("k", size);
        }
        List<String> missing = new ArrayList<>();
        for (String req : required(name)) {
            if (!v.containsKey(req)) {
                missing.add(req);
            }
        }
        if (!missing.isEmpty()) {
            throw new PortableException("spec.missing_key", name + ": missing " + String.join(", ", missing));
        }
        for (String key : new String[] {"eps", "eps_perm", "eps_1", "cell_km", "f", "p", "q"}) {
            if (v.containsKey(key)) {
                double x = (Double) v.get(key);
                boolean zeroOk = key.equals("f") || key.equals("p") || key.equals("q");
                if (!(x > 0 || zeroOk && x == 0)) {
                    throw bad(name + ": " + key + " must be > 0, got " + Json.pyFloat(x));
                }
            }
        }
        if (v.containsKey("k")) {
            BigInteger kk = (BigInteger) v.get("k");
            if (kk.compareTo(BigInteger.valueOf(2)) < 0 || kk.compareTo(BigInteger.valueOf(1_000_000_000L)) > 0) {
                throw bad(name + ": k must be in 2..10^9, got " + kk);
            }
        }
        if (v.containsKey("n_seeds")) {
            BigInteger n = (BigInteger) v.get("n_seeds");
            if (n.signum() < 1 || n.compareTo(BigInteger.valueOf(TWO32)) > 0) {
                throw bad(name + ": n_seeds must be in 1..2^32, got " + n);
            }
        }
        if (name.equals("planar-geometric")) {
            planarRate((Double) v.get("eps") * (Double) v.getOrDefault("cell_km", 0.5));
        }
        if (v.containsKey("keys") && !v.get("keys").equals("index")) {
            throw bad(name + ": keys must be index in the portable protocol, got " + clip((String) v.get("keys"), 40));
        }
        if (v.containsKey("hash") && !v.get("hash").equals("xxh64")) {
            throw bad(name + ": hash must be xxh64 in the portable protocol, got " + clip((String) v.get("hash"), 40));
        }
        for (Map.Entry<String, Object> e : v.entrySet()) {
            if (e.getValue() instanceof BigInteger && ((BigInteger) e.getValue()).bitLength() > 63) {
                throw bad(name + ": " + e.getKey() + " must fit in 64 bits, got " + e.getValue());
            }
        }
        return build(name, v);
    }

    private static List<String> required(String name) {
        if (name.startsWith("planar-")) {
            return Arrays.asList("eps", "nrows", "ncols");
        }
        if (name.equals("rappor")) {
            return Arrays.asList("k");
        }
        if (name.startsWith("l")) { // the longitudinal mechanisms
            return Arrays.asList("k", "eps_perm", "eps_1");
        }
        return Arrays.asList("k", "eps");
    }

    private static Object typed(String name, String key, String kind, String text) {
        if (kind.equals(INT)) {
            if (!INT_RE.matcher(text).matches()) {
                throw bad(name + ": " + key + " must be an integer, got " + clip(text, 40));
            }
            return new BigInteger(text.startsWith("+") ? text.substring(1) : text);
        }
        if (kind.equals(NUM)) {
            if (!NUM_RE.matcher(text).matches()) {
                throw bad(name + ": " + key + " must be a number, got " + clip(text, 40));
            }
            double d = Double.parseDouble(text);
            if (Double.isInfinite(d) || Double.isNaN(d)) {
                throw bad(name + ": " + key + " must be finite, got " + clip(text, 40));
            }
            return d;
        }
        if (!WORD_RE.matcher(text).matches()) {
            throw bad(name + ": " + key + " must be a word, got " + clip(text, 40));
        }
        return text;
    }

    private static long intIn(String name, String key, Object value, long min, long max) {
        BigInteger b = (BigInteger) value;
        if (b.compareTo(BigInteger.valueOf(min)) < 0 || b.compareTo(BigInteger.valueOf(max)) > 0) {
            throw bad(name + ": " + key + " must be in " + min + ".." + max + ", got " + b);
        }
        return b.longValue();
    }

    private static String canon(String name, Object... kv) {
        StringBuilder sb = new StringBuilder(name).append('(');
        boolean first = true;
        for (int i = 0; i < kv.length; i += 2) {
            Object val = kv[i + 1];
            if (val == null) {
                continue;
            }
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append(kv[i]).append('=').append(val instanceof Double ? Json.pyFloat((Double) val) : val.toString());
        }
        return sb.append(')').toString();
    }

    // ------------------------------------------------------------------ float64 parameters
    static double grrP(double level, long g) {
        return 1.0 / (1.0 + (g - 1) * Math.exp(-level));
    }

    static double expit(double l) {
        return 1.0 / (1.0 + Math.exp(-l));
    }

    static double logExpm1(double v) {
        return v > 1.0 ? v + Math.log(-Math.expm1(-v)) : Math.log(Math.expm1(v));
    }

    static double logAddExp(double a, double b) {
        if (a == Double.NEGATIVE_INFINITY) {
            return b;
        }
        double hi = Math.max(a, b);
        double lo = Math.min(a, b);
        return hi + Math.log1p(Math.exp(lo - hi));
    }

    /** {@code L2(l1, t, g)}: the second level of two chained GRRs on {@code g} values whose chained level is {@code t}. */
    static double grrSecond(double l1, double t, long g) {
        double lg2 = g > 2 ? Math.log(g - 2.0) : Double.NEGATIVE_INFINITY;
        return logAddExp(logExpm1(t + l1), lg2 + logExpm1(t)) - t - logExpm1(l1 - t);
    }

    private static double[] ueLogits(String kind, double e) {
        return kind.equals("sue") ? new double[] {e / 2.0, -e / 2.0} : new double[] {0.0, -e};
    }

    private static double logit(double x) {
        return Math.log(x) - Math.log1p(-x);
    }

    /** eps_2 of a chained unary encoding: the root of {@code logit(P) - logit(Q) = eps_1}, by bisection to the last bit. */
    static double ueSecond(String first, String second, double epsPerm, double eps1) {
        double[] l1 = ueLogits(first, epsPerm);
        double pp1 = expit(l1[0]);
        double qq1 = expit(l1[1]);
        java.util.function.DoubleUnaryOperator fn = e2 -> {
            double[] l2 = ueLogits(second, e2);
            double pp2 = expit(l2[0]);
            double qq2 = expit(l2[1]);
            return logit(pp1 * pp2 + (1 - pp1) * qq2) - logit(qq1 * pp2 + (1 - qq1) * qq2) - eps1;
        };
        double lo = eps1;
        if (fn.applyAsDouble(lo) >= 0) {
            return lo;
        }
        double hi = 2.0 * lo;
        while (fn.applyAsDouble(hi) < 0) {
            hi *= 2.0;
            if (!(hi <= 1e306)) {
                throw bad("cannot reach eps_1=" + Json.pyFloat(eps1) + " (numerically too close to eps_perm)");
            }
        }
        for (int i = 0; i < 2200; i++) {
            double mid = lo + (hi - lo) / 2;
            if (mid <= lo || mid >= hi) {
                break;
            }
            if (fn.applyAsDouble(mid) < 0) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        return Math.abs(fn.applyAsDouble(lo)) <= Math.abs(fn.applyAsDouble(hi)) ? lo : hi;
    }

    /** L-OLH's hash range: the first {@code g} in 2..min(1000, rint(e^min(eps_perm, 10)) + 3) minimizing {@code q(1-q)/(P-q)^2}. */
    static long lolhG(double epsPerm, double eps1) {
        long gMax = Math.min(1000, (long) Math.rint(Math.exp(Math.min(epsPerm, 10.0))) + 3);
        long best = 2;
        double bestV = Double.POSITIVE_INFINITY;
        for (long gg = 2; gg <= gMax; gg++) {
            double qq = 1.0 / gg;
            double pp = 1.0 / (1.0 + (gg - 1) * Math.exp(-eps1));
            double val = pp > qq ? qq * (1 - qq) / ((pp - qq) * (pp - qq)) : Double.POSITIVE_INFINITY;
            if (val < bestV) {
                bestV = val;
                best = gg;
            }
        }
        return best;
    }

    /** {@code a = floor(2^32 es / sqrt(2)) - 1}: the planar geometric proposal's rate {@code a / 2^32}. */
    static long planarRate(double es) {
        if (!(es <= 0x1.0p20)) {
            throw bad("planar-geometric: eps * cell_km = " + Json.pyFloat(es)
                    + " is above the portable sampler's largest rate 2^20");
        }
        long a = (long) Math.floor(Math.scalb(es * SQRT_HALF, 32)) - 1;
        if (a < 1) {
            throw bad("planar-geometric: eps * cell_km = " + Json.pyFloat(es)
                    + " is below the portable sampler's least rate 2^-31");
        }
        return a;
    }

    private static void checkChain(double epsPerm, double eps1) {
        if (!(eps1 < epsPerm * (1 - 1e-9))) {
            throw bad("eps_1 (" + Json.pyFloat(eps1) + ") must be smaller than the memoized level eps_perm ("
                    + Json.pyFloat(epsPerm) + ")");
        }
    }

    private static Mechanism build(String name, Map<String, Object> v) {
        int k = v.containsKey("k") ? ((BigInteger) v.get("k")).intValue() : 0;
        Double eps = (Double) v.get("eps");
        Mechanism mm;
        switch (name) {
            case "krr":
                mm = new Mechanism(name, canon(name, "k", k, "eps", eps), k);
                mm.p = grrP(eps, k);
                mm.derived.put("p", mm.p);
                break;
            case "oue":
                mm = new Mechanism(name, canon(name, "k", k, "eps", eps), k);
                mm.p = 0.5;
                mm.q = 1.0 / (1.0 + Math.exp(eps));
                mm.derived.put("p", mm.p);
                mm.derived.put("q", mm.q);
                break;
            case "sue": {
                mm = new Mechanism(name, canon(name, "k", k, "eps", eps), k);
                mm.p = expit(eps / 2.0);
                mm.q = 1.0 - mm.p >= 0x1.0p-20 ? 1.0 - mm.p : expit(-eps / 2.0);
                mm.derived.put("p", mm.p);
                mm.derived.put("q", mm.q);
                break;
            }
            case "olh":
            case "blh": {
                long ns = v.containsKey("n_seeds") ? ((BigInteger) v.get("n_seeds")).longValue() : TWO32;
                mm = new Mechanism(name, canon(name, "k", k, "eps", eps, "n_seeds", ns == TWO32 ? null : ns), k);
                mm.nSeeds = ns;
                mm.g = name.equals("blh") ? 2
                        : Math.min(1L << 30, Math.max(2, (long) Math.rint(Math.exp(Math.min(eps, 30.0))) + 1));
                mm.p = grrP(eps, mm.g);
                mm.derived.put("g", mm.g);
                mm.derived.put("p", mm.p);
                break;
            }
            case "ss": {
                Object om = v.get("omega");
                int w = om != null ? (int) intIn(name, "omega", om, 1, k - 1)
                        : (int) Math.min(k - 1, Math.max(1, (long) Math.rint(k / (1.0 + Math.exp(eps)))));
                mm = new Mechanism(name, canon(name, "k", k, "eps", eps, "omega", om == null ? null : w), k);
                mm.omega = w;
                mm.p = 1.0 / (1.0 + ((double) (k - w) / w) * Math.exp(-eps));
                mm.derived.put("omega", (long) w);
                mm.derived.put("p", mm.p);
                break;
            }
            case "hr": {
                Object bl = v.get("blocks");
                long b;
                if (bl != null) {
                    b = intIn(name, "blocks", bl, 1, 2L * k);
                    if ((b & (b - 1)) != 0) {
                        throw bad("hr: blocks must be a power of two, got " + b);
                    }
                } else {
                    // floor(min(log2(2k), eps / ln 2)), the first term exact (2k is an integer)
                    long log2 = 63 - Long.numberOfLeadingZeros(2L * k);
                    b = eps <= 1.0 ? 1 : 1L << Math.min(log2, (long) Math.floor(eps / Math.log(2.0)));
                }
                mm = new Mechanism(name, canon(name, "k", k, "eps", eps, "blocks", bl == null ? null : b), k);
                long per = (k + b - 1) / b;
                mm.blocks = b;
                mm.width = Long.highestOneBit(per) << 1;
                mm.bigK = b * mm.width;
                mm.p = 2.0 * b / (2.0 * b - 1.0 + Math.exp(eps));
                mm.derived.put("blocks", b);
                mm.derived.put("width", mm.width);
                mm.derived.put("K", mm.bigK);
                mm.derived.put("p_uniform", mm.p);
                break;
            }
            case "geometric": {
                Object l = v.get("lo");
                Object hh = v.get("hi");
                if ((l == null) != (hh == null)) {
                    throw bad("geometric: give both lo and hi (truncated) or neither (untruncated)");
                }
                if (l != null && ((BigInteger) l).compareTo((BigInteger) hh) >= 0) {
                    throw bad("geometric: need lo < hi, got lo=" + l + ", hi=" + hh);
                }
                mm = new Mechanism(name, canon(name, "k", k, "eps", eps, "lo", l, "hi", hh), k);
                mm.lo = (BigInteger) l;
                mm.hi = (BigInteger) hh;
                BigInteger[] r = Primitives.exactRatio(eps);
                mm.ratioA = r[0];
                mm.ratioB = r[1];
                mm.derived.put("a", r[0].toString());
                mm.derived.put("b", r[1].toString());
                break;
            }
            case "duchi": {
                mm = new Mechanism(name, canon(name, "k", k, "eps", eps), k);
                mm.p = Math.tanh(0.5 * eps);
                List<Object> pp = new ArrayList<>();
                for (int x = 0; x < Math.min(k, 8); x++) {
                    pp.add(mm.duchiP(x));
                }
                mm.derived.put("p_plus", pp);
                break;
            }
            case "pm": {
                mm = new Mechanism(name, canon(name, "k", k, "eps", eps), k);
                double sm1 = eps < 1400.0 ? Math.expm1(0.5 * eps) : Double.POSITIVE_INFINITY;
                double cm1 = 2.0 / sm1;
                double cp1 = 2.0 + 2.0 / sm1;
                double base = Math.min(cm1, cp1 / k) / 1024;
                double nEst = base > 0 ? 2.0 * cp1 / base : Double.POSITIVE_INFINITY;
                if (!(nEst < 0x1.0p52)) {
                    throw bad("pm(k=" + k + ",eps=" + Json.pyFloat(eps)
                            + "): the grid would need more than 2^52 points; use eps <= 56");
                }
                mm.grid = Math.scalb(1.0, Math.getExponent(base)); // 2^(e-1) for base = f 2^e, 0.5 <= f < 1
                mm.pmW = Math.max(1, (long) Math.rint(cm1 / mm.grid));
                mm.pmD = Math.max(1, (long) Math.rint(cp1 / (k * mm.grid)));
                mm.pmN = mm.pmW + k * mm.pmD + mm.pmD % 2;
                mm.p = 1.0 / (1.0 + ((double) (mm.pmN - mm.pmW) / mm.pmW) * Math.exp(-eps));
                mm.derived.put("grid", mm.grid);
                mm.derived.put("N", mm.pmN);
                mm.derived.put("W", mm.pmW);
                mm.derived.put("D", mm.pmD);
                mm.derived.put("keep", mm.p);
                break;
            }
            case "sw": {
                Object bu = v.get("buckets");
                long nb = bu == null ? k : intIn(name, "buckets", bu, 1, Long.MAX_VALUE);
                capProduct("sw: k x buckets", k, nb);
                mm = new Mechanism(name, canon(name, "k", k, "eps", eps, "buckets", nb), k);
                mm.buckets = nb;
                mm.swB = (eps + Math.expm1(-eps)) / (2.0 * (Math.expm1(eps) - eps));
                if (!(mm.swB > 0 && !Double.isInfinite(mm.swB))) {
                    throw bad("sw: eps=" + Json.pyFloat(eps) + " gives no finite window");
                }
                double norm = 2.0 * mm.swB * Math.exp(eps) + 1.0;
                mm.p = Math.exp(eps) / norm;
                mm.q = 1.0 / norm;
                mm.derived.put("b", mm.swB);
                mm.derived.put("p", mm.p);
                mm.derived.put("q", mm.q);
                mm.derived.put("buckets", nb);
                break;
            }
            case "planar-geometric":
            case "planar-laplace": {
                long nr = intIn(name, "nrows", v.get("nrows"), 1, MAX_GRID_CELLS);
                long nc = intIn(name, "ncols", v.get("ncols"), 1, MAX_GRID_CELLS);
                double cell = (Double) v.getOrDefault("cell_km", 0.5);
                if (nr * nc > MAX_GRID_CELLS) {
                    throw bad("grid: " + nr + " x " + nc + " = " + nr * nc + " cells is above the limit of 1,000,000");
                }
                if (nr * cell / 110.574 > 90.0 + 1e-9) {
                    throw bad("grid: " + nr + " rows of " + Json.pyFloat(cell) + " km reach beyond the north pole");
                }
                int cells = (int) (nr * nc);
                if (v.containsKey("k") && ((BigInteger) v.get("k")).longValue() != cells) {
                    throw bad(name + ": k=" + v.get("k") + " but the grid has " + cells + " cells");
                }
                mm = new Mechanism(name, canon(name, "eps", eps, "nrows", nr, "ncols", nc, "cell_km", cell), cells);
                mm.nrows = (int) nr;
                mm.ncols = (int) nc;
                mm.cellKm = cell;
                double es = eps * cell;
                long big = Math.max(nr, nc);
                mm.radius = (long) Math.max(big, Math.min(1500, big + Math.ceil(45.0 / es)));
                if (name.equals("planar-geometric")) {
                    mm.planarA = planarRate(es);
                    mm.derived.put("R", mm.radius);
                    mm.derived.put("a", mm.planarA);
                    mm.derived.put("b", TWO32);
                }
                break;
            }
            case "lgrr": {
                double ep = (Double) v.get("eps_perm");
                double e1 = (Double) v.get("eps_1");
                checkChain(ep, e1);
                mm = new Mechanism(name, canon(name, "k", k, "eps_perm", ep, "eps_1", e1), k);
                mm.eps2 = grrSecond(ep, e1, k);
                mm.epsPerm = ep;
                mm.p1 = grrP(ep, k);
                mm.p2 = grrP(mm.eps2, k);
                mm.derived.put("eps_2", mm.eps2);
                mm.derived.put("p1", mm.p1);
                mm.derived.put("p2", mm.p2);
                break;
            }
            case "lsue":
            case "loue":
            case "lsoue":
            case "losue": {
                double ep = (Double) v.get("eps_perm");
                double e1 = (Double) v.get("eps_1");
                checkChain(ep, e1);
                mm = new Mechanism(name, canon(name, "k", k, "eps_perm", ep, "eps_1", e1), k);
                String first = name.equals("lsue") || name.equals("lsoue") ? "sue" : "oue";
                String second = name.equals("lsue") || name.equals("losue") ? "sue" : "oue";
                mm.eps2 = ueSecond(first, second, ep, e1);
                mm.epsPerm = ep;
                double[] l1 = ueLogits(first, ep);
                double[] l2 = ueLogits(second, mm.eps2);
                mm.p1 = expit(l1[0]);
                mm.q1 = expit(l1[1]);
                mm.p2 = expit(l2[0]);
                mm.q2 = expit(l2[1]);
                mm.derived.put("eps_2", mm.eps2);
                mm.derived.put("p1", mm.p1);
                mm.derived.put("q1", mm.q1);
                mm.derived.put("p2", mm.p2);
                mm.derived.put("q2", mm.q2);
                break;
            }
            case "lblh":
            case "lolh": {
                double ep = (Double) v.get("eps_perm");
                double e1 = (Double) v.get("eps_1");
                checkChain(ep, e1);
                long ns = v.containsKey("n_seeds") ? ((BigInteger) v.get("n_seeds")).longValue() : TWO32;
                mm = new Mechanism(name, canon(name, "k", k, "eps_perm", ep, "eps_1", e1, "n_seeds", ns == TWO32 ? null : ns), k);
                mm.nSeeds = ns;
                mm.g = name.equals("lblh") ? 2 : lolhG(ep, e1);
                mm.eps2 = grrSecond(ep, e1, mm.g);
                mm.epsPerm = ep;
                mm.p1 = grrP(ep, mm.g);
                mm.p2 = grrP(mm.eps2, mm.g);
                mm.derived.put("g", mm.g);
                mm.derived.put("eps_2", mm.eps2);
                mm.derived.put("p1", mm.p1);
                mm.derived.put("p2", mm.p2);
                break;
            }
            case "rappor": {
                int mBits = (int) intIn(name, "m", v.getOrDefault("m", BigInteger.valueOf(32)), 1, 4096);
                int hh = (int) intIn(name, "h", v.getOrDefault("h", BigInteger.valueOf(2)), 1, mBits);
                int co = (int) intIn(name, "cohorts", v.getOrDefault("cohorts", BigInteger.valueOf(8)), 1, 1 << 16);
                capProduct("rappor: k x cohorts x m", k, co, mBits);
                capProduct("rappor: k x cohorts x h", k, co, hh);
                double ff = (Double) v.getOrDefault("f", 0.5);
                double pp = (Double) v.getOrDefault("p", 0.5);
                double qq = (Double) v.getOrDefault("q", 0.75);
                if (!(ff >= 0 && ff < 1)) {
                    throw bad("rappor: need 0 <= f < 1, got f=" + Json.pyFloat(ff));
                }
                if (!(pp >= 0 && pp < qq && qq <= 1)) {
                    throw bad("rappor: need 0 <= p < q <= 1, got p=" + Json.pyFloat(pp) + ", q=" + Json.pyFloat(qq));
                }
                double half = ff / 2.0;
                double s1 = (1.0 - half) * qq + half * pp;
                double s0 = half * qq + (1.0 - half) * pp;
                if (!(s0 > 0 && s0 < s1 && s1 < 1)) {
                    throw bad("rappor: the report bits must be random: need 0 < P(S=1|B=0) and P(S=1|B=1) < 1");
                }
                mm = new Mechanism(name, canon(name, "k", k, "m", mBits, "h", hh, "cohorts", co, "f", ff, "p", pp, "q", qq), k);
                mm.m = mBits;
                mm.h = hh;
                mm.cohorts = co;
                mm.f = ff;
                mm.p = pp;
                mm.q = qq;
                mm.wide = mBits + (32 - Integer.numberOfLeadingZeros(co - 1)) > 62;
                mm.derived.put("prr_set", 1.0 - half);
                mm.derived.put("prr_clear", half);
                mm.derived.put("wide", mm.wide);
                break;
            }
            default:
                throw new PortableException("spec.unknown_mechanism", name + " is not a portable mechanism");
        }
        if (eps != null) {
            mm.eps = eps;
        }
        return mm;
    }

    // ------------------------------------------------------------------ privacy levels
    /** Most input pairs (k x k, per cohort) the RAPPOR level examines when no witness ends it early. */
    public static final long MAX_LEVEL_PAIRS = 1L << 24;

    /**
     * {@code log(p* / q*)} of GRR at {@code l1} then GRR at {@code l2} on {@code g} values:
     * {@code log(e^(l1+l2) + g - 1) - log(e^l1 + e^l2 + g - 2)}.
     */
    public static double grrChainLevel(double l1, double l2, long g) {
        double lg2 = g > 2 ? Math.log(g - 2.0) : Double.NEGATIVE_INFINITY;
        return logAddExp(l1 + l2, Math.log(g - 1.0)) - logAddExp(logAddExp(l1, l2), lg2);
    }

    private double geometricLevel() {
        final boolean truncated = lo != null && hi != null;
        final double e = eps;
        final double log1pa = Math.log1p(Math.exp(-e));
        final double logC = Math.log(-Math.expm1(-e)) - log1pa;
        java.util.TreeSet<Long> cols = new java.util.TreeSet<>();
        long l = 0;
        long u = 0;
        if (truncated) {
            l = lo.longValue();
            u = hi.longValue();
            cols.add(l);
            cols.add(u);
            if (l + 1 <= u - 1) {
                cols.add(l + 1);
                cols.add(u - 1);
            }
        } else {
            cols.addAll(Arrays.asList(-1L, 0L, (long) k - 1, (long) k));
        }
        java.util.TreeSet<Long> rows = new java.util.TreeSet<>(Arrays.asList(0L, (long) k - 1));
        for (long z : cols) {
            rows.add(Math.min(k - 1, Math.max(0, z)));
        }
        double best = 0;
        for (long z : cols) {
            double top = Double.NEGATIVE_INFINITY;
            double low = Double.POSITIVE_INFINITY;
            for (long x : rows) {
                double lp;
                if (truncated && z == l) {
                    lp = logCdf(l - x, e, log1pa);
                } else if (truncated && z == u) {
                    lp = logCdf(x - u, e, log1pa);
                } else {
                    lp = logC - e * Math.abs((double) (z - x));
                }
                top = Math.max(top, lp);
                low = Math.min(low, lp);
            }
            if (top > Double.NEGATIVE_INFINITY) {
                best = Math.max(best, top - low);
            }
        }
        return best;
    }

    private static double logCdf(long s, double e, double log1pa) {
        return s < 0 ? -e * Math.abs((double) s) - log1pa : Math.log1p(-Math.exp(-e * (Math.abs((double) s) + 1.0) - log1pa));
    }

    private java.util.Set<Integer> bloom(int x, int c) {
        java.util.Set<Integer> bits = new java.util.HashSet<>();
        for (int i = 0; i < h; i++) {
            bits.add((int) Long.remainderUnsigned(Xxh64.le64(x, (long) c * h + i), m));
        }
        return bits;
    }

    private double rapporPairLevel(double l1, double l0) {
        double top = h * (l1 - l0);
        for (int c = 0; c < cohorts; c++) {
            List<java.util.Set<Integer>> full = new ArrayList<>();
            for (int x = 0; x < k && full.size() < 64; x++) {
                java.util.Set<Integer> b = bloom(x, c);
                if (b.size() == h) {
                    full.add(b);
                }
            }
            for (int i = 0; i < full.size(); i++) {
                for (int j = i + 1; j < full.size(); j++) {
                    if (java.util.Collections.disjoint(full.get(i), full.get(j))) {
                        return top;
                    }
                }
            }
        }
        if ((long) k * k > MAX_LEVEL_PAIRS) {
            throw new IllegalArgumentException(canonical + ": its level needs " + k + " x " + k
                    + " input pairs per cohort, above the limit of " + String.format("%,d", MAX_LEVEL_PAIRS));
        }
        double best = 0;
        for (int c = 0; c < cohorts; c++) {
            List<java.util.Set<Integer>> filters = new ArrayList<>();
            for (int x = 0; x < k; x++) {
                filters.add(bloom(x, c));
            }
            for (java.util.Set<Integer> a : filters) {
                for (java.util.Set<Integer> b : filters) {
                    int inter = 0;
                    for (int bit : a) {
                        if (b.contains(bit)) {
                            inter++;
                        }
                    }
                    best = Math.max(best, (a.size() - inter) * l1 - (b.size() - inter) * l0);
                }
            }
        }
        return best;
    }

    /**
     * The levels of one report as a ledger records them, computed from the channel's formulas as
     * the Python reference computes {@code epsilon_ldp()}, {@code epsilon_perm()} and
     * {@code epsilon_instantaneous()} (docs/accounting.md): k-RR, OUE/SUE, OLH/BLH, SS, HR and PM
     * {@code eps} (k-RR also {@code rr_values = k}); geometric the largest spread of
     * {@code log P(z|x)} over the rows and columns that attain it; Duchi {@code log(p+(k-1)/p+(0))};
     * SW {@code log(p/q)}; L-GRR, L-BLH, L-OLH the chained GRR level, {@code eps_perm} and
     * {@code eps_inst = eps_2}; the chained unary encodings {@code logit P* - logit Q*} and
     * {@code eps_perm}; RAPPOR the largest {@code |B \ B'| l1 - |B' \ B| l0} over cohorts and input
     * pairs (one report: {@code l1 = log(s1/s0)}, {@code l0 = log((1-s1)/(1-s0))}; the memo:
     * {@code l1 = -l0 = log((1-f/2)/(f/2))}, infinite for {@code f = 0}).
     *
     * @return the levels
     * @throws IllegalArgumentException for planar-geometric and planar-laplace (their level needs
     *     the k x k channel of the clamped kernel; not computed by this client)
     */
    public Levels levels() {
        switch (name) {
            case "krr":
                return new Levels(eps, null, null, (long) k);
            case "oue":
            case "sue":
            case "olh":
            case "blh":
            case "ss":
            case "hr":
            case "pm":
                return new Levels(eps, null, null, null);
            case "geometric":
                return new Levels(geometricLevel(), null, null, null);
            case "duchi":
                return new Levels(Math.log(duchiP(k - 1) / duchiP(0)), null, null, null);
            case "sw":
                return new Levels(Math.log(p / q), null, null, null);
            case "lgrr":
                return new Levels(grrChainLevel(epsPerm, eps2, k), epsPerm, eps2, (long) k);
            case "lblh":
            case "lolh":
                return new Levels(grrChainLevel(epsPerm, eps2, g), epsPerm, eps2, null);
            case "lsue":
            case "loue":
            case "lsoue":
            case "losue": {
                double[] first = ueLogits(name.equals("lsue") || name.equals("lsoue") ? "sue" : "oue", epsPerm);
                double one = logit(p1 * p2 + (1 - p1) * q2) - logit(q1 * p2 + (1 - q1) * q2);
                return new Levels(one, first[0] - first[1], null, null);
            }
            case "rappor": {
                double half = f / 2.0;
                double s1 = (1.0 - half) * q + half * p;
                double s0 = half * q + (1.0 - half) * p;
                double one = rapporPairLevel(Math.log(s1 / s0), Math.log((1 - s1) / (1 - s0)));
                double lr = Math.log1p(-half) - Math.log(half);
                return new Levels(one, f == 0 ? Double.POSITIVE_INFINITY : rapporPairLevel(lr, -lr), null, null);
            }
            default:
                throw new IllegalArgumentException(canonical + ": this client does not compute the level of " + name
                        + ", so it cannot record it in a ledger");
        }
    }

    private double duchiP(int x) {
        double t = (2.0 * x + 1.0) / k - 1.0;
        return 0.5 + 0.5 * t * p;
    }

    // ------------------------------------------------------------------ samplers
    private static long grr(WordSource src, long x, long g, double p) {
        if (Primitives.bernoulli(src, p)) {
            return x;
        }
        long r = Primitives.uniformInt(src, g - 1);
        return r >= x ? r + 1 : r;
    }

    /** Lowercase hex of {@code ceil(n/8)} bytes, bit {@code y} at bit {@code 7 - y mod 8} of byte {@code y / 8}. */
    static String bitsHex(boolean[] bits) {
        byte[] out = new byte[(bits.length + 7) / 8];
        for (int y = 0; y < bits.length; y++) {
            if (bits[y]) {
                out[y >> 3] |= (byte) (0x80 >>> (y & 7));
            }
        }
        return hex(out);
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    static String hex(byte[] b) {
        char[] c = new char[2 * b.length];
        for (int i = 0; i < b.length; i++) {
            c[2 * i] = HEX[(b[i] >> 4) & 15];
            c[2 * i + 1] = HEX[b[i] & 15];
        }
        return new String(c);
    }

    private static String quoted(String s) {
        return "\"" + s + "\"";
    }

    private void checkIndex(int x) {
        if (x < 0 || x >= k) {
            throw new PortableException("value.out_of_domain", "input index " + x + " outside 0.." + (k - 1));
        }
    }

    private boolean[] unary(WordSource src, int x, double pp, double qq) {
        boolean[] bits = new boolean[k];
        for (int y = 0; y < k; y++) {
            bits[y] = Primitives.bernoulli(src, y == x ? pp : qq);
        }
        return bits;
    }

    private long clampCell(int x, long di, long dj) {
        long r = x / ncols;
        long c = x % ncols;
        return Math.min(Math.max(r + di, 0), nrows - 1) * ncols + Math.min(Math.max(c + dj, 0), ncols - 1);
    }

    /**
     * One report of a mechanism without a memo for the input index {@code x}, drawn from {@code src}.
     * A memoized mechanism draws its memo first, then the report (see {@link #sample(int, WordSource, Map)}).
     *
     * @return the report's JSON text
     */
    public String sample(int x, WordSource src) {
        return sample(x, src, null);
    }

    /**
     * One report for the input index {@code x}; memoized mechanisms report from {@code memo} (the
     * caller's memo object of this mechanism and input; drawn first from {@code src} when null).
     *
     * @return the report's JSON text
     */
    public String sample(int x, WordSource src, Map<String, Object> memo) {
        checkIndex(x);
        if (memoized()) {
            if (memo == null) {
                memo = memoize(x, src);
            }
            return fromMemo(x, memo, src);
        }
        if (memo != null) {
            throw new PortableException("memo.invalid", name + " keeps no memo");
        }
        switch (name) {
            case "krr":
                return Long.toString(grr(src, x, k, p));
            case "oue":
            case "sue":
                return quoted(bitsHex(unary(src, x, p, q)));
            case "olh":
            case "blh": {
                long s = Primitives.uniformInt(src, nSeeds);
                long hv = Long.remainderUnsigned(Xxh64.le64(x, s), g);
                return Long.toString(s * g + grr(src, hv, g, p));
            }
            case "ss": {
                boolean include = Primitives.bernoulli(src, p);
                int size = k - 1;
                int mm = omega - (include ? 1 : 0);
                java.util.HashSet<Integer> chosen = new java.util.HashSet<>();
                for (int j = size - mm; j < size; j++) {
                    int t = (int) Primitives.uniformInt(src, j + 1);
                    chosen.add(chosen.contains(t) ? j : t);
                }
                boolean[] bits = new boolean[k];
                for (int s : chosen) {
                    bits[s + (s >= x ? 1 : 0)] = true;
                }
                bits[x] = include;
                return quoted(bitsHex(bits));
            }
            case "hr": {
                if (Primitives.bernoulli(src, p)) {
                    return Long.toString(Primitives.uniformInt(src, bigK));
                }
                long blk = x / (width - 1);
                long t = x % (width - 1) + 1;
                long j = Primitives.uniformInt(src, width);
                if ((Long.bitCount(t & j) & 1) == 1) {
                    j ^= t & -t;
                }
                return Long.toString(blk * width + j);
            }
            case "geometric": {
                BigInteger z = BigInteger.valueOf(x).add(Primitives.discreteLaplace(src, ratioA, ratioB));
                if (lo != null) {
                    z = z.max(lo).min(hi).subtract(lo);
                }
                return z.toString();
            }
            case "duchi":
                return Primitives.bernoulli(src, duchiP(x)) ? "1" : "0";
            case "pm": {
                long a = (pmD + pmD % 2) / 2 + x * pmD;
                long i;
                if (pmN == pmW || Primitives.bernoulli(src, p)) {
                    i = a + Primitives.uniformInt(src, pmW);
                } else {
                    long u = Primitives.uniformInt(src, pmN - pmW);
                    i = u < a ? u : u + pmW;
                }
                return Json.pyFloat((double) (2 * i - (pmN - 1)) * (0.5 * grid));
            }
            case "sw": {
                double b = swB;
                double vv = (x + 0.5) / k;
                double w = (1.0 + 2.0 * b) / buckets;
                double pp = p;
                double qq = q;
                return Long.toString(Primitives.categoricalBisect(src, buckets, (l, h2) -> {
                    double eLo = -b + l * w;
                    double eHi = -b + h2 * w;
                    double overlap = Math.max(0.0, Math.min(eHi, vv + b) - Math.max(eLo, vv - b));
                    return qq * (eHi - eLo) + (pp - qq) * overlap;
                }));
            }
            case "planar-geometric": {
                double es = eps * cellKm;
                double c = planarA / (double) TWO32;
                BigInteger a = BigInteger.valueOf(planarA);
                BigInteger b = BigInteger.valueOf(TWO32);
                long di;
                long dj;
                while (true) {
                    di = Primitives.discreteLaplace(src, a, b).longValue();
                    dj = Primitives.discreteLaplace(src, a, b).longValue();
                    double dist = Math.sqrt((double) (di * di + dj * dj));
                    double pa = Math.min(1.0, Math.exp(-(es * dist - c * (Math.abs(di) + Math.abs(dj)))));
                    if (Primitives.bernoulli(src, pa) && Math.abs(di) <= radius && Math.abs(dj) <= radius) {
                        break;
                    }
                }
                return Long.toString(clampCell(x, di, dj));
            }
            case "planar-laplace": {
                double u1 = Primitives.uniformOpen(src);
                double u2 = Primitives.uniformOpen(src);
                double u3 = (Primitives.u64(src) >>> 11) * 0x1.0p-53;
                double r = -(Math.log(u1) + Math.log(u2)) / eps;
                double angle = TWO_PI * u3;
                double vi = r * Math.sin(angle) / cellKm;
                double vj = r * Math.cos(angle) / cellKm;
                return Long.toString(clampCell(x, (long) Math.floor(vi + 0.5), (long) Math.floor(vj + 0.5)));
            }
            default:
                throw new PortableException("spec.unknown_mechanism", name + " has no portable sampler");
        }
    }

    // ------------------------------------------------------------------ memoized mechanisms
    /**
     * The permanent part of a memoized mechanism for the input index {@code x}, as the memo object
     * the caller keeps: {@code {"mechanism": canonical spec, "index": x, "memo": {...}}}.
     */
    public Map<String, Object> memoize(int x, WordSource src) {
        if (!memoized()) {
            throw new PortableException("spec.unknown_mechanism", name + " is not a memoized portable mechanism");
        }
        checkIndex(x);
        Map<String, Object> inner = new LinkedHashMap<>();
        switch (name) {
            case "lgrr":
                inner.put("value", grr(src, x, k, p1));
                break;
            case "lblh":
            case "lolh": {
                long s = Primitives.uniformInt(src, nSeeds);
                long hv = Long.remainderUnsigned(Xxh64.le64(x, s), g);
                inner.put("seed", s);
                inner.put("value", grr(src, hv, g, p1));
                break;
            }
            case "rappor": {
                long c = Primitives.uniformInt(src, cohorts);
                boolean[] bloom = new boolean[m];
                for (int i = 0; i < h; i++) {
                    bloom[(int) Long.remainderUnsigned(Xxh64.le64(x, c * h + i), m)] = true;
                }
                double half = f / 2.0;
                boolean[] prr = new boolean[m];
                for (int j = 0; j < m; j++) {
                    prr[j] = Primitives.bernoulli(src, bloom[j] ? 1.0 - half : half);
                }
                inner.put("cohort", c);
                inner.put("bits", bitsHex(prr));
                break;
            }
            default:
                inner.put("bits", bitsHex(unary(src, x, p1, q1)));
        }
        Map<String, Object> memo = new LinkedHashMap<>();
        memo.put("mechanism", canonical);
        memo.put("index", (long) x);
        memo.put("memo", inner);
        return memo;
    }

    @SuppressWarnings("unchecked")
    private String fromMemo(int x, Map<String, Object> memo, WordSource src) {
        if (!memo.keySet().equals(MEMO_KEYS) || !(memo.get("memo") instanceof Map)) {
            throw new PortableException("memo.invalid", "a memo is {\"mechanism\", \"index\", \"memo\"}");
        }
        Object idx = memo.get("index");
        if (!canonical.equals(memo.get("mechanism")) || !(idx instanceof Long) || (Long) idx != x) {
            throw new PortableException("memo.invalid", "the memo is for " + clip(String.valueOf(memo.get("mechanism")), 80)
                    + ", input " + idx + ", not " + canonical + ", input " + x);
        }
        Map<String, Object> in = (Map<String, Object>) memo.get("memo");
        switch (name) {
            case "lgrr":
                return Long.toString(grr(src, memoInt(in, "value", k), k, p2));
            case "lblh":
            case "lolh": {
                long s = memoInt(in, "seed", nSeeds);
                return Long.toString(s * g + grr(src, memoInt(in, "value", g), g, p2));
            }
            case "rappor": {
                long c = memoInt(in, "cohort", cohorts);
                boolean[] prr = memoBits(in, "bits", m);
                boolean[] bits = new boolean[m];
                for (int j = 0; j < m; j++) {
                    bits[j] = Primitives.bernoulli(src, prr[j] ? q : p);
                }
                if (!wide) {
                    long r = c << m;
                    for (int j = 0; j < m; j++) {
                        if (bits[j]) {
                            r |= 1L << j;
                        }
                    }
                    return Long.toString(r);
                }
                byte[] out = new byte[2 + (m + 7) / 8];
                out[0] = (byte) (c & 0xff);
                out[1] = (byte) (c >> 8);
                for (int j = 0; j < m; j++) {
                    if (bits[j]) {
                        out[2 + (j >> 3)] |= (byte) (1 << (j & 7));
                    }
                }
                return quoted(hex(out));
            }
            default: {
                boolean[] perm = memoBits(in, "bits", k);
                boolean[] bits = new boolean[k];
                for (int y = 0; y < k; y++) {
                    bits[y] = Primitives.bernoulli(src, perm[y] ? p2 : q2);
                }
                return quoted(bitsHex(bits));
            }
        }
    }

    private static long memoInt(Map<String, Object> in, String key, long bound) {
        Object v = in.get(key);
        if (!(v instanceof Long) || (Long) v < 0 || (Long) v >= bound) {
            throw new PortableException("memo.invalid", "memo field '" + key + "' must be an integer in 0.." + (bound - 1));
        }
        return (Long) v;
    }

    private static boolean[] memoBits(Map<String, Object> in, String key, int width) {
        Object v = in.get(key);
        int n = (width + 7) / 8;
        if (!(v instanceof String) || ((String) v).length() != 2 * n || !((String) v).matches("[0-9a-f]*")) {
            throw new PortableException("memo.invalid", "memo field '" + key + "' must be " + 2 * n + " lowercase hex digits");
        }
        String s = (String) v;
        boolean[] bits = new boolean[width];
        for (int y = 0; y < 8 * n; y++) {
            int b = Integer.parseInt(s.substring(2 * (y >> 3), 2 * (y >> 3) + 2), 16);
            boolean set = (b & (0x80 >>> (y & 7))) != 0;
            if (y >= width) {
                if (set) {
                    throw new PortableException("memo.invalid", "memo field '" + key + "' has padding bits set");
                }
            } else {
                bits[y] = set;
            }
        }
        return bits;
    }
}
