package io.tierlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;

/**
 * A batch read's tasks, planned once by the Python planner: each is a list of byte ranges the
 * executor decodes in order, with nothing left to look up but the bytes themselves.
 */
final class TierlogBatch implements Batch {
    private final PlannerClient planner;
    private final Map<String, String> options;
    private final List<JsonNode> filters;
    private final StructType required;
    private final int batchRows;
    private InputPartition[] partitions;

    TierlogBatch(
            PlannerClient planner,
            Map<String, String> options,
            List<JsonNode> filters,
            StructType required,
            int batchRows) {
        this.planner = planner;
        this.options = options;
        this.filters = filters;
        this.required = required;
        this.batchRows = batchRows;
    }

    @Override
    public synchronized InputPartition[] planInputPartitions() {
        if (partitions == null) {
            List<String> tasks = planner.plan(options, filters, required.fieldNames());
            InputPartition[] planned = new InputPartition[tasks.size()];
            for (int i = 0; i < planned.length; i++) {
                planned[i] = new TierlogInputPartition(tasks.get(i));
            }
            partitions = planned;
        }
        return partitions.clone();
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new TierlogReaderFactory(required, batchRows);
    }
}
