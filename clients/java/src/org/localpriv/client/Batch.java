package org.localpriv.client;

import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The body of {@code POST /v1/collections/{name}/batches} (docs/service.md, "Submitting reports"):
 * {@code {"batch_id": ..., "groups": [{"mechanism": ..., "reports": [...]}]}}. Java 8 API only (usable
 * on Android, where {@link Submitter}'s {@code java.net.http} is missing: post the body with any HTTP
 * client). Build the body once and keep it until the server answers: a retry sends the same body,
 * so the same batch id and the same reports (never draw new reports of the same values for a retry).
 */
public final class Batch {
    /** The most reports of one batch (the collector's default body cap holds about 10^6 index reports). */
    public static final int MAX_REPORTS = 1_000_000;

    private Batch() {
    }

    /** A random batch id: 128 bits from {@code random}, lowercase hex. */
    public static String newId(SecureRandom random) {
        byte[] b = new byte[16];
        random.nextBytes(b);
        return Mechanism.hex(b);
    }

    /**
     * The request body of one group.
     *
     * @param batchId 1-128 characters of {@code A-Z a-z 0-9 . _ : -}
     * @param mechanism the group's mechanism (the client's {@code mechanism.canonical})
     * @param reports the reports' JSON texts, as the samplers return them
     */
    public static String body(String batchId, String mechanism, List<String> reports) {
        if (!batchId.matches("[A-Za-z0-9._:-]{1,128}")) {
            throw new IllegalArgumentException("a batch id is 1-128 characters of A-Z a-z 0-9 . _ : -");
        }
        if (reports.size() > MAX_REPORTS) {
            throw new IllegalArgumentException("more than " + MAX_REPORTS + " reports in one batch; split them");
        }
        List<Object> raw = new ArrayList<>(reports.size());
        for (String r : reports) {
            raw.add(new Json.RawJson(r));
        }
        Map<String, Object> group = new LinkedHashMap<>();
        group.put("mechanism", mechanism);
        group.put("reports", raw);
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("batch_id", batchId);
        doc.put("groups", Collections.singletonList(group));
        return Json.write(doc);
    }
}
