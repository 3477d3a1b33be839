package io.tierlog.spark.read;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Closeable;
import java.io.IOException;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Decodes one planned range of a segment (Kafka record batches, magic 2) into Spark column
 * vectors, with exactly the Python reader's rows ({@code tierlog_spark.decode.decode_segment}).
 *
 * <p>This is the read path's hot loop, so it decodes straight from the range's bytes (or one
 * decompression buffer reused from batch to batch): varints are read inline, no object is made
 * per record, keys and values are copied once into their vectors, and columns that were not
 * asked for are never written. Batches are skipped by their header alone whenever the offset
 * range, the timestamp range, a control marker or an aborted transaction rules them out; every
 * batch walked is CRC-checked first, as a Kafka consumer does. The topic, partition and segment
 * id are constant vectors, and the per-batch fields are filled a run of rows at a time.
 *
 * <p>The work is shared out: {@link RangeFields} reads the range, {@link BatchWalk} steps from
 * batch header to batch header, {@link RecordParser} parses one record and {@link ColumnWriter}
 * holds the vectors; this class runs the loop over a batch's records that ties them together.
 */
public final class RangeReader implements Closeable {
    private final RangeFields range;
    private final int batchRows;
    private final RecordParser record;
    private final BatchWalk walk;
    private final ColumnWriter columns;
    private boolean exhausted;

    /**
     * A reader of {@code range} (a planned range R: topic, partition, segmentId, offset and
     * timestamp bounds, transaction settings and the source of its bytes) producing the
     * {@code schema} columns (any of {@link RecordColumns#SCHEMA}'s, in any order), at most
     * {@code batchRows} rows per batch. Nothing is read before the first {@link #next()}.
     */
    public RangeReader(JsonNode range, StructType schema, int batchRows) {
        if (batchRows < 1) {
            throw new IllegalArgumentException("batchRows must be positive, not " + batchRows);
        }
        this.batchRows = batchRows;
        this.range = new RangeFields(range);
        this.record = new RecordParser(this.range.segmentId);
        this.walk = new BatchWalk(this.range, record);
        this.columns = new ColumnWriter(
                schema, batchRows, this.range.topic, this.range.partition, this.range.segmentId);
    }

    /**
     * The next rows of the range, at most {@code batchRows} of them, or null at the end. The
     * batch and its vectors are reused: its rows are valid until the next call.
     *
     * @throws CorruptRecordException for bytes that are not valid record batches, naming the
     *     segment and the byte position within the range
     * @throws IOException when the bytes cannot be read (a deleted or truncated file, an HTTP
     *     failure, a damaged chunk)
     */
    public ColumnarBatch next() throws IOException {
        if (exhausted) {
            return null;
        }
        if (!walk.hasBytes()) {
            walk.start(RangeSource.read(range.source, range.segmentId));
        }
        columns.reset();
        int rows = 0;
        try {
            while (rows < batchRows) {
                if (!walk.inBatch && !walk.advance()) {
                    exhausted = true;
                    walk.release();
                    break;
                }
                rows = decodeRecords(rows);
            }
        } catch (IndexOutOfBoundsException e) {
            // Every read is bounds-checked; this is a last line so damage never escapes as a crash.
            throw new CorruptRecordException(
                    range.segmentId, walk.batchPosition, "undecodable records (" + e + ")");
        }
        if (rows == 0) {
            return null;
        }
        return columns.rows(rows);
    }

    @Override
    public void close() {
        exhausted = true;
        walk.close();
        columns.close();
    }

