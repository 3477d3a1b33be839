package io.tierlog.spark.read;

import static io.tierlog.spark.read.BatchDecompressor.MAX_DECOMPRESSED_SIZE;
import static io.tierlog.spark.read.BatchDecompressor.le32;
import static io.tierlog.spark.read.BatchDecompressor.tooBig;

import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;

/**
 * Kafka's gzip framing: gzip members one after another, each inflated with one reused
 * {@link Inflater} and checked against its CRC-32 and size trailer, since the raw inflater
 * checks neither.
 */
final class GzipMembers {
    private final BatchDecompressor into;
    private Inflater inflater;

    GzipMembers(BatchDecompressor into) {
        this.into = into;
    }

    int decompress(byte[] src, int offset, int length) throws CodecException, DataFormatException {
        if (inflater == null) {
            inflater = new Inflater(true);
        }
        int end = offset + length;
        int pos = offset;
        int total = 0;
        CRC32 crc = new CRC32();
        do {
            pos = header(src, pos, end);
            inflater.reset();
            inflater.setInput(src, pos, end - pos);
            int memberStart = total;
            while (!inflater.finished()) {
                if (total == into.out.length) {
                    if (into.out.length > MAX_DECOMPRESSED_SIZE) {
                        throw tooBig("gzip", total, "at least");
                    }
                    into.grow(total);
                }
                int n = inflater.inflate(into.out, total, into.out.length - total);
                total += n;
                if (n == 0 && !inflater.finished() && total < into.out.length) {
                    if (inflater.needsDictionary()) {
                        throw new CodecException("gzip data is corrupt: it needs a preset dictionary");
                    }
                    throw new CodecException("gzip data is truncated");
                }
            }
            if (total > MAX_DECOMPRESSED_SIZE) {
                throw tooBig("gzip", total, "at least");
            }
            pos = end - inflater.getRemaining();
            if (end - pos < 8) {
                throw new CodecException("gzip data is truncated");
            }
            crc.reset();
            crc.update(into.out, memberStart, total - memberStart);
            if ((int) crc.getValue() != le32(src, pos)) {
                throw new CodecException("gzip data is corrupt: incorrect data check");
            }
            if (total - memberStart != le32(src, pos + 4)) {
                throw new CodecException("gzip data is corrupt: incorrect length check");
            }
            pos += 8;
        } while (pos < end);
        return total;
    }

    /** Where the deflate stream of the gzip member at {@code pos} starts. */
    private static int header(byte[] src, int pos, int end) throws CodecException {
        if (end - pos < 10) {
            throw new CodecException("gzip data is truncated");
        }
        if ((src[pos] & 0xFF) != 0x1F || (src[pos + 1] & 0xFF) != 0x8B || src[pos + 2] != 8) {
            throw new CodecException("gzip data is corrupt: incorrect header check");
        }
        int flags = src[pos + 3] & 0xFF;
        pos += 10;
        if ((flags & 0x04) != 0) { // FEXTRA
            if (end - pos < 2) {
                throw new CodecException("gzip data is truncated");
            }
            pos += 2 + ((src[pos] & 0xFF) | (src[pos + 1] & 0xFF) << 8);
        }
        for (int flag : new int[] {0x08, 0x10}) { // FNAME, FCOMMENT: zero-terminated
            if ((flags & flag) != 0) {
                while (pos < end && src[pos] != 0) {
                    pos++;
                }
                pos++;
            }
        }
        if ((flags & 0x02) != 0) { // FHCRC
            pos += 2;
        }
        if (pos > end) {
            throw new CodecException("gzip data is truncated");
        }
        return pos;
    }

    void close() {
        if (inflater != null) {
            inflater.end();
            inflater = null;
        }
    }
}
