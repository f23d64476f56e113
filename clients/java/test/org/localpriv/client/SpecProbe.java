package org.localpriv.client;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * Reads JSON lines {@code {"spec": ..., "domain": ... or null, "value": ... or null}} on standard input
 * and prints one JSON line each: {@code {"error": code or null, "canonical": ..., "index": ...}}
 * (the differential test against the Python reference, tests/test_client_java.py).
 */
public final class SpecProbe {
    private SpecProbe() {
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            Map<String, Object> c = (Map<String, Object>) Json.parse(line);
            Map<String, Object> r = new java.util.LinkedHashMap<>();
            try {
                Domain d = c.get("domain") == null ? null : Domain.parse((String) c.get("domain"));
                Mechanism m = Mechanism.parse((String) c.get("spec"), d);
                r.put("error", null);
                r.put("canonical", m.canonical);
                if (c.get("value") != null) {
                    r.put("index", (long) d.encode((String) c.get("value")));
                }
            } catch (PortableException e) {
                r.clear();
                r.put("error", e.code);
            }
            out.append(Json.write(r)).append('\n');
        }
        System.out.print(out);
    }
}
