package io.tierlog.spark;

import com.fasterxml.jackson.databind.ObjectMapper;

/** The one Jackson mapper of the reader (thread-safe once configured, costly to make). */
final class Json {
    static final ObjectMapper MAPPER = new ObjectMapper();

    private Json() {}
}
