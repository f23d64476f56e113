package org.localpriv.client;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Posts reports to a collection (docs/service.md, "Submitting reports"):
 * {@code POST /v1/collections/{name}/batches} with {@code Authorization: Bearer TOKEN} and the body
 * {@code {"batch_id": ..., "groups": [{"mechanism": ..., "reports": [...]}]}}. The batch id is 128
 * random bits in hex; a retry sends the same body (same id), so a batch whose answer was lost is
 * counted once. Retried: network errors (refused, cut, timed out) and the statuses 429, 500, 502,
 * 503, 504, backing off from {@code backoff} doubling up to {@code maxBackoff}; any other status
 * of 400 or more is a refusal ({@link RefusedException}), not retried.
 */
public final class Submitter {
    /** The statuses a post is retried on. */
    public static final Set<Integer> RETRY_STATUS = Set.of(429, 500, 502, 503, 504);

    private final HttpClient http;
    private final URI base;
    private final String collection;
    private final String token;
    private final int retries;
    private final long backoffMillis;
    private final long maxBackoffMillis;
    private final Duration timeout;
    private final SecureRandom random = new SecureRandom();
    /** HTTP requests sent so far (retries included). */
    public int attempts;

    /** A refusal by the server (a status that retrying does not help). */
    public static final class RefusedException extends IOException {
        private static final long serialVersionUID = 1L;
        /** The HTTP status. */
        public final int status;

        public RefusedException(int status, String message) {
            super("server refused (" + status + "): " + message);
            this.status = status;
        }
    }

    /**
     * @param baseUrl the collector, e.g. {@code https://collector.example.org}
     * @param collection the collection's name
     * @param token the ingest (or device) token
     */
    public Submitter(String baseUrl, String collection, String token) {
        this(HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build(), baseUrl, collection, token, 8, 250,
                8000, Duration.ofSeconds(30));
    }

    /** With every setting explicit: {@code retries} after the first attempt, back-off in milliseconds. */
    public Submitter(HttpClient http, String baseUrl, String collection, String token, int retries, long backoffMillis,
                     long maxBackoffMillis, Duration timeout) {
        if (!collection.matches("[A-Za-z0-9._-]{1,128}")) {
            throw new IllegalArgumentException("collection name must be 1-128 characters of A-Z a-z 0-9 . _ -");
        }
        this.http = http;
        this.base = URI.create(baseUrl.endsWith("/") ? baseUrl : baseUrl + "/");
        this.collection = collection;
        this.token = token;
        this.retries = retries;
        this.backoffMillis = backoffMillis;
        this.maxBackoffMillis = maxBackoffMillis;
        this.timeout = timeout;
    }

    /**
     * Posts one group as one batch with a new batch id, retrying as the class says.
     *
     * @return the server's answer, e.g. {@code {"status": "accepted", "reports": 3, "counts_version": 7}}
     * @throws RefusedException on a refusal; IOException when every attempt failed
     */
    public Map<String, Object> post(String mechanism, List<String> reports) throws IOException, InterruptedException {
        return postBody(Batch.body(Batch.newId(random), mechanism, reports));
    }

    /** Posts a prepared body (a retry of it sends the same bytes, so the same batch id). */
    @SuppressWarnings("unchecked")
    public Map<String, Object> postBody(String body) throws IOException, InterruptedException {
        HttpRequest req = HttpRequest.newBuilder(base.resolve("v1/collections/" + collection + "/batches"))
                .timeout(timeout)
                .header("Authorization", "Bearer " + token)
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body))
                .build();
        long delay = backoffMillis;
        String last = "no attempt";
        for (int attempt = 0; attempt <= retries; attempt++) {
            attempts++;
            try {
                HttpResponse<String> resp = http.send(req, HttpResponse.BodyHandlers.ofString());
                int status = resp.statusCode();
                if (!RETRY_STATUS.contains(status)) {
                    if (status >= 400) {
                        String msg = resp.body();
                        try {
                            Object doc = Json.parse(msg);
                            if (doc instanceof Map && ((Map<String, Object>) doc).get("error") != null) {
                                msg = String.valueOf(((Map<String, Object>) doc).get("error"));
                            }
                        } catch (IllegalArgumentException e) {
                            // not JSON: the body as it is
                        }
                        throw new RefusedException(status, String.join(" ", msg.trim().split("\\s+")));
                    }
                    Object doc = Json.parse(resp.body());
                    if (!(doc instanceof Map)) {
                        throw new IOException("the server's answer is not a JSON object");
                    }
                    return (Map<String, Object>) doc;
                }
                last = "HTTP " + status;
            } catch (RefusedException e) {
                throw e;
            } catch (IOException e) { // refused, cut, timed out: the batch may or may not be in
                last = e.getClass().getSimpleName() + ": " + e.getMessage();
            }
            if (attempt < retries) {
                Thread.sleep(delay);
                delay = Math.min(2 * delay, maxBackoffMillis);
            }
        }
        throw new IOException("POST batches failed after " + (retries + 1) + " attempts: " + last);
    }
}
