package io.tierlog.spark.read;

import com.fasterxml.jackson.databind.JsonNode;
import com.github.luben.zstd.ZstdDecompressCtx;
import java.io.IOException;
import java.security.GeneralSecurityException;
import java.util.Base64;
import java.util.zip.CRC32C;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * Reassembles a range from the chunks the fsspec plugin stores: each chunk is checked against
 * its CRC-32C, decrypted (AES-256-GCM, bound to its position by nonce and associated data),
 * decompressed (zstd) on its own, and the plain pieces are cut to {@code [start, end)}.
 *
 * <p>Chunks stored back to back in one object are fetched with one read (one GET for an
 * object store), since a request's latency costs more than its bytes.
 */
final class ChunkedSource {
    private static final int GCM_TAG_BITS = 128;
    /** The most stored bytes one read fetches for consecutive chunks. */
    private static final long MAX_SPAN = 256L << 20;

    private final JsonNode chunks;
    private final SecretKeySpec key;
    private final String segmentId;
    private final ZstdDecompressCtx zstd;
    /** The stored bytes last fetched: {@code [spanStart, spanStart + span.length)} of spanLocation. */
    private JsonNode spanLocation;
    private long spanStart;
    private byte[] span;

    private ChunkedSource(JsonNode chunks, SecretKeySpec key, String segmentId, ZstdDecompressCtx zstd) {
        this.chunks = chunks;
        this.key = key;
        this.segmentId = segmentId;
        this.zstd = zstd;
    }

    static byte[] read(JsonNode source, long start, long end, String segmentId) throws IOException {
        JsonNode chunks = source.get("chunks");
        if (chunks == null || !chunks.isArray()) {
            throw new IllegalArgumentException("a chunked source needs a \"chunks\" list: " + source);
        }
        JsonNode keyNode = source.get("key");
        SecretKeySpec key =
                keyNode == null || keyNode.isNull()
                        ? null
                        : new SecretKeySpec(Base64.getDecoder().decode(keyNode.asText()), "AES");
        try (ZstdDecompressCtx zstd = new ZstdDecompressCtx()) {
            return new ChunkedSource(chunks, key, segmentId, zstd).assemble(start, end);
        }
    }

    private byte[] assemble(long start, long end) throws IOException {
        byte[] out = new byte[(int) (end - start)];
        long covered = start;
        for (int index = 0; index < chunks.size() && covered < end; index++) {
            JsonNode chunk = chunks.get(index);
            long plainStart = RangeSource.number(chunk, "plainStart");
            long plainEnd = RangeSource.number(chunk, "plainEnd");
            if (plainEnd <= covered) {
                continue;
            }
            JsonNode location = chunk.get("location");
            if (location == null || !location.isObject()) {
                throw new IllegalArgumentException("chunk " + index + " has no location: " + chunk);
            }
            String where = "segment " + segmentId + ": chunk " + index + " (" + RangeSource.describe(location) + ")";
            if (plainStart > covered) {
                throw new IOException(
                        where + ": starts at plain byte " + plainStart + " but the range needs byte " + covered
                                + " next: the chunk list has a gap");
            }
            byte[] plain = plain(index, chunk, location, where, plainEnd - plainStart, end);
            long to = Math.min(end, plainEnd);
            System.arraycopy(plain, (int) (covered - plainStart), out, (int) (covered - start), (int) (to - covered));
            covered = to;
        }
        if (covered < end) {
            throw new IOException(
                    "segment " + segmentId + ": the chunks cover the range only up to byte " + covered + " of " + end);
        }
        return out;
    }

