package io.tierlog.spark.read;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Closeable;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.zip.CRC32C;
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
 */
public final class RangeReader implements Closeable {
    private static final int LOG_OVERHEAD = 12;
    private static final int HEADER_SIZE = 61;
    private static final int MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD;
    private static final int MIN_RECORD_SIZE = 7;
    private static final int MAGIC = 2;
    private static final int COMPRESSION_MASK = 0x07;
    private static final int LOG_APPEND_TIME_MASK = 0x08;
    private static final int TRANSACTIONAL_MASK = 0x10;
    private static final int CONTROL_MASK = 0x20;
    private static final int CODECS = 5;
    private static final byte[][] TIMESTAMP_TYPES = {
        "CreateTime".getBytes(StandardCharsets.UTF_8), "LogAppendTime".getBytes(StandardCharsets.UTF_8),
    };

    // --- the range ---------------------------------------------------------------------------
    private final JsonNode source;
    private final String segmentId;
    private final long firstOffset;
    private final long lastOffset;
    private final long minTimestamp;
    private final long maxTimestamp;
    private final boolean readCommitted;
    /** The aborted transactions as (first offset, producer id), by first offset. */
    private final long[] abortedFirst;
    private final long[] abortedProducer;
    private final int batchRows;

    // --- the output --------------------------------------------------------------------------
    private final ColumnarBatch batch;
    private final WritableColumnVector[] resettable;
    private final WritableColumnVector offsetColumn;
    private final WritableColumnVector timestampColumn;
    private final WritableColumnVector timestampTypeIds;
    private final WritableColumnVector keyColumn;
    private final WritableColumnVector valueColumn;
    private final WritableColumnVector headersColumn;
    private final WritableColumnVector headerEntries;
    private final WritableColumnVector headerKeys;
    private final WritableColumnVector headerValues;
    private final WritableColumnVector leaderEpochColumn;
    private final WritableColumnVector producerIdColumn;
    private final WritableColumnVector producerEpochColumn;
    private final WritableColumnVector sequenceColumn;
    private final WritableColumnVector transactionalColumn;

    // --- the walk ----------------------------------------------------------------------------
    private byte[] data;
    private int position;
    private boolean exhausted;
    private final CRC32C crc = new CRC32C();
    private final BatchDecompressor decompressor = new BatchDecompressor();
    private int nextAborted;
    private final Set<Long> openAborted = new HashSet<>();

    // --- the batch being decoded (header fields, then where its records are) ------------------
    private int batchPosition;
    private int batchLength;
    private long baseOffset;
    private int leaderEpoch;
    private int attributes;
    private int lastOffsetDelta;
    private long baseTimestamp;
    private long batchMaxTimestamp;
    private long producerId;
    private short producerEpoch;
    private int baseSequence;
    private int recordCount;
    private boolean inBatch;
    private byte[] records;
    private int recordsStart;
    private int recordsEnd;
    private boolean compressed;
    private int recordPosition;
    private int recordsLeft;

