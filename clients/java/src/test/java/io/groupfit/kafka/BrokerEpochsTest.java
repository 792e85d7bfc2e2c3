package io.groupfit.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import java.util.function.IntFunction;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.junit.jupiter.api.Test;

/**
 * GroupfitBrokerAssignor over a group's epochs, as the coordinator calls it (each epoch's current assignment is the
 * previous answer, an unchanged member's map handed back as the very object answered): every answer is the core's
 * MWF computed from scratch on the same input (zone-aware where the members and partitions have racks), whatever the
 * memo kept; a member whose partitions stay the same gets its very map back. The memo's previous-owner table is
 * renumbered and rewritten only for the members whose maps changed: an entry left stale (a changed member's old
 * partitions not cleared, or a changed member taken for unchanged) changes an answer here.
 */
class BrokerEpochsTest {
    /** A little above the mean load of 60 members: fewer need surplus bins (folded into them), more share. */
    private static final double CAPACITY = 440;
    private static final int PER_TOPIC = 1500;
    private static final Map<Uuid, String> TOPICS = Map.of(new Uuid(7, 1), "orders", new Uuid(7, 2), "payments");

    /** One epoch: members m[from] to m[to - 1], each one's rack (null: none), each partition's racks. */
    private record Epoch(int from, int to, IntFunction<String> memberRack, IntFunction<Set<String>> partitionRacks) {
        Epoch(int from, int to) {
            this(from, to, m -> null, p -> Set.of());
        }
    }

    @Test
    void everyEpochsAnswerIsTheCoresFromScratchAndUnchangedMembersKeepTheirMaps() {
        // the group forms; members leave one by one and in a crowd; join one by one and in a crowd; an epoch that
        // changes nothing
        runEpochs(new Epoch(0, 60), new Epoch(1, 60), new Epoch(2, 60), new Epoch(2, 61), new Epoch(2, 62),
                new Epoch(2, 75), new Epoch(2, 75), new Epoch(25, 75), new Epoch(25, 76), new Epoch(0, 80));
    }

    /**
     * Zone-aware epochs: the memo keeps the partitions' racks between calls, and each answer must still be the core's
     * from scratch on the racks of that very epoch: the same racks again; the partitions' leaders moved to other racks
     * (a stale memo would place by the old ones); one partition's racks changed; members in other racks; a member
     * in a rack no partition names; members without racks (rack-unaware) and back.
     */
    @Test
    void zoneAwareEpochsFollowTheRacksOfEachEpoch() {
        IntFunction<String> byThree = m -> "rack-" + m % 3;
        IntFunction<Set<String>> led = p -> Set.of("rack-" + p % 3);
        IntFunction<Set<String>> moved = p -> Set.of("rack-" + (p + 1) % 3);
        IntFunction<Set<String>> oneMoved = p -> p == PER_TOPIC - 1 ? Set.of("rack-0", "rack-2") : moved.apply(p);
        IntFunction<Set<String>> replicas = p -> p % 5 == 0 ? Set.of() : Set.of("rack-" + p % 3, "rack-" + (p + 1) % 3);
        runEpochs(new Epoch(0, 60, byThree, led), new Epoch(0, 60, byThree, led), new Epoch(1, 60, byThree, led),
                new Epoch(1, 60, byThree, moved), new Epoch(1, 61, byThree, moved), new Epoch(1, 61, byThree, oneMoved),
                new Epoch(1, 61, m -> "rack-" + (m + 1) % 3, oneMoved), new Epoch(1, 61, m -> m == 7 ? "rack-9"
                        : byThree.apply(m), oneMoved), new Epoch(1, 62, m -> null, oneMoved),
                new Epoch(0, 62, byThree, replicas), new Epoch(0, 62, byThree, led));
    }

