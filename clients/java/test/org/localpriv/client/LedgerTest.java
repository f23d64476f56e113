package org.localpriv.client;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * The privacy ledger: the levels computed here against Python's (vectors-v1.json), the ledger
 * written by Python (ledger-v1.json) read, totalled and rewritten byte for byte, memo groups
 * capped, bad files refused, budgets refused before any word is drawn. Prints
 * {@code N passed, M failed}; with a third argument, writes a ledger there for the Python side to
 * read and prints its total as {@code total <repr>}.
 *
 * <pre>
 *   java -cp build org.localpriv.client.LedgerTest clients/vectors/vectors-v1.json clients/vectors/ledger-v1.json [out.json]
 * </pre>
 */
public final class LedgerTest {
    private int passed;
    private int failed;

    private LedgerTest() {
    }

    private void check(String what, boolean ok, String detail) {
        if (ok) {
            passed++;
        } else {
            failed++;
            System.out.println("FAIL " + what + ": " + detail);
        }
    }

    private static boolean close(Object want, Double got) {
        if (want == null) {
            return got == null;
        }
        if ("inf".equals(want)) {
            return got != null && got == Double.POSITIVE_INFINITY;
        }
        double w = ((Number) want).doubleValue();
        return got != null && (got == w || Math.abs(got - w) <= 1e-10 * Math.abs(w));
    }

    private String refusal(Runnable r) {
        try {
            r.run();
        } catch (LedgerException | IllegalArgumentException e) {
            check("one line", !e.getMessage().contains("\n"), e.getMessage());
            return e.getMessage();
        }
        return "";
    }

    private static Release rel(String spec, double eps, long reports, String key, Double perm, Double inst) {
        return new Release(spec, eps, 0.0, reports, "", "", key, perm, inst, null);
    }

    /** A word source that fails the test when drawn from. */
    private final class Untouchable implements WordSource {
        @Override
        public int nextWord() {
            check("no word drawn", false, "a word was drawn");
            return 0;
        }
    }

