package io.tierlog.spark.read;

/**
 * Parses one record of a records section (its zig-zag varints, key, value and headers) and
 * checks it as the core's record decoder does, leaving the record's fields here for the reader
 * to copy: parsing makes no object, so a record costs no garbage.
 *
 * <p>It also knows where the section it parses lies, so an error in a record is positioned in
 * the range's bytes, or, for a compressed section, at its batch with the byte within the
 * decompressed records.
 */
final class RecordParser {
    /** The smallest record: its length, attributes, three one-byte varints and a header count. */
    static final int MIN_RECORD_SIZE = 7;

    private final String segmentId;

    // --- the records section being parsed -----------------------------------------------------
    private int batchPosition;
    private int sectionStart;
    private boolean compressed;

    // --- the record just parsed --------------------------------------------------------------
    long timestampDelta;
    int offsetDelta;
    int keyStart;
    int keyLength;
    int valueStart;
    int valueLength;
    int headersStart;
    int headerCount;
    /** Where a long varint ended (the int varints return it packed with their value). */
    private int cursor;

    RecordParser(String segmentId) {
        this.segmentId = segmentId;
    }

    /** The section records are parsed from next: its batch's position and where it starts. */
    void enterSection(int batchPosition, int sectionStart, boolean compressed) {
        this.batchPosition = batchPosition;
        this.sectionStart = sectionStart;
        this.compressed = compressed;
    }

    /**
     * Parses and checks the record at {@code p} (as the core's record decoder does, but for the
     * header keys' UTF-8, which {@link #checkHeaderKeys} checks for the rows kept), leaving its
     * fields in this parser's record fields; returns where the next record starts.
     */
    int parse(byte[] buf, int p, int end) throws CorruptRecordException {
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

    /** Checks that the parsed record's header keys are UTF-8, as Spark strings must be. */
    void checkHeaderKeys(byte[] buf, int end, int recordStart) throws CorruptRecordException {
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

    /**
     * The zig-zag varint (32-bit) at {@code p}, read no further than {@code limit}: the value in
     * the high half of the result, the position after it in the low half.
     */
    long varint(byte[] buf, int p, int limit, int recordStart) throws CorruptRecordException {
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

    /**
     * An error in the records section at {@code at}: positioned in the range's bytes when the
     * section is stored as is; a compressed section has no such position, so the batch's is
     * given with the byte within the decompressed records.
     */
    CorruptRecordException recordError(int at, String reason) {
        if (!compressed) {
            return new CorruptRecordException(segmentId, at, reason);
        }
        return new CorruptRecordException(segmentId, batchPosition,
                reason + " (at byte " + (at - sectionStart) + " of the decompressed records)");
    }
}
