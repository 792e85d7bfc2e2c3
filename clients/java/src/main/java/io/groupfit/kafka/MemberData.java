package io.groupfit.kafka;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import org.apache.kafka.common.TopicPartition;

/**
 * What a member of a classic group says about itself in its subscription user data:
 * {@code {"version":1,"id":"orders-0","capacity":100.0,"generation":7,"owned":{"orders":[0,3]}}}.
 *
 * <p>The version lets the format grow: a later version only adds fields, so a reader takes the fields it knows
 * from any version at or above 1 and ignores the rest (a leader that is one release behind still assigns).
 * Data that is not such a document (another assignor's, a version below 1, no identity) decodes to empty: that
 * member is then known by its member id.
 */
public record MemberData(String identity, Double capacity, List<TopicPartition> owned, int generation) {
    public static final int VERSION = 1;

    public ByteBuffer encode() {
        ObjectNode root = GroupfitClient.JSON.createObjectNode();
        root.put("version", VERSION);
        root.put("id", identity);
        if (capacity != null) {
            root.put("capacity", capacity);
        }
        root.put("generation", generation);
        Map<String, List<Integer>> byTopic = new TreeMap<>();
        for (TopicPartition tp : owned) {
            byTopic.computeIfAbsent(tp.topic(), t -> new ArrayList<>()).add(tp.partition());
        }
        ObjectNode ownedNode = root.putObject("owned");
        byTopic.forEach((topic, partitions) -> {
            ArrayNode array = ownedNode.putArray(topic);
            partitions.stream().sorted().forEach(array::add);
        });
        try {
            return ByteBuffer.wrap(GroupfitClient.JSON.writeValueAsBytes(root));
        } catch (IOException e) {
            throw new IllegalStateException("cannot encode member data", e);
        }
    }

    public static Optional<MemberData> decode(ByteBuffer data) {
        if (data == null || !data.hasRemaining()) {
            return Optional.empty();
        }
        byte[] bytes = new byte[data.remaining()];
        data.duplicate().get(bytes);
        try {
            JsonNode root = GroupfitClient.JSON.readTree(bytes);
            if (root == null || !root.isObject() || !root.path("version").canConvertToInt()
                    || root.path("version").asInt() < 1 || !root.path("id").isTextual()
                    || root.path("id").asText().isEmpty()) {
                return Optional.empty();
            }
            JsonNode capacity = root.path("capacity");
            Double ownCapacity = capacity.isNumber() && capacity.asDouble() > 0 ? capacity.asDouble() : null;
            List<TopicPartition> owned = new ArrayList<>();
            Iterator<Map.Entry<String, JsonNode>> topics = root.path("owned").fields();
            while (topics.hasNext()) {
                Map.Entry<String, JsonNode> topic = topics.next();
                for (JsonNode partition : topic.getValue()) {
                    if (partition.canConvertToInt()) {
                        owned.add(new TopicPartition(topic.getKey(), partition.asInt()));
                    }
                }
            }
            int generation = root.path("generation").canConvertToInt() ? root.path("generation").asInt() : -1;
            return Optional.of(new MemberData(root.path("id").asText(), ownCapacity, owned, generation));
        } catch (IOException e) {
            return Optional.empty();
        }
    }
}
