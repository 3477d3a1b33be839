package io.tierlog.spark;

import java.util.Map;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.read.format("tierlog")} on the JVM. Spark finds registered JVM sources before
 * Python ones, so with this jar on the classpath every tierlog read comes here first; the table
 * then picks the JVM reader or hands the read to the Python source.
 */
public final class TierlogProvider implements TableProvider, DataSourceRegister {
    /** The format name, shared with the Python source. */
    public static final String NAME = "tierlog";

    @Override
    public String shortName() {
        return NAME;
    }

    /** The schema does not depend on the options: it is the records' shape. */
    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return TierlogSchema.FULL;
    }

    /** A user schema picks columns (any subset, any order, same types); nothing else. */
    @Override
    public boolean supportsExternalMetadata() {
        return true;
    }

    @Override
    public Table getTable(
            StructType schema, Transform[] partitioning, Map<String, String> properties) {
        TierlogSchema.checkProjection(schema);
        return new TierlogTable(schema, partitioning, properties);
    }
}
