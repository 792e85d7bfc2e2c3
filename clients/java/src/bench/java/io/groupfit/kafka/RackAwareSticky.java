package io.groupfit.kafka;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupAssignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * Kafka's rack-aware CooperativeStickyAssignor (KIP-881) on a group that bench/zones_kafka.py describes, in this JVM:
 * the members with their client.rack (Subscription's rack id), one topic whose partitions' replicas sit on brokers
 * with a broker.rack. It is rate-unaware, so one assignment serves every measurement of a stream with the same
 * members: the first round (nothing owned) and, cooperative, the follow-ups with what the round before gave (a
 * partition that moves is given once its owner revoked it) until every partition is given; prints {"assignment":
 * {member: [partition, ...]}, "micros": all rounds, "rounds": n} as JSON.
 *
 * <p>Input (a JSON file, the only argument): {"topic": t, "brokers": {"0": "eu-1a", ...}, "replicas": [[leader,
 * follower, ...], ...] per partition, "members": {"m0": "eu-1a", ...}}. Kafka's assignor counts a partition as in
 * a member's rack when any of its replicas is: give it the leader alone for consumers that fetch from the leader.
 */
public final class RackAwareSticky {
    private RackAwareSticky() {}

    public static void main(String[] args) throws Exception {
        JsonNode input = GroupfitClient.JSON.readTree(new File(args[0]));
        String topic = input.get("topic").asText();
        Map<Integer, Node> nodes = new TreeMap<>();
        input.get("brokers").fields().forEachRemaining(broker -> {
            int id = Integer.parseInt(broker.getKey());
            nodes.put(id, new Node(id, "broker-" + id, 9092, broker.getValue().asText()));
        });
        List<PartitionInfo> partitions = new ArrayList<>();
        JsonNode replicas = input.get("replicas");
        for (int p = 0; p < replicas.size(); p++) {
            Node[] held = new Node[replicas.get(p).size()];
            for (int r = 0; r < held.length; r++) {
                held[r] = nodes.get(replicas.get(p).get(r).asInt());
            }
            partitions.add(new PartitionInfo(topic, p, held[0], held, held));
        }
        Cluster cluster = new Cluster("bench", List.copyOf(nodes.values()), partitions, Set.of(), Set.of());
        Map<String, String> racks = new TreeMap<>();
        input.get("members").fields().forEachRemaining(member -> racks.put(member.getKey(), member.getValue().asText()));

        CooperativeStickyAssignor assignor = new CooperativeStickyAssignor();
        Map<String, List<TopicPartition>> owned = new HashMap<>();
        long started = System.nanoTime();
        int given = 0;
        int generation = 0;
        while (given < partitions.size()) { // until the revocations are done and every partition is given
            if (++generation > 10) {
                throw new IllegalStateException("no complete assignment after 10 rounds");
            }
            Map<String, Subscription> subscriptions = new HashMap<>();
            for (Map.Entry<String, String> member : racks.entrySet()) {
                subscriptions.put(member.getKey(), new Subscription(List.of(topic), null,
                        owned.getOrDefault(member.getKey(), List.of()), generation - 1, Optional.of(member.getValue())));
            }
            GroupAssignment assignment = assignor.assign(cluster, new GroupSubscription(subscriptions));
            owned.clear();
            assignment.groupAssignment().forEach((member, held) -> owned.put(member, held.partitions()));
            given = owned.values().stream().mapToInt(List::size).sum();
        }
        long micros = (System.nanoTime() - started) / 1000;
        ObjectNode out = GroupfitClient.JSON.createObjectNode();
        ObjectNode assignment = out.putObject("assignment");
        owned.entrySet().stream().sorted(Map.Entry.comparingByKey()).forEach(member -> {
            var held = assignment.putArray(member.getKey());
            member.getValue().stream().mapToInt(TopicPartition::partition).sorted().forEach(held::add);
        });
        out.put("micros", micros);
        out.put("rounds", generation);
        System.out.println(GroupfitClient.JSON.writeValueAsString(out));
    }
}
