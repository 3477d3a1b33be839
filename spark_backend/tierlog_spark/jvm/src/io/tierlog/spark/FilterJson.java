package io.tierlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.Set;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.sources.StringContains;
import org.apache.spark.sql.sources.StringEndsWith;
import org.apache.spark.sql.sources.StringStartsWith;

/**
 * Spark's filters as the planner reads them: comparisons, {@code In}, null checks, {@code Not}
 * and string matches on top-level columns, with JSON values (a timestamp as microseconds since
 * the epoch). A filter with anything else in it is not sent and stays with Spark.
 */
final class FilterJson {
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private final Set<String> columns;

    /** Filters may name only {@code columns}: the table's top-level columns. */
    FilterJson(Set<String> columns) {
        this.columns = columns;
    }

    /** {@code filter} as the planner's JSON, or null if it cannot be expressed. */
    JsonNode convert(Filter filter) {
        if (filter instanceof Not not) {
            JsonNode child = convert(not.child());
            return child == null ? null : op("Not").set("child", child);
        }
        if (filter instanceof EqualTo f) {
            return compare("EqualTo", f.attribute(), f.value());
        }
        if (filter instanceof EqualNullSafe f) {
            return compare("EqualNullSafe", f.attribute(), f.value());
        }
        if (filter instanceof GreaterThan f) {
            return compare("GreaterThan", f.attribute(), f.value());
        }
        if (filter instanceof GreaterThanOrEqual f) {
            return compare("GreaterThanOrEqual", f.attribute(), f.value());
        }
        if (filter instanceof LessThan f) {
            return compare("LessThan", f.attribute(), f.value());
        }
        if (filter instanceof LessThanOrEqual f) {
            return compare("LessThanOrEqual", f.attribute(), f.value());
        }
        if (filter instanceof In f) {
            if (!columns.contains(f.attribute())) {
                return null;
            }
            ArrayNode values = NODES.arrayNode(f.values().length);
            for (Object value : f.values()) {
                JsonNode json = value(value);
                if (json == null) {
                    return null;
                }
                values.add(json);
            }
            ObjectNode in = op("In").put("column", f.attribute());
            in.set("values", values);
            return in;
        }
        if (filter instanceof IsNull f) {
            return nullCheck("IsNull", f.attribute());
        }
        if (filter instanceof IsNotNull f) {
            return nullCheck("IsNotNull", f.attribute());
        }
        if (filter instanceof StringStartsWith f) {
            return compare("StringStartsWith", f.attribute(), f.value());
        }
        if (filter instanceof StringEndsWith f) {
            return compare("StringEndsWith", f.attribute(), f.value());
        }
        if (filter instanceof StringContains f) {
            return compare("StringContains", f.attribute(), f.value());
        }
        return null;
    }

    private static ObjectNode op(String name) {
        return NODES.objectNode().put("op", name);
    }

    private JsonNode compare(String name, String column, Object value) {
        if (!columns.contains(column)) {
            return null;
        }
        JsonNode json = value(value);
        if (json == null) {
            return null;
        }
        ObjectNode node = op(name).put("column", column);
        node.set("value", json);
        return node;
    }

    private JsonNode nullCheck(String name, String column) {
        return columns.contains(column) ? op(name).put("column", column) : null;
    }

    /** A filter's value as JSON, or null for a kind the planner does not take. */
    static JsonNode value(Object value) {
        if (value instanceof String s) {
            return NODES.textNode(s);
        }
        if (value instanceof Boolean b) {
            return NODES.booleanNode(b);
        }
        if (value instanceof Byte || value instanceof Short || value instanceof Integer) {
            return NODES.numberNode(((Number) value).intValue());
        }
        if (value instanceof Long l) {
            return NODES.numberNode(l);
        }
        if (value instanceof Float || value instanceof Double) {
            double d = ((Number) value).doubleValue();
            return Double.isFinite(d) ? NODES.numberNode(d) : null;
        }
        if (value instanceof BigDecimal d) {
            return NODES.numberNode(d);
        }
        if (value instanceof BigInteger i) {
            return NODES.numberNode(i);
        }
        if (value instanceof Timestamp t) {
            long seconds = Math.floorDiv(t.getTime(), 1000L);
            return timestamp(seconds, t.getNanos());
        }
        if (value instanceof Instant i) {
            return timestamp(i.getEpochSecond(), i.getNano());
        }
        return null;
    }

    private static JsonNode timestamp(long seconds, int nanos) {
        try {
            long micros = Math.addExact(Math.multiplyExact(seconds, 1_000_000L), nanos / 1000);
            return NODES.objectNode().put("timestamp_us", micros);
        } catch (ArithmeticException outOfRange) {
            return null;
        }
    }
}
