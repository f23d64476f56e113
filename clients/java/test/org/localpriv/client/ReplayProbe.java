package org.localpriv.client;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads JSON lines {@code {"spec", "domain", "seed", "values"}} on standard input and prints one JSON
 * line each: {@code {"reports": [...], "memos": [...], "words": n}}, the values perturbed in order on
 * the ChaCha20 stream of the seed (the differential test against the Python reference on seeds the
 * vectors do not hold, tests/test_client_java.py).
 */
public final class ReplayProbe {
    private ReplayProbe() {
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            Map<String, Object> c = (Map<String, Object>) Json.parse(line);
            Client client = Client.create((String) c.get("spec"), (String) c.get("domain"));
            ChaCha20Source src = new ChaCha20Source((String) c.get("seed"));
            List<String> values = new ArrayList<>();
            for (Object v : (List<Object>) c.get("values")) {
                values.add(v.toString());
            }
            List<Object> reports = new ArrayList<>();
            for (String r : client.perturbLines(values, src)) {
                reports.add(new Json.RawJson(r));
            }
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("reports", reports);
            r.put("memos", client.memos());
            r.put("words", src.used());
            out.append(Json.write(r)).append('\n');
        }
        System.out.print(out);
    }
}
