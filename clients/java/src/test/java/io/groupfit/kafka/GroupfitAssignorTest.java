package io.groupfit.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupAssignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class GroupfitAssignorTest {
    private FakeService service;

    @BeforeEach
    void start() throws Exception {
        service = new FakeService();
    }

    @AfterEach
    void stop() {
        service.close();
    }

    static Cluster cluster(String topic, int partitions) {
        Node node = new Node(1, "127.0.0.1", 9092);
        List<PartitionInfo> infos = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            infos.add(new PartitionInfo(topic, p, node, new Node[] {node}, new Node[] {node}));
        }
        return new Cluster("c", List.of(node), infos, java.util.Set.of(), java.util.Set.of());
    }

    private GroupfitAssignor assignor(String protocol, long timeoutMs) {
        return assignor(protocol, timeoutMs, 0);
    }

    private GroupfitAssignor assignor(String protocol, long timeoutMs, long ratesMaxAgeMs) {
        GroupfitAssignor assignor = new GroupfitAssignor();
        assignor.configure(Map.of(GroupfitAssignor.URL, service.url(), "group.id", "g", "client.id", "leader",
                GroupfitAssignor.CAPACITY, "100", GroupfitAssignor.TIMEOUT_MS, String.valueOf(timeoutMs),
                GroupfitAssignor.REBALANCE_PROTOCOL, protocol,
                GroupfitAssignor.RATES_MAX_AGE_MS, String.valueOf(ratesMaxAgeMs)));
        return assignor;
    }

    @Test
    void ratesReadWhileTheGroupJoinsServeTheLeadersAssign() throws Exception {
        service.ratesFor("t", 2, 10);
        service.assign = request -> new FakeService.Reply(200, FakeService.answer(
                "{\"a\":[{\"topic\":\"t\",\"partition\":0},{\"topic\":\"t\",\"partition\":1}]}"));
        GroupfitAssignor assignor = assignor("eager", 2000, 10_000);
        assignor.subscriptionUserData(java.util.Set.of("t")); // the member joins: the read starts
        assignor.assign(cluster("t", 2), new GroupSubscription(Map.of("m1", member("a", List.of(), -1))));
        assignor.assign(cluster("t", 2), new GroupSubscription(Map.of("m1", member("a", List.of(), -1))));
        assertEquals("service", assignor.lastReport().source());
        assertEquals(1, service.ratesReads.get());
        assertEquals(2, service.assignRequests.size());
    }

    private static Subscription member(String identity, List<TopicPartition> owned, int generation) {
        return member(identity, null, owned, generation);
    }

    private static Subscription member(String identity, Double capacity, List<TopicPartition> owned, int generation) {
        return new Subscription(List.of("t"), new MemberData(identity, capacity, owned, generation).encode(), owned,
                generation, Optional.empty());
    }

    private static Map<String, List<TopicPartition>> byMember(GroupAssignment assignment) {
        Map<String, List<TopicPartition>> result = new HashMap<>();
        assignment.groupAssignment().forEach((id, a) -> result.put(id, a.partitions()));
        return result;
    }

    private static TopicPartition tp(int p) {
        return new TopicPartition("t", p);
    }

    @Test
    void theAnswerKeyedByIdentityReachesTheMemberIds() {
        service.ratesFor("t", 4, 10);
        service.assign = request -> new FakeService.Reply(200, FakeService.answer(
                "{\"a\":[{\"topic\":\"t\",\"partition\":0},{\"topic\":\"t\",\"partition\":3}],"
                        + "\"b\":[{\"topic\":\"t\",\"partition\":1},{\"topic\":\"t\",\"partition\":2}]}"));
        GroupfitAssignor assignor = assignor("eager", 2000);
        GroupAssignment assignment = assignor.assign(cluster("t", 4), new GroupSubscription(Map.of(
                "member-x", member("b", List.of(), -1), "member-y", member("a", List.of(tp(0)), 2))));
        assertEquals(Map.of("member-y", List.of(tp(0), tp(3)), "member-x", List.of(tp(1), tp(2))), byMember(assignment));
        JsonNode sent = service.assignRequests.get(0);
        assertEquals("g", sent.get("group").asText());
        assertEquals("[\"a\",\"b\"]", sent.get("members").toString());
        assertEquals(100.0, sent.get("capacity").asDouble());
        assertEquals(4, sent.get("partitions").size());
        assertEquals(10.0, sent.get("partitions").get(2).get("rate").asDouble());
        assertEquals("{\"a\":[{\"topic\":\"t\",\"partition\":0}]}", sent.get("previous").toString());
        GroupfitAssignor.Report report = assignor.lastReport();
        assertEquals("service", report.source());
        assertEquals(0.25, report.rscore());
        assertEquals(1, report.moves());
        assertEquals(List.of("a"), report.overloadedMembers());
        assertEquals(3, report.recommendedConsumers());
    }

    @Test
    void aMemberThatAdvertisesItsCapacityIsSentWithIt() {
        service.ratesFor("t", 2, 10);
        service.assign = request -> new FakeService.Reply(200, FakeService.answer(
                "{\"big\":[{\"topic\":\"t\",\"partition\":0},{\"topic\":\"t\",\"partition\":1}]}"));
        GroupSubscription group = new GroupSubscription(Map.of("m1", member("small", List.of(), -1),
                "m2", member("big", 250.0, List.of(), -1), "m3", member("leader", 100.0, List.of(), -1)));
        GroupfitAssignor assignor = assignor("eager", 2000);
        assignor.assign(cluster("t", 2), group);
        assertEquals("service", assignor.lastReport().source());
        JsonNode sent = service.assignRequests.get(0);
        // The request's capacity is the leader's: a member that advertises none (small) has it.
        assertEquals("[{\"id\":\"big\",\"capacity\":250.0},{\"id\":\"leader\",\"capacity\":100.0},\"small\"]",
                sent.get("members").toString());
        assertEquals(100.0, sent.get("capacity").asDouble());

        GroupfitAssignor withDefault = new GroupfitAssignor();
        withDefault.configure(Map.of(GroupfitAssignor.URL, service.url(), "group.id", "g", "client.id", "leader",
                GroupfitAssignor.CAPACITY, "100", GroupfitAssignor.DEFAULT_CAPACITY, "40",
                GroupfitAssignor.RATES_MAX_AGE_MS, "0"));
        withDefault.assign(cluster("t", 2), group);
        assertEquals(40.0, service.assignRequests.get(1).get("capacity").asDouble());
        assertEquals(sent.get("members"), service.assignRequests.get(1).get("members"));
    }

    @Test
    void aSlowServiceFallsBackWithinTheTimeout() {
        service.ratesFor("t", 6, 10);
        service.delayMs = 1500;
        GroupfitAssignor assignor = assignor("eager", 200);
        long started = System.nanoTime();
        GroupAssignment assignment = assignor.assign(cluster("t", 6), new GroupSubscription(Map.of(
                "m1", member("a", List.of(tp(0), tp(1), tp(2), tp(3)), 1), "m2", member("b", List.of(tp(4), tp(5)), 1))));
        long millis = (System.nanoTime() - started) / 1_000_000;
        assertTrue(millis < 1500, "took " + millis + " ms");
        assertEquals("fallback", assignor.lastReport().source());
        assertEquals("no answer within the timeout", assignor.lastReport().reason());
        // Balanced, and a keeps three of what it read.
        assertEquals(Map.of("m1", List.of(tp(0), tp(1), tp(2)), "m2", List.of(tp(3), tp(4), tp(5))), byMember(assignment));
    }

    @Test
    void anAnswerThatDoesNotFitTheGroupIsNotUsed() {
        service.ratesFor("t", 2, 10);
        service.assign = request -> new FakeService.Reply(200, FakeService.answer(
                "{\"a\":[{\"topic\":\"t\",\"partition\":0}],\"stranger\":[{\"topic\":\"t\",\"partition\":1}]}"));
        GroupfitAssignor assignor = assignor("eager", 2000);
        assignor.assign(cluster("t", 2), new GroupSubscription(Map.of("m1", member("a", List.of(), -1),
                "m2", member("b", List.of(), -1))));
        assertEquals("fallback", assignor.lastReport().source());
        assertTrue(assignor.lastReport().reason().contains("stranger"), assignor.lastReport().reason());
    }

    @Test
    void anErrorOrNoRatesFallsBack() {
        GroupfitAssignor assignor = assignor("eager", 2000);
        GroupSubscription group = new GroupSubscription(Map.of("m1", member("a", List.of(), -1)));
        assignor.assign(cluster("t", 2), group);
        assertTrue(assignor.lastReport().reason().contains("no rates"), assignor.lastReport().reason());
        service.ratesFor("t", 2, 10);
        service.assign = request -> new FakeService.Reply(422,
                "{\"error\":{\"code\":\"invalid_capacity\",\"message\":\"give capacity\"}}");
        GroupAssignment assignment = assignor.assign(cluster("t", 2), group);
        assertTrue(assignor.lastReport().reason().contains("invalid_capacity"), assignor.lastReport().reason());
        assertEquals(Map.of("m1", List.of(tp(0), tp(1))), byMember(assignment));
    }

    @Test
    void withoutTheServicesAnswerTheLeaderAssignsByRateWithTheLastRatesRead() {
        service.ratesFor("t", 70, 50, 20, 10); // 70 and 50 cannot share a member of 100
        service.assign = request -> new FakeService.Reply(503, "{\"error\":{\"code\":\"store_unavailable\","
                + "\"message\":\"down\"}}");
        GroupfitAssignor assignor = assignor("eager", 2000);
        GroupAssignment assignment = assignor.assign(cluster("t", 4), new GroupSubscription(Map.of(
                "m1", member("a", List.of(tp(0), tp(1)), 1), "m2", member("b", List.of(tp(2), tp(3)), 1))));
        assertEquals("fallback", assignor.lastReport().source());
        assertTrue(assignor.lastReport().reason().contains("store_unavailable"), assignor.lastReport().reason());
        // MWF in the Java core: a keeps 70, b's 10 and 20 migrate beside it (100), the 50 goes to b.
        assertEquals(Map.of("m1", List.of(tp(0), tp(2), tp(3)), "m2", List.of(tp(1))), byMember(assignment));
    }

    @Test
    void cooperativeRevokesBeforeItGivesAndCompletesInTheFollowUp() {
        service.ratesFor("t", 4, 10);
        service.assign = request -> new FakeService.Reply(200, FakeService.answer(
                "{\"a\":[{\"topic\":\"t\",\"partition\":0},{\"topic\":\"t\",\"partition\":1}],"
                        + "\"b\":[{\"topic\":\"t\",\"partition\":2},{\"topic\":\"t\",\"partition\":3}]}"));
        GroupfitAssignor assignor = assignor("cooperative", 2000);
        // a owns everything; b joins: 2 and 3 move, so a gives them up first and b gets nothing yet.
        GroupAssignment first = assignor.assign(cluster("t", 4), new GroupSubscription(Map.of(
                "m1", member("a", List.of(tp(0), tp(1), tp(2), tp(3)), 5), "m2", member("b", List.of(), -1))));
        assertEquals(Map.of("m1", List.of(tp(0), tp(1)), "m2", List.of()), byMember(first));
        // The follow-up: a owns 0 and 1; the same target completes without a second request.
        GroupAssignment second = assignor.assign(cluster("t", 4), new GroupSubscription(Map.of(
                "m1", member("a", List.of(tp(0), tp(1)), 6), "m2", member("b", List.of(), 6))));
        assertEquals(Map.of("m1", List.of(tp(0), tp(1)), "m2", List.of(tp(2), tp(3))), byMember(second));
        assertEquals(1, service.assignRequests.size());
        assertEquals("pending", assignor.lastReport().source());
    }

    /**
     * Three brokers in racks a, b, c; partition p led by broker p % 3 + 1 with a follower on the next broker. The
     * partitions' nodes are bare ids (no rack), as a consumer's metadata may name them: racks come from the cluster.
     */
    static Cluster racked(String topic, int partitions) {
        List<Node> nodes = List.of(new Node(1, "h1", 9092, "a"), new Node(2, "h2", 9092, "b"), new Node(3, "h3", 9092, "c"));
        List<PartitionInfo> infos = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            Node leader = new Node(p % 3 + 1, "", -1);
            Node follower = new Node((p + 1) % 3 + 1, "", -1);
            infos.add(new PartitionInfo(topic, p, leader, new Node[] {leader, follower}, new Node[] {leader, follower}));
        }
        return new Cluster("c", nodes, infos, java.util.Set.of(), java.util.Set.of());
    }

    private static Subscription inRack(String identity, String rack) {
        return new Subscription(List.of("t"), new MemberData(identity, null, List.of(), -1).encode(), List.of(), -1,
                Optional.ofNullable(rack));
    }

    @Test
    void membersRacksAndTheLeadersRacksAreSentAndTheCrossZoneRateReported() {
        service.ratesFor("t", 4, 10);
        service.assign = request -> new FakeService.Reply(200, FakeService.answer(
                "{\"a\":[{\"topic\":\"t\",\"partition\":0},{\"topic\":\"t\",\"partition\":3}],"
                        + "\"b\":[{\"topic\":\"t\",\"partition\":1},{\"topic\":\"t\",\"partition\":2}]}")
                .replace("\"added_later\"", "\"cross_zone_rate\":10.0,\"added_later\""));
        GroupfitAssignor assignor = assignor("eager", 2000);
        assignor.assign(racked("t", 4), new GroupSubscription(Map.of(
                "m1", inRack("a", "a"), "m2", inRack("b", "b"), "m3", inRack("c", null))));
        JsonNode sent = service.assignRequests.get(0);
        assertEquals("[{\"id\":\"a\",\"rack\":\"a\"},{\"id\":\"b\",\"rack\":\"b\"},\"c\"]",
                sent.get("members").toString());
        List<String> racks = new ArrayList<>();
        sent.get("partitions").forEach(p -> racks.add(p.get("racks").toString()));
        assertEquals(List.of("[\"a\"]", "[\"b\"]", "[\"c\"]", "[\"a\"]"), racks); // the leaders'
        assertEquals(10.0, assignor.lastReport().crossZoneRate());

        GroupfitAssignor follower = new GroupfitAssignor();
        follower.configure(Map.of(GroupfitAssignor.URL, service.url(), "group.id", "g", "client.id", "leader",
                GroupfitAssignor.CAPACITY, "100", GroupfitAssignor.FETCH_FROM_FOLLOWER, "true"));
        follower.assign(racked("t", 4), new GroupSubscription(Map.of("m1", inRack("a", "a"))));
        racks.clear();
        service.assignRequests.get(1).get("partitions").forEach(p -> racks.add(p.get("racks").toString()));
        assertEquals(List.of("[\"a\",\"b\"]", "[\"b\",\"c\"]", "[\"a\",\"c\"]", "[\"a\",\"b\"]"), racks); // every replica's
    }

    @Test
    void withoutAMembersRackTheRequestIsRackFree() {
        service.ratesFor("t", 2, 10);
        service.assign = request -> new FakeService.Reply(200, FakeService.answer(
                "{\"a\":[{\"topic\":\"t\",\"partition\":0},{\"topic\":\"t\",\"partition\":1}]}"));
        GroupfitAssignor assignor = assignor("eager", 2000);
        assignor.assign(racked("t", 2), new GroupSubscription(Map.of("m1", inRack("a", null), "m2", inRack("b", ""))));
        JsonNode sent = service.assignRequests.get(0);
        assertEquals("[\"a\",\"b\"]", sent.get("members").toString());
        sent.get("partitions").forEach(p -> assertTrue(!p.has("racks"), p.toString()));
        assertEquals(null, assignor.lastReport().crossZoneRate());
    }

    @Test
    void aBadFetchFromFollowerSettingIsRefused() {
        org.junit.jupiter.api.Assertions.assertThrows(org.apache.kafka.common.config.ConfigException.class,
                () -> new GroupfitAssignor().configure(Map.of(GroupfitAssignor.URL, service.url(), "group.id", "g",
                        "client.id", "x", GroupfitAssignor.FETCH_FROM_FOLLOWER, "yes")));
    }

    @Test
    void aRepeatedIdentityIsKnownByItsMemberId() {
        List<GroupfitAssignor.Member> members = GroupfitAssignor.members(Map.of(
                "m1", member("same", List.of(), -1), "m2", member("same", List.of(), -1),
                "m3", new Subscription(List.of("t"), null)));
        assertEquals(List.of("same", "m2", "m3"), members.stream().map(GroupfitAssignor.Member::identity).toList());
    }
}
