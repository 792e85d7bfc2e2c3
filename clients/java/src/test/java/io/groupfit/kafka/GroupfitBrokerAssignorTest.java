package io.groupfit.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class GroupfitBrokerAssignorTest {
    static final Uuid TOPIC = new Uuid(1, 2);

    /** Members subscribed to TOPIC, holding `current` partitions of it, with instance ids "instance-" + member id. */
    static GroupSpec spec(Map<String, Set<Integer>> current) {
        Map<String, Map<Uuid, Set<Integer>>> held = new HashMap<>();
        current.forEach((member, partitions) -> held.put(member, Map.of(TOPIC, partitions)));
        return new FakeGroupSpec(List.copyOf(current.keySet()), Set.of(TOPIC), held,
                member -> Optional.of("instance-" + member));
    }

    static SubscribedTopicDescriber topic(int partitions) {
        return FakeGroupSpec.topics(partitions);
    }

    static Map<String, Set<Integer>> owned(GroupAssignment assignment) {
        Map<String, Set<Integer>> result = new TreeMap<>();
        assignment.members().forEach((m, a) -> result.put(m, a.partitions().getOrDefault(TOPIC, Set.of())));
        return result;
    }

    private FakeService service;
    private GroupfitBrokerAssignor assignor;

    @BeforeEach
    void start() throws Exception {
        service = new FakeService();
        service.ratesFor("orders", 4, 10);
        service.assign = request -> new FakeService.Reply(200, FakeService.answer(
                "{\"instance-a\":[{\"topic\":\"orders\",\"partition\":0}],\"instance-b\":[{\"topic\":\"orders\","
                        + "\"partition\":1},{\"topic\":\"orders\",\"partition\":2},{\"topic\":\"orders\",\"partition\":3}]}"));
        assignor = new GroupfitBrokerAssignor();
        assignor.configure(Map.of(GroupfitBrokerAssignor.URL, service.url(), GroupfitBrokerAssignor.CAPACITY, "100",
                GroupfitBrokerAssignor.TIMEOUT_MS, "1000", "listeners", "PLAINTEXT://127.0.0.1:1"));
        assignor.warm.get(); // a broker configures its assignors long before the first group forms
    }

    @AfterEach
    void stop() {
        assignor.close();
        service.close();
    }

    @Test
    void anUnknownGroupGetsABalancedStickyAssignmentAtOnce() {
        GroupSpec spec = spec(Map.of("a", Set.of(0, 1, 2, 3), "b", Set.of(), "c", Set.of()));
        GroupAssignment assignment = assignor.assign(spec, topic(5));
        assertEquals(Map.of("a", Set.of(0, 1), "b", Set.of(2, 4), "c", Set.of(3)), owned(assignment));
        assertEquals("fallback", assignor.lastReport().source());
        assertTrue(assignor.lastReport().reason().contains("not known"), assignor.lastReport().reason());
        assertEquals(0, service.assignRequests.size());
    }

    @Test
    void aKnownGroupGetsTheServicesAnswerKeyedByInstanceId() {
        assignor.remember(Map.of("a", "g1", "b", "g1"), Map.of(TOPIC, "orders"));
        GroupAssignment assignment = assignor.assign(spec(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3))), topic(4));
        assertEquals(Map.of("a", Set.of(0), "b", Set.of(1, 2, 3)), owned(assignment));
        assertEquals("service", assignor.lastReport().source());
        var sent = service.assignRequests.get(0);
        assertEquals("g1", sent.get("group").asText());
        assertEquals("[\"instance-a\",\"instance-b\"]", sent.get("members").toString());
        assertEquals("orders", sent.get("previous").get("instance-b").get(0).get("topic").asText());
    }

    @Test
    void aMemberConfiguredWithItsOwnCapacityIsSentWithIt() throws Exception {
        assignor.configure(Map.of(GroupfitBrokerAssignor.URL, service.url(), GroupfitBrokerAssignor.CAPACITY, "100",
                GroupfitBrokerAssignor.MEMBER_CAPACITIES, "instance-b:250, other:7",
                GroupfitBrokerAssignor.TIMEOUT_MS, "1000", "listeners", "PLAINTEXT://127.0.0.1:1"));
        assignor.warm.get();
        assignor.remember(Map.of("a", "g1", "b", "g1"), Map.of(TOPIC, "orders"));
        assignor.assign(spec(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3))), topic(4));
        assertEquals("service", assignor.lastReport().source());
        var sent = service.assignRequests.get(0);
        assertEquals("[\"instance-a\",{\"id\":\"instance-b\",\"capacity\":250.0}]", sent.get("members").toString());
        assertEquals(100.0, sent.get("capacity").asDouble());
        assertEquals(Map.of("a:b:c", 5.0, "d", 1.5), GroupfitBrokerAssignor.memberCapacities("a:b:c:5,d:1.5,"));
        for (String wrong : List.of("a", "a:0", "a:x", ":4")) {
            assertThrows(ConfigException.class, () -> GroupfitBrokerAssignor.memberCapacities(wrong), wrong);
        }
    }

    @Test
    void aSlowServiceIsCutAtTheBoundAndItsLateAnswerServesTheNextChange() throws Exception {
        assignor.configure(Map.of(GroupfitBrokerAssignor.URL, service.url(), GroupfitBrokerAssignor.CAPACITY, "100",
                GroupfitBrokerAssignor.TIMEOUT_MS, "20", "listeners", "PLAINTEXT://127.0.0.1:1"));
        assignor.warm.get();
        assignor.remember(Map.of("a", "g1", "b", "g1"), Map.of(TOPIC, "orders"));
        assignor.assign(spec(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3))), topic(4)); // warms the rates cache
        for (int i = 0; i < 100 && !assignor.latest.containsKey("g1"); i++) {
            Thread.sleep(20); // its answer, on time or late, is kept
        }
        service.delayMs = 300;
        GroupAssignment first = assignor.assign(spec(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3))), topic(4));
        assertEquals("fallback", assignor.lastReport().source());
        assertTrue(assignor.lastReport().micros() < 200_000, "held " + assignor.lastReport().micros() + " µs");
        // The newest answer groupfit gave for these members (from the warm-up call above) is kept.
        assertEquals(Map.of("a", Set.of(0), "b", Set.of(1, 2, 3)), owned(first));
        Thread.sleep(600); // the late answer arrives
        Map<String, Set<Integer>> before = new HashMap<>(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3), "c", Set.of()));
        GroupAssignment next = assignor.assign(spec(before), topic(4));
        // c joined: balanced counts over the late answer (a: 0, b: 1 2 3), so c takes one of b's.
        assertEquals(Map.of("a", Set.of(0), "b", Set.of(1, 2), "c", Set.of(3)), owned(next));
    }

    @Test
    void bootstrapIsTheBrokersOwnClientListener() {
        assertEquals("127.0.0.1:9092", GroupfitBrokerAssignor.bootstrap(Map.of(
                "listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                "controller.listener.names", "CONTROLLER")));
        assertEquals("h:1", GroupfitBrokerAssignor.bootstrap(Map.of("listeners", "PLAINTEXT://:9",
                "advertised.listeners", "PLAINTEXT://h:1")));
        assertEquals("x:2", GroupfitBrokerAssignor.bootstrap(Map.of(GroupfitBrokerAssignor.BOOTSTRAP_SERVERS, "x:2")));
    }
}