    /**
     * The racks kept are used again for the very describer they were read from, and for another only while every
     * partition's racks are the same as it says.
     */
    @Test
    void theRacksKeptAreReadAgainWhenAnyPartitionsRacksChange() {
        Map<String, GroupfitBrokerAssignor.TopicRates> rates = new HashMap<>();
        for (String topic : TOPICS.values()) {
            double[] rate = new double[PER_TOPIC];
            java.util.Arrays.fill(rate, 1.0);
            rates.put(topic, new GroupfitBrokerAssignor.TopicRates(rate, new double[0]));
        }
        Uuid[] topicIds = TOPICS.keySet().stream().sorted(java.util.Comparator.comparing(TOPICS::get)).toArray(Uuid[]::new);
        GroupMemo.Table table = GroupMemo.table(null, new GroupfitBrokerAssignor.Knowledge(rates,
                Algorithm.of("mwf", Map.of()), null), topicIds, new int[] {PER_TOPIC, PER_TOPIC}, new int[0], TOPICS::get);
        SubscribedTopicDescriber describer = FakeGroupSpec.topics(PER_TOPIC, p -> Set.of("rack-" + p % 3));
        GroupMemo.Racks kept = GroupMemo.racks(null, table, describer);
        assertSame(kept, GroupMemo.racks(kept, table, describer));
        GroupMemo.Racks again = GroupMemo.racks(kept, table, FakeGroupSpec.topics(PER_TOPIC, p -> Set.of("rack-" + p % 3)));
        assertSame(kept.racks(), again.racks());
        int last = table.partitions().size() - 1;
        GroupMemo.Racks read = GroupMemo.racks(again, table, FakeGroupSpec.topics(PER_TOPIC,
                p -> p == PER_TOPIC - 1 ? Set.of("rack-0", "rack-1") : Set.of("rack-" + p % 3)));
        assertNotSame(kept.racks(), read.racks());
        assertTrue(read.racks().sameAs(last, Set.of("rack-0", "rack-1")));
        assertFalse(kept.racks().sameAs(last, Set.of("rack-0", "rack-1")));
        assertTrue(read.racks().sameAs(0, Set.of("rack-0")));
    }

    private static void runEpochs(Epoch... epochs) {
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
            Algorithm mwf = Algorithm.of("mwf", Map.of());
            Map<String, Map<Uuid, Set<Integer>>> current = new HashMap<>();
            for (Epoch epoch : epochs) {
                Map<String, Map<Uuid, Set<Integer>>> before = current;
                List<String> members = new ArrayList<>(everyone.subList(epoch.from(), epoch.to()));
                Map<String, String> racks = new HashMap<>();
                members.forEach(m -> {
                    String rack = epoch.memberRack().apply(Integer.parseInt(m.substring(1)));
                    if (rack != null) {
                        racks.put(m, rack);
                    }
                });
                Map<TopicPartition, List<String>> partitionRacks = new HashMap<>();
                partitions.forEach(tp -> partitionRacks.put(tp, List.copyOf(epoch.partitionRacks().apply(tp.partition()))));
                // a describer of its own per epoch, as the coordinator makes one per call
                SubscribedTopicDescriber describer = FakeGroupSpec.topics(PER_TOPIC, epoch.partitionRacks());
                GroupAssignment answer = assignor.assign(new FakeGroupSpec(members, TOPICS.keySet(), before,
                        member -> Optional.empty(), member -> Optional.ofNullable(racks.get(member))), describer);
                assertEquals("core", assignor.lastReport().source());
                assertEquals(!racks.isEmpty() && partitionRacks.values().stream().anyMatch(r -> !r.isEmpty()),
                        assignor.lastReport().crossZoneRate() != null, "zone-aware exactly when racks are known");

                // the core's input is what the spec says: the present members' current assignments
                Map<TopicPartition, String> previous = new HashMap<>();
                for (String member : members) {
                    before.getOrDefault(member, Map.of()).forEach((topicId, ps) -> ps.forEach(p ->
                            previous.put(new TopicPartition(TOPICS.get(topicId), p), member)));
                }
                List<String> natural = new ArrayList<>(members);
                natural.sort(Natural::compare);
                Map<TopicPartition, String> expected = LocalCore.solve(mwf, CAPACITY, natural, Map.of(), racks,
                        partitions, rates, partitionRacks, previous);
                Map<TopicPartition, String> got = new HashMap<>();
                answer.members().forEach((member, assigned) -> assigned.partitions().forEach((topicId, ps) ->
                        ps.forEach(p -> got.put(new TopicPartition(TOPICS.get(topicId), p), member))));
                assertEquals(expected, got, "the epoch of members " + members + " in racks " + racks);

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
