package io.tierlog.spark.read;

import static io.tierlog.spark.read.BatchDecompressor.MAX_DECOMPRESSED_SIZE;
import static io.tierlog.spark.read.BatchDecompressor.le32;
import static io.tierlog.spark.read.BatchDecompressor.tooBig;

import com.github.luben.zstd.ZstdDecompressCtx;

/**
 * Kafka's zstd framing: standard zstd frames one after another, skippable frames ignored. Each
 * frame's header and block headers are read first to bound its output (its content size when
 * declared, else what its blocks allow) before one reused context decodes it.
 */
final class ZstdFrames {
    private static final int ZSTD_MAGIC = 0xFD2FB528;
    private static final int ZSTD_BLOCK_MAX = 128 * 1024;

    private final BatchDecompressor into;
    private ZstdDecompressCtx zstd;

    ZstdFrames(BatchDecompressor into) {
        this.into = into;
    }

    int decompress(byte[] src, int offset, int length) throws CodecException {
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
            frameExtent(src, pos, end, extent);
            int frameEnd = (int) extent[0];
            long bound = extent[1];
            if (bound >= 0) {
                if (total + bound > MAX_DECOMPRESSED_SIZE) {
                    throw tooBig("zstd", total + bound, "its blocks allow up to");
                }
                if (into.out.length < total + bound) {
                    long size = Math.max(total + bound, Math.min(MAX_DECOMPRESSED_SIZE, 2L * into.out.length));
                    into.resize(total, (int) size);
                }
                zstd.reset();
                total += zstd.decompressByteArray(into.out, total, (int) bound, src, pos, frameEnd - pos);
            }
            pos = frameEnd;
        }
        return total;
    }

    /** Sets {@code extent} to where the frame at {@code pos} ends and its output bound (-1: skippable). */
    private static void frameExtent(byte[] src, int pos, int end, long[] extent) throws CodecException {
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

    void close() {
        if (zstd != null) {
            zstd.close();
            zstd = null;
        }
    }
}
