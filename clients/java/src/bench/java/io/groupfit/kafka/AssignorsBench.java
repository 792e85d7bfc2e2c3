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
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
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

/**
 * One rebalance of a group, in one JVM and on the same input, by the broker-side assignors (GroupfitBrokerAssignor's
 * full assign() with the rates known, Kafka's UniformAssignor and RangeAssignor on Kafka's own GroupSpecImpl) and
 * the classic ones (Kafka's CooperativeStickyAssignor; the classic GroupfitAssignor's local path, the Java core on
 * its inputs). The group: `size` = partitions/members, in 10 topics, skewed rates (1 + 99·u³), a capacity 15 %
 * above the mean load; every member but the last holds partitions round-robin, the last just joined.
 * bench/java_assignors.py runs it with `-prof gc` and prints the table.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"-Xms2g", "-Xmx6g"})
public class AssignorsBench {
    static final int TOPICS = 10;
    static final String GROUP = "bench";

    @Param({"1000/20", "50000/1000", "500000/10000"})
    public String size;

    private GroupSpec spec;
    private SubscribedTopicDescriber describer;
    private GroupfitBrokerAssignor groupfit;
    private final UniformAssignor uniform = new UniformAssignor();
    private final RangeAssignor range = new RangeAssignor();
    private Cluster cluster;
    private GroupSubscription subscription;
    private final CooperativeStickyAssignor sticky = new CooperativeStickyAssignor();
    private final Algorithm mwf = Algorithm.of("mwf", Map.of());
    private double capacity;
    private List<String> identities;
    private List<TopicPartition> partitions;
    private Map<TopicPartition, Api.PartitionRate> rates;
    private Map<TopicPartition, String> previous;

    @Setup(Level.Trial)
    public void setUp() {
        String[] parts = size.split("/");
        int total = Integer.parseInt(parts[0]);
        int memberCount = Integer.parseInt(parts[1]);
        int perTopic = total / TOPICS;
        Random random = new Random(42);
        List<Uuid> topicIds = new ArrayList<>();
        Map<Uuid, String> names = new HashMap<>();
        List<Api.PartitionRate> stored = new ArrayList<>();
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
        capacity = Math.ceil(sum / memberCount * 1.15);
        identities = new ArrayList<>();
        for (int m = 0; m < memberCount; m++) {
            identities.add("member-" + m);
        }
        identities.sort(null);
        // every member but the last holds partitions round-robin; the last just joined
        Map<String, Map<Uuid, Set<Integer>>> held = new HashMap<>();
        Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
        Map<String, List<TopicPartition>> owned = new HashMap<>();
        previous = new HashMap<>();
        for (int g = 0; g < partitions.size(); g++) {
            String member = "member-" + (g % (memberCount - 1));
            Uuid topicId = topicIds.get(g / perTopic);
            int p = g % perTopic;
            held.computeIfAbsent(member, m -> new HashMap<>()).computeIfAbsent(topicId, t -> new HashSet<>()).add(p);
            inverted.computeIfAbsent(topicId, t -> new HashMap<>()).put(p, member);
            owned.computeIfAbsent(member, m -> new ArrayList<>()).add(partitions.get(g));
            previous.put(partitions.get(g), member);
        }
        Set<Uuid> subscribed = Set.copyOf(topicIds);
        Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
        Map<String, Subscription> subscriptions = new HashMap<>();
        List<String> topicNames = List.copyOf(names.values());
        for (String member : identities) {
            members.put(member, new MemberSubscriptionAndAssignmentImpl(Optional.empty(), Optional.empty(), subscribed,
                    new Assignment(held.getOrDefault(member, Map.of()))));
            subscriptions.put(member, new Subscription(topicNames, null, owned.getOrDefault(member, List.of()), 1,
                    Optional.empty()));
        }
        spec = new GroupSpecImpl(members, SubscriptionType.HOMOGENEOUS, inverted);
        describer = FakeGroupSpec.topics(perTopic);
        subscription = new GroupSubscription(subscriptions);
        Node node = new Node(1, "127.0.0.1", 9092);
        List<PartitionInfo> infos = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            infos.add(new PartitionInfo(tp.topic(), tp.partition(), node, new Node[] {node}, new Node[] {node}));
        }
        cluster = new Cluster("c", List.of(node), infos, Set.of(), Set.of());

        groupfit = new GroupfitBrokerAssignor() {
            @Override
            void report(String group, java.util.function.Supplier<Api.AssignRequest> request) {
                // left out: see GroupfitBrokerAssignor.report
            }
        };
        groupfit.configure(Map.of(GroupfitBrokerAssignor.URL, "http://127.0.0.1:1", GroupfitBrokerAssignor.CAPACITY,
                String.valueOf(capacity), GroupfitBrokerAssignor.BOOTSTRAP_SERVERS, "127.0.0.1:1",
                GroupfitBrokerAssignor.REFRESH_MS, "3600000"));
        Map<String, String> groups = new HashMap<>();
        identities.forEach(member -> groups.put(member, GROUP));
        groupfit.remember(groups, names);
        groupfit.remember(GROUP, new Api.StoredRates(GROUP, stored, "x", "x"), null);
        groupfit.assign(spec, describer);
        if (!"core".equals(groupfit.lastReport().source())) {
            throw new IllegalStateException("the broker assignor did not assign by rate: " + groupfit.lastReport());
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        groupfit.close();
    }

    @Benchmark
    public GroupAssignment brokerGroupfit() {
        return groupfit.assign(spec, describer);
    }

    @Benchmark
    public GroupAssignment brokerUniform() {
        return uniform.assign(spec, describer);
    }

    @Benchmark
    public GroupAssignment brokerRange() {
        return range.assign(spec, describer);
    }

    @Benchmark
    public Object classicCooperativeSticky() {
        return sticky.assign(cluster, subscription);
    }

    @Benchmark
    public Map<TopicPartition, String> classicGroupfitCore() {
        return LocalCore.solve(mwf, capacity, identities, Map.of(), partitions, rates, previous);
    }
}
