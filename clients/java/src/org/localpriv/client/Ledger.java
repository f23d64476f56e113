package org.localpriv.client;

import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TimeZone;
import java.util.TreeSet;

/**
 * The device's privacy ledger (docs/accounting.md): the same versioned JSON file as the Python
 * reference ({@code localpriv.data.ledger}), its basic-composition total with memo groups capped,
 * and the budget check a submission passes before anything is perturbed or sent.
 *
 * <pre>
 *   Ledger ledger = Ledger.open(Paths.get("device-ledger.json"));   // a missing file is empty
 *   Client c = Client.create("krr(eps=1.0)", "0..99");
 *   List&lt;String&gt; reports = c.perturbLines(values, new SecureRandomSource(), ledger, 4.0, "ages");
 * </pre>
 *
 * The storage is the caller's ({@link Storage}; {@link #fileStorage(Path)} rewrites a file
 * atomically). One writer at a time.
 */
public final class Ledger {
    /** The {@code format} member of a ledger file. */
    public static final String FORMAT = "localpriv-ledger";
    /** The version this code writes, and the only one it reads. */
    public static final long VERSION = 1;
    /** Most releases one ledger holds. */
    public static final int MAX_RELEASES = 100_000;
    /** Largest ledger file read, in bytes. */
    public static final long MAX_LEDGER_BYTES = 64L << 20;
    private static final List<String> TOP_KEYS = Arrays.asList("format", "version", "releases");

    /** Where a ledger's text is kept. */
    public interface Storage {
        /** @return the stored text, or null when there is none yet (an empty ledger) */
        String load() throws IOException;

        /** @param text the whole new text, replacing the old */
        void save(String text) throws IOException;
    }

    /** The basic-composition total of some releases ({@link #compose(List)}). */
    public static final class Total {
        /** Pure {@code eps} by basic composition, memo groups capped (infinite if a level is). */
        public final double epsilon;
        /** The releases' own {@code delta}, summed (at most 1). */
        public final double delta;
        /** Events composed: independent reports plus one per memo group of two or more reports. */
        public final long events;

        Total(double epsilon, double delta, long events) {
            this.epsilon = epsilon;
            this.delta = delta;
            this.events = events;
        }
    }

    private final Storage storage;
    /** The ledger's name in messages (the file's path for a file). */
    public final String name;
    private List<Release> releases;

    /**
     * The ledger kept by {@code storage} (read now).
     *
     * @param storage where the text is kept
     * @param name its name in messages
     * @throws LedgerException on a bad stored text
     */
    public Ledger(Storage storage, String name) {
        this.storage = storage;
        this.name = name;
        String text;
        try {
            text = storage.load();
        } catch (IOException e) {
            throw new LedgerException("ledger " + name + ": cannot read (" + e.getMessage() + ")");
        }
        this.releases = text == null ? new ArrayList<Release>() : parse(text, "ledger " + name);
    }

    /** The ledger in the file {@code path} (a missing file is empty; created by the first record). */
    public static Ledger open(Path path) {
        return new Ledger(fileStorage(path), path.toString());
    }

