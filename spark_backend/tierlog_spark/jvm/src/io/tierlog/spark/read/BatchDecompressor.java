package io.tierlog.spark.read;

import com.github.luben.zstd.ZstdDecompressCtx;
import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;
import net.jpountz.lz4.LZ4Exception;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.lz4.LZ4SafeDecompressor;
import net.jpountz.xxhash.XXHash32;
import net.jpountz.xxhash.XXHashFactory;
import org.xerial.snappy.Snappy;
import org.xerial.snappy.SnappyError;

/**
 * Decompresses records sections in the framings Kafka writes (as the core's
 * {@code tierlog.records.compression} reads them) into one buffer reused from batch to batch.
 *
 * <p>Decompression is where hostile bytes cost memory, so every codec learns an upper bound of
 * its output before producing it (declared lengths, block counts) and refuses anything over
 * {@link #MAX_DECOMPRESSED_SIZE}, the core's {@code DEFAULT_MAX_DECOMPRESSED_SIZE}.
 */
final class BatchDecompressor implements AutoCloseable {
    static final int MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024;
    static final int NONE = 0;
    static final int GZIP = 1;
    static final int SNAPPY = 2;
    static final int LZ4 = 3;
    static final int ZSTD = 4;
    private static final String[] NAMES = {"none", "gzip", "snappy", "lz4", "zstd"};

