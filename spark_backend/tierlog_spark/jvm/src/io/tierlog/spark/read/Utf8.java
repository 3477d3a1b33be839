package io.tierlog.spark.read;

/**
 * Strict UTF-8 validation of header keys, as Python's {@code bytes.decode("utf-8")} does it
 * (no overlong forms, no surrogates, nothing past U+10FFFF): a key the Python reader refuses
 * must not become a Spark string here.
 */
final class Utf8 {
    private Utf8() {}

    static boolean isValid(byte[] bytes, int offset, int length) {
        int i = offset;
        int end = offset + length;
        while (i < end && bytes[i] >= 0) {
            i++;
        }
        while (i < end) {
            int b = bytes[i++];
            if (b >= 0) {
                continue;
            }
            b &= 0xFF;
            int needed;
            int min;
            int lowLimit = 0x80;
            int highLimit = 0xBF;
            if (b >= 0xC2 && b <= 0xDF) {
                needed = 1;
            } else if (b >= 0xE0 && b <= 0xEF) {
                needed = 2;
                if (b == 0xE0) {
                    lowLimit = 0xA0; // overlong
                } else if (b == 0xED) {
                    highLimit = 0x9F; // surrogates
                }
            } else if (b >= 0xF0 && b <= 0xF4) {
                needed = 3;
                if (b == 0xF0) {
                    lowLimit = 0x90; // overlong
                } else if (b == 0xF4) {
                    highLimit = 0x8F; // past U+10FFFF
                }
            } else {
                return false;
            }
            if (end - i < needed) {
                return false;
            }
            min = bytes[i] & 0xFF;
            if (min < lowLimit || min > highLimit) {
                return false;
            }
            for (int k = 1; k < needed; k++) {
                int c = bytes[i + k] & 0xFF;
                if (c < 0x80 || c > 0xBF) {
                    return false;
                }
            }
            i += needed;
        }
        return true;
    }
}
