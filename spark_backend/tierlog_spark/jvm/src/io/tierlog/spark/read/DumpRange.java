package io.tierlog.spark.read;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.sql.vectorized.ColumnarRow;

/**
 * Prints the rows a {@link RangeReader} decodes, one JSON object per line, so the decoder can
 * be compared with the Python reader without a Spark session.
 *
 * <p>Arguments: a JSON file holding one range, a comma-separated list of columns (empty: all
 * of them), and optionally the rows per batch. Binary values are base64, timestamps
 * microseconds, headers lists of [key, base64 value]. An error's message goes to stderr with
 * exit status 1.
 *
 * <p>With the single argument {@code -}, requests come from stdin instead, one per line:
 * range file, columns, batch rows and an output file, tab-separated. The rows go to the output
 * file, an error's message to the output file plus {@code .error}, and a line {@code done} to
 * stdout after each request: starting a JVM with Spark's classes costs seconds, a request
 * milliseconds.
 */
public final class DumpRange {
    private DumpRange() {}

    public static void main(String[] args) throws IOException {
        if (args.length == 1 && args[0].equals("-")) {
            serve();
            return;
        }
        if (args.length < 2 || args.length > 3) {
            System.err.println("usage: DumpRange <range.json> <column,column,...> [batch rows] | DumpRange -");
            System.exit(2);
        }
        Writer out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        try {
            dump(args[0], args[1], args.length == 3 ? Integer.parseInt(args[2]) : 4096, out);
        } catch (IOException | IllegalArgumentException e) {
            out.flush();
            System.err.println(e.getMessage());
            System.exit(1);
        }
        out.flush();
    }

    private static void serve() throws IOException {
        BufferedReader requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = requests.readLine()) != null) {
            String[] request = line.split("\t", -1);
            Path output = Path.of(request[3]);
            try (Writer out = Files.newBufferedWriter(output, StandardCharsets.UTF_8)) {
                dump(request[0], request[1], Integer.parseInt(request[2]), out);
            } catch (IOException e) {
                Files.writeString(Path.of(request[3] + ".error"), e.getMessage(), StandardCharsets.UTF_8);
            } catch (RuntimeException e) {
                Files.writeString(Path.of(request[3] + ".error"), e.toString(), StandardCharsets.UTF_8);
            }
            System.out.println("done");
            System.out.flush();
        }
    }

    private static void dump(String rangeFile, String columns, int batchRows, Writer out) throws IOException {
        ObjectMapper json = new ObjectMapper();
        JsonNode range = json.readTree(new File(rangeFile));
        StructType schema = new StructType();
        if (columns.isEmpty()) {
            schema = RecordColumns.SCHEMA;
        } else {
            for (String name : columns.split(",")) {
                schema = schema.add(RecordColumns.SCHEMA.apply(name.trim()));
            }
        }
        try (RangeReader reader = new RangeReader(range, schema, batchRows)) {
            ColumnarBatch batch;
            while ((batch = reader.next()) != null) {
                if (batch.numRows() > batchRows) {
                    throw new IllegalStateException(batch.numRows() + " rows in a batch of at most " + batchRows);
                }
                for (int row = 0; row < batch.numRows(); row++) {
                    out.write(json.writeValueAsString(row(json, schema, batch, row)));
                    out.write('\n');
                }
            }
        }
    }

    private static ObjectNode row(ObjectMapper json, StructType schema, ColumnarBatch batch, int row) {
        ObjectNode node = json.createObjectNode();
        StructField[] fields = schema.fields();
        for (int i = 0; i < fields.length; i++) {
            ColumnVector column = batch.column(i);
            String name = fields[i].name();
            if (column.isNullAt(row)) {
                node.putNull(name);
                continue;
            }
            switch (RecordColumns.indexOf(fields[i])) {
                case RecordColumns.TOPIC:
                case RecordColumns.TIMESTAMP_TYPE:
                case RecordColumns.SEGMENT_ID:
                    node.put(name, column.getUTF8String(row).toString());
                    break;
                case RecordColumns.PARTITION:
                case RecordColumns.LEADER_EPOCH:
                case RecordColumns.SEQUENCE:
                    node.put(name, column.getInt(row));
                    break;
                case RecordColumns.OFFSET:
                case RecordColumns.TIMESTAMP:
                case RecordColumns.PRODUCER_ID:
                    node.put(name, column.getLong(row));
                    break;
                case RecordColumns.PRODUCER_EPOCH:
                    node.put(name, column.getShort(row));
                    break;
                case RecordColumns.IS_TRANSACTIONAL:
                    node.put(name, column.getBoolean(row));
                    break;
                case RecordColumns.KEY:
                case RecordColumns.VALUE:
                    node.put(name, Base64.getEncoder().encodeToString(column.getBinary(row)));
                    break;
                case RecordColumns.HEADERS:
                    ArrayNode headers = node.putArray(name);
                    ColumnarArray array = column.getArray(row);
                    for (int h = 0; h < array.numElements(); h++) {
                        ColumnarRow header = array.getStruct(h, 2);
                        ArrayNode pair = headers.addArray();
                        pair.add(header.getUTF8String(0).toString());
                        if (header.isNullAt(1)) {
                            pair.addNull();
                        } else {
                            pair.add(Base64.getEncoder().encodeToString(header.getBinary(1)));
                        }
                    }
                    break;
                default:
                    throw new IllegalStateException("unknown column " + name);
            }
        }
        return node;
    }
}
