package io.tierlog.spark;

/** Build check; replaced by the reader's classes. */
final class Placeholder {
    private Placeholder() {}
}
