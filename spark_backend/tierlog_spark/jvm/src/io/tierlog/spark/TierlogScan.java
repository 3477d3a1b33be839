package io.tierlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A JVM read, set up: its columns and the filters the planner applies. A batch read is planned
 * in Python and decoded in the JVM; a stream goes to the Python source, which Spark gives no
 * pruning or pushdown anyway.
 */
final class TierlogScan implements Scan {
    /** The Spark conf setting how many rows a decoded batch holds at most. */
    static final String BATCH_ROWS_KEY = "spark.tierlog.jvm.batchRows";

    /** Parquet's vectorized reader's default: batches that stay in the CPU caches. */
    static final int DEFAULT_BATCH_ROWS = 4096;

    private final TierlogTable table;
    private final CaseInsensitiveStringMap options;
    private final PlannerClient planner;
    private final StructType required;
    private final Filter[] pushed;
    private final List<JsonNode> pushedJson;
    private TierlogBatch batch;

    TierlogScan(
            TierlogTable table,
            CaseInsensitiveStringMap options,
            PlannerClient planner,
            StructType required,
            Filter[] pushed,
            List<JsonNode> pushedJson) {
        this.table = table;
        this.options = options;
        this.planner = planner;
        this.required = required;
        this.pushed = pushed;
        this.pushedJson = pushedJson;
    }

    @Override
    public StructType readSchema() {
        return required;
    }

    @Override
    public String description() {
        String filters =
                Arrays.stream(pushed).map(Filter::toString).collect(Collectors.joining(", "));
        return "TierlogScan [" + String.join(", ", required.fieldNames()) + "] PushedFilters: ["
                + filters + "]";
    }

    /** The same batch every time, so that a read is planned once however often Spark asks. */
    @Override
    public synchronized Batch toBatch() {
        if (batch == null) {
            batch =
                    new TierlogBatch(
                            planner,
                            options.asCaseSensitiveMap(),
                            pushedJson,
                            required,
                            batchRows());
        }
        return batch;
    }

    /**
     * The Python source's stream. Whether reads are columnar is left to each partition's reader
     * factory (Spark's default), which is the Python one's for a stream.
     */
    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        return table.pythonScanBuilder(options).build().toMicroBatchStream(checkpointLocation);
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
        return new CustomMetric[] {new SegmentBytesMetric()};
    }

    static int batchRows() {
        String value = SQLConf.get().getConfString(BATCH_ROWS_KEY, null);
        if (value == null) {
            return DEFAULT_BATCH_ROWS;
        }
        try {
            int rows = Integer.parseInt(value.trim());
            if (rows > 0) {
                return rows;
            }
        } catch (NumberFormatException notANumber) {
            // Reported below with the value.
        }
        throw new IllegalArgumentException(
                BATCH_ROWS_KEY + " is " + TierlogSchema.pythonRepr(value)
                        + ", not a positive number of rows");
    }
}
