package io.tierlog.spark.read;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Reads a byte range of an object over HTTP(S) with one ranged GET, as object stores serve
 * presigned URLs. Transient failures (connection errors, 5xx, 429) are retried with backoff;
 * a refused or missing object fails at once with a message naming the URL without its query,
 * which holds the signature.
 */
final class HttpSource {
    static final int ATTEMPTS = 4;
    private static final long FIRST_BACKOFF_MS = 200;
    /** Headers the JDK client sets itself and refuses from callers. */
    private static final Set<String> RESTRICTED =
            Set.of("connection", "content-length", "expect", "host", "upgrade");

    private static final HttpClient CLIENT =
            HttpClient.newBuilder()
                    .version(HttpClient.Version.HTTP_1_1)
                    .connectTimeout(Duration.ofSeconds(30))
                    .followRedirects(HttpClient.Redirect.NORMAL)
                    .build();

    private HttpSource() {}

    static byte[] read(String url, long start, long end, JsonNode headers) throws IOException {
        String where = withoutQuery(url);
        HttpRequest.Builder builder =
                HttpRequest.newBuilder(URI.create(url)).GET().timeout(Duration.ofMinutes(2));
        if (end > start) {
            builder.header("Range", "bytes=" + start + "-" + (end - 1));
        }
        if (headers != null && headers.isObject()) {
            for (Map.Entry<String, JsonNode> header : headers.properties()) {
                if (!RESTRICTED.contains(header.getKey().toLowerCase(Locale.ROOT))) {
                    builder.header(header.getKey(), header.getValue().asText());
                }
            }
        }
        HttpRequest request = builder.build();
        String failure = null;
        for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
            if (attempt > 1) {
                backoff(attempt);
            }
            HttpResponse<InputStream> response;
            try {
                response = CLIENT.send(request, HttpResponse.BodyHandlers.ofInputStream());
            } catch (IOException e) {
                failure = e.toString();
                continue;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new InterruptedIOException("interrupted while reading " + where);
            }
            int status = response.statusCode();
            try (InputStream body = response.body()) {
                if (status == 206 || status == 200) {
                    try {
                        return body(body, status == 200 ? start : 0, (int) (end - start), where);
                    } catch (ShortBody e) {
                        throw e;
                    } catch (IOException e) {
                        failure = e.toString();
                        continue;
                    }
                }
                if (status == 429 || status >= 500) {
                    failure = "HTTP " + status;
                    continue;
                }
                if (status == 403) {
                    throw new IOException(
                            "GET " + where + " was refused (HTTP 403 Forbidden): the presigned URL has expired "
                                    + "or does not grant access; run the query again");
                }
                if (status == 404) {
                    throw new FileNotFoundException(
                            "GET " + where + " found nothing (HTTP 404 Not Found): the object was deleted "
                                    + "since the query was planned; run the query again");
                }
                if (status == 416) {
                    throw new IOException(
                            "GET " + where + ": bytes " + start + "-" + (end - 1) + " are past the end of the "
                                    + "object (HTTP 416; truncated since the query was planned?); run the query again");
                }
                throw new IOException("GET " + where + " failed with HTTP " + status);
            }
        }
        throw new IOException("GET " + where + " failed " + ATTEMPTS + " times; the last failure: " + failure);
    }

    /** Exactly {@code length} bytes of {@code body} after skipping {@code skip}. */
    private static byte[] body(InputStream body, long skip, int length, String where) throws IOException {
        long skipped = 0;
        while (skipped < skip) {
            long n = body.skip(skip - skipped);
            if (n <= 0) {
                if (body.read() < 0) {
                    throw new ShortBody(
                            "GET " + where + " returned " + skipped + " bytes, fewer than the range starts at");
                }
                n = 1;
            }
            skipped += n;
        }
        byte[] data = new byte[length];
        int read = body.readNBytes(data, 0, length);
        if (read < length) {
            throw new ShortBody(
                    "GET " + where + " returned " + read + " of the " + length + " bytes of the range "
                            + "(the object is shorter than when the query was planned); run the query again");
        }
        return data;
    }

    private static void backoff(int attempt) throws InterruptedIOException {
        long delay = FIRST_BACKOFF_MS << (attempt - 2);
        delay += ThreadLocalRandom.current().nextLong(delay / 2 + 1);
        try {
            Thread.sleep(delay);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("interrupted while retrying a GET");
        }
    }

    /** {@code url} without its query and fragment, which may hold credentials. */
    static String withoutQuery(String url) {
        int cut = url.length();
        int query = url.indexOf('?');
        if (query >= 0) {
            cut = query;
        }
        int fragment = url.indexOf('#');
        if (fragment >= 0 && fragment < cut) {
            cut = fragment;
        }
        return url.substring(0, cut);
    }

    /** A body shorter than the range: the object changed, and retrying will not help. */
    private static final class ShortBody extends IOException {
        private static final long serialVersionUID = 1L;

        ShortBody(String message) {
            super(message);
        }
    }
}
