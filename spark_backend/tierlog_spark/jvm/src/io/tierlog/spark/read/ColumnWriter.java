package io.tierlog.spark.read;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.Dictionary;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The Spark vectors of a reader's batch, made once for the requested schema and reused from
 * batch to batch. A column not asked for has no vector and costs nothing; the topic, partition
 * and segment id are constant vectors; timestamp_type is dictionary ids over its two strings,
 * as Parquet's dictionary pages are read; the fields every row of a record batch shares are
 * written a run of rows at a time. The reader's loop writes the per-record vectors directly.
 */
final class ColumnWriter {
    private static final byte[][] TIMESTAMP_TYPES = {
        "CreateTime".getBytes(StandardCharsets.UTF_8), "LogAppendTime".getBytes(StandardCharsets.UTF_8),
    };

    private final ColumnarBatch batch;
    private final WritableColumnVector[] resettable;
    final WritableColumnVector offsetColumn;
    final WritableColumnVector timestampColumn;
    private final WritableColumnVector timestampTypeIds;
    final WritableColumnVector keyColumn;
    final WritableColumnVector valueColumn;
    final WritableColumnVector headersColumn;
    private final WritableColumnVector headerEntries;
    private final WritableColumnVector headerKeys;
    private final WritableColumnVector headerValues;
    private final WritableColumnVector leaderEpochColumn;
    private final WritableColumnVector producerIdColumn;
    private final WritableColumnVector producerEpochColumn;
    final WritableColumnVector sequenceColumn;
    private final WritableColumnVector transactionalColumn;

    /**
     * Vectors of {@code batchRows} rows for the {@code schema} columns (any of
     * {@link RecordColumns#SCHEMA}'s, in any order), with the range's constant fields.
     */
    ColumnWriter(StructType schema, int batchRows, String topic, int partition, String segmentId) {
        StructField[] fields = schema.fields();
        ColumnVector[] columns = new ColumnVector[fields.length];
        WritableColumnVector[] byIndex = new WritableColumnVector[RecordColumns.SCHEMA.size()];
        for (int i = 0; i < fields.length; i++) {
            int index = RecordColumns.indexOf(fields[i]);
            switch (index) {
                case RecordColumns.TOPIC:
                    columns[i] = constantString(topic, batchRows);
                    break;
                case RecordColumns.SEGMENT_ID:
                    columns[i] = constantString(segmentId, batchRows);
                    break;
                case RecordColumns.PARTITION:
                    ConstantColumnVector constant = new ConstantColumnVector(batchRows, DataTypes.IntegerType);
                    constant.setInt(partition);
                    columns[i] = constant;
                    break;
                default:
                    if (byIndex[index] == null) {
                        byIndex[index] = new OnHeapColumnVector(batchRows, fields[i].dataType());
                    }
                    columns[i] = byIndex[index];
            }
        }
        this.resettable = Arrays.stream(byIndex).filter(c -> c != null).toArray(WritableColumnVector[]::new);
        this.offsetColumn = byIndex[RecordColumns.OFFSET];
        this.timestampColumn = byIndex[RecordColumns.TIMESTAMP];
        WritableColumnVector timestampType = byIndex[RecordColumns.TIMESTAMP_TYPE];
        if (timestampType != null) {
            // Two values for every row: dictionary ids, as Parquet's dictionary pages are read.
            timestampType.setDictionary(new TimestampTypes());
            this.timestampTypeIds = timestampType.reserveDictionaryIds(batchRows);
        } else {
            this.timestampTypeIds = null;
        }
        this.keyColumn = byIndex[RecordColumns.KEY];
        this.valueColumn = byIndex[RecordColumns.VALUE];
        this.headersColumn = byIndex[RecordColumns.HEADERS];
        if (headersColumn != null) {
            this.headerEntries = headersColumn.arrayData();
            this.headerKeys = headerEntries.getChild(0);
            this.headerValues = headerEntries.getChild(1);
        } else {
            this.headerEntries = null;
            this.headerKeys = null;
            this.headerValues = null;
        }
        this.leaderEpochColumn = byIndex[RecordColumns.LEADER_EPOCH];
        this.producerIdColumn = byIndex[RecordColumns.PRODUCER_ID];
        this.producerEpochColumn = byIndex[RecordColumns.PRODUCER_EPOCH];
        this.sequenceColumn = byIndex[RecordColumns.SEQUENCE];
        this.transactionalColumn = byIndex[RecordColumns.IS_TRANSACTIONAL];
        this.batch = new ColumnarBatch(columns);
    }

