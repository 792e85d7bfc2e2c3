package io.groupfit.kafka;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
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

/**
 * The time the assignors add to a rebalance (bench/java_rebalance.py runs it against a live service): the classic
 * leader's assign() through the service and in fallback, and the broker-side assign() (how long it holds the
 * coordinator's thread: the Java core on the rates it read in the background, the report sent by another thread),
 * for 8 topics × 125 partitions and 20 members, beside Kafka's CooperativeStickyAssignor.
 *
 * <p>args: serviceUrl group capacity runs
 */
public final class RebalanceBench {
    static final int TOPICS = 8;
    static final int PER_TOPIC = 125;
    static final int MEMBERS = 20;

    public static void main(String[] args) throws Exception {
        String url = args[0], group = args[1];
        String capacity = args[2];
        int runs = Integer.parseInt(args[3]);
        Node node = new Node(1, "127.0.0.1", 9092);
        List<PartitionInfo> infos = new ArrayList<>();
        List<String> topics = new ArrayList<>();
        for (int t = 0; t < TOPICS; t++) {
            topics.add("topic-" + t);
            for (int p = 0; p < PER_TOPIC; p++) {
                infos.add(new PartitionInfo("topic-" + t, p, node, new Node[] {node}, new Node[] {node}));
            }
        }
        Cluster cluster = new Cluster("c", List.of(node), infos, Set.of(), Set.of());
        System.out.printf("%d partitions, %d members, %d rebalances each (after %d to warm up)%n",
                infos.size(), MEMBERS, runs, runs / 2);

        String down = "http://127.0.0.1:1";
        report("classic leader assign(), through the service", "service", classic(url, group, capacity, cluster, topics), runs);
        report("classic leader assign(), fallback (service down)", "fallback", classic(down, group, capacity, cluster, topics), runs);
        report("Kafka's CooperativeStickyAssignor (baseline)", null, baseline(cluster, topics), runs);
        report("broker assign() holds the coordinator, rates known (Java core)", "core", broker(url, group, capacity, true), runs);
        report("broker assign() holds the coordinator, service down from the start", "fallback", broker(down, group, capacity, true), runs);
        report("broker assign() holds the coordinator, group not known yet", "fallback", broker(url, group, capacity, false), runs);
    }

    /** One rebalance: its wall time and the calling thread's CPU time in ns, and where the assignment came from. */
    record Run(long nanos, long cpuNanos, String source) {}

    static final java.lang.management.ThreadMXBean THREADS = java.lang.management.ManagementFactory.getThreadMXBean();

    static void report(String name, String expected, Supplier<Run> rebalance, int runs) {
        for (int i = 0; i < runs / 2; i++) {
            rebalance.get();
        }
        List<Long> times = new ArrayList<>();
        List<Long> cpu = new ArrayList<>();
        Map<String, Integer> sources = new TreeMap<>();
        for (int i = 0; i < runs; i++) {
            Run run = rebalance.get();
            times.add(run.nanos());
            cpu.add(run.cpuNanos());
            sources.merge(String.valueOf(run.source()), 1, Integer::sum);
        }
        times.sort(Long::compare);
        cpu.sort(Long::compare);
        System.out.printf("%-62s wall p50 %6.2f p99 %6.2f max %6.2f ms | thread CPU p50 %5.2f p99 %5.2f ms %s%n",
                name, at(times, 0.5), at(times, 0.99), at(times, 1.0), at(cpu, 0.5), at(cpu, 0.99),
                expected == null ? "" : sources.toString());
    }

    static double at(List<Long> sorted, double quantile) {
        return sorted.get(Math.min(sorted.size() - 1, Math.max(0, (int) Math.ceil(quantile * sorted.size()) - 1))) / 1e6;
    }

