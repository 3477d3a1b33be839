package io.tierlog.spark.read;

import static io.tierlog.spark.read.BatchDecompressor.MAX_DECOMPRESSED_SIZE;
import static io.tierlog.spark.read.BatchDecompressor.tooBig;

import java.io.IOException;
import org.xerial.snappy.Snappy;

/**
 * Kafka's snappy framing: snappy-java's xerial stream (a magic header, then length-prefixed
 * blocks, possibly several streams one after another), or one raw block. Each block declares
 * its decompressed length, which is checked against the cap before the block is decoded.
 */
final class SnappyFraming {
    private static final byte[] XERIAL_MAGIC = {(byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    private static final int XERIAL_HEADER_SIZE = 16;

    private SnappyFraming() {}

    static int decompress(BatchDecompressor into, byte[] src, int offset, int length)
            throws CodecException, IOException {
        int end = offset + length;
        if (length < XERIAL_HEADER_SIZE || !startsWith(src, offset, end, XERIAL_MAGIC)) {
            return block(into, src, offset, length, 0);
        }
        int total = 0;
        int pos = offset + XERIAL_HEADER_SIZE;
        while (pos < end) {
            if (end - pos < 4) {
                throw new CodecException(
                        "snappy block length truncated at byte " + (pos - offset) + " of the compressed data");
            }
            int blockLength = (src[pos] & 0xFF) << 24 | (src[pos + 1] & 0xFF) << 16
                    | (src[pos + 2] & 0xFF) << 8 | (src[pos + 3] & 0xFF);
            if (blockLength < 0) {
                if (startsWith(src, pos, end, XERIAL_MAGIC)) { // concatenated streams
                    pos += XERIAL_HEADER_SIZE;
                    continue;
                }
                throw new CodecException("negative snappy block length " + blockLength);
            }
            pos += 4;
            if (blockLength > end - pos) {
                throw new CodecException(
                        "snappy block of " + blockLength + " bytes overruns the " + (end - pos) + " bytes left");
            }
            total += block(into, src, pos, blockLength, total);
            pos += blockLength;
        }
        return total;
    }

    private static int block(BatchDecompressor into, byte[] src, int offset, int length, int total)
            throws CodecException, IOException {
        int size = Snappy.uncompressedLength(src, offset, length);
        if (size < 0 || (long) total + size > MAX_DECOMPRESSED_SIZE) {
            throw tooBig("snappy", (long) total + (size & 0xFFFFFFFFL), "its block lengths declare");
        }
        if (into.out.length < total + size) {
            into.resize(total, Math.max(total + size, (int) Math.min(MAX_DECOMPRESSED_SIZE, 2L * into.out.length)));
        }
        int n = Snappy.uncompress(src, offset, length, into.out, total);
        if (n != size) {
            throw new CodecException("snappy data is corrupt: a block declares " + size + " bytes but holds " + n);
        }
        return n;
    }

    private static boolean startsWith(byte[] src, int pos, int end, byte[] prefix) {
        if (end - pos < prefix.length) {
            return false;
        }
        for (int i = 0; i < prefix.length; i++) {
            if (src[pos + i] != prefix[i]) {
                return false;
            }
        }
        return true;
    }
}
