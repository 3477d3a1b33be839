package io.tierlog.spark.read;

import java.util.HashSet;
import java.util.Set;
import java.util.zip.CRC32C;

/**
 * The walk over a range's record batches (magic 2) by their headers. Every batch walked has its
 * header read and checked and its CRC verified, as a Kafka consumer does; a batch whose records
 * cannot be wanted (past the offset range, outside the timestamp range, a control marker, an
 * aborted transaction under read_committed) is stepped over by its header alone. A wanted
 * batch's records section is laid open, decompressed into one buffer reused from batch to
 * batch if need be, with its header fields here for the reader.
 */
final class BatchWalk {
    static final int LOG_OVERHEAD = 12;
    static final int HEADER_SIZE = 61;
    static final int MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD;
    static final int MAGIC = 2;
    static final int COMPRESSION_MASK = 0x07;
    static final int LOG_APPEND_TIME_MASK = 0x08;
    static final int TRANSACTIONAL_MASK = 0x10;
    static final int CONTROL_MASK = 0x20;
    static final int CODECS = 5;

    // --- the range ---------------------------------------------------------------------------
    private final String segmentId;
    private final long firstOffset;
    private final long lastOffset;
    private final long minTimestamp;
    private final long maxTimestamp;
    private final boolean readCommitted;
    private final long[] abortedFirst;
    private final long[] abortedProducer;
    private final RecordParser record;

    // --- the walk ----------------------------------------------------------------------------
    private byte[] data;
    private int position;
    private final CRC32C crc = new CRC32C();
    private final BatchDecompressor decompressor = new BatchDecompressor();
    private int nextAborted;
    private final Set<Long> openAborted = new HashSet<>();

    // --- the batch being decoded (header fields, then where its records are) ------------------
    int batchPosition;
    private int batchLength;
    long baseOffset;
    int leaderEpoch;
    int attributes;
    private int lastOffsetDelta;
    long baseTimestamp;
    long batchMaxTimestamp;
    long producerId;
    short producerEpoch;
    int baseSequence;
    int recordCount;
    /** Whether records of the current batch are left to decode (from {@link #recordPosition}). */
    boolean inBatch;
    byte[] records;
    int recordsStart;
    int recordsEnd;
    int recordPosition;
    int recordsLeft;

    BatchWalk(RangeFields range, RecordParser record) {
        this.segmentId = range.segmentId;
        this.firstOffset = range.firstOffset;
        this.lastOffset = range.lastOffset;
        this.minTimestamp = range.minTimestamp;
        this.maxTimestamp = range.maxTimestamp;
        this.readCommitted = range.readCommitted;
        this.abortedFirst = range.abortedFirst;
        this.abortedProducer = range.abortedProducer;
        this.record = record;
    }

    /** Whether the range's bytes are here to walk. */
    boolean hasBytes() {
        return data != null;
    }

    /** Starts the walk over {@code bytes}, the range's bytes. */
    void start(byte[] bytes) {
        data = bytes;
    }

    /** Lets go of the range's bytes once the walk is over. */
    void release() {
        data = null;
    }

    void close() {
        data = null;
        records = null;
        decompressor.close();
    }

    /** Moves to the next batch whose records are wanted; false at the end of the range. */
    boolean advance() throws CorruptRecordException {
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
        if (codec == 0 && recordCount > (batchLength - MIN_BATCH_LENGTH) / RecordParser.MIN_RECORD_SIZE) {
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
            record.enterSection(at, start, false);
            return;
        }
        int size;
        try {
            size = decompressor.decompress(codec, data, start, length);
        } catch (CodecException e) {
            throw corrupt(at, e.getMessage());
        }
        if (recordCount > size / RecordParser.MIN_RECORD_SIZE) {
            throw corrupt(at, "record count " + recordCount + " cannot fit in a " + size + "-byte records section");
        }
        records = decompressor.buffer();
        recordsStart = 0;
        recordsEnd = size;
        record.enterSection(at, 0, true);
    }

    /** Whether the control batch at {@code at} is an ABORT marker (its first record's key says). */
    private boolean isAbortMarker(int at) throws CorruptRecordException {
        openRecords(at);
        if (recordCount == 0) {
            return false;
        }
        record.parse(records, recordsStart, recordsEnd);
        record.checkHeaderKeys(records, recordsEnd, recordsStart);
        int keyLength = record.keyLength;
        if (keyLength < 4) {
            throw corrupt(at, "control record key must hold at least 4 bytes, not " + Math.max(keyLength, 0));
        }
        int version = (short) int16(records, record.keyStart);
        if (version < 0) {
            throw corrupt(at, "invalid control record key version " + version);
        }
        return (short) int16(records, record.keyStart + 2) == 0;
    }

    // --- errors and helpers ------------------------------------------------------------------

    private CorruptRecordException corrupt(int at, String reason) {
        return new CorruptRecordException(segmentId, at, reason);
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
}
