package io.tierlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import io.tierlog.spark.read.RangeReader;
import java.io.IOException;
import java.io.UncheckedIOException;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * A task's records: its ranges decoded one after the other into batches. Each batch is the
 * range reader's own, reused for the next one, so a task allocates per batch at most, never per
 * row.
 */
final class TierlogPartitionReader implements PartitionReader<ColumnarBatch> {
    private final JsonNode ranges;
    private final StructType schema;
    private final int batchRows;
    private final SegmentBytes segmentBytes = new SegmentBytes();
    private final CustomTaskMetric[] metrics = {segmentBytes};
    private int nextRange;
    private RangeReader current;
    private ColumnarBatch batch;

    TierlogPartitionReader(String rangesJson, StructType schema, int batchRows) {
        try {
            this.ranges = Json.MAPPER.readTree(rangesJson);
        } catch (IOException error) {
            throw new UncheckedIOException("a tierlog task's ranges are not JSON", error);
        }
        if (!ranges.isArray()) {
            throw new IllegalArgumentException("a tierlog task's ranges are not a JSON list");
        }
        this.schema = schema;
        this.batchRows = batchRows;
    }

    @Override
    public boolean next() throws IOException {
        while (true) {
            if (current == null) {
                if (nextRange >= ranges.size()) {
                    batch = null;
                    return false;
                }
                JsonNode range = ranges.get(nextRange++);
                current = new RangeReader(range, schema, batchRows);
                JsonNode source = range.path("source");
                segmentBytes.value += source.path("end").asLong(0) - source.path("start").asLong(0);
            }
            ColumnarBatch next = current.next();
            if (next != null) {
                batch = next;
                return true;
            }
            RangeReader done = current;
            current = null;
            done.close();
        }
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public CustomTaskMetric[] currentMetricsValues() {
        return metrics;
    }

    @Override
    public void close() {
        batch = null;
        if (current != null) {
            RangeReader open = current;
            current = null;
            open.close();
        }
    }

    /** This task's value of {@link SegmentBytesMetric}, updated in place. */
    private static final class SegmentBytes implements CustomTaskMetric {
        long value;

        @Override
        public String name() {
            return SegmentBytesMetric.NAME;
        }

        @Override
        public long value() {
            return value;
        }
    }
}
