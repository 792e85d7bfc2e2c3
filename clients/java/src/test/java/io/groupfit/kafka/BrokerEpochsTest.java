package io.groupfit.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.groupfit.kafka.core.Algorithm;
import io.groupfit.kafka.core.Natural;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.junit.jupiter.api.Test;

/**
 * GroupfitBrokerAssignor over a group's epochs, as the coordinator calls it (each epoch's current assignment is the
 * previous answer, an unchanged member's map handed back as the very object answered): every answer is the core's
 * MWF computed from scratch on the same input, whatever the memo kept; a member whose partitions stay the same gets
 * its very map back.
 */
class BrokerEpochsTest {
    /** A little above the mean load of 60 members: fewer need surplus bins (folded into them), more share. */
    private static final double CAPACITY = 440;
    private static final int PER_TOPIC = 1500;
    private static final Map<Uuid, String> TOPICS = Map.of(new Uuid(7, 1), "orders", new Uuid(7, 2), "payments");

    @Test
    void everyEpochsAnswerIsTheCoresFromScratchAndUnchangedMembersKeepTheirMaps() {
        Random random = new Random(7);
        List<Api.PartitionRate> stored = new ArrayList<>();
        List<TopicPartition> partitions = new ArrayList<>();
        Map<TopicPartition, Api.PartitionRate> rates = new HashMap<>();
        for (String topic : new TreeSet<>(TOPICS.values())) {
            for (int p = 0; p < PER_TOPIC; p++) {
                double u = random.nextDouble();
                Api.PartitionRate rate = new Api.PartitionRate(topic, p, Math.round((1 + 30 * u * u * u) * 100) / 100.0,
                        null);
                stored.add(rate);
                partitions.add(new TopicPartition(topic, p));
                rates.put(new TopicPartition(topic, p), rate);
            }
        }
        List<String> everyone = new ArrayList<>();
        for (int m = 0; m < 80; m++) {
            everyone.add("m" + m);
        }
        Map<String, String> groups = new HashMap<>();
        everyone.forEach(member -> groups.put(member, "g"));
        try (GroupfitBrokerAssignor assignor = new GroupfitBrokerAssignor() {
            @Override
            void report(String group, java.util.function.Supplier<Api.AssignRequest> request) {
                // no service here: the answer is checked against the core instead
            }
        }) {
            assignor.configure(Map.of(GroupfitBrokerAssignor.URL, "http://127.0.0.1:1", GroupfitBrokerAssignor.CAPACITY,
                    String.valueOf(CAPACITY), GroupfitBrokerAssignor.BOOTSTRAP_SERVERS, "127.0.0.1:1",
                    GroupfitBrokerAssignor.REFRESH_MS, "3600000"));
            assignor.remember(groups, TOPICS);
            assignor.remember("g", new Api.StoredRates("g", stored, "x", "x"), null);
            SubscribedTopicDescriber describer = FakeGroupSpec.topics(PER_TOPIC);
            Algorithm mwf = Algorithm.of("mwf", Map.of());
            // the group forms; members leave one by one and in a crowd; join one by one and in a crowd; an epoch
            // that changes nothing (members m[from] to m[to - 1])
            int[][] epochs = {{0, 60}, {1, 60}, {2, 60}, {2, 61}, {2, 62}, {2, 75}, {2, 75}, {25, 75}, {25, 76}, {0, 80}};
            Map<String, Map<Uuid, Set<Integer>>> current = new HashMap<>();
            for (int[] epoch : epochs) {
                Map<String, Map<Uuid, Set<Integer>>> before = current;
                List<String> members = new ArrayList<>(everyone.subList(epoch[0], epoch[1]));
                GroupAssignment answer = assignor.assign(new FakeGroupSpec(members, TOPICS.keySet(), before,
                        member -> Optional.empty()), describer);
                assertEquals("core", assignor.lastReport().source());

                // the core's input is what the spec says: the present members' current assignments
                Map<TopicPartition, String> previous = new HashMap<>();
                for (String member : members) {
                    before.getOrDefault(member, Map.of()).forEach((topicId, ps) -> ps.forEach(p ->
                            previous.put(new TopicPartition(TOPICS.get(topicId), p), member)));
                }
                List<String> natural = new ArrayList<>(members);
                natural.sort(Natural::compare);
                Map<TopicPartition, String> expected = LocalCore.solve(mwf, CAPACITY, natural, Map.of(), Map.of(),
                        partitions, rates, Map.of(), previous);
                Map<TopicPartition, String> got = new HashMap<>();
                answer.members().forEach((member, assigned) -> assigned.partitions().forEach((topicId, ps) ->
                        ps.forEach(p -> got.put(new TopicPartition(TOPICS.get(topicId), p), member))));
                assertEquals(expected, got, "the epoch of members " + members);

                Map<String, Map<Uuid, Set<Integer>>> next = new HashMap<>();
                answer.members().forEach((member, assigned) -> {
                    Map<Uuid, Set<Integer>> was = before.get(member);
                    if (was != null && was.equals(assigned.partitions())) {
                        assertSame(was, assigned.partitions(), member + "'s unchanged map is handed back");
                    }
                    next.put(member, assigned.partitions());
                });
                current = next;
            }
        }
    }
}
