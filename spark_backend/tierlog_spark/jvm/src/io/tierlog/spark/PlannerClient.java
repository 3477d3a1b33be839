package io.tierlog.spark;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.UnaryOperator;

/**
 * The planner's three calls as typed Java calls: builds the JSON requests, checks the answers'
 * shape, and turns an {@code {"error": ...}} answer into the exception the Python reader would
 * have raised, with its message unchanged.
 */
final class PlannerClient {
    /** The planner's answer to {@code check}. */
    record Check(boolean jvm, String why) {}

    private final Planner planner;

    PlannerClient(Planner planner) {
        this.planner = planner;
    }

    Check check(Map<String, String> options) {
        JsonNode answer = call("check", planner::check, request(options));
        String reader = answer.path("reader").asText("");
        if (!reader.equals("jvm") && !reader.equals("python")) {
            throw malformed("check", answer, "no \"reader\": \"jvm\" or \"python\"");
        }
        return new Check(reader.equals("jvm"), answer.path("why").asText(""));
    }

    /** The indexes into {@code filters} of those the planner does not apply. */
    Set<Integer> push(Map<String, String> options, List<JsonNode> filters) {
        ObjectNode request = request(options);
        request.putArray("filters").addAll(filters);
        JsonNode answer = call("push", planner::push, request);
        JsonNode rest = answer.get("rest");
        if (rest == null || !rest.isArray()) {
            throw malformed("push", answer, "no \"rest\" list");
        }
        Set<Integer> indexes = new HashSet<>();
        for (JsonNode index : rest) {
            if (!index.canConvertToInt() || index.asInt() < 0 || index.asInt() >= filters.size()) {
                throw malformed("push", answer, "a \"rest\" entry that is no filter's index");
            }
            indexes.add(index.asInt());
        }
        return indexes;
    }

    /** The tasks of a read, each as the JSON text of its list of ranges. */
    List<String> plan(Map<String, String> options, List<JsonNode> filters, String[] columns) {
        ObjectNode request = request(options);
        request.putArray("filters").addAll(filters);
        ArrayNode names = request.putArray("columns");
        for (String column : columns) {
            names.add(column);
        }
        JsonNode answer = call("plan", planner::plan, request);
        JsonNode tasks = answer.get("tasks");
        if (tasks == null || !tasks.isArray()) {
            throw malformed("plan", answer, "no \"tasks\" list");
        }
        List<String> result = new ArrayList<>(tasks.size());
        for (JsonNode task : tasks) {
            JsonNode ranges = task.get("ranges");
            if (ranges == null || !ranges.isArray()) {
                throw malformed("plan", answer, "a task without a \"ranges\" list");
            }
            result.add(ranges.toString());
        }
        return result;
    }

    private static ObjectNode request(Map<String, String> options) {
        ObjectNode request = Json.MAPPER.createObjectNode();
        ObjectNode given = request.putObject("options");
        options.forEach(given::put);
        return request;
    }

    private static JsonNode call(String method, UnaryOperator<String> send, ObjectNode request) {
        String text = send.apply(request.toString());
        if (text == null) {
            throw new IllegalStateException("the tierlog planner answered " + method + " with null");
        }
        JsonNode answer;
        try {
            answer = Json.MAPPER.readTree(text);
        } catch (JsonProcessingException error) {
            throw new IllegalStateException(
                    "the tierlog planner's answer to " + method + " is not JSON: " + text, error);
        }
        if (answer == null || !answer.isObject()) {
            throw malformed(method, answer, "not a JSON object");
        }
        JsonNode error = answer.get("error");
        if (error != null && !error.isNull()) {
            String message = error.path("message").asText(error.toString());
            if (error.path("type").asText("").equals("TierlogOptionError")) {
                throw new IllegalArgumentException(message);
            }
            throw new RuntimeException(message);
        }
        return answer;
    }

    private static IllegalStateException malformed(String method, JsonNode answer, String what) {
        return new IllegalStateException(
                "the tierlog planner's answer to " + method + " has " + what + ": " + answer);
    }
}