    /** A storage reading {@code path} and rewriting it atomically (a synced temporary file beside it, renamed over it). */
    public static Storage fileStorage(final Path path) {
        return new Storage() {
            @Override
            public String load() throws IOException {
                long size;
                try {
                    size = Files.size(path);
                } catch (NoSuchFileException e) {
                    return null;
                }
                if (size > MAX_LEDGER_BYTES) {
                    throw new LedgerException("ledger " + path + ": " + String.format(Locale.ROOT, "%,d", size)
                            + " bytes exceed the limit of " + String.format(Locale.ROOT, "%,d", MAX_LEDGER_BYTES));
                }
                return new String(Files.readAllBytes(path), StandardCharsets.UTF_8);
            }

            @Override
            public void save(String text) throws IOException {
                Path dir = path.toAbsolutePath().getParent();
                Path tmp = Files.createTempFile(dir, "." + path.getFileName(), ".tmp");
                try {
                    try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
                        ByteBuffer buf = ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
                        while (buf.hasRemaining()) {
                            ch.write(buf);
                        }
                        ch.force(true);
                    }
                    Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
                } finally {
                    Files.deleteIfExists(tmp);
                }
            }
        };
    }

    /** The releases, in the order recorded. */
    public List<Release> releases() {
        return Collections.unmodifiableList(releases);
    }

    /** The total of every release. */
    public Total total() {
        return compose(releases);
    }

    /**
     * Refuses {@code add} if it would take the total past {@code budget}; else returns the total
     * with it. The refusal is one line: the current total, the request's cost (the total with it
     * minus the total without) and the budget, worded as the Python reference words it.
     */
    public Total check(double budget, List<Release> add) {
        if (Double.isNaN(budget) || budget < 0) {
            throw new LedgerException("budget must be a number >= 0, got " + Json.pyFloat(budget));
        }
        double before = total().epsilon;
        List<Release> all = new ArrayList<>(releases);
        all.addAll(add);
        Total after = compose(all);
        if (after.epsilon > budget) {
            double cost = Double.isInfinite(after.epsilon) ? Double.POSITIVE_INFINITY : after.epsilon - before;
            long reports = 0;
            Set<String> specs = new LinkedHashSet<>();
            for (Release r : add) {
                reports += r.reports;
                specs.add(r.spec);
            }
            String spec = specs.size() == 1 ? add.get(0).spec : specs.size() + " mechanisms";
            throw new LedgerException("privacy budget exceeded: the ledger " + name + " totals eps " + fmt(before)
                    + ", this request (" + String.format(Locale.ROOT, "%,d", reports) + " report(s) of " + spec + ") costs eps "
                    + fmt(cost) + " more, and the budget is " + formatG(budget, 6) + "; nothing was perturbed or sent");
        }
        return after;
    }

    /**
     * Checks {@code add} against {@code budget} (if not null), appends it and saves the ledger.
     *
     * @return the new total
     */
    public Total record(List<Release> add, Double budget) {
        if (budget != null) {
            check(budget, add);
        }
        if (releases.size() + add.size() > MAX_RELEASES) {
            throw new LedgerException("ledger " + name + ": " + String.format(Locale.ROOT, "%,d", releases.size() + add.size())
                    + " releases would exceed the limit of " + String.format(Locale.ROOT, "%,d", MAX_RELEASES));
        }
        List<Release> next = new ArrayList<>(releases);
        next.addAll(add);
        try {
            storage.save(text(next));
        } catch (IOException e) {
            throw new LedgerException("ledger " + name + ": cannot write (" + e.getMessage() + ")");
        }
        releases = next;
        return total();
    }

    /** The stored text of this ledger. */
    public String text() {
        return text(releases);
    }

    private static String fmt(double x) {
        return Double.isInfinite(x) ? "inf" : formatG(x, 6);
    }

    /** Python's {@code format(x, '.<prec>g')} of a finite double: {@code 1}, {@code 0.5}, {@code 1.5e-07}, {@code 1e+06}. */
    public static String formatG(double x, int prec) {
        if (x == 0) {
            return (Double.doubleToRawLongBits(x) < 0) ? "-0" : "0";
        }
        BigDecimal r = new BigDecimal(x).round(new MathContext(prec, RoundingMode.HALF_EVEN));
        int exp = r.precision() - r.scale() - 1;
        if (exp < -4 || exp >= prec) {
            BigDecimal mant = r.movePointLeft(exp).stripTrailingZeros();
            String m = mant.scale() <= 0 ? mant.toBigInteger().toString() : mant.toPlainString();
            return m + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
        }
        BigDecimal s = r.stripTrailingZeros();
        return s.scale() <= 0 ? s.toBigInteger().toString() : s.toPlainString();
    }

    /**
     * The correctly rounded sum (Shewchuk's exact partials, then the round-half-even correction of
     * Python's {@code math.fsum}): the same double for any order of the terms.
     */
    public static double fsum(double[] values) {
        double[] partials = new double[16];
        int n = 0;
        double special = 0;
        for (double v : values) {
            if (Double.isInfinite(v) || Double.isNaN(v)) {
                special += v;
                continue;
            }
            double x = v;
            int i = 0;
            for (int j = 0; j < n; j++) {
                double y = partials[j];
                if (Math.abs(x) < Math.abs(y)) {
                    double t = x;
                    x = y;
                    y = t;
                }
                double hi = x + y;
                double lo = y - (hi - x);
                if (lo != 0) {
                    partials[i++] = lo;
                }
                x = hi;
            }
            if (i >= partials.length) {
                partials = Arrays.copyOf(partials, 2 * partials.length);
            }
            partials[i] = x;
            n = i + 1;
        }
        if (special != 0 || Double.isNaN(special)) {
            return special;
        }
        double hi = 0;
        if (n > 0) {
            hi = partials[--n];
            double lo = 0;
            while (n > 0) {
                double x = hi;
                double y = partials[--n];
                hi = x + y;
                lo = y - (hi - x);
                if (lo != 0) {
                    break;
                }
            }
            if (n > 0 && ((lo < 0 && partials[n - 1] < 0) || (lo > 0 && partials[n - 1] > 0))) {
                double y = lo * 2;
                double x = hi + y;
                if (y == x - hi) {
                    hi = x;
                }
            }
        }
        return hi;
    }

    private static final class Cls {
        final double eps;
        final double delta;
        long count;

        Cls(double eps, double delta) {
            this.eps = eps;
            this.delta = delta;
        }
    }

    private static void add(Map<String, Cls> classes, String model, double eps, double delta, long k, long count) {
        String key = model + "|" + Double.doubleToLongBits(eps) + "|" + Double.doubleToLongBits(delta) + "|" + k;
        Cls c = classes.get(key);
        if (c == null) {
            c = new Cls(eps, delta);
            classes.put(key, c);
        }
        c.count += count;
    }

    private static void own(Map<String, Cls> classes, Release r, long count) {
        if (r.rrValues != null && r.delta == 0) {
            add(classes, "rr", r.epsilon, r.delta, r.rrValues, count);
        } else {
            add(classes, "eps-dp", r.epsilon, r.delta, 0, count);
        }
    }

    /**
     * Basic composition (docs/accounting.md): {@code r eps} per independent release; per memo key,
     * one report alone its own {@code eps}, {@code t >= 2} reports {@code min(eps_perm, sum r eps_inst)}
     * when every release of the memo gives {@code eps_inst}, else {@code eps_perm}. The same for
     * any order of the releases (exact sums).
     */
    public static Total compose(List<Release> rels) {
        if (rels.size() > MAX_RELEASES) {
            throw new LedgerException("compose: " + String.format(Locale.ROOT, "%,d", rels.size())
                    + " releases exceed the limit of " + String.format(Locale.ROOT, "%,d", MAX_RELEASES));
        }
        Map<String, Cls> classes = new LinkedHashMap<>();
        Map<String, List<Release>> groups = new LinkedHashMap<>();
        for (Release r : rels) {
            if (r.memoKey == null) {
                own(classes, r, r.reports);
            } else {
                List<Release> g = groups.get(r.memoKey);
                if (g == null) {
                    g = new ArrayList<>();
                    groups.put(r.memoKey, g);
                }
                g.add(r);
            }
        }
        for (Map.Entry<String, List<Release>> e : groups.entrySet()) {
            List<Release> members = e.getValue();
            TreeSet<String> perms = new TreeSet<>();
            long n = 0;
            boolean allInst = true;
            double[] inst = new double[members.size()];
            for (int i = 0; i < members.size(); i++) {
                Release m = members.get(i);
                perms.add("'" + Json.pyFloat(m.epsPerm) + "'");
                n += m.reports;
                allInst &= m.epsInst != null;
                inst[i] = m.epsInst == null ? 0 : m.reports * m.epsInst;
            }
            if (perms.size() > 1) {
                throw new LedgerException("releases of memo '" + e.getKey() + "' disagree on eps_perm ([" + String.join(", ", perms)
                        + "]): one memo has one permanent level");
            }
            if (n == 1) {
                own(classes, members.get(0), 1);
            } else {
                double cap = members.get(0).epsPerm;
                if (allInst) {
                    cap = Math.min(cap, fsum(inst));
                }
                add(classes, "memo", cap, 0.0, 0, 1);
            }
        }
        List<Double> eps = new ArrayList<>();
        double[] deltas = new double[classes.size()];
        long events = 0;
        int i = 0;
        for (Cls c : classes.values()) {
            if (c.eps > 0) {
                eps.add(c.count * c.eps);
            }
            deltas[i++] = c.count * c.delta;
            events += c.count;
        }
        double[] e = new double[eps.size()];
        for (int j = 0; j < e.length; j++) {
            e[j] = eps.get(j);
        }
        return new Total(fsum(e), Math.min(1.0, fsum(deltas)), events);
    }

    // ------------------------------------------------------------------ the file
    private static double number(Object v, String name, boolean levelKey) {
        if (levelKey && "inf".equals(v)) {
            return Double.POSITIVE_INFINITY;
        }
        if (v instanceof Double || v instanceof Long || v instanceof BigInteger) {
            return ((Number) v).doubleValue();
        }
        throw new LedgerException("release: " + name + " must be a number, got " + typeName(v));
    }

    private static String typeName(Object v) {
        return v == null ? "null" : v instanceof String ? "str" : v instanceof Boolean ? "bool" : v instanceof List ? "list"
                : v instanceof Map ? "dict" : v instanceof Double ? "float" : "int";
    }

    private static Long integer(Object v) {
        return v instanceof Long ? (Long) v : null;
    }

    /** A release from the file's JSON object; unknown keys refused, the optional ones defaulted. */
    @SuppressWarnings("unchecked")
    static Release fromJson(Object o) {
        if (!(o instanceof Map)) {
            throw new LedgerException("release: expected an object, got " + typeName(o));
        }
        Map<String, Object> m = (Map<String, Object>) o;
        TreeSet<String> unknown = new TreeSet<>(m.keySet());
        unknown.removeAll(Release.KEYS);
        if (!unknown.isEmpty()) {
            throw new LedgerException("release: unknown key(s) " + String.join(", ", unknown) + "; known: "
                    + String.join(", ", Release.KEYS));
        }
        List<String> missing = new ArrayList<>();
        for (String k : new String[] {"spec", "epsilon"}) {
            if (!m.containsKey(k)) {
                missing.add(k);
            }
        }
        if (!missing.isEmpty()) {
            throw new LedgerException("release: missing key(s) " + String.join(", ", missing));
        }
        Object spec = m.get("spec");
        if (!(spec instanceof String)) {
            throw new LedgerException("release: spec must be a non-empty string");
        }
        double epsilon = number(m.get("epsilon"), "epsilon", true);
        double delta = m.containsKey("delta") ? number(m.get("delta"), "delta", false) : 0.0;
        long reports = 1;
        if (m.containsKey("reports")) {
            Long r = integer(m.get("reports"));
            if (r == null) {
                throw new LedgerException("release: reports must be an integer in 1.." + Release.MAX_REPORTS + ", got "
                        + Json.write(m.get("reports")));
            }
            reports = r;
        }
        String[] strings = new String[2];
        String[] names = {"collection", "time"};
        for (int i = 0; i < 2; i++) {
            Object s = m.getOrDefault(names[i], "");
            if (!(s instanceof String)) {
                throw new LedgerException("release: " + names[i] + " must be a string");
            }
            strings[i] = (String) s;
        }
        Object key = m.get("memo_key");
        if (key != null && !(key instanceof String)) {
            throw new LedgerException("release: memo_key must be a non-empty string or null");
        }
        Double perm = m.get("eps_perm") == null ? null : number(m.get("eps_perm"), "eps_perm", true);
        Double inst = m.get("eps_inst") == null ? null : number(m.get("eps_inst"), "eps_inst", true);
        Object rr = m.get("rr_values");
        if (rr != null && integer(rr) == null) {
            throw new LedgerException("release: rr_values must be an integer >= 2 or null, got " + Json.write(rr));
        }
        return new Release((String) spec, epsilon, delta, reports, strings[0], strings[1], (String) key, perm, inst, integer(rr));
    }

    /**
     * The releases of a ledger file's text: unknown keys refused, the version checked, {@code "inf"}
     * read as infinity.
     *
     * @param where the ledger's name in messages, e.g. {@code ledger device.json}
     */
    @SuppressWarnings("unchecked")
    public static List<Release> parse(String text, String where) {
        if (text.length() > MAX_LEDGER_BYTES) {
            throw new LedgerException(where + ": " + String.format(Locale.ROOT, "%,d", text.length())
                    + " bytes exceed the limit of " + String.format(Locale.ROOT, "%,d", MAX_LEDGER_BYTES));
        }
        Object doc;
        try {
            doc = Json.parse(text);
        } catch (RuntimeException e) {
            throw new LedgerException(where + ": not a readable JSON file (" + e.getMessage() + ")");
        }
        if (!(doc instanceof Map) || !FORMAT.equals(((Map<String, Object>) doc).get("format"))) {
            throw new LedgerException(where + ": not a localpriv ledger (no \"format\": \"" + FORMAT + "\")");
        }
        Map<String, Object> obj = (Map<String, Object>) doc;
        TreeSet<String> unknown = new TreeSet<>(obj.keySet());
        unknown.removeAll(TOP_KEYS);
        if (!unknown.isEmpty()) {
            throw new LedgerException(where + ": unknown key(s) " + String.join(", ", unknown) + "; known: "
                    + String.join(", ", TOP_KEYS));
        }
        if (!Long.valueOf(VERSION).equals(obj.get("version"))) {
            throw new LedgerException(where + ": version " + Json.write(obj.get("version")) + " is not supported (this is version "
                    + VERSION + ")");
        }
        Object rels = obj.get("releases");
        if (!(rels instanceof List)) {
            throw new LedgerException(where + ": \"releases\" must be a list");
        }
        List<Object> list = (List<Object>) rels;
        if (list.size() > MAX_RELEASES) {
            throw new LedgerException(where + ": " + String.format(Locale.ROOT, "%,d", list.size())
                    + " releases exceed the limit of " + String.format(Locale.ROOT, "%,d", MAX_RELEASES));
        }
        List<Release> out = new ArrayList<>();
        for (int i = 0; i < list.size(); i++) {
            try {
                out.add(fromJson(list.get(i)));
            } catch (LedgerException e) {
                throw new LedgerException(where + ": release " + (i + 1) + ": " + e.getMessage());
            }
        }
        return out;
    }

    private static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                case '\b': sb.append("\\b"); break;
                case '\f': sb.append("\\f"); break;
                default:
                    if (c < 0x20 || c > 0x7f) {
                        sb.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }

    private static void level(StringBuilder sb, Double v) {
        if (v == null) {
            sb.append("null");
        } else if (Double.isInfinite(v)) {
            sb.append("\"inf\"");
        } else {
            sb.append(Json.pyFloat(v));
        }
    }

    /** The file's text, as the Python reference writes it (1-space indent, ASCII, {@code "inf"} for infinity, final newline). */
    public static String text(List<Release> rels) {
        StringBuilder sb = new StringBuilder("{\n \"format\": \"" + FORMAT + "\",\n \"version\": " + VERSION + ",\n \"releases\": ");
        if (rels.isEmpty()) {
            sb.append("[]");
        } else {
            sb.append("[\n");
            for (int i = 0; i < rels.size(); i++) {
                Release r = rels.get(i);
                sb.append("  {\n   \"spec\": ");
                quote(sb, r.spec);
                sb.append(",\n   \"epsilon\": ");
                level(sb, r.epsilon);
                sb.append(",\n   \"delta\": ").append(Json.pyFloat(r.delta));
                sb.append(",\n   \"reports\": ").append(r.reports);
                sb.append(",\n   \"collection\": ");
                quote(sb, r.collection);
                sb.append(",\n   \"time\": ");
                quote(sb, r.time);
                sb.append(",\n   \"memo_key\": ");
                if (r.memoKey == null) {
                    sb.append("null");
                } else {
                    quote(sb, r.memoKey);
                }
                sb.append(",\n   \"eps_perm\": ");
                level(sb, r.epsPerm);
                sb.append(",\n   \"eps_inst\": ");
                level(sb, r.epsInst);
                sb.append(",\n   \"rr_values\": ").append(r.rrValues == null ? "null" : r.rrValues.toString());
                sb.append(i + 1 < rels.size() ? "\n  },\n" : "\n  }\n");
            }
            sb.append(" ]");
        }
        return sb.append("\n}\n").toString();
    }

    /** The current time, ISO 8601 in UTC to the second ({@code 2026-11-28T10:00:00Z}). */
    public static String utcNow() {
        SimpleDateFormat f = new SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss'Z'", Locale.ROOT);
        f.setTimeZone(TimeZone.getTimeZone("UTC"));
        return f.format(new Date());
    }

    /**
     * The ledger key of a stored memo: {@code memo-} and the XXH64 (seed 0) of the UTF-8 JSON text
     * of {@code [mechanism, index, memo]} in hex. Reports drawn from one memo share it.
     */
    public static String memoKey(Map<String, Object> memo) {
        String text = Json.write(Arrays.asList(memo.get("mechanism"), memo.get("index"), memo.get("memo")));
        return String.format(Locale.ROOT, "memo-%016x", Xxh64.hash(text.getBytes(StandardCharsets.UTF_8), 0));
    }

}
