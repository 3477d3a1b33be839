package io.tierlog.spark.read;

import java.io.IOException;

/**
 * Bytes of a range that are not valid record batches. The message reads like the Python
 * reader's {@code CorruptRecordError}: the byte position within the range's bytes, then the
 * segment and the reason, so either reader reports the same damage the same way.
 */
public final class CorruptRecordException extends IOException {
    private static final long serialVersionUID = 1L;

    private final long position;
    private final String reason;

    CorruptRecordException(String segmentId, long position, String reason) {
        super("corrupt record batch at byte " + position + ": segment " + segmentId + ": " + reason);
        this.position = position;
        this.reason = reason;
    }

    /** Where the damage is, counted from the first byte of the range. */
    public long position() {
        return position;
    }

    /** What is wrong, without the position and segment. */
    public String reason() {
        return reason;
    }
}
