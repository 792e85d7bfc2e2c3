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
 * [id | {"id", "capacity", "rack"}] | null, "previous": {consumer: [{"topic", "partition"}]}}}, a partition's
 * {@code "racks"} and without members the previous consumers' {@code "previous_racks": {consumer: rack}} where the
 * instance is zone-aware; the answer {@code {"assignment": {consumer: [[topic, partition], ...]}, "rscore",
 * "moves", "bins_used", "outputs"}}, for a zone-aware problem with {@code "racks": {consumer: rack | null},
 * "cross_zone": {consumer: rate}, "cross_zone_rate"}, or {@code {"error": message}}.
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
            JsonNode racks = p.get("racks");
            if (racks != null && !racks.isNull()) {
                java.util.List<String> listed = new java.util.ArrayList<>();
                racks.forEach(rack -> listed.add(rack.asText()));
                builder.racks(j, listed);
            }
        }
        JsonNode members = instance.get("members");
        if (members != null && !members.isNull()) {
            for (JsonNode m : members) {
                if (m.isTextual()) {
                    builder.member(builder.consumer(m.asText()), Double.NaN);
                } else {
                    JsonNode capacity = m.get("capacity");
                    int c = builder.consumer(m.get("id").asText());
                    builder.member(c, capacity == null || capacity.isNull() ? Double.NaN : capacity.asDouble());
                    JsonNode rack = m.get("rack");
                    if (rack != null && !rack.isNull()) {
                        builder.rack(c, rack.asText());
                    }
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
        JsonNode previousRacks = instance.get("previous_racks");
        if (previousRacks != null && !previousRacks.isNull()) {
            previousRacks.fields().forEachRemaining(e -> builder.rack(builder.consumer(e.getKey()), e.getValue().asText()));
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
        ZoneReport zones = outcome.zones();
        if (zones != null) {
            ObjectNode racks = answer.putObject("racks");
            ObjectNode cross = answer.putObject("cross_zone");
            for (int i = 0; i < outcome.consumerCount(); i++) {
                racks.put(outcome.consumer(i), zones.rack(i));
                cross.put(outcome.consumer(i), zones.crossZone(i));
            }
            answer.put("cross_zone_rate", zones.crossZoneRate());
        }
        return answer;
    }
}
