package io.tierlog.spark;

import org.apache.spark.sql.connector.metric.CustomSumMetric;

/**
 * The SQL metric "segment bytes read": bytes of record batches the tasks asked storage for.
 * Public with a no-argument constructor: Spark makes one by name to sum the tasks' values.
 */
public final class SegmentBytesMetric extends CustomSumMetric {
    static final String NAME = "tierlogSegmentBytes";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String description() {
        return "segment bytes read";
    }
}