    private static final byte[] XERIAL_MAGIC = {(byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    private static final int XERIAL_HEADER_SIZE = 16;
    private static final int LZ4_MAGIC = 0x184D2204;
    private static final int ZSTD_MAGIC = 0xFD2FB528;
    private static final int ZSTD_BLOCK_MAX = 128 * 1024;

    /** The decompressed bytes of the last call, from index 0. */
    private byte[] out = new byte[64 * 1024];

    private Inflater inflater;
    private ZstdDecompressCtx zstd;
    private LZ4SafeDecompressor lz4;
    private XXHash32 xxhash;

    byte[] buffer() {
        return out;
    }

    /** Decompresses {@code src[offset, offset + length)} with {@code codec}; returns the size. */
    int decompress(int codec, byte[] src, int offset, int length) throws CodecException {
        try {
            switch (codec) {
                case GZIP:
                    return gzip(src, offset, length);
                case SNAPPY:
                    return snappy(src, offset, length);
                case LZ4:
                    return lz4(src, offset, length);
                case ZSTD:
                    return zstd(src, offset, length);
                default:
                    throw new CodecException("unknown compression codec " + codec);
            }
        } catch (CodecException e) {
            throw e;
        } catch (RuntimeException | java.io.IOException | DataFormatException | SnappyError e) {
            // Whatever a codec library throws, the input is what is wrong.
            throw new CodecException(NAMES[codec] + " data is corrupt: " + e.getMessage());
        }
    }

    private void grow(int keep) {
        byte[] bigger = new byte[(int) Math.min(MAX_DECOMPRESSED_SIZE + 1L, 2L * out.length)];
        System.arraycopy(out, 0, bigger, 0, keep);
        out = bigger;
    }

    private static CodecException tooBig(String codec, long size, String how) {
        return new CodecException(
                codec + " data decompresses to more than " + MAX_DECOMPRESSED_SIZE + " bytes (" + how + " "
                        + size + ")");
    }

    private static int le32(byte[] b, int p) {
        return (b[p] & 0xFF) | (b[p + 1] & 0xFF) << 8 | (b[p + 2] & 0xFF) << 16 | (b[p + 3] & 0xFF) << 24;
    }

    // --- gzip: members one after another, each checked against its CRC-32 and size trailer ----

    private int gzip(byte[] src, int offset, int length) throws CodecException, DataFormatException {
        if (inflater == null) {
            inflater = new Inflater(true);
        }
        int end = offset + length;
        int pos = offset;
        int total = 0;
        CRC32 crc = new CRC32();
        do {
            pos = gzipHeader(src, pos, end);
            inflater.reset();
            inflater.setInput(src, pos, end - pos);
            int memberStart = total;
            while (!inflater.finished()) {
                if (total == out.length) {
                    if (out.length > MAX_DECOMPRESSED_SIZE) {
                        throw tooBig("gzip", total, "at least");
                    }
                    grow(total);
                }
                int n = inflater.inflate(out, total, out.length - total);
                total += n;
                if (n == 0 && !inflater.finished() && total < out.length) {
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
            crc.update(out, memberStart, total - memberStart);
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
    private static int gzipHeader(byte[] src, int pos, int end) throws CodecException {
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

    // --- snappy: snappy-java's xerial framing, or one raw block ---------------------------------

    private int snappy(byte[] src, int offset, int length) throws CodecException, java.io.IOException {
        int end = offset + length;
        if (length < XERIAL_HEADER_SIZE || !startsWith(src, offset, end, XERIAL_MAGIC)) {
            return snappyBlock(src, offset, length, 0);
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
            total += snappyBlock(src, pos, blockLength, total);
            pos += blockLength;
        }
        return total;
    }

    private int snappyBlock(byte[] src, int offset, int length, int total)
            throws CodecException, java.io.IOException {
        int size = Snappy.uncompressedLength(src, offset, length);
        if (size < 0 || (long) total + size > MAX_DECOMPRESSED_SIZE) {
            throw tooBig("snappy", (long) total + (size & 0xFFFFFFFFL), "its block lengths declare");
        }
        if (out.length < total + size) {
            byte[] bigger = new byte[Math.max(total + size, (int) Math.min(MAX_DECOMPRESSED_SIZE, 2L * out.length))];
            System.arraycopy(out, 0, bigger, 0, total);
            out = bigger;
        }
        int n = Snappy.uncompress(src, offset, length, out, total);
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

    // --- lz4: one LZ4 frame of independent blocks, as Kafka writes it ----------------------------

    private int lz4(byte[] src, int offset, int length) throws CodecException {
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
            if (out.length - total < blockMax) {
                // total stays within the cap (checked below), so this stays within cap + one block.
                byte[] bigger = new byte[(int) Math.max(total + blockMax, Math.min(bound + blockMax, 2L * out.length))];
                System.arraycopy(out, 0, bigger, 0, total);
                out = bigger;
            }
            if (word < 0) { // the high bit: stored uncompressed
                System.arraycopy(src, pos, out, total, size);
                total += size;
            } else {
                try {
                    total += lz4.decompress(src, pos, size, out, total, blockMax);
                } catch (LZ4Exception e) {
                    throw new CodecException("lz4 data is corrupt: " + e.getMessage());
                }
            }
            if (total > MAX_DECOMPRESSED_SIZE) {
                throw tooBig("lz4", total, "at least");
            }
            pos += size + (blockChecksums ? 4 : 0);
        }
        if ((flags & 0x04) != 0 && xxhash.hash(out, 0, total, 0) != le32(src, pos)) {
            throw new CodecException("lz4 data is corrupt: the content checksum does not match");
        }
        if (contentSize >= 0 && contentSize != total) {
            throw new CodecException(
                    "lz4 data is corrupt: the frame declares " + contentSize + " bytes but holds " + total);
        }
        return total;
    }

    // --- zstd: standard frames, skippable frames ignored ----------------------------------------

    private int zstd(byte[] src, int offset, int length) throws CodecException {
        int end = offset + length;
        if (length == 0) {
            throw new CodecException("zstd data is empty");
        }
        if (zstd == null) {
            zstd = new ZstdDecompressCtx();
        }
        int total = 0;
        int pos = offset;
        long[] extent = new long[2];
        while (pos < end) {
            zstdFrameExtent(src, pos, end, extent);
            int frameEnd = (int) extent[0];
            long bound = extent[1];
            if (bound >= 0) {
                if (total + bound > MAX_DECOMPRESSED_SIZE) {
                    throw tooBig("zstd", total + bound, "its blocks allow up to");
                }
                if (out.length < total + bound) {
                    long size = Math.max(total + bound, Math.min(MAX_DECOMPRESSED_SIZE, 2L * out.length));
                    byte[] bigger = new byte[(int) size];
                    System.arraycopy(out, 0, bigger, 0, total);
                    out = bigger;
                }
                zstd.reset();
                total += zstd.decompressByteArray(out, total, (int) bound, src, pos, frameEnd - pos);
            }
            pos = frameEnd;
        }
        return total;
    }

    /** Sets {@code extent} to where the frame at {@code pos} ends and its output bound (-1: skippable). */
    private static void zstdFrameExtent(byte[] src, int pos, int end, long[] extent) throws CodecException {
        if (end - pos < 4) {
            throw new CodecException("zstd frame is truncated");
        }
        int magic = le32(src, pos);
        if ((magic & 0xFFFFFFF0) == 0x184D2A50) {
            if (end - pos < 8) {
                throw new CodecException("zstd skippable frame is truncated");
            }
            long frameEnd = pos + 8L + (le32(src, pos + 4) & 0xFFFFFFFFL);
            if (frameEnd > end) {
                throw new CodecException("zstd skippable frame is truncated");
            }
            extent[0] = frameEnd;
            extent[1] = -1;
            return;
        }
        if (magic != ZSTD_MAGIC) {
            throw new CodecException("zstd data does not start with a zstd frame magic");
        }
        pos += 4;
        if (pos >= end) {
            throw new CodecException("zstd frame header is truncated");
        }
        int descriptor = src[pos] & 0xFF;
        pos++;
        if ((descriptor & 0x08) != 0) {
            throw new CodecException("zstd frame header has its reserved bit set");
        }
        boolean singleSegment = (descriptor & 0x20) != 0;
        pos += (singleSegment ? 0 : 1) + new int[] {0, 1, 2, 4}[descriptor & 0x03];
        int contentSizeBytes = new int[] {singleSegment ? 1 : 0, 2, 4, 8}[descriptor >> 6];
        if (end - pos < contentSizeBytes) {
            throw new CodecException("zstd frame header is truncated");
        }
        long contentSize = -1;
        if (contentSizeBytes > 0) {
            contentSize = 0;
            for (int i = contentSizeBytes - 1; i >= 0; i--) {
                contentSize = contentSize << 8 | (src[pos + i] & 0xFF);
            }
            if (contentSizeBytes == 2) {
                contentSize += 256;
            }
        }
        pos += contentSizeBytes;
        long bound = 0;
        long at = pos;
        while (true) {
            if (end - at < 3) {
                throw new CodecException("zstd frame is truncated");
            }
            int p = (int) at;
            int header = (src[p] & 0xFF) | (src[p + 1] & 0xFF) << 8 | (src[p + 2] & 0xFF) << 16;
            at += 3;
            int type = (header >> 1) & 0x3;
            int size = header >>> 3;
            if (type == 0) {
                at += size;
                bound += size;
            } else if (type == 1) {
                at += 1;
                bound += size;
            } else if (type == 2) {
                at += size;
                bound += ZSTD_BLOCK_MAX;
            } else {
                throw new CodecException("zstd block has the reserved block type");
            }
            if ((header & 1) != 0) {
                break;
            }
        }
        if ((descriptor & 0x04) != 0) {
            at += 4;
        }
        if (at > end) {
            throw new CodecException("zstd frame is truncated");
        }
        extent[0] = at;
        extent[1] = contentSize < 0 ? bound : Math.min(bound, contentSize);
    }

    @Override
    public void close() {
        if (inflater != null) {
            inflater.end();
            inflater = null;
        }
        if (zstd != null) {
            zstd.close();
            zstd = null;
        }
    }
}