    /** Decodes records of the current batch into rows from {@code row} on; returns the next row. */
    private int decodeRecords(int row) throws CorruptRecordException {
        final BatchWalk walk = this.walk;
        final RecordParser record = this.record;
        final ColumnWriter columns = this.columns;
        final WritableColumnVector offsetColumn = columns.offsetColumn;
        final WritableColumnVector timestampColumn = columns.timestampColumn;
        final WritableColumnVector keyColumn = columns.keyColumn;
        final WritableColumnVector valueColumn = columns.valueColumn;
        final WritableColumnVector headersColumn = columns.headersColumn;
        final WritableColumnVector sequenceColumn = columns.sequenceColumn;
        final long firstOffset = range.firstOffset;
        final long lastOffset = range.lastOffset;
        final long minTimestamp = range.minTimestamp;
        final long maxTimestamp = range.maxTimestamp;
        final int runStart = row;
        final byte[] buf = walk.records;
        final int end = walk.recordsEnd;
        final long base = walk.baseOffset;
        final long baseTimestamp = walk.baseTimestamp;
        final long batchMaxTimestamp = walk.batchMaxTimestamp;
        final int baseSequence = walk.baseSequence;
        final boolean logAppendTime = (walk.attributes & BatchWalk.LOG_APPEND_TIME_MASK) != 0;
        final int limit = batchRows;
        int p = walk.recordPosition;
        int left = walk.recordsLeft;
        while (left > 0 && row < limit) {
            int recordStart = p;
            p = record.parse(buf, p, end);
            left--;
            int offsetDelta = record.offsetDelta;
            long offset = base + offsetDelta;
            if (((base ^ offset) & (offsetDelta ^ offset)) < 0) {
                continue; // past the long range: outside every offset range, as in Python
            }
            long timestamp = logAppendTime ? batchMaxTimestamp : baseTimestamp + record.timestampDelta;
            if (offset < firstOffset || offset > lastOffset || timestamp < minTimestamp || timestamp > maxTimestamp) {
                continue;
            }
            if (offsetColumn != null) {
                offsetColumn.putLong(row, offset);
            }
            if (timestampColumn != null) {
                timestampColumn.putLong(row, micros(timestamp));
            }
            if (keyColumn != null) {
                int keyLength = record.keyLength;
                if (keyLength < 0) {
                    keyColumn.putNull(row);
                } else {
                    keyColumn.putByteArray(row, buf, record.keyStart, keyLength);
                }
            }
            if (valueColumn != null) {
                int valueLength = record.valueLength;
                if (valueLength < 0) {
                    valueColumn.putNull(row);
                } else {
                    valueColumn.putByteArray(row, buf, record.valueStart, valueLength);
                }
            }
            if (record.headerCount > 0) {
                // Like the Python reader, only the keys of rows kept must be UTF-8.
                record.checkHeaderKeys(buf, end, recordStart);
                if (headersColumn != null) {
                    columns.putHeaders(row, buf, end, record);
                }
            } else if (headersColumn != null) {
                columns.putNoHeaders(row);
            }
            if (sequenceColumn != null) {
                sequenceColumn.putInt(row, sequence(baseSequence, offsetDelta));
            } else if (baseSequence >= 0) {
                sequence(baseSequence, offsetDelta); // a sequence that does not fit fails the row, requested or not
            }
            row++;
        }
        walk.recordPosition = p;
        walk.recordsLeft = left;
        columns.fillBatchConstants(runStart, row - runStart, logAppendTime, walk.leaderEpoch, walk.producerId,
                walk.producerEpoch, (walk.attributes & BatchWalk.TRANSACTIONAL_MASK) != 0);
        if (left == 0) {
            walk.inBatch = false;
            if (p != end) {
                throw record.recordError(p, (end - p) + " bytes left over after the " + walk.recordCount
                        + " records the header declares");
            }
        }
        return row;
    }

    /** The record's producer sequence: the batch's base plus the offset delta, wrapping as Kafka does. */
    private int sequence(int baseSequence, int offsetDelta) throws CorruptRecordException {
        if (baseSequence < 0) {
            return -1;
        }
        long sequence = (long) baseSequence + offsetDelta;
        if (sequence > Integer.MAX_VALUE) {
            sequence -= 1L << 31;
        }
        if (sequence < Integer.MIN_VALUE) {
            throw unfit("sequence " + sequence);
        }
        return (int) sequence;
    }

    private long micros(long millis) throws CorruptRecordException {
        if (millis > Long.MAX_VALUE / 1000 || millis < Long.MIN_VALUE / 1000) {
            throw unfit("timestamp " + millis + " ms is beyond what a Spark timestamp holds");
        }
        return millis * 1000;
    }

    /** A row whose field does not fit its Spark column, positioned at its batch. */
    private CorruptRecordException unfit(String what) {
        return new CorruptRecordException(
                range.segmentId, walk.batchPosition, "records that do not fit the schema: " + what);
    }
}
