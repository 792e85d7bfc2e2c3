package io.groupfit.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
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

    /** A client that counts, per thread, the calls made through it. */
    static final class CountingClient extends GroupfitClient {
        final Map<String, AtomicInteger> callsByThread = new ConcurrentHashMap<>();

        CountingClient(String url) {
            super(url, null, Duration.ofSeconds(2));
        }

        private void count() {
            callsByThread.computeIfAbsent(Thread.currentThread().getName(), t -> new AtomicInteger()).incrementAndGet();
        }

        @Override
        public CompletableFuture<Api.StoredRates> rates(String group, Duration timeout) {
            count();
            return super.rates(group, timeout);
        }

        @Override
        public CompletableFuture<Api.GroupState> group(String group, Duration timeout) {
            count();
            return super.group(group, timeout);
        }

        @Override
        public CompletableFuture<Api.AssignResponse> assign(Api.AssignRequest body, Duration timeout) {
            count();
            return super.assign(body, timeout);
        }
    }

    private FakeService service;
    private CountingClient client;
    private GroupfitBrokerAssignor assignor;

    private GroupfitBrokerAssignor assignor(Map<String, String> settings) {
        GroupfitBrokerAssignor made = new GroupfitBrokerAssignor() {
            @Override
            GroupfitClient client(String url, String token) {
                client = new CountingClient(url);
                return client;
            }
        };
        Map<String, String> configs = new HashMap<>(Map.of(GroupfitBrokerAssignor.URL, service.url(),
                "listeners", "PLAINTEXT://127.0.0.1:1"));
        configs.putAll(settings);
        made.configure(configs);
        return made;
    }

    /** What the background learns, read here on a thread of its own (as the background thread would). */
    private void learn(String group) throws Exception {
        assignor.remember(Map.of("a", group, "b", group, "c", group), Map.of(TOPIC, "orders"));
        CompletableFuture.runAsync(() -> assignor.refresh(group)).get(10, TimeUnit.SECONDS);
    }

    @BeforeEach
    void start() throws Exception {
        service = new FakeService();
        // 70 and 50 cannot share a member of 100: counts would put them together.
        service.ratesFor("orders", 70, 50, 20, 10);
        service.assign = request -> new FakeService.Reply(200, FakeService.answer("{}"));
        assignor = assignor(Map.of(GroupfitBrokerAssignor.CAPACITY, "100"));
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
    void aGroupWithoutStoredRatesGetsTheUniformStickyAssignment() throws Exception {
        service.ratesStatus = 404;
        service.rates = "{\"error\":{\"code\":\"group_not_found\",\"message\":\"no such group\"}}";
        learn("g1");
        GroupAssignment assignment = assignor.assign(spec(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3))), topic(4));
        assertEquals(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3)), owned(assignment));
        assertEquals("no rates are known for the group yet", assignor.lastReport().reason());
    }

    @Test
    void aKnownGroupIsAssignedByRateInTheBrokerAndTheAnswerIsReported() throws Exception {
        learn("g1");
        GroupAssignment assignment = assignor.assign(spec(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3))), topic(4));
        // MWF: instance-a (120) keeps 70; b's 10 and 20 migrate beside it (100); the 50 goes to b.
        assertEquals(Map.of("a", Set.of(0, 2, 3), "b", Set.of(1)), owned(assignment));
        GroupfitBrokerAssignor.Report report = assignor.lastReport();
        assertEquals("core", report.source());
        assertEquals("mwf", report.algorithm());
        assertEquals(3, report.moves());
        assertEquals(0.8, report.rscore(), 1e-12);
        // The report: POST /v1/assign with the assignment given, sent by another thread.
        for (int i = 0; i < 2000 && service.assignRequests.isEmpty(); i++) {
            Thread.sleep(10);
        }
        JsonNode sent = service.assignRequests.get(0);
        assertEquals("g1", sent.get("group").asText());
        assertEquals("mwf", sent.get("algorithm").asText());
        assertEquals(100.0, sent.get("capacity").asDouble());
        assertEquals("[\"instance-a\",\"instance-b\"]", sent.get("members").toString());
        assertEquals(70.0, sent.get("partitions").get(0).get("rate").asDouble());
        assertEquals("{\"instance-a\":[{\"topic\":\"orders\",\"partition\":0},{\"topic\":\"orders\",\"partition\":1}],"
                + "\"instance-b\":[{\"topic\":\"orders\",\"partition\":2},{\"topic\":\"orders\",\"partition\":3}]}",
                sorted(sent.get("previous")));
        assertEquals("{\"instance-a\":[{\"topic\":\"orders\",\"partition\":0},{\"topic\":\"orders\",\"partition\":2},"
                + "{\"topic\":\"orders\",\"partition\":3}],\"instance-b\":[{\"topic\":\"orders\",\"partition\":1}]}",
                sorted(sent.get("assignment")));
        assertFalse(sent.has("params"));
    }

    /** consumer → its refs sorted by partition, as JSON. */
    private static String sorted(JsonNode byConsumer) {
        Map<String, List<String>> result = new TreeMap<>();
        byConsumer.fields().forEachRemaining(e -> {
            List<JsonNode> refs = new java.util.ArrayList<>();
            e.getValue().forEach(refs::add);
            refs.sort((x, y) -> Integer.compare(x.get("partition").asInt(), y.get("partition").asInt()));
            result.put(e.getKey(), refs.stream().map(JsonNode::toString).toList());
        });
        StringBuilder json = new StringBuilder("{");
        result.forEach((k, v) -> json.append(json.length() > 1 ? "," : "").append('"').append(k).append("\":")
                .append(v.toString().replace(", ", ",")));
        return json.append('}').toString();
    }

    @Test
    void aMemberConfiguredWithItsOwnCapacityTakesMore() throws Exception {
        assignor.close();
        assignor = assignor(Map.of(GroupfitBrokerAssignor.CAPACITY, "100",
                GroupfitBrokerAssignor.MEMBER_CAPACITIES, "instance-b:250, other:7"));
        learn("g1");
        GroupAssignment assignment = assignor.assign(spec(Map.of("a", Set.of(), "b", Set.of())), topic(4));
        // b (250) is opened first, as the largest member, and takes all 150.
        assertEquals(Map.of("a", Set.of(), "b", Set.of(0, 1, 2, 3)), owned(assignment));
        for (int i = 0; i < 2000 && service.assignRequests.isEmpty(); i++) {
            Thread.sleep(10);
        }
        assertEquals("[\"instance-a\",{\"id\":\"instance-b\",\"capacity\":250.0}]",
                service.assignRequests.get(0).get("members").toString());
        assertEquals(Map.of("a:b:c", 5.0, "d", 1.5), GroupfitBrokerAssignor.memberCapacities("a:b:c:5,d:1.5,"));
        for (String wrong : List.of("a", "a:0", "a:x", ":4")) {
            assertThrows(ConfigException.class, () -> GroupfitBrokerAssignor.memberCapacities(wrong), wrong);
        }
    }

    @Test
    void theGroupsStoredAlgorithmAndCapacityAreUsed() throws Exception {
        assignor.close();
        assignor = assignor(Map.of()); // no capacity of its own: the group's stored one
        service.stored("bfd", 200);
        learn("g1");
        GroupAssignment assignment = assignor.assign(spec(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3))), topic(4));
        // BFD at 200: 70 → instance-a, then 50, 20 and 10 into the fullest bin that fits: everything on a.
        assertEquals(Map.of("a", Set.of(0, 1, 2, 3), "b", Set.of()), owned(assignment));
        assertEquals("bfd", assignor.lastReport().algorithm());
        service.stored("repack", 200); // not one the core runs: the configured one (mwf)
        CompletableFuture.runAsync(() -> assignor.refresh("g1")).get(10, TimeUnit.SECONDS);
        assignor.assign(spec(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3))), topic(4));
        assertEquals("mwf", assignor.lastReport().algorithm());
        assertThrows(ConfigException.class, () -> GroupfitBrokerAssignor.algorithm("mwf", "{\"max_move\": 1}"));
        assertThrows(ConfigException.class, () -> GroupfitBrokerAssignor.algorithm("repack", ""));
        assertEquals(Map.of("max_rscore", 0.5),
                GroupfitBrokerAssignor.algorithm("mwf", "{\"max_rscore\": 0.5}").params());
    }

    @Test
    void assignNeverCallsTheServiceOnItsThreadSoAHungOrStoppedServiceChangesNothing() throws Exception {
        learn("g1");
        Map<String, Set<Integer>> before = Map.of("a", Set.of(0, 1), "b", Set.of(2, 3));
        assertHungOrStoppedServiceChangesNothing(() -> assignor.assign(spec(before), topic(4)));
        // Calls were made (the reads, the reports), none of them on a thread that called assign().
        assertTrue(client.callsByThread.values().stream().mapToInt(AtomicInteger::get).sum() >= 3,
                client.callsByThread.toString());
    }

    /**
     * The answer of {@code assign} with the service up, then hung (every request waits until the test ends), then
     * stopped: the same each time, as computed in the core, and no call made on a thread that called assign().
     */
    private Map<String, Set<Integer>> assertHungOrStoppedServiceChangesNothing(Supplier<GroupAssignment> assign)
            throws Exception {
        Map<String, Set<Integer>> answer = owned(assign.get());
        service.gate = new CountDownLatch(1);
        Thread caller = new Thread(() -> {
            for (int i = 0; i < 20; i++) {
                assertEquals(answer, owned(assign.get()));
                assertEquals("core", assignor.lastReport().source());
            }
        }, "coordinator");
        caller.start();
        caller.join(30_000);
        assertFalse(caller.isAlive(), "assign() waited on the hung service");
        service.server.stop(0);
        for (int i = 0; i < 20; i++) {
            assertEquals(answer, owned(assign.get()));
        }
        assertFalse(client.callsByThread.containsKey("coordinator"), client.callsByThread.toString());
        assertFalse(client.callsByThread.containsKey(Thread.currentThread().getName()),
                client.callsByThread.toString());
        return answer;
    }

    /** a in rack x, b in rack y, c without one; partitions 0 and 2 have replicas in x (and z), 1 and 3 in y. */
    private static GroupSpec racked(Map<String, Set<Integer>> current) {
        Map<String, Map<Uuid, Set<Integer>>> held = new HashMap<>();
        current.forEach((member, partitions) -> held.put(member, Map.of(TOPIC, partitions)));
        Map<String, String> racks = Map.of("a", "x", "b", "y");
        return new FakeGroupSpec(List.copyOf(new java.util.TreeSet<>(current.keySet())), Set.of(TOPIC), held,
                member -> Optional.of("instance-" + member), member -> Optional.ofNullable(racks.get(member)));
    }

    private static final SubscribedTopicDescriber RACKED = FakeGroupSpec.topics(4,
            p -> p % 2 == 0 ? Set.of("z", "x") : Set.of("y"));

    @Test
    void withRacksTheCoreComputesTheZoneAwareAnswerAndTheReportCarriesTheRacks() throws Exception {
        learn("g1");
        GroupAssignment assignment = assignor.assign(
                racked(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3), "c", Set.of())), RACKED);
        // zone-aware MWF (the service's answer to the same request): each partition on a member of its racks;
        // without racks MWF gives a {0, 2, 3} and b {1} (the next test)
        assertEquals(Map.of("a", Set.of(0, 2), "b", Set.of(1, 3), "c", Set.of()), owned(assignment));
        assertEquals("core", assignor.lastReport().source());
        assertEquals("mwf", assignor.lastReport().algorithm());
        assertEquals(0.0, assignor.lastReport().crossZoneRate());
        for (int i = 0; i < 2000 && service.assignRequests.isEmpty(); i++) {
            Thread.sleep(10);
        }
        assertEquals(1, service.assignRequests.size()); // the report alone: nothing was asked
        JsonNode report = service.assignRequests.get(0);
        assertFalse(report.has("dry_run"));
        assertEquals("[{\"id\":\"instance-a\",\"rack\":\"x\"},{\"id\":\"instance-b\",\"rack\":\"y\"},\"instance-c\"]",
                report.get("members").toString());
        List<String> racks = new java.util.ArrayList<>();
        report.get("partitions").forEach(p -> racks.add(p.get("racks").toString()));
        assertEquals(List.of("[\"x\",\"z\"]", "[\"y\"]", "[\"x\",\"z\"]", "[\"y\"]"), racks);
        assertEquals("{\"instance-a\":[{\"topic\":\"orders\",\"partition\":0},{\"topic\":\"orders\",\"partition\":2}],"
                + "\"instance-b\":[{\"topic\":\"orders\",\"partition\":1},{\"topic\":\"orders\",\"partition\":3}],"
                + "\"instance-c\":[]}", sorted(report.get("assignment")));
    }

    @Test
    void withoutRacksTheSameGroupGetsTheRackUnawareAnswer() throws Exception {
        learn("g1");
        GroupAssignment assignment = assignor.assign(spec(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3))), topic(4));
        assertEquals(Map.of("a", Set.of(0, 2, 3), "b", Set.of(1)), owned(assignment));
        assertEquals(null, assignor.lastReport().crossZoneRate());
    }

    @Test
    void aZoneAwareGroupMakesNoServiceCallOnTheCallingThreadHungOrStopped() throws Exception {
        learn("g1");
        Map<String, Set<Integer>> before = Map.of("a", Set.of(0, 1), "b", Set.of(2, 3));
        Map<String, Set<Integer>> answer = assertHungOrStoppedServiceChangesNothing(
                () -> assignor.assign(racked(before), RACKED));
        assertEquals(Map.of("a", Set.of(0, 2), "b", Set.of(1, 3)), answer); // zone-aware
        assertEquals(0.0, assignor.lastReport().crossZoneRate());
    }

    @Test
    void aZoneAwareGroupWithAStoredAlgorithmTheCoreDoesNotRunRunsTheConfiguredOne() throws Exception {
        service.stored("repack", 100);
        learn("g1");
        assignor.assign(racked(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3))), RACKED);
        assertEquals("core", assignor.lastReport().source());
        assertEquals("mwf", assignor.lastReport().algorithm()); // as for a group without racks
        assertEquals(0.0, assignor.lastReport().crossZoneRate());
        for (int i = 0; i < 2000 && service.assignRequests.isEmpty(); i++) {
            Thread.sleep(10);
        }
        assertTrue(service.assignRequests.stream().allMatch(r -> r.has("assignment")),
                service.assignRequests.toString());
    }

    @Test
    void racksOnOneSideOnlyChangeNothing() throws Exception {
        learn("g1");
        // Partitions with racks, members without: computed in the broker, rack-free.
        assignor.assign(spec(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3))), RACKED);
        assertEquals("core", assignor.lastReport().source());
        for (int i = 0; i < 2000 && service.assignRequests.isEmpty(); i++) {
            Thread.sleep(10);
        }
        service.assignRequests.get(0).get("partitions").forEach(p -> assertFalse(p.has("racks"), p.toString()));
        // Members with racks, partitions without: the same.
        assignor.assign(racked(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3))), topic(4));
        assertEquals("core", assignor.lastReport().source());
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
