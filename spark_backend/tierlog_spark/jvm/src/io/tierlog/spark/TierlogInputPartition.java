package io.tierlog.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One task: the JSON text of its ranges, parsed on the executor. Text keeps the partition
 * trivially serializable and small, whatever the planner puts in a range. No preferred hosts:
 * the bytes are in remote storage, equally far from every executor.
 */
final class TierlogInputPartition implements InputPartition {
    private static final long serialVersionUID = 1L;

    private final String ranges;

    TierlogInputPartition(String ranges) {
        this.ranges = ranges;
    }

    /** A JSON list of the contract's range objects, in the order they are read. */
    String ranges() {
        return ranges;
    }
}
