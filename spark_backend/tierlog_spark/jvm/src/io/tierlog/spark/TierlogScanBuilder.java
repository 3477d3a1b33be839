package io.tierlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A JVM read being set up: the planner takes the filters it applies exactly (the Python reader's
 * pushdown, so topics, partitions, offsets and timestamps narrow what is fetched), Spark keeps
 * the rest, and only the columns the query uses are decoded.
 */
final class TierlogScanBuilder
        implements ScanBuilder, SupportsPushDownFilters, SupportsPushDownRequiredColumns {
    private final TierlogTable table;
    private final CaseInsensitiveStringMap options;
    private final PlannerClient planner;
    private StructType required;
    private Filter[] pushed = new Filter[0];
    private List<JsonNode> pushedJson = List.of();

    TierlogScanBuilder(TierlogTable table, CaseInsensitiveStringMap options, PlannerClient planner) {
        this.table = table;
        this.options = options;
        this.planner = planner;
        this.required = table.schema();
    }

    @Override
    public Filter[] pushFilters(Filter[] filters) {
        Set<String> columns = new HashSet<>(List.of(table.schema().fieldNames()));
        FilterJson converter = new FilterJson(columns);
        List<Filter> sent = new ArrayList<>();
        List<JsonNode> sentJson = new ArrayList<>();
        List<Filter> kept = new ArrayList<>();
        for (Filter filter : filters) {
            JsonNode json = converter.convert(filter);
            if (json == null) {
                kept.add(filter);
            } else {
                sent.add(filter);
                sentJson.add(json);
            }
        }
        List<Filter> applied = new ArrayList<>();
        List<JsonNode> appliedJson = new ArrayList<>();
        if (!sent.isEmpty()) {
            Set<Integer> rest = planner.push(givenOptions(), sentJson);
            for (int i = 0; i < sent.size(); i++) {
                if (rest.contains(i)) {
                    kept.add(sent.get(i));
                } else {
                    applied.add(sent.get(i));
                    appliedJson.add(sentJson.get(i));
                }
            }
        }
        pushed = applied.toArray(new Filter[0]);
        pushedJson = List.copyOf(appliedJson);
        return kept.toArray(new Filter[0]);
    }

    @Override
    public Filter[] pushedFilters() {
        return pushed.clone();
    }

    /**
     * Keeps the table's columns that {@code requiredSchema} names, in its order, with their full
     * types: a header is always read whole (nested pruning would save nothing worth its cost).
     */
    @Override
    public void pruneColumns(StructType requiredSchema) {
        StructType tableSchema = table.schema();
        List<StructField> fields = new ArrayList<>();
        for (String name : requiredSchema.fieldNames()) {
            fields.add(tableSchema.apply(name));
        }
        required = new StructType(fields.toArray(new StructField[0]));
    }

    @Override
    public Scan build() {
        return new TierlogScan(table, options, planner, required, pushed, pushedJson);
    }

    private Map<String, String> givenOptions() {
        return options.asCaseSensitiveMap();
    }
}
