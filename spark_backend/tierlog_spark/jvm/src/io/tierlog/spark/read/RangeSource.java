package io.tierlog.spark.read;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;

/**
 * Fetches the bytes {@code [start, end)} a range's {@code source} names: a local file, an HTTP
 * URL (typically presigned), or the chunks of an object the fsspec plugin stored compressed and
 * encrypted. A range is planned to at most a task's worth of bytes, so it is read in one go.
 */
final class RangeSource {
    private RangeSource() {}

    static byte[] read(JsonNode source, String segmentId) throws IOException {
        String kind = text(source, "kind");
        long start = number(source, "start");
        long end = number(source, "end");
        checkRange(start, end);
        switch (kind) {
            case "file":
                return FileSource.read(text(source, "path"), start, end, strings(source.get("alsoTry")));
            case "http":
                return HttpSource.read(text(source, "url"), start, end, source.get("headers"));
            case "chunked":
                return ChunkedSource.read(source, start, end, segmentId);
            default:
                throw new IllegalArgumentException("unknown source kind " + kind);
        }
    }

    /** The bytes {@code [start, end)} of a chunk's stored object: a file or a URL. */
    static byte[] readLocation(JsonNode location, long start, long end) throws IOException {
        checkRange(start, end);
        String kind = text(location, "kind");
        switch (kind) {
            case "file":
                return FileSource.read(text(location, "path"), start, end, new String[0]);
            case "http":
                return HttpSource.read(text(location, "url"), start, end, location.get("headers"));
            default:
                throw new IllegalArgumentException("unknown chunk location kind " + kind);
        }
    }

    /** A human name for a location in messages: its path, or its URL without the query. */
    static String describe(JsonNode location) {
        if ("http".equals(location.path("kind").asText())) {
            return HttpSource.withoutQuery(location.path("url").asText());
        }
        return location.path("path").asText();
    }

    private static void checkRange(long start, long end) {
        if (start < 0 || end < start) {
            throw new IllegalArgumentException("bad byte range [" + start + ", " + end + ")");
        }
        if (end - start > Integer.MAX_VALUE - 16) {
            throw new IllegalArgumentException(
                    "a range of " + (end - start) + " bytes is too large to read at once; plan smaller ranges");
        }
    }

    static String text(JsonNode node, String field) {
        JsonNode value = node.get(field);
        if (value == null || !value.isTextual()) {
            throw new IllegalArgumentException("the source needs a string \"" + field + "\": " + node);
        }
        return value.asText();
    }

    static long number(JsonNode node, String field) {
        JsonNode value = node.get(field);
        if (value == null || !value.canConvertToLong()) {
            throw new IllegalArgumentException("the source needs an integer \"" + field + "\": " + node);
        }
        return value.asLong();
    }

    private static String[] strings(JsonNode array) {
        if (array == null || array.isNull()) {
            return new String[0];
        }
        String[] out = new String[array.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = array.get(i).asText();
        }
        return out;
    }
}
