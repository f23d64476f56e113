package org.localpriv.client;

import java.io.ByteArrayInputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Replays every entry of {@code clients/vectors/vectors-v1.json} (positive and negative) and prints
 * {@code N passed, M failed}; exit status 1 when anything failed. No test framework: plain
 * {@code javac} and {@code java}.
 *
 * <pre>
 *   java -cp build org.localpriv.client.VectorsTest clients/vectors/vectors-v1.json
 * </pre>
 */
public final class VectorsTest {
    private int passed;
    private int failed;

    private VectorsTest() {
    }

    private void check(String what, boolean ok, String detail) {
        if (ok) {
            passed++;
        } else {
            failed++;
            System.out.println("FAIL " + what + ": " + detail);
        }
    }

    private void checkEq(String what, Object expected, Object got) {
        check(what, String.valueOf(expected).equals(String.valueOf(got)), "expected " + expected + ", got " + got);
    }

    private static String hexWords(int[] w) {
        StringBuilder sb = new StringBuilder();
        for (int x : w) {
            sb.append(String.format("%08x,", x));
        }
        return sb.toString();
    }

    private static byte[] unhex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return b;
    }

    private static int[] words(byte[] b) {
        int[] w = new int[b.length / 4];
        for (int i = 0; i < w.length; i++) {
            w[i] = ChaCha20Source.le32(b, 4 * i);
        }
        return w;
    }

    private static long[] longs(Object list) {
        List<?> l = (List<?>) list;
        long[] out = new long[l.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = ((Number) l.get(i)).longValue();
        }
        return out;
    }

    private static BigInteger big(Object o) {
        return new BigInteger(o.toString());
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Object o) {
        return (Map<String, Object>) o;
    }

    @SuppressWarnings("unchecked")
    private static List<Object> list(Object o) {
        return (List<Object>) o;
    }

    private static String unquote(String s) {
        return s.startsWith("\"") ? s.substring(1, s.length() - 1) : s;
    }

    // ---------------------------------------------------------------- sections
    private void chacha(Map<String, Object> c) throws Exception {
        Map<String, Object> rfc = map(c.get("rfc8439_2.3.2"));
        int[] out = new int[16];
        ChaCha20Source.block(words(unhex((String) rfc.get("key_hex"))), (int) (long) (Long) rfc.get("counter"),
                words(unhex((String) rfc.get("nonce_hex"))), out);
        StringBuilder exp = new StringBuilder();
        for (Object w : list(rfc.get("words_hex"))) {
            exp.append(w).append(',');
        }
        checkEq("chacha20 rfc8439 2.3.2 block", exp, hexWords(out));
        for (Object o : list(c.get("streams"))) {
            Map<String, Object> s = map(o);
            String seed = (String) s.get("seed");
            byte[] key = java.security.MessageDigest.getInstance("SHA-256").digest(seed.getBytes(StandardCharsets.UTF_8));
            checkEq("chacha20 key " + seed, s.get("key_hex"), Mechanism.hex(key));
            ChaCha20Source src = new ChaCha20Source(seed);
            List<Object> got = new ArrayList<>();
            for (int i = 0; i < list(s.get("words")).size(); i++) {
                got.add(Integer.toUnsignedLong(src.nextWord()));
            }
            checkEq("chacha20 words " + seed, s.get("words"), got);
        }
    }

    private void xxh64(List<Object> cases) {
        for (Object o : cases) {
            Map<String, Object> c = map(o);
            long seed = Long.parseUnsignedLong((String) c.get("seed"));
            String input = (String) c.get("input");
            long h;
            if (c.get("input_kind").equals("utf8")) {
                h = Xxh64.hash(input.getBytes(StandardCharsets.UTF_8), seed);
            } else {
                long key = Long.parseUnsignedLong(input);
                h = Xxh64.le64(key, seed);
                byte[] le = new byte[8];
                for (int i = 0; i < 8; i++) {
                    le[i] = (byte) (key >>> (8 * i));
                }
                checkEq("xxh64 le64 = bytes " + input, Long.toHexString(h), Long.toHexString(Xxh64.hash(le, seed)));
            }
            checkEq("xxh64 " + input + " seed " + seed, c.get("xxh64_hex"), String.format("%016x", h));
            if (c.containsKey("mod")) {
                checkEq("xxh64 mod " + input, c.get("h_mod"), Long.remainderUnsigned(h, (Long) c.get("mod")));
            }
        }
    }

    private interface Draw {
        Object draw(WordSource src);
    }

    private void drawCase(String what, String seed, List<Object> expected, Object words, Draw d) {
        ChaCha20Source src = new ChaCha20Source(seed);
        List<String> got = new ArrayList<>();
        List<String> exp = new ArrayList<>();
        for (Object e : expected) {
            exp.add(e.toString());
            got.add(d.draw(src).toString());
        }
        checkEq(what + " draws", exp, got);
        if (words != null) {
            checkEq(what + " words", words, src.used());
        }
    }

    private static String bit(boolean b) {
        return b ? "1" : "0";
    }

    private void primitives(Map<String, Object> p) {
        for (Object o : list(p.get("u64"))) {
            Map<String, Object> c = map(o);
            drawCase("u64 " + c.get("seed"), (String) c.get("seed"), list(c.get("draws")), null,
                src -> Long.toUnsignedString(Primitives.u64(src)));
        }
        for (Object o : list(p.get("uniform_int"))) {
            Map<String, Object> c = map(o);
            BigInteger n = big(c.get("n"));
            drawCase("uniform_int " + n, (String) c.get("seed"), list(c.get("draws")), c.get("words"),
                src -> Primitives.uniformInt(src, n));
            if (n.bitLength() < 63) {
                drawCase("uniform_int(long) " + n, (String) c.get("seed"), list(c.get("draws")), c.get("words"),
                    src -> Primitives.uniformInt(src, n.longValue()));
            }
        }
        for (Object o : list(p.get("uniform_int_rejection"))) {
            Map<String, Object> c = map(o);
            ListSource src = new ListSource(longs(c.get("words_in")));
            checkEq("uniform_int rejection", c.get("draw"), Primitives.uniformInt(src, big(c.get("n"))));
            checkEq("uniform_int rejection words", c.get("words"), src.used());
        }
        for (Object o : list(p.get("on_words"))) {
            Map<String, Object> c = map(o);
            ListSource src = new ListSource(longs(c.get("words_in")));
            List<Object> args = list(c.get("args"));
            String prim = (String) c.get("primitive");
            String what = prim + " on words " + c.get("words_in");
            Object got;
            switch (prim) {
                case "bernoulli":
                    got = bit(Primitives.bernoulli(src, ((Number) args.get(0)).doubleValue()));
                    break;
                case "bernoulli_rational":
                    got = bit(Primitives.bernoulliRational(src, big(args.get(0)), big(args.get(1))));
                    break;
                case "uniform_int":
                    got = Primitives.uniformInt(src, big(args.get(0)));
                    break;
                default:
                    check(what, false, "unknown primitive");
                    continue;
            }
            checkEq(what, c.get("result"), got);
            checkEq(what + " words", c.get("words"), src.used());
        }
        for (Object o : list(p.get("bernoulli"))) {
            Map<String, Object> c = map(o);
            double pr = ((Number) c.get("p")).doubleValue();
            drawCase("bernoulli " + pr, (String) c.get("seed"), list(c.get("draws")), c.get("words"),
                src -> bit(Primitives.bernoulli(src, pr)));
        }
        for (Object o : list(p.get("bernoulli_rational"))) {
            Map<String, Object> c = map(o);
            BigInteger a = big(c.get("a"));
            BigInteger b = big(c.get("b"));
            drawCase("bernoulli_rational " + a + "/" + b, (String) c.get("seed"), list(c.get("draws")), c.get("words"),
                src -> bit(Primitives.bernoulliRational(src, a, b)));
        }
        for (Object o : list(p.get("bernoulli_exp"))) {
            Map<String, Object> c = map(o);
            BigInteger a = big(c.get("a"));
            BigInteger b = big(c.get("b"));
            drawCase("bernoulli_exp " + a + "/" + b, (String) c.get("seed"), list(c.get("draws")), c.get("words"),
                src -> bit(Primitives.bernoulliExp(src, a, b)));
        }
        for (Object o : list(p.get("discrete_laplace"))) {
            Map<String, Object> c = map(o);
            BigInteger a = big(c.get("a"));
            BigInteger b = big(c.get("b"));
            drawCase("discrete_laplace " + a + "/" + b, (String) c.get("seed"), list(c.get("draws")), c.get("words"),
                src -> Primitives.discreteLaplace(src, a, b));
        }
    }

    private void derived(String what, Map<String, Object> expected, Map<String, Object> got) {
        for (Map.Entry<String, Object> e : expected.entrySet()) {
            Object exp = e.getValue();
            Object mine = got.get(e.getKey());
            String w = what + " derived " + e.getKey();
            if (exp instanceof List) {
                List<Object> le = list(exp);
                boolean ok = mine instanceof List && list(mine).size() == le.size();
                for (int i = 0; ok && i < le.size(); i++) {
                    ok = close(le.get(i), list(mine).get(i));
                }
                check(w, ok, "expected " + exp + ", got " + mine);
            } else {
                check(w, close(exp, mine), "expected " + exp + ", got " + mine);
            }
        }
    }

    private static boolean close(Object exp, Object mine) {
        if (exp instanceof Double) {
            if (!(mine instanceof Number)) {
                return false;
            }
            double a = (Double) exp;
            double b = ((Number) mine).doubleValue();
            return a == b || Math.abs(a - b) <= 1e-10 * Math.max(Math.abs(a), Math.abs(b));
        }
        return String.valueOf(exp).equals(String.valueOf(mine));
    }

    private static List<String> lines(List<Object> values) {
        List<String> out = new ArrayList<>();
        for (Object v : values) {
            out.add(v.toString());
        }
        return out;
    }

    private void command(String what, Map<String, Object> c, List<String> lines, List<String> expected) throws Exception {
        StringBuilder in = new StringBuilder();
        for (String l : lines) {
            in.append(l).append('\n');
        }
        String[] args = {(String) c.get("spec"), "--domain", (String) c.get("domain"), "--seed", (String) c.get("seed")};
        byte[] out = Main.run(args, new ByteArrayInputStream(in.toString().getBytes(StandardCharsets.UTF_8)));
        StringBuilder exp = new StringBuilder();
        for (String r : expected) {
            exp.append(r).append('\n');
        }
        checkEq(what + " command output", exp, new String(out, StandardCharsets.UTF_8));
    }

    private void mechanisms(List<Object> cases) throws Exception {
        for (Object o : cases) {
            Map<String, Object> c = map(o);
            String what = (String) c.get("spec") + " on " + c.get("domain");
            Client client = Client.create((String) c.get("spec"), (String) c.get("domain"));
            checkEq(what + " canonical", c.get("canonical"), client.mechanism.canonical);
            derived(what, map(c.get("derived")), client.mechanism.derived());
            List<Object> idx = new ArrayList<>();
            for (String v : lines(list(c.get("values")))) {
                idx.add((long) client.domain.encode(v));
            }
            checkEq(what + " indices", c.get("indices"), idx);
            ChaCha20Source src = new ChaCha20Source((String) c.get("seed"));
            List<String> got = new ArrayList<>();
            for (String r : client.perturbLines(lines(list(c.get("values"))), src)) {
                got.add(unquote(r));
            }
            checkEq(what + " reports", c.get("reports_text"), got);
            checkEq(what + " words", c.get("words"), src.used());
            List<String> json = new ArrayList<>();
            for (Object r : list(c.get("reports"))) {
                json.add(Json.write(r));
            }
            command(what, c, lines(list(c.get("values"))), json);
        }
    }

    private void memoized(List<Object> cases) throws Exception {
        for (Object o : cases) {
            Map<String, Object> c = map(o);
            String what = (String) c.get("spec") + " on " + c.get("domain");
            Client client = Client.create((String) c.get("spec"), (String) c.get("domain"));
            Mechanism mech = client.mechanism;
            checkEq(what + " canonical", c.get("canonical"), mech.canonical);
            derived(what, map(c.get("derived")), mech.derived());
            int rounds = (int) (long) (Long) c.get("rounds");
            ChaCha20Source src = new ChaCha20Source((String) c.get("seed"));
            List<Object> memos = new ArrayList<>();
            List<Object> reports = new ArrayList<>();
            List<String> cmdLines = new ArrayList<>();
            List<String> cmdOut = new ArrayList<>();
            for (String v : lines(list(c.get("values")))) {
                int x = client.domain.encode(v);
                Map<String, Object> memo = mech.memoize(x, src);
                memos.add(memo);
                List<Object> rs = new ArrayList<>();
                for (int r = 0; r < rounds; r++) {
                    String rep = mech.sample(x, src, memo);
                    rs.add(unquote(rep));
                    cmdLines.add(v);
                    cmdOut.add(rep);
                }
                reports.add(rs);
            }
            checkEq(what + " memos", Json.write(c.get("memos")), Json.write(memos));
            checkEq(what + " reports", c.get("reports_text"), reports);
            checkEq(what + " words", c.get("words"), src.used());
            if (new java.util.HashSet<>(list(c.get("values"))).size() == list(c.get("values")).size()) {
                command(what, c, cmdLines, cmdOut);
            }
        }
    }

    private void negative(List<Object> cases) {
        for (Object o : cases) {
            Map<String, Object> c = map(o);
            String what = "negative " + Json.write(c);
            String code = null;
            try {
                Domain d = c.get("domain") == null ? null : Domain.parse((String) c.get("domain"));
                Mechanism m = Mechanism.parse((String) c.get("spec"), d);
                if (c.get("value") != null) {
                    int x = d.encode((String) c.get("value"));
                    Map<String, Object> memo = c.containsKey("memo") ? map(c.get("memo")) : null;
                    m.sample(x, new ChaCha20Source("negative"), memo);
                }
            } catch (PortableException e) {
                code = e.code;
                check(what + " one line", !e.getMessage().contains("\n"), e.getMessage());
            }
            checkEq(what, c.get("error"), code);
        }
    }

    /** Runs every section; returns the number of failures. */
    static int runAll(String path) throws Exception {
        Map<String, Object> v = map(Json.parse(new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8)));
        VectorsTest t = new VectorsTest();
        t.checkEq("protocol version", 1L, v.get("version"));
        t.checkEq("error codes", List.of("spec.syntax", "spec.unknown_mechanism", "spec.unknown_key",
            "spec.duplicate_key", "spec.missing_key", "spec.bad_value", "domain.syntax", "value.out_of_domain",
            "memo.invalid"), new ArrayList<>(map(v.get("error_codes")).keySet()));
        t.chacha(map(v.get("chacha20")));
        t.xxh64(list(v.get("xxh64")));
        t.primitives(map(v.get("primitives")));
        t.mechanisms(list(v.get("mechanisms")));
        t.memoized(list(v.get("memoized")));
        t.negative(list(v.get("negative")));
        t.negative(list(v.get("negative_memo")));
        t.selfChecks();
        System.out.println(t.passed + " passed, " + t.failed + " failed");
        return t.failed;
    }

    /** Checks beyond the vectors: float formatting, JSON round trips, the batch body. */
    private void selfChecks() {
        checkEq("pyFloat 1.0", "1.0", Json.pyFloat(1.0));
        checkEq("pyFloat 0.1", "0.1", Json.pyFloat(0.1));
        checkEq("pyFloat 1e-05", "1e-05", Json.pyFloat(1e-5));
        checkEq("pyFloat 1e+16", "1e+16", Json.pyFloat(1e16));
        checkEq("pyFloat 123456789012345.6", "123456789012345.6", Json.pyFloat(123456789012345.6));
        checkEq("pyFloat 0.0001", "0.0001", Json.pyFloat(1e-4));
        checkEq("pyFloat 2^-1074", "5e-324", Json.pyFloat(Double.MIN_VALUE));
        checkEq("pyFloat 1/3", "0.3333333333333333", Json.pyFloat(1.0 / 3));
        // powers of two, where the decimals reading back to v reach farther above v than below
        checkEq("pyFloat 2^-1017", "7.120236347223045e-307", Json.pyFloat(Math.scalb(1.0, -1017)));
        checkEq("pyFloat 2^-921", "5.641232424577593e-278", Json.pyFloat(Math.scalb(1.0, -921)));
        checkEq("json round trip", "{\"a\": [1, -2, 18446744073709551616, 0.5, \"x\\u00e9\", true, null]}",
            Json.write(Json.parse("{\"a\":[1,-2,18446744073709551616,5e-1,\"x\\u00e9\",true,null]}")));
        checkEq("batch body", "{\"batch_id\": \"b1\", \"groups\": [{\"mechanism\": \"krr(k=10,eps=1.0)\", \"reports\": [3, 7]}]}",
            Batch.body("b1", "krr(k=10,eps=1.0)", List.of("3", "7")));
        String id = Batch.newId(new java.security.SecureRandom());
        check("batch id", id.matches("[0-9a-f]{32}"), id);
        secureRandomLaw();
        for (String bad : new String[] {"{", "[1,]", "01", "{\"a\":1,\"a\":2}", "\"\\x\"", "1 2"}) {
            boolean refused = false;
            try {
                Json.parse(bad);
            } catch (IllegalArgumentException e) {
                refused = true;
            }
            check("json refuses " + bad, refused, "accepted");
        }
    }

    /**
     * The buffered and unbuffered {@link SecureRandomSource} (on a seeded SHA1PRNG: a fixed stream)
     * give k-RR its law: the kept share within 5 standard deviations of {@code p}.
     */
    private void secureRandomLaw() {
        Client client = Client.create("krr(eps=1.0)", "0..9");
        double p = (Double) client.mechanism.derived().get("p");
        for (boolean buffered : new boolean[] {true, false}) {
            java.security.SecureRandom rng;
            try {
                rng = java.security.SecureRandom.getInstance("SHA1PRNG");
            } catch (java.security.NoSuchAlgorithmException e) {
                check("SHA1PRNG", false, "missing");
                return;
            }
            rng.setSeed(39L);
            SecureRandomSource src = new SecureRandomSource(rng, buffered);
            int n = 20000;
            int kept = 0;
            for (int i = 0; i < n; i++) {
                kept += client.report("3", src).equals("3") ? 1 : 0;
            }
            double sd = Math.sqrt(p * (1 - p) / n);
            check("krr law on SecureRandomSource buffered=" + buffered, Math.abs((double) kept / n - p) <= 5 * sd,
                "kept share " + (double) kept / n + ", p " + p);
        }
    }

    public static void main(String[] args) throws Exception {
        int failed = runAll(args.length > 0 ? args[0] : "clients/vectors/vectors-v1.json");
        System.exit(failed == 0 ? 0 : 1);
    }
}
