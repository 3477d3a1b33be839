package io.tierlog.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Makes each task's reader on its executor; records are only ever read as columnar batches. */
final class TierlogReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    private final StructType schema;
    private final int batchRows;

    TierlogReaderFactory(StructType schema, int batchRows) {
        this.schema = schema;
        this.batchRows = batchRows;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return true;
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        return new TierlogPartitionReader(((TierlogInputPartition) partition).ranges(), schema,
                batchRows);
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        throw new UnsupportedOperationException("the tierlog reader reads columnar batches only");
    }
}
