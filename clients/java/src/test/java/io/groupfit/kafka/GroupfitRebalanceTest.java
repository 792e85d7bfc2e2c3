package io.groupfit.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The leader's reassignment check: asked only on the leader, in the background, within the minimum interval once. */
class GroupfitRebalanceTest {
    private FakeService service;

    @BeforeEach
    void start() throws Exception {
        service = new FakeService();
        service.ratesFor("t", 2, 10);
        service.assign = request -> new FakeService.Reply(200, FakeService.answer(
                "{\"a\":[{\"topic\":\"t\",\"partition\":0}],\"b\":[{\"topic\":\"t\",\"partition\":1}]}"));
    }

    @AfterEach
    void stop() {
        service.close();
    }

    /** A consumer of the group as the check sees it: its group metadata, and the rebalances it was asked for. */
    static final class Member {
        final List<String> enforced = new CopyOnWriteArrayList<>();
        volatile ConsumerGroupMetadata metadata;
        final Consumer<?, ?> consumer = (Consumer<?, ?>) Proxy.newProxyInstance(
                Consumer.class.getClassLoader(), new Class<?>[] {Consumer.class}, (proxy, method, args) -> {
                    switch (method.getName()) {
                        case "groupMetadata":
                            return metadata;
                        case "enforceRebalance":
                            enforced.add((String) args[0]);
                            return null;
                        default:
                            throw new UnsupportedOperationException(method.getName());
                    }
                });

        Member(String memberId, int generation) {
            metadata = new ConsumerGroupMetadata("g", generation, memberId, Optional.empty());
        }
    }

    private GroupfitAssignor assignor(String identity, Map<String, String> extra) {
        Map<String, String> configs = new HashMap<>(Map.of(GroupfitAssignor.URL, service.url(), "group.id", "g",
                "client.id", identity, GroupfitAssignor.CAPACITY, "100"));
        configs.putAll(extra);
        GroupfitAssignor assignor = new GroupfitAssignor();
        assignor.configure(configs);
        return assignor;
    }

    private static Subscription subscription(String identity, Double capacity) {
        return new Subscription(List.of("t"), new MemberData(identity, capacity, List.of(), -1).encode(), List.of(), -1,
                Optional.empty());
    }

    /** A rebalance round: both join, the leader assigns, both complete `generation` with their member ids. */
    private static void round(GroupfitAssignor leader, GroupfitAssignor follower, int generation) {
        leader.subscriptionUserData(Set.of("t"));
        follower.subscriptionUserData(Set.of("t"));
        leader.assign(GroupfitAssignorTest.cluster("t", 2), new GroupSubscription(Map.of(
                "member-a", subscription("a", null), "member-b", subscription("b", 200.0))));
        leader.onAssignment(new Assignment(List.of(new TopicPartition("t", 0))),
                new ConsumerGroupMetadata("g", generation, "member-a", Optional.empty()));
        follower.onAssignment(new Assignment(List.of(new TopicPartition("t", 1))),
                new ConsumerGroupMetadata("g", generation, "member-b", Optional.empty()));
    }

    private static String signal(String action) {
        return "{\"group\":\"g\",\"algorithm\":\"mwf\",\"capacity\":100,\"needed\":2,\"current\":2,\"lower_bound\":1,"
                + "\"total_rate\":150,\"overloaded\":[\"a\"],\"action\":\"" + action + "\",\"reason\":\"a is above C\","
                + "\"rates_window_end\":\"x\",\"unowned\":0,\"remove\":[],\"rscore\":0.3,\"moves\":1,\"gain\":0.2}";
    }

    /** Calls enforceIfDue as a poll loop does until it triggers or `calls` pass; the reason, or null. */
    private static String poll(Member member, int calls) throws InterruptedException {
        for (int i = 0; i < calls; i++) {
            String reason = GroupfitRebalance.enforceIfDue(member.consumer);
            if (reason != null) {
                return reason;
            }
            Thread.sleep(5);
        }
        return null;
    }

    private static final Map<String, String> CHECK = Map.of(GroupfitRebalance.INTERVAL_MS, "1",
            GroupfitRebalance.MIN_INTERVAL_MS, "3600000", GroupfitRebalance.MIN_GAIN, "0.1",
            GroupfitRebalance.MAX_MOVES, "3", GroupfitAssignor.PARAMS, "{\"max_moves\":2}");

    private record Pair(GroupfitAssignor leader, GroupfitAssignor follower) {}

    /** Members a and b checking as CHECK sets, a leading generation `generation`; the service answers `action`. */
    private Pair group(String action, int generation) {
        service.scale = query -> new FakeService.Reply(200, signal(action));
        Pair pair = new Pair(assignor("a", CHECK), assignor("b", CHECK));
        round(pair.leader(), pair.follower(), generation);
        return pair;
    }