    /** A leader whose members report what the last rebalance gave them, as in a group that rebalances often. */
    static Supplier<Run> classic(String url, String group, String capacity, Cluster cluster, List<String> topics) {
        GroupfitAssignor leader = new GroupfitAssignor();
        leader.configure(Map.of(GroupfitAssignor.URL, url, "group.id", group, "client.id", "c0",
                GroupfitAssignor.CAPACITY, capacity, GroupfitAssignor.TIMEOUT_MS, "2000"));
        Map<String, List<TopicPartition>> owned = new HashMap<>();
        int[] generation = {0};
        return () -> {
            Map<String, Subscription> subscriptions = new HashMap<>();
            for (int i = 0; i < MEMBERS; i++) {
                List<TopicPartition> mine = owned.getOrDefault("member-" + i, List.of());
                ByteBuffer data = new MemberData("c" + i, null, mine, generation[0]).encode();
                subscriptions.put("member-" + i, new Subscription(topics, data, List.of(), generation[0], Optional.empty()));
            }
            leader.subscriptionUserData(Set.copyOf(topics)); // as when the leader joins: its rates read starts
            long started = System.nanoTime();
            long startedCpu = THREADS.getCurrentThreadCpuTime();
            ConsumerPartitionAssignor.GroupAssignment result = leader.assign(cluster, new GroupSubscription(subscriptions));
            long nanos = System.nanoTime() - started;
            long cpuNanos = THREADS.getCurrentThreadCpuTime() - startedCpu;
            result.groupAssignment().forEach((member, assignment) -> owned.put(member, assignment.partitions()));
            generation[0]++;
            leader.onAssignment(result.groupAssignment().get("member-0"), new ConsumerGroupMetadata(group));
            return new Run(nanos, cpuNanos, leader.lastReport().source());
        };
    }

    static Supplier<Run> baseline(Cluster cluster, List<String> topics) {
        CooperativeStickyAssignor sticky = new CooperativeStickyAssignor();
        Map<String, List<TopicPartition>> owned = new HashMap<>();
        int[] generation = {0};
        return () -> {
            Map<String, Subscription> subscriptions = new HashMap<>();
            for (int i = 0; i < MEMBERS; i++) {
                subscriptions.put("member-" + i, new Subscription(topics, null,
                        owned.getOrDefault("member-" + i, List.of()), generation[0], Optional.empty()));
            }
            long started = System.nanoTime();
            long startedCpu = THREADS.getCurrentThreadCpuTime();
            ConsumerPartitionAssignor.GroupAssignment result = sticky.assign(cluster, new GroupSubscription(subscriptions));
            long nanos = System.nanoTime() - started;
            long cpuNanos = THREADS.getCurrentThreadCpuTime() - startedCpu;
            result.groupAssignment().forEach((member, assignment) -> owned.put(member, assignment.partitions()));
            generation[0]++;
            return new Run(nanos, cpuNanos, null);
        };
    }

    /** The broker-side assignor on a group spec of the same shape; `known`: it has learnt the group and topics. */
    static Supplier<Run> broker(String url, String group, String capacity, boolean known) {
        GroupfitBrokerAssignor assignor = new GroupfitBrokerAssignor();
        assignor.configure(Map.of(GroupfitBrokerAssignor.URL, url, GroupfitBrokerAssignor.CAPACITY, capacity,
                GroupfitBrokerAssignor.BOOTSTRAP_SERVERS, "127.0.0.1:1"));
        assignor.warm.join();
        if (known) { // the background's first read of the group's rates, before the rebalances
            assignor.refresh(group);
        }
        Map<Uuid, String> names = new HashMap<>();
        for (int t = 0; t < TOPICS; t++) {
            names.put(new Uuid(7, t), "topic-" + t);
        }
        Map<String, Map<Uuid, Set<Integer>>> current = new HashMap<>();
        int[] run = {0};
        return () -> {
            // Unknown groups are met by fresh member ids each time; known ones keep theirs.
            String prefix = known ? "member-" : "new-" + run[0]++ + "-";
            List<String> members = new ArrayList<>();
            for (int i = 0; i < MEMBERS; i++) {
                members.add(prefix + i);
            }
            if (known) {
                assignor.remember(Map.of(members.get(0), group), names);
            }
            GroupSpec spec = new FakeGroupSpec(members, names.keySet(), current, member -> Optional.empty());
            SubscribedTopicDescriber describer = FakeGroupSpec.topics(PER_TOPIC);
            long started = System.nanoTime();
            long startedCpu = THREADS.getCurrentThreadCpuTime();
            GroupAssignment result = assignor.assign(spec, describer);
            long nanos = System.nanoTime() - started;
            long cpuNanos = THREADS.getCurrentThreadCpuTime() - startedCpu;
            if (known) {
                result.members().forEach((member, assignment) -> current.put(member, assignment.partitions()));
            }
            return new Run(nanos, cpuNanos, assignor.lastReport().source());
        };
    }
}