    @SuppressWarnings("unchecked")
    private void run(String vectorsPath, String fixturePath, String out) throws Exception {
        Map<String, Object> vectors = (Map<String, Object>) Json.parse(new String(Files.readAllBytes(Paths.get(vectorsPath)),
                StandardCharsets.UTF_8));
        String fixture = new String(Files.readAllBytes(Paths.get(fixturePath)), StandardCharsets.UTF_8);

        // levels against Python's, every vector
        List<Object> cases = new ArrayList<>((List<Object>) vectors.get("mechanisms"));
        cases.addAll((List<Object>) vectors.get("memoized"));
        for (Object o : cases) {
            Map<String, Object> v = (Map<String, Object>) o;
            Mechanism mech = Mechanism.parse((String) v.get("spec"), Domain.parse((String) v.get("domain")));
            Map<String, Object> want = (Map<String, Object>) v.get("levels");
            if (mech.name.startsWith("planar-")) {
                check("planar refused " + mech.canonical, refusal(mech::levels).contains("does not compute the level of planar"), "");
                continue;
            }
            Levels lv = mech.levels();
            String what = "levels " + v.get("spec");
            check(what + " epsilon", close(want.get("epsilon_ldp"), lv.epsilon), want + " vs " + lv.epsilon);
            if (want.containsKey("eps_perm")) {
                check(what + " eps_perm", close(want.get("eps_perm"), lv.epsPerm), want + " vs " + lv.epsPerm);
                check(what + " eps_inst", close(want.get("eps_inst"), lv.epsInst), want + " vs " + lv.epsInst);
            } else {
                check(what + " no eps_perm", lv.epsPerm == null, String.valueOf(lv.epsPerm));
            }
        }

        // the ledger written by Python: read, totalled as Python totals it, rewritten byte for byte
        Map<String, Object> totals = (Map<String, Object>) vectors.get("ledger");
        List<Release> rels = Ledger.parse(fixture, "ledger fixture");
        List<Object> prefix = (List<Object>) totals.get("prefix_epsilon");
        check("fixture size", rels.size() == ((Long) totals.get("releases")).intValue(), String.valueOf(rels.size()));
        for (int i = 0; i < rels.size(); i++) {
            double got = Ledger.compose(rels.subList(0, i + 1)).epsilon;
            double want = ((Number) prefix.get(i)).doubleValue();
            check("prefix total " + (i + 1), got == want, want + " vs " + got);
        }
        check("fixture rewritten byte for byte", Ledger.text(rels).equals(fixture), Ledger.text(rels));
        boolean inf = false;
        for (Release r : rels) {
            inf |= r.epsPerm != null && r.epsPerm == Double.POSITIVE_INFINITY;
            String dom = r.spec.replaceAll(".*k=(\\d+).*", "$1");
            Mechanism mech = Mechanism.parse(r.spec, Domain.parse("0.." + (Integer.parseInt(dom) - 1)));
            Release mine = Release.of(mech, r.reports, r.collection, r.time, r.memoKey);
            check("release of " + r.spec, mine.spec.equals(r.spec) && close(r.epsilon, mine.epsilon)
                    && close(r.epsPerm == null ? null : (Object) r.epsPerm, mine.epsPerm)
                    && close(r.epsInst == null ? null : (Object) r.epsInst, mine.epsInst)
                    && String.valueOf(r.rrValues).equals(String.valueOf(mine.rrValues)), r.spec);
        }
        check("\"inf\" read as infinity", inf, "");

        // memo groups
        Release one = rel("lgrr(k=3,eps_perm=4.0,eps_1=0.5)", 0.5, 1, "a", 4.0, 0.527);
        check("one report alone", Ledger.compose(Arrays.asList(one)).epsilon == 0.5, "");
        check("t eps_inst below eps_perm", Ledger.compose(Arrays.asList(one, one)).epsilon == 2 * 0.527, "");
        check("eps_perm caps", Ledger.compose(Arrays.asList(one, rel("lgrr(k=3,eps_perm=4.0,eps_1=0.5)", 0.5, 9, "a", 4.0, 0.527)))
                .epsilon == 4, "");
        check("no eps_inst: eps_perm", Ledger.compose(Arrays.asList(rel("loue(k=3,eps_perm=4.0,eps_1=0.5)", 0.5, 2, "b", 4.0, null)))
                .epsilon == 4, "");
        List<Release> mixed = new ArrayList<>(rels);
        mixed.add(one);
        List<Release> reversed = new ArrayList<>(mixed);
        Collections.reverse(reversed);
        check("order does not matter", Ledger.compose(mixed).epsilon == Ledger.compose(reversed).epsilon, "");
        check("disagreeing eps_perm", refusal(() -> Ledger.compose(Arrays.asList(one,
                rel("lgrr(k=3,eps_perm=4.0,eps_1=0.5)", 0.5, 1, "a", 3.0, null))))
                .equals("releases of memo 'a' disagree on eps_perm (['3.0', '4.0']): one memo has one permanent level"), "");
        check("fsum exact", Ledger.fsum(new double[] {1e100, 1, -1e100}) == 1 && Ledger.fsum(new double[] {0.1, 0.2, 0.3}) == 0.6, "");
        check("formatG", Ledger.formatG(1.0 / 3, 6).equals("0.333333") && Ledger.formatG(1234567, 6).equals("1.23457e+06")
                && Ledger.formatG(1.5e-7, 6).equals("1.5e-07") && Ledger.formatG(3, 6).equals("3"), Ledger.formatG(1234567, 6));

        // bad files
        String[][] bad = {
            {fixture.replace("\"version\": 1,", "\"version\": 1, \"extra\": 1,"), "unknown key(s) extra; known: format, version, releases"},
            {fixture.replace("\"version\": 1,", "\"version\": 2,"), "version 2 is not supported (this is version 1)"},
            {fixture.replace("\"localpriv-ledger\"", "\"x\""), "not a localpriv ledger"},
            {fixture.replaceFirst("\"delta\": 0.0,", "\"colour\": 1,"), "release 1: release: unknown key(s) colour"},
            {fixture.replaceFirst("\"epsilon\": 1.0", "\"epsilon\": -1.0"), "release 1: release: epsilon must be >= 0"},
            {fixture.replaceFirst("\"reports\": 3", "\"reports\": 3.0"), "reports must be an integer in 1..1000000000"},
            {fixture.replaceFirst("\"eps_perm\": 2.0", "\"eps_perm\": null"), "release 3: release: a memo_key needs eps_perm"},
            {"{", "ledger x.json: not a readable JSON file"},
        };
        for (String[] b : bad) {
            String msg = refusal(() -> Ledger.parse(b[0], "ledger x.json"));
            check("refused: " + b[1], msg.contains(b[1]), msg);
        }
        List<Release> minimal = Ledger.parse("{\"format\": \"localpriv-ledger\", \"version\": 1, \"releases\": "
                + "[{\"spec\": \"x(k=2)\", \"epsilon\": \"inf\"}]}", "m");
        check("minimal release", minimal.get(0).epsilon == Double.POSITIVE_INFINITY && minimal.get(0).reports == 1
                && Ledger.text(minimal).contains("\"epsilon\": \"inf\""), "");

        // budgets, refused before any word is drawn
        Path dir = Files.createTempDirectory("ledger");
        Path file = dir.resolve("device.json");
        try {
            Ledger ledger = Ledger.open(file);
            Client c = Client.create("krr(eps=1.0)", "0..9");
            c.perturbLines(Arrays.asList("3", "4", "5"), new ChaCha20Source("ledger-1"), ledger, 5.0, "ages");
            String msg = refusal(() -> c.perturbLines(Arrays.asList("1", "2", "3"), new Untouchable(), ledger, 5.0, "ages"));
            check("refusal wording", msg.equals("privacy budget exceeded: the ledger " + file + " totals eps 3, this request (3 report(s) of "
                    + "krr(k=10,eps=1.0)) costs eps 3 more, and the budget is 5; nothing was perturbed or sent"), msg);
            Ledger again = Ledger.open(file);
            check("saved", again.releases().size() == 1 && again.releases().get(0).reports == 3
                    && again.releases().get(0).collection.equals("ages") && again.text().equals(new String(Files.readAllBytes(file),
                    StandardCharsets.UTF_8)), again.text());
            check("a budget needs a ledger", refusal(() -> c.perturbLines(Arrays.asList("1"), new Untouchable(), null, 1.0, ""))
                    .contains("a budget needs a ledger"), "");

            // memoized: one release per memo, keyed; a stored memo reused joins its group
            Ledger m = new Ledger(new MemoryStorage(), "m");
            Client l = Client.create("lgrr(eps_perm=2.0,eps_1=1.0)", "0..9");
            l.perturbLines(Arrays.asList("3", "3", "5"), new ChaCha20Source("ledger-2"), m, null, "ages");
            Levels lv = l.mechanism.levels();
            check("two memos", m.releases().size() == 2 && m.releases().get(0).reports == 2
                    && m.releases().get(0).memoKey.equals(Ledger.memoKey((Map<String, Object>) l.memos().get(0))), "");
            check("memo group total", m.total().epsilon == Ledger.fsum(new double[] {Math.min(lv.epsPerm, 2 * lv.epsInst), lv.epsilon}),
                    String.valueOf(m.total().epsilon));
            l.perturbLines(Arrays.asList("3"), new ChaCha20Source("ledger-3"), m, null, "ages");
            check("reused memo joins its group", m.total().epsilon == Ledger.fsum(new double[] {2.0, lv.epsilon}),
                    String.valueOf(m.total().epsilon));
            String refused = refusal(() -> l.perturbLines(Arrays.asList("7", "8"), new Untouchable(), m, 4.0, "ages"));
            check("new memos refused before drawing", refused.startsWith("privacy budget exceeded") && m.releases().size() == 3, refused);
        } finally {
            Files.deleteIfExists(file);
            Files.deleteIfExists(dir);
        }

        if (out != null) { // a ledger for Python to read: the fixture, then releases recorded here
            Ledger w = new Ledger(new MemoryStorage(fixture), "out");
            w.record(Arrays.asList(Release.of(Mechanism.parse("olh(eps=2.0)", Domain.parse("0..99")), 5, "pages", "2026-11-28T11:00:00Z",
                    null), Release.of(Mechanism.parse("lolh(eps_perm=4.0,eps_1=1.0)", Domain.parse("0..99")), 3, "pages",
                    "2026-11-28T11:00:01Z", "memo-java"), Release.of(Mechanism.parse("rappor()", Domain.parse("0..99")), 2, "flags",
                    "2026-11-28T11:00:02Z", "memo-r")), null);
            Files.write(Paths.get(out), w.text().getBytes(StandardCharsets.UTF_8));
            System.out.println("total " + Json.pyFloat(w.total().epsilon));
        }
    }

    /** Storage in memory. */
    static final class MemoryStorage implements Ledger.Storage {
        private String text;

        MemoryStorage() {
        }

        MemoryStorage(String text) {
            this.text = text;
        }

        @Override
        public String load() {
            return text;
        }

        @Override
        public void save(String t) {
            text = t;
        }
    }

    public static void main(String[] args) throws Exception {
        LedgerTest t = new LedgerTest();
        t.run(args[0], args[1], args.length > 2 ? args[2] : null);
        System.out.println(t.passed + " passed, " + t.failed + " failed");
        System.exit(t.failed == 0 ? 0 : 1);
    }
}
