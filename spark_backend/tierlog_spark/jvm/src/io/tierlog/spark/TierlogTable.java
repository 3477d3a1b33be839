package io.tierlog.spark;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The records a tierlog read selects. Each scan chooses its reader (see {@link ReaderSetting}):
 * the JVM one needs the Python planner installed on the driver and its word that these options
 * can be read from the JVM; otherwise the read goes to the Python source.
 */
final class TierlogTable implements SupportsRead {
    private static final Logger LOG = LoggerFactory.getLogger(TierlogTable.class);
    private static final Set<TableCapability> CAPABILITIES =
            EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ);

    private final StructType schema;
    private final Transform[] partitioning;
    private final Map<String, String> properties;

    TierlogTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        this.schema = schema;
        this.partitioning = partitioning;
        this.properties = properties;
    }

    @Override
    public String name() {
        return TierlogProvider.NAME;
    }

    @Override
    public StructType schema() {
        return schema;
    }

    @Override
    public Transform[] partitioning() {
        return partitioning;
    }

    @Override
    public Map<String, String> properties() {
        return properties;
    }

    @Override
    public Set<TableCapability> capabilities() {
        return CAPABILITIES;
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        ReaderSetting setting = ReaderSetting.current();
        if (setting == ReaderSetting.PYTHON) {
            return pythonScanBuilder(options);
        }
        if (!PlannerBridge.installed()) {
            if (setting == ReaderSetting.JVM) {
                throw new IllegalArgumentException(
                        ReaderSetting.KEY
                                + " is 'jvm', but no tierlog planner is installed in this JVM:"
                                + " call tierlog_spark.register(spark) from the Python driver");
            }
            LOG.debug("No tierlog planner installed: reading through the Python data source");
            return pythonScanBuilder(options);
        }
        PlannerClient planner = new PlannerClient(PlannerBridge.planner());
        Map<String, String> given = options.asCaseSensitiveMap();
        PlannerClient.Check check = planner.check(given);
        if (!check.jvm()) {
            if (setting == ReaderSetting.JVM) {
                throw new IllegalArgumentException(
                        ReaderSetting.KEY
                                + " is 'jvm', but the JVM reader cannot read this: "
                                + check.why());
            }
            LOG.info("Reading tierlog records through the Python data source: {}", check.why());
            return pythonScanBuilder(options);
        }
        return new TierlogScanBuilder(this, options, planner);
    }

    /** The Python source's scan of this table: the fallback, and every stream. */
    ScanBuilder pythonScanBuilder(CaseInsensitiveStringMap options) {
        return PythonSource.scanBuilder(schema, partitioning, properties, options);
    }
}