    @Test
    void theLeaderTriggersOneRebalanceWithinTheMinimumInterval() throws Exception {
        group("reass", 5);
        Member leader = new Member("member-a", 5);
        Member follower = new Member("member-b", 5);

        String reason = poll(leader, 1000);
        assertNotNull(reason, "the leader never triggered the rebalance");
        assertTrue(reason.contains("a is above C"), reason);
        assertEquals(List.of(reason), leader.enforced);
        assertNull(poll(follower, 20));
        assertEquals(List.of(), follower.enforced);
        // within the minimum interval the leader neither asks again nor triggers
        assertNull(poll(leader, 40));
        assertEquals(1, leader.enforced.size());
        assertEquals(1, service.scaleQueries.size());
        Map<String, String> query = query(service.scaleQueries.get(0));
        assertEquals("mwf", query.get("algorithm"));
        assertEquals("{\"max_moves\":2}", query.get("params"));
        assertEquals("{\"b\":200.0}", query.get("member_capacities"));
        assertEquals("0.1", query.get("min_gain"));
        assertEquals("3", query.get("max_moves"));
        assertEquals("3600.0", query.get("min_interval_s"));
        // the assign used the same parameters as the decision
        assertEquals("{\"max_moves\":2}", service.assignRequests.get(0).get("params").toString());
    }

    @Test
    void aMemberThatDidNotLeadTheGenerationNeverAsks() throws Exception {
        Pair pair = group("reass", 5);
        GroupfitAssignor leaderAssignor = pair.leader();
        // the next round is led elsewhere: a joins and completes generation 6 without assigning
        leaderAssignor.subscriptionUserData(Set.of("t"));
        leaderAssignor.onAssignment(new Assignment(List.of()), new ConsumerGroupMetadata("g", 6, "member-a", Optional.empty()));
        Member leader = new Member("member-a", 6);
        assertNull(poll(leader, 30));
        // a consumer whose generation moved on past the one its assignor led does not ask either
        round(leaderAssignor, pair.follower(), 7);
        assertNull(poll(new Member("member-a", 8), 30));
        assertEquals(0, service.scaleQueries.size());
        assertEquals(List.of(), leader.enforced);
    }

    @Test
    void anAnswerOtherThanReassTriggersNothingAndTheCheckRepeats() throws Exception {
        group("none", 5);
        Member leader = new Member("member-a", 5);
        long deadline = System.nanoTime() + 20_000_000_000L; // the checks run in the background: a loaded machine
        while (service.scaleQueries.size() < 2 && System.nanoTime() < deadline) {
            assertNull(poll(leader, 10));
        }
        assertTrue(service.scaleQueries.size() >= 2, "asked " + service.scaleQueries.size() + " times");
        service.scale = query -> new FakeService.Reply(503, "{\"error\":{\"code\":\"store_unavailable\",\"message\":\"x\"}}");
        assertNull(poll(leader, 50));
        assertEquals(List.of(), leader.enforced);
    }

    @Test
    void aFallbackAssignmentOrAnUnsetIntervalMeansNoCheck() throws Exception {
        service.scale = query -> new FakeService.Reply(200, signal("reass"));
        service.assign = request -> new FakeService.Reply(500, "{}");
        round(assignor("a", CHECK), assignor("b", CHECK), 5); // the leader assigns locally
        assertNull(poll(new Member("member-a", 5), 30));
        service.assign = request -> new FakeService.Reply(200, FakeService.answer(
                "{\"a\":[{\"topic\":\"t\",\"partition\":0}],\"b\":[{\"topic\":\"t\",\"partition\":1}]}"));
        GroupfitAssignor off = assignor("a", Map.of());
        round(off, assignor("b", Map.of()), 9);
        assertNull(poll(new Member("member-a", 9), 30));
        assertEquals(0, service.scaleQueries.size());
    }

    @Test
    void badSettingsAreRefusedWithTheirName() {
        for (Map.Entry<String, String> bad : Map.of(GroupfitRebalance.INTERVAL_MS, "-1",
                GroupfitRebalance.MIN_INTERVAL_MS, "soon", GroupfitRebalance.MIN_GAIN, "-0.1",
                GroupfitRebalance.MAX_MOVES, "1.5", GroupfitAssignor.PARAMS, "[1]").entrySet()) {
            ConfigException refused = assertThrows(ConfigException.class, () -> assignor("a", Map.of(bad.getKey(), bad.getValue())));
            assertTrue(refused.getMessage().contains(bad.getKey()), refused.getMessage());
        }
    }

    private static Map<String, String> query(String text) {
        Map<String, String> query = new HashMap<>();
        for (String pair : text.split("&")) {
            String[] parts = pair.split("=", 2);
            query.put(parts[0], URLDecoder.decode(parts[1], StandardCharsets.UTF_8));
        }
        return query;
    }
}
