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
 */
final class ChunkedSource {
    private static final int GCM_TAG_BITS = 128;

    private ChunkedSource() {}

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
        byte[] out = new byte[(int) (end - start)];
        long covered = start;
        try (ZstdDecompressCtx zstd = new ZstdDecompressCtx()) {
            for (int index = 0; index < chunks.size() && covered < end; index++) {
                JsonNode chunk = chunks.get(index);
                long plainStart = RangeSource.number(chunk, "plainStart");
                long plainEnd = RangeSource.number(chunk, "plainEnd");
                if (plainEnd <= covered) {
                    continue;
                }
                String where = "segment " + segmentId + ": chunk " + index + " ("
                        + RangeSource.describe(chunk.get("location")) + ")";
                if (plainStart > covered) {
                    throw new IOException(
                            where + ": starts at plain byte " + plainStart + " but the range needs byte " + covered
                                    + " next: the chunk list has a gap");
                }
                byte[] plain = plain(chunk, key, zstd, where, plainEnd - plainStart);
                long from = covered;
                long to = Math.min(end, plainEnd);
                System.arraycopy(plain, (int) (from - plainStart), out, (int) (from - start), (int) (to - from));
                covered = to;
            }
        }
        if (covered < end) {
            throw new IOException(
                    "segment " + segmentId + ": the chunks cover the range only up to byte " + covered + " of "
                            + end);
        }
        return out;
    }

    /** The plain bytes of one chunk, every transform checked. */
    private static byte[] plain(JsonNode chunk, SecretKeySpec key, ZstdDecompressCtx zstd, String where, long size)
            throws IOException {
        JsonNode location = chunk.get("location");
        if (location == null || !location.isObject()) {
            throw new IllegalArgumentException(where + ": has no location");
        }
        byte[] body =
                RangeSource.readLocation(
                        location, RangeSource.number(chunk, "storedStart"), RangeSource.number(chunk, "storedEnd"));
        JsonNode crcNode = chunk.get("crc32c");
        if (crcNode != null && !crcNode.isNull()) {
            CRC32C crc = new CRC32C();
            crc.update(body, 0, body.length);
            if (crc.getValue() != crcNode.asLong()) {
                throw new IOException(
                        String.format(
                                "%s: CRC-32C mismatch: stored 0x%08x, computed 0x%08x (the stored chunk is damaged)",
                                where, crcNode.asLong(), crc.getValue()));
            }
        }
        if (key != null) {
            body = decrypt(chunk, key, body, where);
        }
        String compression = chunk.path("compression").asText("none");
        if ("zstd".equals(compression)) {
            byte[] plain = new byte[(int) size];
            int n;
            try {
                zstd.reset();
                n = zstd.decompressByteArray(plain, 0, plain.length, body, 0, body.length);
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
        if (body.length != size) {
            throw new IOException(where + ": decodes to " + body.length + " bytes; the manifest says " + size);
        }
        return body;
    }

    private static byte[] decrypt(JsonNode chunk, SecretKeySpec key, byte[] body, String where) throws IOException {
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
            return cipher.doFinal(body);
        } catch (AEADBadTagException e) {
            throw new IOException(
                    where + ": failed authentication: it was altered, moved from another position or segment, "
                            + "or encrypted with another data key");
        } catch (GeneralSecurityException e) {
            throw new IOException(where + ": cannot be decrypted: " + e.getMessage(), e);
        }
    }
}
