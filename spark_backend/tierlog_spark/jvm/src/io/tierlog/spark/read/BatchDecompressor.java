package io.tierlog.spark.read;

import java.util.zip.DataFormatException;
import org.xerial.snappy.SnappyError;

/**
 * Decompresses records sections in the framings Kafka writes (as the core's
 * {@code tierlog.records.compression} reads them) into one buffer reused from batch to batch.
 * Each codec's framing is read by its own class ({@link GzipMembers}, {@link SnappyFraming},
 * {@link Lz4Frame}, {@link ZstdFrames}), made on first use; this class owns the buffer they
 * write into and turns whatever a codec library throws into a {@link CodecException}.
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

    /** The decompressed bytes of the last call, from index 0; the codecs grow it as they write. */
    byte[] out = new byte[64 * 1024];

    private GzipMembers gzip;
    private Lz4Frame lz4;
    private ZstdFrames zstd;

    byte[] buffer() {
        return out;
    }

    /** Decompresses {@code src[offset, offset + length)} with {@code codec}; returns the size. */
    int decompress(int codec, byte[] src, int offset, int length) throws CodecException {
        try {
            switch (codec) {
                case GZIP:
                    if (gzip == null) {
                        gzip = new GzipMembers(this);
                    }
                    return gzip.decompress(src, offset, length);
                case SNAPPY:
                    return SnappyFraming.decompress(this, src, offset, length);
                case LZ4:
                    if (lz4 == null) {
                        lz4 = new Lz4Frame(this);
                    }
                    return lz4.decompress(src, offset, length);
                case ZSTD:
                    if (zstd == null) {
                        zstd = new ZstdFrames(this);
                    }
                    return zstd.decompress(src, offset, length);
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

    /** Doubles the buffer (up to one byte past the cap), keeping its first {@code keep} bytes. */
    void grow(int keep) {
        resize(keep, (int) Math.min(MAX_DECOMPRESSED_SIZE + 1L, 2L * out.length));
    }

    /** Replaces the buffer by one of {@code capacity} bytes, keeping its first {@code keep} bytes. */
    void resize(int keep, int capacity) {
        byte[] bigger = new byte[capacity];
        System.arraycopy(out, 0, bigger, 0, keep);
        out = bigger;
    }

    static CodecException tooBig(String codec, long size, String how) {
        return new CodecException(
                codec + " data decompresses to more than " + MAX_DECOMPRESSED_SIZE + " bytes (" + how + " "
                        + size + ")");
    }

    static int le32(byte[] b, int p) {
        return (b[p] & 0xFF) | (b[p + 1] & 0xFF) << 8 | (b[p + 2] & 0xFF) << 16 | (b[p + 3] & 0xFF) << 24;
    }

    @Override
    public void close() {
        if (gzip != null) {
            gzip.close();
        }
        if (zstd != null) {
            zstd.close();
        }
    }
}