    /** Empties the vectors for the next batch's rows. */
    void reset() {
        for (WritableColumnVector column : resettable) {
            column.reset();
        }
    }

    /** The batch holding the first {@code rows} rows written. */
    ColumnarBatch rows(int rows) {
        batch.setNumRows(rows);
        return batch;
    }

    void close() {
        batch.close();
    }

    /** Appends the headers {@code record} just parsed from {@code buf} (and checked) to {@code row}. */
    void putHeaders(int row, byte[] buf, int end, RecordParser record) throws CorruptRecordException {
        int first = headerEntries.getElementsAppended();
        int count = record.headerCount;
        int p = record.headersStart;
        for (int i = 0; i < count; i++) {
            long v = record.varint(buf, p, end, p);
            int length = (int) (v >> 32);
            p = (int) v;
            headerKeys.appendByteArray(buf, p, length);
            p += length;
            v = record.varint(buf, p, end, p);
            length = (int) (v >> 32);
            p = (int) v;
            if (length < 0) {
                headerValues.appendNull();
            } else {
                headerValues.appendByteArray(buf, p, length);
                p += length;
            }
            headerEntries.appendStruct(false);
        }
        headersColumn.putArray(row, first, count);
    }

    /** Gives {@code row} an empty list of headers. */
    void putNoHeaders(int row) {
        headersColumn.putArray(row, headerEntries.getElementsAppended(), 0);
    }

    /** The batch's fields every row of it shares, written for {@code count} rows at once. */
    void fillBatchConstants(int row, int count, boolean logAppendTime, int leaderEpoch, long producerId,
            short producerEpoch, boolean transactional) {
        if (count == 0) {
            return;
        }
        if (timestampTypeIds != null) {
            timestampTypeIds.putInts(row, count, logAppendTime ? 1 : 0);
        }
        if (leaderEpochColumn != null) {
            leaderEpochColumn.putInts(row, count, leaderEpoch);
        }
        if (producerIdColumn != null) {
            producerIdColumn.putLongs(row, count, producerId);
        }
        if (producerEpochColumn != null) {
            producerEpochColumn.putShorts(row, count, producerEpoch);
        }
        if (transactionalColumn != null) {
            transactionalColumn.putBooleans(row, count, transactional);
        }
    }

    private static ConstantColumnVector constantString(String value, int rows) {
        ConstantColumnVector vector = new ConstantColumnVector(rows, DataTypes.StringType);
        vector.setUtf8String(UTF8String.fromString(value));
        return vector;
    }

    /** The two timestamp_type strings, which rows refer to by id. */
    private static final class TimestampTypes implements Dictionary {
        @Override
        public byte[] decodeToBinary(int id) {
            return TIMESTAMP_TYPES[id];
        }

        @Override
        public int decodeToInt(int id) {
            throw new UnsupportedOperationException("timestamp_type is a string");
        }

        @Override
        public long decodeToLong(int id) {
            throw new UnsupportedOperationException("timestamp_type is a string");
        }

        @Override
        public float decodeToFloat(int id) {
            throw new UnsupportedOperationException("timestamp_type is a string");
        }

        @Override
        public double decodeToDouble(int id) {
            throw new UnsupportedOperationException("timestamp_type is a string");
        }
    }
}
