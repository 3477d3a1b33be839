package io.tierlog.spark;

import java.util.Map;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The Python {@code tierlog} data source reached from the JVM: the fallback reader, and the
 * stream reader. Spark's own wrapper runs it, so the read is exactly the one the Python source
 * gives when no jar is loaded (the session must have it registered).
 */
final class PythonSource {
    private PythonSource() {}

    static ScanBuilder scanBuilder(
            StructType schema,
            Transform[] partitioning,
            Map<String, String> properties,
            CaseInsensitiveStringMap options) {
        PythonDataSourceV2 source = new PythonDataSourceV2();
        source.setShortName(TierlogProvider.NAME);
        SupportsRead table = (SupportsRead) source.getTable(schema, partitioning, properties);
        return table.newScanBuilder(options);
    }
}
