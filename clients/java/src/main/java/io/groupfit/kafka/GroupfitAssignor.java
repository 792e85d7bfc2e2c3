package io.groupfit.kafka;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A classic-protocol assignor that asks groupfit (partition.assignment.strategy=io.groupfit.kafka.GroupfitAssignor).
 *
 * <p>Every member sends its stable identity, its capacity and the partitions it owns as subscription user data
 * ({@link MemberData}). The group's leader sends the group's partitions (from the cluster metadata) with the rates
 * stored in groupfit, the previous owners and the members (each with the capacity it advertises, if any) to POST
 * /v1/assign, and maps the answer, keyed by identity, back to member ids. When groupfit does not answer within {@code groupfit.timeout.ms}, errors, or answers
 * something that does not fit the group, the leader assigns locally and logs why: by the same algorithm in the
 * Java core ({@link io.groupfit.kafka.core}) on the last rates it read, else by balanced counts ({@link
 * Balance#sticky}). A rebalance never fails because groupfit is down.
 *
 * <p>With {@code groupfit.rebalance.protocol=cooperative} a partition that changes member is first revoked from its
 * owner and given to its new member in the follow-up rebalance (as CooperativeStickyAssignor does), so no partition
 * is owned by two members at once; the follow-up completes the same target without asking again.
 *
 * <p>With {@code groupfit.reassign.interval.ms} set, the leader also rebalances the group when the rates drift and the
 * membership does not: the application calls {@link GroupfitRebalance#enforceIfDue} after each poll.
 */
public class GroupfitAssignor implements ConsumerPartitionAssignor, Configurable {
    public static final String URL = "groupfit.url";
    public static final String TOKEN = "groupfit.token";
    public static final String TIMEOUT_MS = "groupfit.timeout.ms";
    public static final String CAPACITY = "groupfit.capacity";
    public static final String DEFAULT_CAPACITY = "groupfit.default.capacity";
    public static final String ALGORITHM = "groupfit.algorithm";
    public static final String GROUP = "groupfit.group";
    public static final String IDENTITY = "groupfit.identity";
    public static final String REBALANCE_PROTOCOL = "groupfit.rebalance.protocol";
    public static final String RATES_MAX_AGE_MS = "groupfit.rates.max.age.ms";
    /** The algorithm's parameters, a JSON object (e.g. least-loaded's {"mu":200,"w_sla":0.5}). */
    public static final String PARAMS = "groupfit.params";
    /**
     * Whether the brokers serve fetch-from-follower (KIP-392: a rack-aware {@code replica.selector.class}), so a
     * member with a {@code client.rack} reads a partition from a replica in its rack: a partition's racks are then
     * every replica's, else (the default) its leader's only.
     */
    public static final String FETCH_FROM_FOLLOWER = "groupfit.fetch.from.follower";

    private static final Logger log = LoggerFactory.getLogger(GroupfitAssignor.class);

    /** How the leader's last assign() went: "service", "fallback" or "pending" (a cooperative follow-up). */
    public record Report(
            String source, String reason, Double rscore, int moves, List<String> overloadedMembers,
            Integer recommendedConsumers, int members, int partitions, Double crossZoneRate, long micros) {}

    /** A member as the leader sees it; {@code rack}: its client.rack (null: none). */
    record Member(String memberId, String identity, Double capacity, List<TopicPartition> owned, int generation,
            String rack) {}

    private GroupfitService service;
    private String group;
    private String identity;
    private Double capacity;
    private Double defaultCapacity;
    private Duration timeout;
    private boolean cooperative;
    private boolean fetchFromFollower;
    // This member's partitions and generation, sent in the next subscription (an EAGER member owns nothing when it
    // rejoins, so the leader learns what it read from here).
    private volatile List<TopicPartition> owned = List.of();
    private volatile int generation = -1;
    // The leader's last target, identity-keyed, kept to complete a cooperative transfer in the follow-up rebalance.
    private Map<TopicPartition, String> lastTarget = Map.of();
    private List<String> lastMembers = List.of();
    private volatile Report lastReport;
    // The leader's check for a rebalance when the rates drift (GroupfitRebalance), kept apart from assign().
    private Reassigner reassigner;

    @Override
    public void configure(Map<String, ?> configs) {
        Object url = configs.get(URL);
        if (url == null || url.toString().isBlank()) {
            throw new ConfigException(URL, url, "GroupfitAssignor needs groupfit's URL, e.g. http://groupfit:8000");
        }
        Object groupId = configs.containsKey(GROUP) ? configs.get(GROUP) : configs.get("group.id");
        Object instance = configs.get("group.instance.id");
        Object id = configs.containsKey(IDENTITY) ? configs.get(IDENTITY)
                : instance != null ? instance : configs.get("client.id");
        if (groupId == null || id == null) {
            throw new ConfigException("GroupfitAssignor needs group.id (or " + GROUP + ") and a client.id, "
                    + "group.instance.id or " + IDENTITY + " to name this member");
        }
        group = groupId.toString();
        identity = id.toString();
        capacity = configs.containsKey(CAPACITY) ? positive(CAPACITY, configs.get(CAPACITY)) : null;
        // A group whose members all set groupfit.capacity needs no default of its own.
        defaultCapacity = configs.containsKey(DEFAULT_CAPACITY)
                ? positive(DEFAULT_CAPACITY, configs.get(DEFAULT_CAPACITY)) : capacity;
        timeout = Duration.ofMillis(Long.parseLong(setting(configs, TIMEOUT_MS, "2000")));
        String protocol = setting(configs, REBALANCE_PROTOCOL, "eager").toLowerCase();
        if (!protocol.equals("eager") && !protocol.equals("cooperative")) {
            throw new ConfigException(REBALANCE_PROTOCOL, protocol, "must be eager or cooperative");
        }
        cooperative = protocol.equals("cooperative");
        String follower = setting(configs, FETCH_FROM_FOLLOWER, "false").trim().toLowerCase();
        if (!follower.equals("true") && !follower.equals("false")) {
            throw new ConfigException(FETCH_FROM_FOLLOWER, follower, "must be true or false");
        }
        fetchFromFollower = follower.equals("true");
        Object token = configs.get(TOKEN);
        GroupfitClient client = new GroupfitClient(url.toString(), token == null ? null : token.toString(), timeout);
        Duration ratesMaxAge = Duration.ofMillis(Long.parseLong(setting(configs, RATES_MAX_AGE_MS, "10000")));
        service = new GroupfitService(client, setting(configs, ALGORITHM, "mwf"), params(configs.get(PARAMS)), ratesMaxAge);
        reassigner = Reassigner.configure(configs, service, group, timeout);
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> params(Object value) {
        if (value == null || value.toString().isBlank()) {
            return null;
        }
        try {
            return GroupfitClient.JSON.readValue(value.toString(), Map.class);
        } catch (java.io.IOException e) {
            throw new ConfigException(PARAMS, value, "must be a JSON object, e.g. {\"mu\":200,\"w_sla\":0.5}");
        }
    }

    static String setting(Map<String, ?> configs, String key, String otherwise) {
        Object value = configs.get(key);
        return value == null ? otherwise : value.toString();
    }

    static Double positive(String key, Object value) {
        try {
            double parsed = Double.parseDouble(value.toString());
            if (parsed > 0 && Double.isFinite(parsed)) {
                return parsed;
            }
        } catch (NumberFormatException ignored) {
            // reported below
        }
        throw new ConfigException(key, value, "must be a number above 0, in the unit of the stored rates");
    }

    @Override
    public String name() {
        return "groupfit";
    }

    @Override
    public List<RebalanceProtocol> supportedProtocols() {
        return cooperative ? List.of(RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)
                : List.of(RebalanceProtocol.EAGER);
    }

    @Override
    public ByteBuffer subscriptionUserData(Set<String> topics) {
        // Every member is about to join and any may become the leader: read the rates now, while the group
        // gathers, so the leader's assign() makes one call instead of two.
        service.rates(group, timeout);
        reassigner.joining();
        return new MemberData(identity, capacity, owned, generation).encode();
    }

    @Override
    public void onAssignment(Assignment assignment, ConsumerGroupMetadata metadata) {
        owned = List.copyOf(assignment.partitions());
        generation = metadata.generationId();
        reassigner.joined(metadata);
    }

    public Report lastReport() {
        return lastReport;
    }

    @Override
    public GroupAssignment assign(Cluster metadata, GroupSubscription groupSubscription) {
        long started = System.nanoTime();
        Map<String, Subscription> subscriptions = groupSubscription.groupSubscription();
        List<Member> members = members(subscriptions);
        List<String> identities = members.stream().map(Member::identity).sorted().toList();
        Set<String> topics = new TreeSet<>();
        subscriptions.values().forEach(s -> topics.addAll(s.topics()));
        List<TopicPartition> partitions = new ArrayList<>();
        for (String topic : topics) {
            metadata.partitionsForTopic(topic).stream()
                    .map(p -> new TopicPartition(p.topic(), p.partition()))
                    .sorted(Comparator.comparingInt(TopicPartition::partition))
                    .forEach(partitions::add);
        }
        Map<TopicPartition, String> current = currentOwners(members, new HashSet<>(partitions));
        Map<String, Double> sizes = new HashMap<>(); // the members that advertise a capacity of their own
        members.stream().filter(m -> m.capacity() != null).forEach(m -> sizes.put(m.identity(), m.capacity()));
        boolean homogeneous = subscriptions.values().stream().map(s -> new HashSet<>(s.topics())).distinct().count() <= 1;
        Map<String, String> racks = new HashMap<>(); // the members that run in a known rack
        members.stream().filter(m -> m.rack() != null).forEach(m -> racks.put(m.identity(), m.rack()));
        // Without a member's rack nothing can be read locally: the request stays rack-free.
        Map<TopicPartition, List<String>> partitionRacks =
                racks.isEmpty() ? Map.of() : partitionRacks(metadata, partitions, fetchFromFollower);

        Map<TopicPartition, String> target;
        Report report;
        if (cooperative && completesTransfer(identities, partitions, current)) {
            target = lastTarget;
            report = new Report("pending", "completing the previous rebalance's transfers", null, 0, List.of(), null,
                    members.size(), partitions.size(), null, 0);
        } else {
            String reason;
            try {
                if (!homogeneous) {
                    throw new GroupfitService.UnusableAnswer("members subscribe to different topics");
                }
                GroupfitService.Answer answer = service.ask(group, defaultCapacity, identities, sizes, racks,
                                partitions, partitionRacks, current, timeout)
                        .get(timeout.toNanos(), TimeUnit.NANOSECONDS);
                Api.AssignResponse response = answer.response();
                target = answer.owner();
                report = new Report("service", "", response.rscore(), response.moves().size(),
                        response.overloadedMembers(), response.recommendedConsumers(), members.size(),
                        partitions.size(), response.crossZoneRate(), 0);
                reason = null;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                reason = "interrupted";
                target = null;
                report = null;
            } catch (Exception e) {
                reason = GroupfitService.reason(e);
                target = null;
                report = null;
            }
            if (target == null) {
                Local local = fallback(members, identities, partitions, current, subscriptions, homogeneous,
                        partitionRacks);
                log.warn("groupfit gave group {} no usable assignment ({}); assigned locally {}", group, reason, local.how());
                target = local.owner();
                report = new Report("fallback", reason, null, 0, List.of(), null, members.size(), partitions.size(), null, 0);
            }
        }
        lastTarget = target;
        lastMembers = identities;
        Map<TopicPartition, String> now = cooperative ? revokeFirst(target, current) : target;
        Map<String, List<TopicPartition>> byIdentity = new HashMap<>();
        now.forEach((tp, member) -> byIdentity.computeIfAbsent(member, m -> new ArrayList<>()).add(tp));
        Map<String, Assignment> assignments = new LinkedHashMap<>();
        for (Member member : members) {
            List<TopicPartition> mine = new ArrayList<>(byIdentity.getOrDefault(member.identity(), List.of()));
            mine.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
            assignments.put(member.memberId(), new Assignment(mine));
        }
        reassigner.led(!report.source().equals("fallback"), sizes);
        long micros = (System.nanoTime() - started) / 1000;
        lastReport = new Report(report.source(), report.reason(), report.rscore(), report.moves(),
                report.overloadedMembers(), report.recommendedConsumers(), report.members(), report.partitions(),
                report.crossZoneRate(), micros);
        log.info("group {}: {} partitions to {} members via {} in {} ms; rscore {}, moves {}, withheld for revocation "
                        + "{}, overloaded members {}, recommended consumers {}{}",
                group, partitions.size(), members.size(), report.source(), micros / 1000.0, report.rscore(),
                report.moves(), target.size() - now.size(), report.overloadedMembers(), report.recommendedConsumers(),
                report.crossZoneRate() == null ? "" : ", cross-zone rate " + report.crossZoneRate());
        if (!report.overloadedMembers().isEmpty()) {
            log.warn("group {}: members {} are over capacity; groupfit recommends {} consumers (the group has {})",
                    group, report.overloadedMembers(), report.recommendedConsumers(), members.size());
        }
        return new GroupAssignment(assignments);
    }

    /** The members with their data; one configured with an identity another already uses is known by its id. */
    static List<Member> members(Map<String, Subscription> subscriptions) {
        List<Member> members = new ArrayList<>();
        Set<String> seen = new HashSet<>();
        for (String memberId : new TreeSet<>(subscriptions.keySet())) {
            Subscription subscription = subscriptions.get(memberId);
            MemberData data = MemberData.decode(subscription.userData()).orElse(null);
            String identity = data == null ? memberId : data.identity();
            if (!seen.add(identity)) {
                log.warn("member {} repeats identity {}; known by its member id", memberId, identity);
                identity = memberId;
                seen.add(identity);
            }
            // COOPERATIVE members report what they own in the subscription itself; EAGER ones revoked it first.
            List<TopicPartition> owned = !subscription.ownedPartitions().isEmpty() ? subscription.ownedPartitions()
                    : data == null ? List.of() : data.owned();
            int generation = subscription.generationId().orElse(data == null ? -1 : data.generation());
            String rack = subscription.rackId().filter(r -> !r.isEmpty()).orElse(null);
            members.add(new Member(memberId, identity, data == null ? null : data.capacity(), owned, generation, rack));
        }
        return members;
    }

    /**
     * Each partition's racks from the cluster metadata, sorted: its leader's broker's rack, or with {@code replicas}
     * (the brokers serve fetch-from-follower) every replica's; a partition none of whose brokers has a rack (or
     * without a leader, from the leader) is left out: it has no racks.
     */
    static Map<TopicPartition, List<String>> partitionRacks(
            Cluster metadata, List<TopicPartition> partitions, boolean replicas) {
        Map<TopicPartition, List<String>> racks = new HashMap<>();
        for (TopicPartition tp : partitions) {
            PartitionInfo info = metadata.partition(tp);
            if (info == null) {
                continue;
            }
            Set<String> found = new TreeSet<>();
            for (Node node : replicas ? info.replicas() : new Node[] {info.leader()}) {
                String rack = rackOf(metadata, node);
                if (rack != null) {
                    found.add(rack);
                }
            }
            if (!found.isEmpty()) {
                racks.put(tp, List.copyOf(found));
            }
        }
        return racks;
    }

    /** A broker's rack: the node's own, else the cluster's node of that id (a partition's nodes may be bare ids). */
    private static String rackOf(Cluster metadata, Node node) {
        if (node == null || node.id() < 0) { // no leader
            return null;
        }
        if (node.hasRack()) {
            return node.rack();
        }
        Node known = metadata.nodeById(node.id());
        return known != null && known.hasRack() ? known.rack() : null;
    }

    /** Who owns each partition now, by identity; a partition claimed twice goes to the newest generation. */
    static Map<TopicPartition, String> currentOwners(List<Member> members, Set<TopicPartition> partitions) {
        Map<TopicPartition, String> owner = new HashMap<>();
        members.stream()
                .sorted(Comparator.comparingInt(Member::generation).thenComparing(Member::identity))
                .forEach(m -> m.owned().stream().filter(partitions::contains).forEach(tp -> owner.put(tp, m.identity())));
        return owner;
    }

    /** Whether this rebalance is the follow-up of a cooperative one whose target is still under way. */
    private boolean completesTransfer(
            List<String> identities, List<TopicPartition> partitions, Map<TopicPartition, String> current) {
        if (lastTarget.size() != partitions.size() || !lastTarget.keySet().containsAll(partitions)
                || !lastMembers.equals(identities)) {
            return false;
        }
        boolean pending = false;
        for (TopicPartition tp : partitions) {
            String owner = current.get(tp);
            if (owner == null) {
                pending = true;
            } else if (!owner.equals(lastTarget.get(tp))) {
                return false;
            }
        }
        return pending;
    }

    /** The target less every partition whose owner must revoke it first (it is given in the follow-up). */
    static Map<TopicPartition, String> revokeFirst(Map<TopicPartition, String> target, Map<TopicPartition, String> current) {
        Map<TopicPartition, String> now = new HashMap<>();
        target.forEach((tp, member) -> {
            String owner = current.get(tp);
            if (owner == null || owner.equals(member)) {
                now.put(tp, member);
            }
        });
        return now;
    }

    /** A local assignment and how it was made. */
    record Local(Map<TopicPartition, String> owner, String how) {}

    /**
     * Without the service: its algorithm in the local Java core on the last rates read (the configured algorithm if
     * the core runs it, else MWF), with the members' capacities and the last capacity the service used when the
     * leader has no {@code groupfit.default.capacity}, zone-aware where members and partitions have racks
     * ({@code partitionRacks}); without rates or a capacity, or when members subscribe to different topics: balanced
     * counts.
     */
    Local fallback(List<Member> members, List<String> identities, List<TopicPartition> partitions,
            Map<TopicPartition, String> current, Map<String, Subscription> subscriptions, boolean homogeneous,
            Map<TopicPartition, List<String>> partitionRacks) {
        Map<TopicPartition, Api.PartitionRate> rates = service.lastRates(group);
        Double used = defaultCapacity != null ? defaultCapacity : service.lastCapacity(group);
        String missing = !homogeneous ? "members subscribe to different topics"
                : rates == null || partitions.stream().noneMatch(rates::containsKey) ? "no rates were read"
                : used == null ? "no capacity is known" : null;
        if (missing == null) {
            String name = io.groupfit.kafka.core.Algorithm.runs(service.algorithm()) ? service.algorithm() : "mwf";
            Map<String, Double> sizes = new HashMap<>();
            members.stream().filter(m -> m.capacity() != null).forEach(m -> sizes.put(m.identity(), m.capacity()));
            Map<String, String> racks = new HashMap<>();
            members.stream().filter(m -> m.rack() != null).forEach(m -> racks.put(m.identity(), m.rack()));
            try {
                return new Local(LocalCore.solve(io.groupfit.kafka.core.Algorithm.of(name, Map.of()), used, identities,
                        sizes, racks, partitions, rates, partitionRacks, current),
                        "by " + name + " in the Java core on the last rates read");
            } catch (IllegalArgumentException e) {
                missing = e.getMessage();
            }
        }
        return new Local(balancedCounts(members, partitions, current, subscriptions), "by balanced counts (" + missing + ")");
    }

    /** Balance.sticky per set of members that may read a topic (all members when subscriptions agree). */
    static Map<TopicPartition, String> balancedCounts(List<Member> members, List<TopicPartition> partitions,
            Map<TopicPartition, String> current, Map<String, Subscription> subscriptions) {
        Map<String, List<String>> readersOf = new HashMap<>();
        Map<List<String>, List<TopicPartition>> byReaders = new LinkedHashMap<>(); // partitions come sorted
        for (TopicPartition tp : partitions) {
            List<String> readers = readersOf.computeIfAbsent(tp.topic(), topic -> members.stream()
                    .filter(m -> subscriptions.get(m.memberId()).topics().contains(topic))
                    .map(Member::identity).sorted().toList());
            byReaders.computeIfAbsent(readers, r -> new ArrayList<>()).add(tp);
        }
        Map<TopicPartition, String> owner = new HashMap<>();
        byReaders.forEach((readers, share) -> owner.putAll(Balance.sticky(readers, share, current)));
        return owner;
    }
}
