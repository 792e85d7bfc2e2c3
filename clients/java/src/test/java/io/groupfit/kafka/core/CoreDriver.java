package io.groupfit.kafka.core;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * The Java core on instances read as JSON lines from stdin, one answer line each on stdout, for the differential
 * test against the Python reference (tests/integration/test_java_core.py). An instance is the service's request:
 * {@code {"algorithm", "params", "capacity", "partitions": [{"topic", "partition", "rate", "lag"}], "members":
 * [id | {"id", "capacity"}] | null, "previous": {consumer: [{"topic", "partition"}]}}}; the answer {@code
 * {"assignment": {consumer: [[topic, partition], ...]}, "rscore", "moves", "bins_used", "outputs"}} or {@code
 * {"error": message}}.
 */
public final class CoreDriver {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode instance = JSON.readTree(line);
            ObjectNode answer;
            try {
                answer = solve(instance);
            } catch (IllegalArgumentException e) {
                answer = JSON.createObjectNode().put("error", e.getMessage());
            }
            out.println(JSON.writeValueAsString(answer));
        }
        out.flush();
    }

    @SuppressWarnings("unchecked")
    static ObjectNode solve(JsonNode instance) {
        Problem.Builder builder = new Problem.Builder(instance.get("capacity").asDouble());
        Map<String, Integer> index = new HashMap<>();
        for (JsonNode p : instance.get("partitions")) {
            String topic = p.get("topic").asText();
            int partition = p.get("partition").asInt();
            JsonNode lag = p.get("lag");
            int j = builder.partition(builder.topic(topic), partition, p.get("rate").asDouble(),
                    lag == null || lag.isNull() ? Double.NaN : lag.asDouble());
            index.put(topic + "\u0000" + partition, j);
        }
        JsonNode members = instance.get("members");
        if (members != null && !members.isNull()) {
            for (JsonNode m : members) {
                if (m.isTextual()) {
                    builder.member(builder.consumer(m.asText()), Double.NaN);
                } else {
                    builder.member(builder.consumer(m.get("id").asText()), m.get("capacity").asDouble());
                }
            }
        }
        JsonNode previous = instance.get("previous");
        if (previous != null && !previous.isNull()) {
            previous.fields().forEachRemaining(entry -> {
                int c = builder.consumer(entry.getKey());
                builder.previousConsumer(c);
                for (JsonNode ref : entry.getValue()) {
                    Integer j = index.get(ref.get("topic").asText() + "\u0000" + ref.get("partition").asInt());
                    if (j != null) { // a partition that is gone
                        builder.previous(c, j);
                    }
                }
            });
        }
        Problem problem = builder.build();
        JsonNode params = instance.get("params");
        Map<String, Object> given = params == null || params.isNull() ? Map.of() : JSON.convertValue(params, Map.class);
        Outcome outcome = Algorithm.of(instance.get("algorithm").asText(), given).solve(problem);
        ObjectNode answer = JSON.createObjectNode();
        ObjectNode assignment = answer.putObject("assignment");
        for (int i = 0; i < outcome.consumerCount(); i++) {
            ArrayNode held = assignment.putArray(outcome.consumer(i));
            for (int j : outcome.partitions(i)) {
                held.addArray().add(problem.topic(j)).add(problem.partition(j));
            }
        }
        answer.put("rscore", outcome.rscore());
        answer.put("moves", outcome.moves());
        answer.put("bins_used", outcome.binsUsed());
        answer.set("outputs", JSON.valueToTree(outcome.outputs()));
        return answer;
    }
}
