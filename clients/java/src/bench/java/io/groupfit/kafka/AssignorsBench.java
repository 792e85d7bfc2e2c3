package io.groupfit.kafka;

import io.groupfit.kafka.core.Algorithm;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.BenchmarkParams;

/**
 * One rebalance of a group, in one JVM and on the same group, by the broker-side assignors (GroupfitBrokerAssignor's
 * whole assign() with the rates known, Kafka's UniformAssignor and RangeAssignor, all on Kafka's own GroupSpecImpl)
 * and the classic ones (Kafka's CooperativeStickyAssignor; the classic GroupfitAssignor's local path, the Java core
 * on the leader's inputs), for what the coordinator really asks (as Kafka's ServerSideAssignorBenchmark):
 *
 * <ul>
 *   <li>FULL: every member new, nothing assigned (the group forms);
 *   <li>JOIN: a settled group of members-1, and one member joins;
 *   <li>LEAVE: a settled group of members+1, and one member leaves.
 * </ul>
 *
 * <p>`size` = partitions/members after the change, in 10 topics, skewed rates (1 + 99·u³), a capacity 15 % above
 * the mean load. Settled means: each assignor's own answer, fed back as the current assignment until it no longer
 * changes (what a coordinator running that assignor holds), each member's current assignment in fresh immutable
 * maps as the coordinator builds them from its records. GroupfitBrokerAssignor keeps what it read of a group
 * between calls ({@link GroupMemo}): `brokerGroupfit` is the steady state (it computed the previous epoch of this
 * group, so it has read the settled members' maps and sorted the partitions by rate), `brokerGroupfitCold` forgets
 * everything before each call (the first call after the broker started, or after the rates changed before the
 * background re-sorted them). `brokerGroupfitZones` is `brokerGroupfit` on the group made zone-aware: member m in
 * rack m % 3 (its client.rack), partition p of each topic led in rack p % 3, so the core runs its zone mode (the
 * describer is one object for every call, as the coordinator's on a metadata image that did not change). Only
 * what the running benchmark needs is set up. bench/java_assignors.py runs it with `-prof gc` and prints the table.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 5, time = 1)
@Measurement(iterations = 10, time = 1)
@Fork(value = 1, jvmArgsAppend = {"-Xms2g", "-Xmx6g"})
public class AssignorsBench {
    static final int TOPICS = 10;
    static final String GROUP = "bench";
    /** At most this many rounds to settle an assignor's answer (each fed back as the current assignment). */
    static final int SETTLE_ROUNDS = 10;

    @Param({"1000/20", "50000/1000", "500000/10000"})
    public String size;

    @Param({"FULL", "JOIN", "LEAVE"})
    public String change;

    private double capacity;
    private List<Uuid> topicIds;
    private Map<Uuid, String> names;
    private List<Api.PartitionRate> stored;
    private List<TopicPartition> partitions;
    private Map<TopicPartition, Api.PartitionRate> rates;
    private SubscribedTopicDescriber describer;
    /** Zone-aware: members and partitions in three racks. */
    private boolean zoned;
    /** The members before the change and after it. */
    private List<String> before;
    private List<String> after;

    private ConsumerGroupPartitionAssignor broker;
    private GroupfitBrokerAssignor groupfit;
    private GroupSpec spec;

    private final Algorithm mwf = Algorithm.of("mwf", Map.of());
    private Map<TopicPartition, String> previous;
    private final CooperativeStickyAssignor sticky = new CooperativeStickyAssignor();
    private Cluster cluster;
    private GroupSubscription subscription;

    @Setup(Level.Trial)
    public void setUp(BenchmarkParams params) {
        String benchmark = params.getBenchmark();
        setUp(benchmark.substring(benchmark.lastIndexOf('.') + 1));
    }

    /** The group, and the inputs of this benchmark's assignor only. */
    void setUp(String benchmark) {
        String[] parts = size.split("/");
        int total = Integer.parseInt(parts[0]);
        int members = Integer.parseInt(parts[1]);
        int perTopic = total / TOPICS;
        Random random = new Random(42);
        topicIds = new ArrayList<>();
        names = new HashMap<>();
        stored = new ArrayList<>();
        partitions = new ArrayList<>();
        rates = new HashMap<>();
        double sum = 0;
        for (int t = 0; t < TOPICS; t++) {
            Uuid id = new Uuid(0x6f, t + 1);
            topicIds.add(id);
            names.put(id, "topic-" + t);
            for (int p = 0; p < perTopic; p++) {
                double u = random.nextDouble();
                double rate = Math.round((1 + 99 * u * u * u) * 1000) / 1000.0;
                Api.PartitionRate entry = new Api.PartitionRate("topic-" + t, p, rate, null);
                stored.add(entry);
                TopicPartition tp = new TopicPartition("topic-" + t, p);
                partitions.add(tp);
                rates.put(tp, entry);
                sum += rate;
            }
        }
        capacity = Math.ceil(sum / members * 1.15);
        describer = FakeGroupSpec.topics(perTopic);
        after = names(members);
        before = switch (change) {
            case "FULL" -> List.of();
            case "JOIN" -> names(members - 1);
            case "LEAVE" -> names(members + 1);
            default -> throw new IllegalArgumentException("change is FULL, JOIN or LEAVE, not " + change);
        };
        if (change.equals("LEAVE")) {
            after = new ArrayList<>(before);
            after.remove(members / 2); // one from the middle leaves
        }
        zoned = benchmark.equals("brokerGroupfitZones");
        if (zoned) {
            describer = FakeGroupSpec.topics(perTopic, p -> Set.of("rack-" + p % 3));
        }
        switch (benchmark) {
            case "brokerGroupfit", "brokerGroupfitCold", "brokerGroupfitZones" -> {
                groupfit = groupfit();
                broker = groupfit;
                spec = brokerCase(groupfit);
                groupfit.assign(spec, describer);
                if (!"core".equals(groupfit.lastReport().source())
                        || zoned != (groupfit.lastReport().crossZoneRate() != null)) {
                    throw new IllegalStateException("the broker assignor did not assign by rate"
                            + (zoned ? " in its zone mode: " : ": ") + groupfit.lastReport());
                }
            }
            case "brokerUniform" -> {
                broker = new UniformAssignor();
                spec = brokerCase(broker);
            }
            case "brokerRange" -> {
                broker = new RangeAssignor();
                spec = brokerCase(broker);
            }
            case "classicGroupfitCore" -> previous = classicCoreCase();
            case "classicCooperativeSticky" -> subscription = classicStickyCase();
            default -> throw new IllegalArgumentException("no set-up for benchmark " + benchmark);
        }
    }

    private static List<String> names(int count) {
        List<String> made = new ArrayList<>();
        for (int m = 0; m < count; m++) {
            made.add("member-" + m);
        }
        return made;
    }

    private GroupfitBrokerAssignor groupfit() {
        GroupfitBrokerAssignor made = new GroupfitBrokerAssignor() {
            @Override
            void report(String group, java.util.function.Supplier<Api.AssignRequest> request) {
                // left out: see GroupfitBrokerAssignor.report
            }
        };
        made.configure(Map.of(GroupfitBrokerAssignor.URL, "http://127.0.0.1:1", GroupfitBrokerAssignor.CAPACITY,
                String.valueOf(capacity), GroupfitBrokerAssignor.BOOTSTRAP_SERVERS, "127.0.0.1:1",
                GroupfitBrokerAssignor.REFRESH_MS, "3600000"));
        Map<String, String> groups = new HashMap<>();
        for (List<String> list : List.of(before, after)) {
            list.forEach(member -> groups.put(member, GROUP));
        }
        made.remember(groups, names);
        made.remember(GROUP, new Api.StoredRates(GROUP, stored, "x", "x"), null);
        return made;
    }

    /** The group spec of the change, the settled group being this assignor's own answer. */
    private GroupSpec brokerCase(ConsumerGroupPartitionAssignor assignor) {
        Map<String, Map<Uuid, Set<Integer>>> current = new HashMap<>();
        if (!before.isEmpty()) {
            for (int round = 0; round < SETTLE_ROUNDS; round++) {
                Map<String, Map<Uuid, Set<Integer>>> next = new HashMap<>();
                assignor.assign(groupSpec(before, current), describer).members()
                        .forEach((member, assigned) -> next.put(member, assigned.partitions()));
                if (next.equals(current)) {
                    break;
                }
                current = next;
            }
            // the epoch that changed nothing: the assignor has met every settled member's map
            assignor.assign(groupSpec(before, current), describer);
        }
        return groupSpec(after, current);
    }

    /**
     * A GroupSpecImpl as the coordinator makes it: each member's current assignment in its own immutable maps
     * (the coordinator rebuilds a changed member's target from its record), the inverted assignment of the members
     * present. Maps already made for a member are reused (an unchanged member's target is the same object).
     */
    private final Map<String, Assignment> made = new HashMap<>();

    private GroupSpec groupSpec(List<String> members, Map<String, Map<Uuid, Set<Integer>>> current) {
        Map<String, MemberSubscriptionAndAssignmentImpl> specs = new HashMap<>();
        Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
        Set<Uuid> subscribed = Set.copyOf(topicIds);
        for (String member : members) {
            Map<Uuid, Set<Integer>> held = current.getOrDefault(member, Map.of());
            Assignment assignment = made.get(member);
            if (assignment == null || !assignment.partitions().equals(held)) {
                Map<Uuid, Set<Integer>> copy = new HashMap<>();
                held.forEach((topic, ps) -> copy.put(topic, new HashSet<>(ps)));
                assignment = held.isEmpty() ? Assignment.EMPTY : new Assignment(copy);
                made.put(member, assignment);
            }
            Optional<String> rack = zoned
                    ? Optional.of("rack-" + Integer.parseInt(member.substring(member.indexOf('-') + 1)) % 3)
                    : Optional.empty();
            specs.put(member, new MemberSubscriptionAndAssignmentImpl(rack, Optional.empty(), subscribed, assignment));
            held.forEach((topic, ps) -> ps.forEach(p -> inverted.computeIfAbsent(topic, t -> new HashMap<>()).put(p,
                    member)));
        }
        return new GroupSpecImpl(specs, SubscriptionType.HOMOGENEOUS, inverted);
    }

    /** The classic leader's previous assignment: the local core's own settled answer (none for FULL). */
    private Map<TopicPartition, String> classicCoreCase() {
        Map<TopicPartition, String> current = new HashMap<>();
        if (!before.isEmpty()) {
            for (int round = 0; round < SETTLE_ROUNDS; round++) {
                Map<TopicPartition, String> next = LocalCore.solve(mwf, capacity, before, Map.of(), Map.of(), partitions,
                        rates, Map.of(), current);
                if (next.equals(current)) {
                    break;
                }
                current = next;
            }
        }
        return current;
    }

    /** The classic members' subscriptions, owning CooperativeStickyAssignor's own settled answer (none for FULL). */
    private GroupSubscription classicStickyCase() {
        Node node = new Node(1, "127.0.0.1", 9092);
        List<PartitionInfo> infos = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            infos.add(new PartitionInfo(tp.topic(), tp.partition(), node, new Node[] {node}, new Node[] {node}));
        }
        cluster = new Cluster("c", List.of(node), infos, Set.of(), Set.of());
        Map<String, List<TopicPartition>> owned = new HashMap<>();
        if (!before.isEmpty()) {
            for (int round = 0; round < SETTLE_ROUNDS; round++) {
                Map<String, List<TopicPartition>> next = new HashMap<>();
                sticky.assign(cluster, classicSubscription(before, owned)).groupAssignment()
                        .forEach((member, assigned) -> next.put(member, assigned.partitions()));
                if (next.equals(owned)) {
                    break;
                }
                owned = next;
            }
        }
        return classicSubscription(after, owned);
    }

    private GroupSubscription classicSubscription(List<String> members, Map<String, List<TopicPartition>> owned) {
        List<String> topics = List.copyOf(names.values());
        Map<String, Subscription> subscriptions = new HashMap<>();
        for (String member : members) {
            subscriptions.put(member, new Subscription(topics, null, owned.getOrDefault(member, List.of()), 1,
                    Optional.empty()));
        }
        return new GroupSubscription(subscriptions);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        if (groupfit != null) {
            groupfit.close();
        }
    }

    @Benchmark
    public GroupAssignment brokerGroupfit() {
        return groupfit.assign(spec, describer);
    }

    @Benchmark
    public GroupAssignment brokerGroupfitZones() {
        return groupfit.assign(spec, describer);
    }

    @Benchmark
    public GroupAssignment brokerGroupfitCold() {
        groupfit.memos.clear();
        return groupfit.assign(spec, describer);
    }

    @Benchmark
    public GroupAssignment brokerUniform() {
        return broker.assign(spec, describer);
    }

    @Benchmark
    public GroupAssignment brokerRange() {
        return broker.assign(spec, describer);
    }

    @Benchmark
    public ConsumerPartitionAssignor.GroupAssignment classicCooperativeSticky() {
        return sticky.assign(cluster, subscription);
    }

    @Benchmark
    public Map<TopicPartition, String> classicGroupfitCore() {
        return LocalCore.solve(mwf, capacity, after, Map.of(), Map.of(), partitions, rates, Map.of(), previous);
    }
}