    /** The plain bytes of chunk {@code index}, every transform checked. */
    private byte[] plain(int index, JsonNode chunk, JsonNode location, String where, long size, long end)
            throws IOException {
        long storedStart = RangeSource.number(chunk, "storedStart");
        long storedEnd = RangeSource.number(chunk, "storedEnd");
        if (storedStart < 0 || storedEnd < storedStart) {
            throw new IllegalArgumentException(where + ": bad stored range " + storedStart + "-" + storedEnd);
        }
        if (!location.equals(spanLocation) || storedStart < spanStart || storedEnd > spanStart + span.length) {
            fetchSpan(index, location, storedStart, storedEnd, end);
        }
        int offset = (int) (storedStart - spanStart);
        int length = (int) (storedEnd - storedStart);
        JsonNode crcNode = chunk.get("crc32c");
        if (crcNode != null && !crcNode.isNull()) {
            CRC32C crc = new CRC32C();
            crc.update(span, offset, length);
            if (crc.getValue() != crcNode.asLong()) {
                throw new IOException(
                        String.format(
                                "%s: CRC-32C mismatch: stored 0x%08x, computed 0x%08x (the stored chunk is damaged)",
                                where, crcNode.asLong(), crc.getValue()));
            }
        }
        byte[] body = span;
        if (key != null) {
            body = decrypt(chunk, where, offset, length);
            offset = 0;
            length = body.length;
        }
        String compression = chunk.path("compression").asText("none");
        if ("zstd".equals(compression)) {
            byte[] plain = new byte[(int) size];
            int n;
            try {
                zstd.reset();
                n = zstd.decompressByteArray(plain, 0, plain.length, body, offset, length);
            } catch (RuntimeException e) {
                throw new IOException(where + ": cannot be decompressed: " + e.getMessage(), e);
            }
            if (n != size) {
                throw new IOException(where + ": decodes to " + n + " bytes; the manifest says " + size);
            }
            return plain;
        }
        if (!"none".equals(compression)) {
            throw new IllegalArgumentException(where + ": unknown chunk compression " + compression);
        }
        if (length != size) {
            throw new IOException(where + ": decodes to " + length + " bytes; the manifest says " + size);
        }
        if (body == span) {
            byte[] plain = new byte[length];
            System.arraycopy(span, offset, plain, 0, length);
            return plain;
        }
        return body;
    }

    /**
     * Reads the stored bytes of chunk {@code index} and of the chunks after it that are needed
     * and stored right after it in the same object.
     */
    private void fetchSpan(int index, JsonNode location, long storedStart, long storedEnd, long end)
            throws IOException {
        long spanEnd = storedEnd;
        for (int next = index + 1; next < chunks.size(); next++) {
            JsonNode chunk = chunks.get(next);
            long nextStart = chunk.path("storedStart").asLong(-1);
            long nextEnd = chunk.path("storedEnd").asLong(-1);
            if (!location.equals(chunk.get("location"))
                    || nextStart != spanEnd
                    || nextEnd < nextStart
                    || nextEnd - storedStart > MAX_SPAN
                    || chunk.path("plainStart").asLong(Long.MAX_VALUE) >= end) {
                break;
            }
            spanEnd = nextEnd;
        }
        span = null; // let the previous span go before the next is read
        span = RangeSource.readLocation(location, storedStart, spanEnd);
        spanLocation = location;
        spanStart = storedStart;
    }

    private byte[] decrypt(JsonNode chunk, String where, int offset, int length) throws IOException {
        JsonNode nonce = chunk.get("nonce");
        if (nonce == null || nonce.isNull()) {
            throw new IllegalArgumentException(where + ": is encrypted but has no nonce");
        }
        JsonNode aad = chunk.get("aad");
        try {
            Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
            cipher.init(
                    Cipher.DECRYPT_MODE, key,
                    new GCMParameterSpec(GCM_TAG_BITS, Base64.getDecoder().decode(nonce.asText())));
            if (aad != null && !aad.isNull()) {
                cipher.updateAAD(Base64.getDecoder().decode(aad.asText()));
            }
            return cipher.doFinal(span, offset, length);
        } catch (AEADBadTagException e) {
            throw new IOException(
                    where + ": failed authentication: it was altered, moved from another position or segment, "
                            + "or encrypted with another data key");
        } catch (GeneralSecurityException e) {
            throw new IOException(where + ": cannot be decrypted: " + e.getMessage(), e);
        }
    }
}
