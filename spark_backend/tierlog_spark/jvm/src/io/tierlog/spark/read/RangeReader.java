package io.tierlog.spark.read;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Stub with the decoder's signature, so that the provider compiles; it decodes nothing. */
public final class RangeReader implements java.io.Closeable {
    /** range: one R object of the contract; schema: the required columns, in order. */
    public RangeReader(JsonNode range, StructType schema, int batchRows) {
        throw new UnsupportedOperationException("the tierlog JVM decoder is not built in");
    }

    /** The next batch of at most batchRows rows, or null at the end. */
    public ColumnarBatch next() throws java.io.IOException {
        return null;
    }

    @Override
    public void close() {}
}
