package io.tierlog.spark.read;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Arrays;

/**
 * The fields of a planned range's JSON, read and checked once when a reader is made, so a
 * range missing a field or holding a bound that is not an integer fails before any byte is
 * read, and the decoding loops see plain values instead of JSON.
 */
final class RangeFields {
    final JsonNode source;
    final String topic;
    final int partition;
    final String segmentId;
    final long firstOffset;
    final long lastOffset;
    final long minTimestamp;
    final long maxTimestamp;
    final boolean readCommitted;
    /** The aborted transactions as (first offset, producer id), by first offset. */
    final long[] abortedFirst;
    final long[] abortedProducer;

    RangeFields(JsonNode range) {
        this.source = required(range, "source");
        this.topic = required(range, "topic").asText();
        this.partition = required(range, "partition").asInt();
        this.segmentId = required(range, "segmentId").asText();
        this.firstOffset = optionalLong(range, "firstOffset", 0);
        this.lastOffset = optionalLong(range, "lastOffset", Long.MAX_VALUE);
        this.minTimestamp = optionalLong(range, "minTimestamp", Long.MIN_VALUE);
        this.maxTimestamp = optionalLong(range, "maxTimestamp", Long.MAX_VALUE);
        this.readCommitted = range.path("readCommitted").asBoolean(false);
        long[][] aborted = abortedTransactions(range.get("aborted"));
        this.abortedFirst = new long[aborted.length];
        this.abortedProducer = new long[aborted.length];
        for (int i = 0; i < aborted.length; i++) {
            abortedFirst[i] = aborted[i][0];
            abortedProducer[i] = aborted[i][1];
        }
    }

    private static JsonNode required(JsonNode range, String field) {
        JsonNode value = range.get(field);
        if (value == null || value.isNull()) {
            throw new IllegalArgumentException("the range has no \"" + field + "\": " + range);
        }
        return value;
    }

    private static long optionalLong(JsonNode range, String field, long absent) {
        JsonNode value = range.get(field);
        if (value == null || value.isNull()) {
            return absent;
        }
        if (!value.canConvertToLong()) {
            throw new IllegalArgumentException("the range's \"" + field + "\" is not an integer: " + value);
        }
        return value.asLong();
    }

    /** (first offset, producer id) pairs sorted as the Python reader sorts them. */
    private static long[][] abortedTransactions(JsonNode aborted) {
        if (aborted == null || aborted.isNull()) {
            return new long[0][];
        }
        long[][] out = new long[aborted.size()][];
        for (int i = 0; i < out.length; i++) {
            JsonNode pair = aborted.get(i);
            out[i] = new long[] {pair.get(1).asLong(), pair.get(0).asLong()};
        }
        Arrays.sort(out, (a, b) -> a[0] != b[0] ? Long.compare(a[0], b[0]) : Long.compare(a[1], b[1]));
        return out;
    }
}
