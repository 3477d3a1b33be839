package io.tierlog.spark;

/**
 * The read planning that stays in Python on the driver (metadata, lineage, pushdown, aborted
 * transactions, splitting), called from the JVM through a Py4J callback. Every method takes a
 * JSON object and answers one; an answer {@code {"error": {"type": ..., "message": ...}}} is an
 * error the user sees as is.
 */
public interface Planner {
    /** {@code {"options"}} → {@code {"reader": "jvm"|"python", "why"}}: may the JVM read this? */
    String check(String request);

    /** {@code {"options", "filters"}} → {@code {"rest": [index, ...]}}: filters not applied. */
    String push(String request);

    /** {@code {"options", "filters", "columns"}} → {@code {"tasks": [{"ranges": [...]}, ...]}}. */
    String plan(String request);
}
