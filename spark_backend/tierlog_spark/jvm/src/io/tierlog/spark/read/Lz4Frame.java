package io.tierlog.spark.read;

import static io.tierlog.spark.read.BatchDecompressor.MAX_DECOMPRESSED_SIZE;
import static io.tierlog.spark.read.BatchDecompressor.le32;
import static io.tierlog.spark.read.BatchDecompressor.tooBig;

import net.jpountz.lz4.LZ4Exception;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.lz4.LZ4SafeDecompressor;
import net.jpountz.xxhash.XXHash32;
import net.jpountz.xxhash.XXHashFactory;

/**
 * Kafka's lz4 framing: one LZ4 frame of independent blocks. The frame header and its checksum
 * are checked, then a first pass over the block headers bounds the output before a second pass
 * decodes the blocks, checking their checksums and the content checksum when present.
 */
final class Lz4Frame {
    private static final int LZ4_MAGIC = 0x184D2204;

    private final BatchDecompressor into;
    private LZ4SafeDecompressor lz4;
    private XXHash32 xxhash;

    Lz4Frame(BatchDecompressor into) {
        this.into = into;
    }

    int decompress(byte[] src, int offset, int length) throws CodecException {
        int end = offset + length;
        if (length < 7) {
            throw new CodecException("lz4 frame header is truncated");
        }
        if (le32(src, offset) != LZ4_MAGIC) {
            throw new CodecException("lz4 data does not start with the LZ4 frame magic");
        }
        int flags = src[offset + 4] & 0xFF;
        int descriptor = src[offset + 5] & 0xFF;
        if (flags >> 6 != 1) {
            throw new CodecException("unsupported lz4 frame version " + (flags >> 6));
        }
        if ((flags & 0x20) == 0) {
            throw new CodecException("lz4 frame uses linked blocks, which Kafka does not support");
        }
        int code = (descriptor >> 4) & 0x7;
        if (code < 4) {
            throw new CodecException("bad lz4 block size code " + code);
        }
        int blockMax = 1 << (8 + 2 * code);
        boolean blockChecksums = (flags & 0x10) != 0;
        long contentSize = -1;
        int pos = offset + 6;
        if ((flags & 0x08) != 0) {
            if (end - pos < 8) {
                throw new CodecException("lz4 frame header is truncated");
            }
            contentSize = (le32(src, pos) & 0xFFFFFFFFL) | ((long) le32(src, pos + 4)) << 32;
            pos += 8;
        }
        if ((flags & 0x01) != 0) {
            pos += 4;
        }
        if (end - pos < 1) {
            throw new CodecException("lz4 frame header is truncated");
        }
        if (xxhash == null) {
            xxhash = XXHashFactory.fastestInstance().hash32();
            lz4 = LZ4Factory.fastestInstance().safeDecompressor();
        }
        int headerChecksum = (xxhash.hash(src, offset + 4, pos - offset - 4, 0) >> 8) & 0xFF;
        if (headerChecksum != (src[pos] & 0xFF)) {
            throw new CodecException("lz4 data is corrupt: the frame header checksum does not match");
        }
        pos++;
        // First pass: the bound the blocks allow, before any output is produced.
        long bound = 0;
        int scan = pos;
        while (true) {
            if (end - scan < 4) {
                throw new CodecException("lz4 frame is truncated");
            }
            int word = le32(src, scan);
            scan += 4;
            if (word == 0) {
                break;
            }
            int size = word & 0x7FFFFFFF;
            if (size > blockMax) {
                throw new CodecException(
                        "lz4 block of " + size + " bytes exceeds the frame's " + blockMax + "-byte blocks");
            }
            if (end - scan < size + (blockChecksums ? 4 : 0)) {
                throw new CodecException("lz4 frame is truncated");
            }
            scan += size + (blockChecksums ? 4 : 0);
            bound += blockMax;
        }
        int trailerEnd = scan + ((flags & 0x04) != 0 ? 4 : 0);
        if (trailerEnd > end) {
            throw new CodecException("lz4 frame is truncated");
        }
        if (trailerEnd < end) {
            throw new CodecException((end - trailerEnd) + " bytes of trailing data after the lz4 frame");
        }
        if (contentSize >= 0) {
            bound = Math.min(bound, contentSize);
        }
        if (bound > MAX_DECOMPRESSED_SIZE) {
            throw tooBig("lz4", bound, "its blocks allow up to");
        }
        int total = 0;
        while (true) {
            int word = le32(src, pos);
            pos += 4;
            if (word == 0) {
                break;
            }
            int size = word & 0x7FFFFFFF;
            if (blockChecksums && xxhash.hash(src, pos, size, 0) != le32(src, pos + size)) {
                throw new CodecException("lz4 data is corrupt: a block checksum does not match");
            }
            if (into.out.length - total < blockMax) {
                // total stays within the cap (checked below), so this stays within cap + one block.
                into.resize(total, (int) Math.max(total + blockMax, Math.min(bound + blockMax, 2L * into.out.length)));
            }
            if (word < 0) { // the high bit: stored uncompressed
                System.arraycopy(src, pos, into.out, total, size);
                total += size;
            } else {
                try {
                    total += lz4.decompress(src, pos, size, into.out, total, blockMax);
                } catch (LZ4Exception e) {
                    throw new CodecException("lz4 data is corrupt: " + e.getMessage());
                }
            }
            if (total > MAX_DECOMPRESSED_SIZE) {
                throw tooBig("lz4", total, "at least");
            }
            pos += size + (blockChecksums ? 4 : 0);
        }
        if ((flags & 0x04) != 0 && xxhash.hash(into.out, 0, total, 0) != le32(src, pos)) {
            throw new CodecException("lz4 data is corrupt: the content checksum does not match");
        }
        if (contentSize >= 0 && contentSize != total) {
            throw new CodecException(
                    "lz4 data is corrupt: the frame declares " + contentSize + " bytes but holds " + total);
        }
        return total;
    }
}
