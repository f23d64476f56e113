package org.localpriv.client;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Throughput of the Java client on one thread: reports per second of CPU time (the measuring
 * thread's, {@link ThreadMXBean}) per mechanism, bytes per report (the report's JSON text, as
 * posted) and words per report, drawing from {@link SecureRandomSource} (what devices use: buffered,
 * {@code secure}, or one {@code nextInt()} per word, {@code secure-unbuffered}) or from
 * {@link ChaCha20Source} ({@code chacha}). Rounds are interleaved over the mechanisms (each round times every
 * mechanism once); medians with min and max. One JSON document on standard output.
 *
 * <pre>
 *   java -cp build org.localpriv.client.Bench [--n 20000] [--rounds 5] [--warmup 20000] [--source secure|secure-unbuffered|chacha]
 * </pre>
 */
public final class Bench {
    /** The mechanisms timed, all on the domain 0..99 (the planar ones on a 10 x 10 grid). */
    static final String[] SPECS = {
        "krr(eps=1.0)", "oue(eps=1.0)", "sue(eps=1.0)", "olh(eps=1.0)", "blh(eps=1.0)", "ss(eps=1.0)",
        "hr(eps=1.0)", "geometric(eps=1.0,lo=0,hi=99)", "duchi(eps=1.0)", "pm(eps=1.0)", "sw(eps=1.0)",
        "planar-geometric(eps=1.0,nrows=10,ncols=10,cell_km=1.0)",
        "planar-laplace(eps=1.0,nrows=10,ncols=10,cell_km=1.0)",
        "lgrr(eps_perm=2.0,eps_1=1.0)", "lsue(eps_perm=2.0,eps_1=1.0)", "loue(eps_perm=2.0,eps_1=1.0)",
        "lolh(eps_perm=2.0,eps_1=1.0)", "rappor()",
    };

    private Bench() {
    }

    /** Counts the words drawn through it. */
    static final class Counting implements WordSource {
        final WordSource inner;
        long used;

        Counting(WordSource inner) {
            this.inner = inner;
        }

        @Override
        public int nextWord() {
            used++;
            return inner.nextWord();
        }
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        int n = s.length;
        return n % 2 == 1 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    }

    private static Map<String, Object> spread(double[] v) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("median", median(v));
        m.put("min", Arrays.stream(v).min().orElse(Double.NaN));
        m.put("max", Arrays.stream(v).max().orElse(Double.NaN));
        return m;
    }

    public static void main(String[] args) {
        int n = 20000;
        int rounds = 5;
        int warmup = 20000;
        String source = "secure";
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--n": n = Integer.parseInt(args[i + 1]); break;
                case "--rounds": rounds = Integer.parseInt(args[i + 1]); break;
                case "--warmup": warmup = Integer.parseInt(args[i + 1]); break;
                case "--source": source = args[i + 1]; break;
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (n < 1 || n > 10_000_000 || rounds < 1 || rounds > 100 || warmup < 0 || warmup > 10_000_000) {
            throw new IllegalArgumentException("need 1 <= n <= 10^7, 1 <= rounds <= 100, 0 <= warmup <= 10^7");
        }
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        WordSource base;
        switch (source) {
            case "chacha": base = new ChaCha20Source("bench"); break;
            case "secure": base = new SecureRandomSource(); break;
            case "secure-unbuffered": base = new SecureRandomSource(new java.security.SecureRandom(), false); break;
            default: throw new IllegalArgumentException("--source is secure, secure-unbuffered or chacha");
        }
        Counting words = new Counting(base);
        // the inputs: n values of 0..99 from a fixed stream (the same for every mechanism)
        ChaCha20Source inputs = new ChaCha20Source("bench-inputs");
        List<String> values = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            values.add(Long.toString(Primitives.uniformInt(inputs, 100)));
        }
        Client[] clients = new Client[SPECS.length];
        double[][] cpu = new double[SPECS.length][rounds];
        double[][] wall = new double[SPECS.length][rounds];
        long[] bytes = new long[SPECS.length];
        long[] used = new long[SPECS.length];
        for (int s = 0; s < SPECS.length; s++) {
            clients[s] = Client.create(SPECS[s], "0..99");
            for (int i = 0; i < warmup; i++) { // JIT warm-up; memoized mechanisms draw every value's memo here
                clients[s].report(values.get(i % n), words);
            }
        }
        long sink = 0;
        for (int r = 0; r < rounds; r++) {
            for (int s = 0; s < SPECS.length; s++) {
                Client c = clients[s];
                long w0 = words.used;
                long b = 0;
                long t0 = mx.getCurrentThreadCpuTime();
                long c0 = System.nanoTime();
                for (int i = 0; i < n; i++) {
                    b += c.report(values.get(i), words).length();
                }
                long c1 = System.nanoTime();
                long t1 = mx.getCurrentThreadCpuTime();
                cpu[s][r] = n / ((t1 - t0) * 1e-9);
                wall[s][r] = n / ((c1 - c0) * 1e-9);
                bytes[s] += b;
                used[s] += words.used - w0;
                sink += b;
            }
        }
        List<Object> rows = new ArrayList<>();
        for (int s = 0; s < SPECS.length; s++) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("spec", SPECS[s]);
            row.put("canonical", clients[s].mechanism.canonical);
            row.put("memoized", clients[s].mechanism.memoized());
            row.put("reports_per_cpu_second", spread(cpu[s]));
            row.put("reports_per_wall_second", spread(wall[s]));
            row.put("bytes_per_report", (double) bytes[s] / ((long) n * rounds));
            row.put("words_per_report", (double) used[s] / ((long) n * rounds));
            rows.add(row);
        }
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("benchmark", "java_client");
        doc.put("source", source);
        doc.put("secure_random_algorithm", new java.security.SecureRandom().getAlgorithm());
        doc.put("domain", "0..99");
        doc.put("n", (long) n);
        doc.put("rounds", (long) rounds);
        doc.put("warmup", (long) warmup);
        doc.put("java_version", System.getProperty("java.version"));
        doc.put("java_vm", System.getProperty("java.vm.name"));
        doc.put("bytes_note", "bytes of the report's JSON text as posted in a group (no separator)");
        doc.put("mechanisms", rows);
        doc.put("checksum", sink);
        System.out.println(new String(Json.write(doc).getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8));
    }
}
