package org.localpriv.client;

import java.io.IOException;
import java.io.PrintStream;
import java.net.http.HttpClient;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Posts one wire-format group (what {@code Main --group} prints) to a collection:
 *
 * <pre>
 *   LOCALPRIV_TOKEN=... java -cp build org.localpriv.client.Submit URL COLLECTION [--retries N] [--backoff-ms MS] &lt; group.json
 * </pre>
 *
 * The token is read from the environment (never from the command line, where other users of the
 * machine could read it). Prints the server's answer as one JSON line; a refusal or a failure after
 * every retry is one line {@code error: ...} on standard error, exit status 1.
 */
public final class Submit {
    private Submit() {
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws InterruptedException {
        PrintStream err = new PrintStream(System.err, true, StandardCharsets.UTF_8);
        try {
            List<String> pos = new ArrayList<>();
            int retries = 8;
            long backoff = 250;
            for (int i = 0; i < args.length; i++) {
                if (args[i].equals("--retries") && i + 1 < args.length) {
                    retries = Integer.parseInt(args[++i]);
                } else if (args[i].equals("--backoff-ms") && i + 1 < args.length) {
                    backoff = Long.parseLong(args[++i]);
                } else if (args[i].startsWith("-")) {
                    throw new IllegalArgumentException("unknown option " + args[i]);
                } else {
                    pos.add(args[i]);
                }
            }
            String token = System.getenv("LOCALPRIV_TOKEN");
            if (pos.size() != 2 || token == null || token.isEmpty()) {
                throw new IllegalArgumentException("usage: LOCALPRIV_TOKEN=... Submit URL COLLECTION < group.json");
            }
            String text = new String(System.in.readNBytes((int) Main.MAX_INPUT_BYTES + 1), StandardCharsets.UTF_8);
            if (text.length() > Main.MAX_INPUT_BYTES) {
                throw new IllegalArgumentException("group larger than 64 MiB; split it");
            }
            Object doc = Json.parse(text);
            if (!(doc instanceof Map) || !((Map<String, Object>) doc).keySet().equals(java.util.Set.of("mechanism", "reports"))
                    || !(((Map<String, Object>) doc).get("reports") instanceof List)) {
                throw new IllegalArgumentException("expected one group {\"mechanism\": ..., \"reports\": [...]}");
            }
            Map<String, Object> group = (Map<String, Object>) doc;
            List<String> reports = new ArrayList<>();
            for (Object r : (List<Object>) group.get("reports")) {
                reports.add(Json.write(r));
            }
            Submitter s = new Submitter(HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build(), pos.get(0),
                    pos.get(1), token, retries, backoff, 8000, Duration.ofSeconds(30));
            System.out.println(Json.write(s.post(String.valueOf(group.get("mechanism")), reports)));
        } catch (IOException | IllegalArgumentException e) {
            err.println("error: " + String.join(" ", String.valueOf(e.getMessage()).split("\\s+")));
            System.exit(1);
        }
    }
}