    // --- the record just parsed --------------------------------------------------------------
    private long timestampDelta;
    private int offsetDelta;
    private int keyStart;
    private int keyLength;
    private int valueStart;
    private int valueLength;
    private int headersStart;
    private int headerCount;
    /** Where a long varint ended (the int varints return it packed with their value). */
    private int cursor;

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
        this.source = required(range, "source");
        String topic = required(range, "topic").asText();
        int partition = required(range, "partition").asInt();
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
        if (data == null) {
            data = RangeSource.read(source, segmentId);
        }
        for (WritableColumnVector column : resettable) {
            column.reset();
        }
        int rows = 0;
        try {
            while (rows < batchRows) {
                if (!inBatch && !advance()) {
                    exhausted = true;
                    data = null;
                    break;
                }
                rows = decodeRecords(rows);
            }
        } catch (IndexOutOfBoundsException e) {
            // Every read is bounds-checked; this is a last line so damage never escapes as a crash.
            throw new CorruptRecordException(segmentId, batchPosition, "undecodable records (" + e + ")");
        }
        if (rows == 0) {
            return null;
        }
        batch.setNumRows(rows);
        return batch;
    }

    @Override
    public void close() {
        exhausted = true;
        data = null;
        records = null;
        batch.close();
        decompressor.close();
    }

    // --- batches -----------------------------------------------------------------------------

    /** Moves to the next batch whose records are wanted; false at the end of the range. */
    private boolean advance() throws CorruptRecordException {
        final byte[] bytes = data;
        final int end = bytes.length;
        while (position < end) {
            int at = position;
            readHeader(bytes, at, end);
            position = at + LOG_OVERHEAD + batchLength;
            if (baseOffset > lastOffset) {
                position = end;
                return false;
            }
            long batchLastOffset = baseOffset + lastOffsetDelta;
            if (batchLastOffset < baseOffset) {
                batchLastOffset = Long.MAX_VALUE;
            }
            boolean control = (attributes & CONTROL_MASK) != 0;
            if (readCommitted && producerId >= 0) {
                // Kafka's fetch path: a transaction is open from its first offset until its
                // producer's ABORT marker, and meanwhile that producer's transactional batches
                // are dropped.
                while (nextAborted < abortedFirst.length && abortedFirst[nextAborted] <= batchLastOffset) {
                    openAborted.add(abortedProducer[nextAborted]);
                    nextAborted++;
                }
                if (control) {
                    if (isAbortMarker(at)) {
                        openAborted.remove(producerId);
                    }
                    continue;
                }
                if ((attributes & TRANSACTIONAL_MASK) != 0 && openAborted.contains(producerId)) {
                    continue;
                }
            }
            if (control || batchLastOffset < firstOffset) {
                continue;
            }
            if (batchMaxTimestamp < minTimestamp) {
                continue;
            }
            if ((attributes & LOG_APPEND_TIME_MASK) != 0 && batchMaxTimestamp > maxTimestamp) {
                continue;
            }
            openRecords(at);
            recordPosition = recordsStart;
            recordsLeft = recordCount;
            inBatch = true;
            return true;
        }
        return false;
    }

    /** Reads and checks the header of the batch at {@code at}, and its CRC. */
    private void readHeader(byte[] b, int at, int end) throws CorruptRecordException {
        int available = end - at;
        if (available < HEADER_SIZE) {
            if (available > 16 && b[at + 16] != MAGIC) {
                throw badMagic(b[at + 16], at);
            }
            if (available >= LOG_OVERHEAD && int32(b, at + 8) < MIN_BATCH_LENGTH) {
                throw shortLength(int32(b, at + 8), at);
            }
            throw corrupt(at, "truncated batch header: " + Math.max(available, 0) + " of " + HEADER_SIZE + " bytes");
        }
        baseOffset = int64(b, at);
        batchLength = int32(b, at + 8);
        leaderEpoch = int32(b, at + 12);
        byte magic = b[at + 16];
        long storedCrc = int32(b, at + 17) & 0xFFFFFFFFL;
        attributes = int16(b, at + 21);
        lastOffsetDelta = int32(b, at + 23);
        baseTimestamp = int64(b, at + 27);
        batchMaxTimestamp = int64(b, at + 35);
        producerId = int64(b, at + 43);
        producerEpoch = (short) int16(b, at + 51);
        baseSequence = int32(b, at + 53);
        recordCount = int32(b, at + 57);
        if (magic != MAGIC) {
            throw badMagic(magic, at);
        }
        if (batchLength < MIN_BATCH_LENGTH) {
            throw shortLength(batchLength, at);
        }
        if (batchLength > available - LOG_OVERHEAD) {
            throw corrupt(at, "truncated batch: the header declares " + (LOG_OVERHEAD + (long) batchLength)
                    + " bytes, " + available + " are present");
        }
        crc.reset();
        crc.update(b, at + 21, batchLength - 9);
        long computed = crc.getValue();
        if (computed != storedCrc) {
            throw corrupt(at, String.format("CRC mismatch: stored 0x%08x, computed 0x%08x", storedCrc, computed));
        }
        int codec = attributes & COMPRESSION_MASK;
        if (codec >= CODECS) {
            throw corrupt(at, "unknown compression codec " + codec);
        }
        if (recordCount < 0) {
            throw corrupt(at, "negative record count " + recordCount);
        }
        if (lastOffsetDelta < 0) {
            throw corrupt(at, "negative last offset delta " + lastOffsetDelta);
        }
        if (codec == 0 && recordCount > (batchLength - MIN_BATCH_LENGTH) / MIN_RECORD_SIZE) {
            throw corrupt(at, "record count " + recordCount + " cannot fit in a " + (batchLength - MIN_BATCH_LENGTH)
                    + "-byte records section");
        }
    }

    /** Points {@link #records} at the batch's records section, decompressed if need be. */
    private void openRecords(int at) throws CorruptRecordException {
        batchPosition = at;
        int codec = attributes & COMPRESSION_MASK;
        int start = at + HEADER_SIZE;
        int length = batchLength - MIN_BATCH_LENGTH;
        if (codec == BatchDecompressor.NONE) {
            records = data;
            recordsStart = start;
            recordsEnd = start + length;
            compressed = false;
            return;
        }
        int size;
        try {
            size = decompressor.decompress(codec, data, start, length);
        } catch (CodecException e) {
            throw corrupt(at, e.getMessage());
        }
        if (recordCount > size / MIN_RECORD_SIZE) {
            throw corrupt(at, "record count " + recordCount + " cannot fit in a " + size + "-byte records section");
        }
        records = decompressor.buffer();
        recordsStart = 0;
        recordsEnd = size;
        compressed = true;
    }

    /** Whether the control batch at {@code at} is an ABORT marker (its first record's key says). */
    private boolean isAbortMarker(int at) throws CorruptRecordException {
        openRecords(at);
        if (recordCount == 0) {
            return false;
        }
        parseRecord(records, recordsStart, recordsEnd);
        checkHeaderKeys(records, recordsEnd, recordsStart);
        if (keyLength < 4) {
            throw corrupt(at, "control record key must hold at least 4 bytes, not " + Math.max(keyLength, 0));
        }
        int version = (short) int16(records, keyStart);
        if (version < 0) {
            throw corrupt(at, "invalid control record key version " + version);
        }
        return (short) int16(records, keyStart + 2) == 0;
    }

    // --- records -----------------------------------------------------------------------------

    /** Decodes records of the current batch into rows from {@code row} on; returns the next row. */
    private int decodeRecords(int row) throws CorruptRecordException {
        final int runStart = row;
        final byte[] buf = records;
        final int end = recordsEnd;
        final long base = baseOffset;
        final boolean logAppendTime = (attributes & LOG_APPEND_TIME_MASK) != 0;
        final int limit = batchRows;
        int p = recordPosition;
        int left = recordsLeft;
        while (left > 0 && row < limit) {
            int recordStart = p;
            p = parseRecord(buf, p, end);
            left--;
            long offset = base + offsetDelta;
            if (((base ^ offset) & (offsetDelta ^ offset)) < 0) {
                continue; // past the long range: outside every offset range, as in Python
            }
            long timestamp = logAppendTime ? batchMaxTimestamp : baseTimestamp + timestampDelta;
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
                if (keyLength < 0) {
                    keyColumn.putNull(row);
                } else {
                    keyColumn.putByteArray(row, buf, keyStart, keyLength);
                }
            }
            if (valueColumn != null) {
                if (valueLength < 0) {
                    valueColumn.putNull(row);
                } else {
                    valueColumn.putByteArray(row, buf, valueStart, valueLength);
                }
            }
            if (headerCount > 0) {
                // Like the Python reader, only the keys of rows kept must be UTF-8.
                checkHeaderKeys(buf, end, recordStart);
                if (headersColumn != null) {
                    putHeaders(row, buf, end);
                }
            } else if (headersColumn != null) {
                headersColumn.putArray(row, headerEntries.getElementsAppended(), 0);
            }
            if (sequenceColumn != null) {
                sequenceColumn.putInt(row, sequence());
            } else if (baseSequence >= 0) {
                sequence(); // a sequence that does not fit fails the row, requested or not
            }
            row++;
        }
        recordPosition = p;
        recordsLeft = left;
        fillBatchConstants(runStart, row - runStart, logAppendTime);
        if (left == 0) {
            inBatch = false;
            if (p != end) {
                throw recordError(p, (end - p) + " bytes left over after the " + recordCount
                        + " records the header declares");
            }
        }
        return row;
    }

    /** The batch's fields every row of it shares, written for {@code count} rows at once. */
    private void fillBatchConstants(int row, int count, boolean logAppendTime) {
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
            transactionalColumn.putBooleans(row, count, (attributes & TRANSACTIONAL_MASK) != 0);
        }
    }

    /** The record's producer sequence: the batch's base plus the offset delta, wrapping as Kafka does. */
    private int sequence() throws CorruptRecordException {
        if (baseSequence < 0) {
            return -1;
        }
        long sequence = (long) baseSequence + offsetDelta;
        if (sequence > Integer.MAX_VALUE) {
            sequence -= 1L << 31;
        }
        if (sequence < Integer.MIN_VALUE) {
            throw corrupt(batchPosition, "records that do not fit the schema: sequence " + sequence);
        }
        return (int) sequence;
    }

    private long micros(long millis) throws CorruptRecordException {
        if (millis > Long.MAX_VALUE / 1000 || millis < Long.MIN_VALUE / 1000) {
            throw corrupt(batchPosition, "records that do not fit the schema: timestamp " + millis
                    + " ms is beyond what a Spark timestamp holds");
        }
        return millis * 1000;
    }

    /** Checks that the parsed record's header keys are UTF-8, as Spark strings must be. */
    private void checkHeaderKeys(byte[] buf, int end, int recordStart) throws CorruptRecordException {
        int p = headersStart;
        for (int i = 0; i < headerCount; i++) {
            long v = varint(buf, p, end, p);
            int length = (int) (v >> 32);
            p = (int) v;
            if (!Utf8.isValid(buf, p, length)) {
                throw recordError(recordStart, "header key is not valid UTF-8");
            }
            p += length;
            v = varint(buf, p, end, p);
            length = (int) (v >> 32);
            p = (int) v + Math.max(length, 0);
        }
    }

    /** Appends the parsed record's headers (already checked by {@link #parseRecord}). */
    private void putHeaders(int row, byte[] buf, int end) throws CorruptRecordException {
        int first = headerEntries.getElementsAppended();
        int count = headerCount;
        int p = headersStart;
        for (int i = 0; i < count; i++) {
            long v = varint(buf, p, end, p);
            int length = (int) (v >> 32);
            p = (int) v;
            headerKeys.appendByteArray(buf, p, length);
            p += length;
            v = varint(buf, p, end, p);
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

    /**
     * Parses and checks the record at {@code p} (as the core's record decoder does, but for the
     * header keys' UTF-8, which {@link #checkHeaderKeys} checks for the rows kept), leaving its
     * fields in this reader's record fields; returns where the next record starts.
     */
    private int parseRecord(byte[] buf, int p, int end) throws CorruptRecordException {
        final int start = p;
        long v = varint(buf, p, end, start);
        int size = (int) (v >> 32);
        p = (int) v;
        if (size < MIN_RECORD_SIZE - 1) {
            throw recordError(start, "record length " + size + " is less than the " + (MIN_RECORD_SIZE - 1)
                    + "-byte minimum");
        }
        if (size > end - p) {
            throw recordError(start, "record length " + size + " overruns the " + (end - p) + " bytes left");
        }
        final int recordEnd = p + size;
        p++; // the record attributes: no bits are defined
        int b = buf[p];
        if (b >= 0) {
            timestampDelta = (b >>> 1) ^ -(b & 1);
            p++;
        } else {
            timestampDelta = varlong(buf, p, recordEnd, start);
            p = cursor;
        }
        v = varint(buf, p, recordEnd, start);
        offsetDelta = (int) (v >> 32);
        p = (int) v;

        v = varint(buf, p, recordEnd, start);
        int length = (int) (v >> 32);
        p = (int) v;
        keyStart = p;
        keyLength = length;
        if (length >= 0) {
            if (length > recordEnd - p) {
                throw recordError(start, "key length " + length + " overruns its record");
            }
            p += length;
        } else if (length != -1) {
            throw recordError(start, "negative key length " + length);
        }

        v = varint(buf, p, recordEnd, start);
        length = (int) (v >> 32);
        p = (int) v;
        valueStart = p;
        valueLength = length;
        if (length >= 0) {
            if (length > recordEnd - p) {
                throw recordError(start, "value length " + length + " overruns its record");
            }
            p += length;
        } else if (length != -1) {
            throw recordError(start, "negative value length " + length);
        }

        if (p >= recordEnd) {
            throw recordError(start, "truncated record");
        }
        if (buf[p] == 0) {
            headerCount = 0;
            p++;
        } else {
            v = varint(buf, p, recordEnd, start);
            int count = (int) (v >> 32);
            p = (int) v;
            // Each header takes at least two bytes, which bounds the loop by the record's size.
            if (count < 0 || count > (recordEnd - p) / 2) {
                throw recordError(start, "bad header count " + count);
            }
            headersStart = p;
            headerCount = count;
            for (int i = 0; i < count; i++) {
                v = varint(buf, p, recordEnd, start);
                length = (int) (v >> 32);
                p = (int) v;
                if (length < 0) {
                    throw recordError(start, "negative header key length " + length);
                }
                if (length > recordEnd - p) {
                    throw recordError(start, "header key length " + length + " overruns its record");
                }
                p += length;
                v = varint(buf, p, recordEnd, start);
                length = (int) (v >> 32);
                p = (int) v;
                if (length >= 0) {
                    if (length > recordEnd - p) {
                        throw recordError(start, "header value length " + length + " overruns its record");
                    }
                    p += length;
                } else if (length != -1) {
                    throw recordError(start, "negative header value length " + length);
                }
            }
        }
        if (p != recordEnd) {
            throw recordError(start, "record length " + size + " disagrees with its fields, which take "
                    + (p - recordEnd + size) + " bytes");
        }
        return p;
    }

    /**
     * The zig-zag varint (32-bit) at {@code p}, read no further than {@code limit}: the value in
     * the high half of the result, the position after it in the low half.
     */
    private long varint(byte[] buf, int p, int limit, int recordStart) throws CorruptRecordException {
        if (p < limit) {
            int b = buf[p];
            if (b >= 0) {
                return ((long) ((b >>> 1) ^ -(b & 1)) << 32) | (p + 1);
            }
        }
        long zz = 0;
        for (int shift = 0; shift < 35; shift += 7) {
            if (p >= limit) {
                throw recordError(recordStart, "truncated varint");
            }
            int b = buf[p++] & 0xFF;
            zz |= (long) (b & 0x7F) << shift;
            if (b < 0x80) {
                if ((zz >>> 32) != 0) {
                    throw recordError(recordStart, "varint does not fit in 32 bits");
                }
                int value = (int) ((zz >>> 1) ^ -(zz & 1));
                return ((long) value << 32) | p;
            }
        }
        throw recordError(recordStart, "varint longer than 5 bytes");
    }

    /** The zig-zag varlong (64-bit) at {@code p}; the position after it goes to {@link #cursor}. */
    private long varlong(byte[] buf, int p, int limit, int recordStart) throws CorruptRecordException {
        long zz = 0;
        for (int shift = 0; shift < 70; shift += 7) {
            if (p >= limit) {
                throw recordError(recordStart, "truncated varlong");
            }
            int b = buf[p++] & 0xFF;
            if (shift == 63 && (b & 0x7F) > 1) {
                throw recordError(recordStart, "varlong does not fit in 64 bits");
            }
            zz |= (long) (b & 0x7F) << shift;
            if (b < 0x80) {
                cursor = p;
                return (zz >>> 1) ^ -(zz & 1);
            }
        }
        throw recordError(recordStart, "varlong longer than 10 bytes");
    }

    // --- errors and helpers ------------------------------------------------------------------

    private CorruptRecordException corrupt(int at, String reason) {
        return new CorruptRecordException(segmentId, at, reason);
    }

    /**
     * An error in the records section at {@code at}: positioned in the range's bytes when the
     * section is stored as is; a compressed section has no such position, so the batch's is
     * given with the byte within the decompressed records.
     */
    private CorruptRecordException recordError(int at, String reason) {
        if (!compressed) {
            return corrupt(at, reason);
        }
        return corrupt(batchPosition, reason + " (at byte " + (at - recordsStart) + " of the decompressed records)");
    }

    private CorruptRecordException badMagic(int magic, int at) {
        return corrupt(at, "unsupported magic " + magic + ": only record batch v2 (magic 2) is supported");
    }

    private CorruptRecordException shortLength(int length, int at) {
        return corrupt(at, "batch length " + length + " is smaller than the " + MIN_BATCH_LENGTH + "-byte minimum");
    }

    private static int int16(byte[] b, int p) {
        return (short) ((b[p] & 0xFF) << 8 | (b[p + 1] & 0xFF));
    }

    private static int int32(byte[] b, int p) {
        return (b[p] & 0xFF) << 24 | (b[p + 1] & 0xFF) << 16 | (b[p + 2] & 0xFF) << 8 | (b[p + 3] & 0xFF);
    }

    private static long int64(byte[] b, int p) {
        return ((long) int32(b, p)) << 32 | (int32(b, p + 4) & 0xFFFFFFFFL);
    }

    private static ConstantColumnVector constantString(String value, int rows) {
        ConstantColumnVector vector = new ConstantColumnVector(rows, DataTypes.StringType);
        vector.setUtf8String(UTF8String.fromString(value));
        return vector;
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
