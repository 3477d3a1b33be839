package io.tierlog.spark.read;

import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The 14 columns a tiered record becomes, exactly as the Python reader's {@code spark_schema()}
 * declares them (names, order, types, nullability), so both readers expose one table.
 */
public final class RecordColumns {
    public static final int TOPIC = 0;
    public static final int PARTITION = 1;
    public static final int OFFSET = 2;
    public static final int TIMESTAMP = 3;
    public static final int TIMESTAMP_TYPE = 4;
    public static final int KEY = 5;
    public static final int VALUE = 6;
    public static final int HEADERS = 7;
    public static final int LEADER_EPOCH = 8;
    public static final int PRODUCER_ID = 9;
    public static final int PRODUCER_EPOCH = 10;
    public static final int SEQUENCE = 11;
    public static final int IS_TRANSACTIONAL = 12;
    public static final int SEGMENT_ID = 13;

    /** A header: a UTF-8 key that is never null and a value that may be. */
    public static final StructType HEADER =
            new StructType(
                    new StructField[] {
                        field("key", DataTypes.StringType, false),
                        field("value", DataTypes.BinaryType, true),
                    });

    public static final StructType SCHEMA =
            new StructType(
                    new StructField[] {
                        field("topic", DataTypes.StringType, false),
                        field("partition", DataTypes.IntegerType, false),
                        field("offset", DataTypes.LongType, false),
                        field("timestamp", DataTypes.TimestampType, false),
                        field("timestamp_type", DataTypes.StringType, false),
                        field("key", DataTypes.BinaryType, true),
                        field("value", DataTypes.BinaryType, true),
                        field("headers", new ArrayType(HEADER, true), false),
                        field("leader_epoch", DataTypes.IntegerType, false),
                        field("producer_id", DataTypes.LongType, false),
                        field("producer_epoch", DataTypes.ShortType, false),
                        field("sequence", DataTypes.IntegerType, false),
                        field("is_transactional", DataTypes.BooleanType, false),
                        field("segment_id", DataTypes.StringType, false),
                    });

    private RecordColumns() {}

    private static StructField field(String name, DataType type, boolean nullable) {
        return new StructField(name, type, nullable, Metadata.empty());
    }

    /**
     * The index in {@link #SCHEMA} of the column {@code field} names, after checking its type.
     *
     * @throws IllegalArgumentException for an unknown column or a different type
     */
    public static int indexOf(StructField field) {
        String[] names = SCHEMA.fieldNames();
        for (int i = 0; i < names.length; i++) {
            if (names[i].equals(field.name())) {
                DataType expected = SCHEMA.fields()[i].dataType();
                if (!DataType.equalsIgnoreNullability(expected, field.dataType())) {
                    throw new IllegalArgumentException(
                            "column " + field.name() + " is " + expected.simpleString()
                                    + ", not " + field.dataType().simpleString());
                }
                return i;
            }
        }
        throw new IllegalArgumentException(
                "unknown column " + field.name() + "; the columns are "
                        + String.join(", ", names));
    }
}
