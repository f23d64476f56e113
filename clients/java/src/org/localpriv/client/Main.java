package org.localpriv.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The client command (docs/clients.md, "The client command"): values one per line in, one report
 * per line out, the same arguments as {@code localpriv client}:
 *
 * <pre>
 *   java -cp build org.localpriv.client.Main SPEC --domain D [--in F] [--out F] [--seed S] [--memo F] [--group]
 *       [--reports-per-device R]
 * </pre>
 *
 * With {@code --reports-per-device R} each input line is one simulated device, with its own memo, that
 * reports its value R times ({@link Client#perturbDevices}): R lines out per line in (audits).
 *
 * A refusal is one line {@code error: CODE: message} on standard error, exit status 1, and nothing written.
 */
public final class Main {
    /** The largest input or memo file read, in bytes. */
    public static final long MAX_INPUT_BYTES = 64L << 20;

    private Main() {
    }

    public static void main(String[] args) {
        PrintStream err = new PrintStream(System.err, true, StandardCharsets.UTF_8);
        try {
            byte[] out = run(args, System.in);
            System.out.write(out);
            System.out.flush();
        } catch (PortableException e) {
            err.println("error: " + e.getMessage());
            System.exit(1);
        } catch (java.nio.file.NoSuchFileException e) {
            err.println("error: no such file: " + e.getFile());
            System.exit(1);
        } catch (UsageException | IOException | IllegalArgumentException | IllegalStateException e) {
            err.println("error: " + String.join(" ", e.getMessage().split("\\s+")));
            System.exit(1);
        }
    }

    static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String m) {
            super(m);
        }
    }

    /** Runs the command; returns what goes to standard output (empty when {@code --out} is given). */
    @SuppressWarnings("unchecked")
    static byte[] run(String[] args, InputStream stdin) throws UsageException, IOException {
        String spec = null;
        String domain = null;
        String in = null;
        String out = null;
        String seed = null;
        String memo = null;
        boolean group = false;
        String rounds = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String val = null;
            int eq = a.indexOf('=');
            String opt = a.startsWith("--") && eq > 0 ? a.substring(0, eq) : a;
            if (a.startsWith("--") && eq > 0) {
                val = a.substring(eq + 1);
            }
            switch (opt) {
                case "--group":
                    group = true;
                    continue;
                case "--domain": case "-d": case "--in": case "-i": case "--out": case "-o": case "--seed": case "--memo":
                case "--reports-per-device":
                    if (val == null) {
                        if (i + 1 >= args.length) {
                            throw new UsageException("option " + opt + " needs a value");
                        }
                        val = args[++i];
                    }
                    break;
                default:
                    if (a.startsWith("-") && a.length() > 1) {
                        throw new UsageException("unknown option " + a + "; usage: SPEC --domain D [--in F] [--out F] "
                                + "[--seed S] [--memo F] [--group] [--reports-per-device R]");
                    }
                    if (spec != null) {
                        throw new UsageException("one SPEC only, got a second: " + a);
                    }
                    spec = a;
                    continue;
            }
            switch (opt) {
                case "--domain": case "-d": domain = val; break;
                case "--in": case "-i": in = val; break;
                case "--out": case "-o": out = val; break;
                case "--seed": seed = val; break;
                case "--reports-per-device": rounds = val; break;
                default: memo = val;
            }
        }
        if (spec == null || domain == null) {
            throw new UsageException("usage: SPEC --domain D [--in F] [--out F] [--seed S] [--memo F] [--group] "
                    + "[--reports-per-device R]");
        }
        int perDevice = 0;
        if (rounds != null) {
            if (!rounds.matches("[0-9]{1,7}")) {
                throw new UsageException("--reports-per-device: expected an integer in 1..1000, got "
                        + rounds.substring(0, Math.min(40, rounds.length())));
            }
            if (memo != null) {
                throw new UsageException("--reports-per-device keeps each simulated device's memo in memory: no --memo");
            }
            perDevice = Integer.parseInt(rounds);
        }
        WordSource src = seed != null ? new ChaCha20Source(seed) : new SecureRandomSource();
        Client client = Client.create(spec, domain);
        if (memo != null && Files.exists(Paths.get(memo))) {
            Object doc = Json.parse(utf8(readBounded(Files.newInputStream(Paths.get(memo))), "memo file " + memo));
            if (!(doc instanceof Map) || !((Map<String, Object>) doc).keySet().equals(java.util.Set.of("memos"))
                    || !(((Map<String, Object>) doc).get("memos") instanceof List)) {
                throw new UsageException("memo file " + memo + ": expected {\"memos\": [...]}");
            }
            client.addMemos((List<Object>) ((Map<String, Object>) doc).get("memos"));
        }
        byte[] raw = in == null ? readBounded(stdin) : readBounded(Files.newInputStream(Paths.get(in)));
        List<String> lines = new ArrayList<>(Arrays.asList(utf8(raw, "input").split("\n", -1)));
        if (!lines.isEmpty() && lines.get(lines.size() - 1).isEmpty()) {
            lines.remove(lines.size() - 1);
        }
        List<String> reports = rounds == null ? client.perturbLines(lines, src) : client.perturbDevices(lines, perDevice, src);
        StringBuilder sb = new StringBuilder();
        if (group) {
            Map<String, Object> g = new LinkedHashMap<>();
            g.put("mechanism", client.mechanism.canonical);
            List<Object> raws = new ArrayList<>();
            for (String r : reports) {
                raws.add(new Json.RawJson(r));
            }
            g.put("reports", raws);
            Json.write(sb, g);
            sb.append('\n');
        } else {
            for (String r : reports) {
                sb.append(r).append('\n');
            }
        }
        if (memo != null && !client.memos().isEmpty()) {
            Map<String, Object> doc = new LinkedHashMap<>();
            doc.put("memos", client.memos());
            writeAtomically(Paths.get(memo), (Json.write(doc) + "\n").getBytes(StandardCharsets.UTF_8));
        }
        byte[] text = sb.toString().getBytes(StandardCharsets.UTF_8);
        if (out != null) {
            writeAtomically(Paths.get(out), text);
            return new byte[0];
        }
        return text;
    }

    private static byte[] readBounded(InputStream s) throws IOException {
        try (InputStream in = s) {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            byte[] chunk = new byte[1 << 16];
            int n;
            while ((n = in.read(chunk)) > 0) {
                buf.write(chunk, 0, n);
                if (buf.size() > MAX_INPUT_BYTES) {
                    throw new IOException("input larger than " + (MAX_INPUT_BYTES >> 20) + " MiB; split it");
                }
            }
            return buf.toByteArray();
        }
    }

    private static String utf8(byte[] raw, String what) throws IOException {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(raw)).toString();
        } catch (CharacterCodingException e) {
            throw new IOException(what + " is not UTF-8 text");
        }
    }

    /** Writes {@code data} to a temporary file beside {@code target}, then renames it over the target. */
    static void writeAtomically(Path target, byte[] data) throws IOException {
        Path dir = target.toAbsolutePath().getParent();
        Path tmp = Files.createTempFile(dir, "." + target.getFileName(), ".tmp");
        try {
            Files.write(tmp, data);
            try {
                Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
    }
}
