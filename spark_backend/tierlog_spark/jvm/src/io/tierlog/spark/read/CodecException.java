package io.tierlog.spark.read;

/**
 * A records section its codec cannot decode; the reader adds the segment and the batch
 * position, which the codec does not know.
 */
final class CodecException extends Exception {
    private static final long serialVersionUID = 1L;

    CodecException(String reason) {
        super(reason, null, false, false);
    }
}
