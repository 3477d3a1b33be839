package io.tierlog.spark;

import java.util.HashSet;
import java.util.Set;
import io.tierlog.spark.read.RecordColumns;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The columns of a tierlog read: the same names, types and nullability as the Python source's
 * {@code spark_schema()}, so that a query gives the same rows whichever reader runs it.
 */
final class TierlogSchema {
    /** Every column, in the order the source declares them (the decoder's own schema). */
    static final StructType FULL = RecordColumns.SCHEMA;

    private TierlogSchema() {}

    /**
     * Refuses a user schema that is not a projection of {@link #FULL}: any of its columns, in any
     * order, each with its own type. The messages are the Python source's, word for word.
     */
    static void checkProjection(StructType schema) {
        if (schema.fields().length == 0) {
            throw new IllegalArgumentException(
                    "the schema given to the tierlog source names no column");
        }
        Set<String> seen = new HashSet<>();
        for (StructField given : schema.fields()) {
            String name = given.name();
            StructField wanted = find(name);
            if (wanted == null) {
                throw new IllegalArgumentException(
                        "the tierlog source has no column "
                                + pythonRepr(name)
                                + "; its columns are "
                                + String.join(", ", FULL.fieldNames()));
            }
            String wantedType = wanted.dataType().simpleString();
            String givenType = given.dataType().simpleString();
            if (!wantedType.equals(givenType)) {
                throw new IllegalArgumentException(
                        "column "
                                + pythonRepr(name)
                                + " of the tierlog source is "
                                + wantedType
                                + ", not "
                                + givenType);
            }
            if (!seen.add(name)) {
                throw new IllegalArgumentException(
                        "the schema names column " + pythonRepr(name) + " twice");
            }
        }
    }

    /** The source's own field named {@code name} (exact case), or null. */
    static StructField find(String name) {
        for (StructField field : FULL.fields()) {
            if (field.name().equals(name)) {
                return field;
            }
        }
        return null;
    }

    /**
     * {@code name} quoted as Python's {@code repr} quotes a string, so that the messages read the
     * same as the Python source's.
     */
    static String pythonRepr(String text) {
        char quote = text.indexOf('\'') >= 0 && text.indexOf('"') < 0 ? '"' : '\'';
        StringBuilder out = new StringBuilder(text.length() + 2).append(quote);
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == quote || c == '\\') {
                out.append('\\').append(c);
            } else if (c == '\n') {
                out.append("\\n");
            } else if (c == '\r') {
                out.append("\\r");
            } else if (c == '\t') {
                out.append("\\t");
            } else if (c < 0x20 || c == 0x7f) {
                out.append(String.format("\\x%02x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append(quote).toString();
    }
}
