package io.groupfit.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A broker-side assignor for KIP-848 consumer groups that asks groupfit (broker: {@code
 * group.consumer.assignors=io.groupfit.kafka.GroupfitBrokerAssignor,uniform,range}; consumers:
 * {@code group.remote.assignor=groupfit}).
 *
 * <p>The coordinator calls {@link #assign} on its own thread whenever a group's epoch changes (a member joins or
 * leaves, a subscription changes) and nothing else: an answer that arrives later is applied only at the next
 * change. So this assignor asks synchronously, strictly bounded by {@code groupfit.assign.timeout.ms} (20 ms by
 * default): one POST /v1/assign on a kept connection, everything else prepared in the background. The group
 * spec names neither the group nor the topics (only member and topic ids), so a background thread learns them
 * from the broker itself through an Admin client (which group each member id is in; each topic id's name) and
 * keeps the group's stored rates fresh. When the group or a topic is not known yet, groupfit errs or the bound
 * passes, the assignment is a uniform sticky one ({@link Balance#sticky}) over the newest answer groupfit gave
 * for the group (members that left dropped), else over the current assignment; a late answer is kept for that.
 *
 * <p>Member identities sent to groupfit are the members' group.instance.id, else their member id. Members send the
 * coordinator no data of their own, so a member's capacity is what {@code groupfit.member.capacities} says for its
 * instance id; the others are sent as bare ids, with {@code groupfit.capacity}.
 */
public class GroupfitBrokerAssignor implements ConsumerGroupPartitionAssignor, Configurable, AutoCloseable {
    public static final String URL = "groupfit.url";
    public static final String TOKEN = "groupfit.token";
    public static final String TIMEOUT_MS = "groupfit.assign.timeout.ms";
    public static final String CAPACITY = "groupfit.capacity";
    public static final String MEMBER_CAPACITIES = "groupfit.member.capacities";
    public static final String ALGORITHM = "groupfit.algorithm";
    public static final String RATES_MAX_AGE_MS = "groupfit.rates.max.age.ms";
    public static final String BOOTSTRAP_SERVERS = "groupfit.bootstrap.servers";

    private static final Logger log = LoggerFactory.getLogger(GroupfitBrokerAssignor.class);
    /** How long an answer may take to be kept for a later change, beyond the bound the coordinator waits. */
    private static final Duration LATE = Duration.ofSeconds(5);

    /** A partition as the group spec names it. */
    record IdPartition(Uuid topicId, int partition) {}

    /** groupfit's newest answer for a group, identity-keyed. */
    record Latest(Map<TopicPartition, String> owner, Set<String> members) {}

    /** How one assign() went: where the target came from, why, and how long it held the calling thread. */
    public record Report(String group, String source, String reason, int members, int partitions, long micros) {}

    private GroupfitService service;
    private Duration timeout;
    private Double capacity;
    private Map<String, Double> memberCapacities;
    private Properties adminConfig;
    private final Map<String, String> groupOfMember = new ConcurrentHashMap<>();
    private final Map<Uuid, String> topicNames = new ConcurrentHashMap<>();
    final Map<String, Latest> latest = new ConcurrentHashMap<>(); // by group; read by tests
    private final Set<String> resolving = ConcurrentHashMap.newKeySet();
    private final ExecutorService background = Executors.newSingleThreadExecutor(runnable -> {
        Thread thread = new Thread(runnable, "groupfit-assignor-background");
        thread.setDaemon(true);
        return thread;
    });
    private final ExecutorService calls = Executors.newCachedThreadPool(runnable -> {
        Thread thread = new Thread(runnable, "groupfit-assignor-call");
        thread.setDaemon(true);
        return thread;
    });
    private volatile Admin admin;
    volatile CompletableFuture<Void> warm = CompletableFuture.completedFuture(null);
    private volatile Report lastReport;

    @Override
    public String name() {
        return "groupfit";
    }

    @Override
    public void configure(Map<String, ?> configs) {
        String url = GroupfitAssignor.setting(configs, URL, "");
        if (url.isBlank()) {
            throw new ConfigException(URL, url, "GroupfitBrokerAssignor needs groupfit's URL, e.g. http://groupfit:8000");
        }
        timeout = Duration.ofMillis(Long.parseLong(GroupfitAssignor.setting(configs, TIMEOUT_MS, "20")));
        String capacitySetting = GroupfitAssignor.setting(configs, CAPACITY, "");
        capacity = capacitySetting.isBlank() ? null : GroupfitAssignor.positive(CAPACITY, capacitySetting);
        memberCapacities = memberCapacities(GroupfitAssignor.setting(configs, MEMBER_CAPACITIES, ""));
        Duration ratesMaxAge = Duration.ofMillis(Long.parseLong(GroupfitAssignor.setting(configs, RATES_MAX_AGE_MS, "10000")));
        // Connecting is not bounded by the assign timeout: a new connection waits for the next assign().
        GroupfitClient client = new GroupfitClient(url, GroupfitAssignor.setting(configs, TOKEN, ""), Duration.ofSeconds(2));
        service = new GroupfitService(client, GroupfitAssignor.setting(configs, ALGORITHM, "mwf"), ratesMaxAge);
        warm = warmUp(client);
        adminConfig = new Properties();
        adminConfig.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap(configs));
        adminConfig.put(AdminClientConfig.CLIENT_ID_CONFIG, "groupfit-broker-assignor");
        adminConfig.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        adminConfig.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
    }

    /** Load the HTTP and JSON classes and open a connection now, so the first bounded call is not a cold one. */
    private CompletableFuture<Void> warmUp(GroupfitClient client) {
        return CompletableFuture.runAsync(() -> {
            try {
                GroupfitClient.JSON.writeValueAsBytes(new Api.AssignRequest("mwf", 1.0, "g", List.of("a"),
                        List.of(new Api.PartitionRate("t", 0, 1.0, null)), Map.of("a", List.of(new Api.PartitionRef("t", 0))),
                        null));
                GroupfitClient.JSON.readValue(WARM_UP_ANSWER, Api.AssignResponse.class);
                GroupfitService.check(GroupfitClient.JSON.readValue(WARM_UP_ANSWER, Api.AssignResponse.class),
                        List.of("a"), List.of(new TopicPartition("t", 0)));
                Balance.sticky(List.of("a", "b"), List.of(1, 2, 3), Map.of(1, "b"));
                // A stateless request (no group: nothing is stored) warms both ends of the first real call.
                client.assign(new Api.AssignRequest("mwf", 1.0, null, null,
                                List.of(new Api.PartitionRate("warm-up", 0, 1.0, null)), null, null), Duration.ofSeconds(5))
                        .handle((r, e) -> null).get(6, TimeUnit.SECONDS);
            } catch (Exception e) {
                log.warn("groupfit assignor: warming up failed: {}", GroupfitService.reason(e));
            }
        }, calls);
    }

    private static final String WARM_UP_ANSWER = "{\"algorithm\":\"mwf\",\"capacity\":1,\"assignment\":{\"a\":"
            + "[{\"topic\":\"t\",\"partition\":0}]},\"consumers\":[{\"id\":\"a\",\"load\":1,\"utilization\":1,"
            + "\"partition_count\":1}],\"moves\":[{\"topic\":\"t\",\"partition\":0,\"from\":\"b\",\"to\":\"a\","
            + "\"rate\":1}],\"delta\":{\"rows\":[],\"columns\":[],\"cells\":[]},\"rscore\":1,\"consumer_count\":1,"
            + "\"lower_bound\":1,\"overloaded_partitions\":[],\"overloaded_members\":[],\"recommended_consumers\":null,"
            + "\"outputs\":{},\"group\":\"g\",\"version\":1}";

    /** groupfit.member.capacities: {@code instance-id:capacity} pairs, comma-separated. */
    static Map<String, Double> memberCapacities(String setting) {
        Map<String, Double> capacities = new HashMap<>();
        for (String pair : setting.split(",")) {
            if (pair.isBlank()) {
                continue;
            }
            int colon = pair.lastIndexOf(':'); // an instance id may hold a colon; a number does not
            if (colon <= 0) {
                throw new ConfigException(MEMBER_CAPACITIES, setting,
                        "give instance-id:capacity pairs, comma-separated, e.g. orders-0:200,orders-1:100");
            }
            capacities.put(pair.substring(0, colon).trim(),
                    GroupfitAssignor.positive(MEMBER_CAPACITIES, pair.substring(colon + 1).trim()));
        }
        return Map.copyOf(capacities);
    }

    /** groupfit.bootstrap.servers, else this broker's own advertised (or plain) client listeners. */
    static String bootstrap(Map<String, ?> configs) {
        String given = GroupfitAssignor.setting(configs, BOOTSTRAP_SERVERS, "");
        if (!given.isBlank()) {
            return given;
        }
        Set<String> controllers = Set.of(GroupfitAssignor.setting(configs, "controller.listener.names", "").split(","));
        String listeners = GroupfitAssignor.setting(configs, "advertised.listeners",
                GroupfitAssignor.setting(configs, "listeners", ""));
        List<String> addresses = new ArrayList<>();
        for (String listener : listeners.split(",")) {
            int scheme = listener.indexOf("://");
            if (scheme < 0 || controllers.contains(listener.substring(0, scheme).trim())) {
                continue;
            }
            String address = listener.substring(scheme + 3).trim();
            addresses.add(address.startsWith(":") ? "localhost" + address : address);
        }
        if (addresses.isEmpty()) {
            throw new ConfigException(BOOTSTRAP_SERVERS, given, "set it: no client listener found in the broker's config");
        }
        return String.join(",", addresses);
    }

    public Report lastReport() {
        return lastReport;
    }

    /** What the background would learn from the broker (for tests without one). */
    void remember(Map<String, String> groups, Map<Uuid, String> names) {
        groupOfMember.putAll(groups);
        topicNames.putAll(names);
    }

    @Override
    public GroupAssignment assign(GroupSpec groupSpec, SubscribedTopicDescriber describer)
            throws PartitionAssignorException {
        long started = System.nanoTime();
        List<String> memberIds = new ArrayList<>(new TreeSet<>(groupSpec.memberIds()));
        Map<String, String> identityOf = new HashMap<>();
        Map<String, String> memberOf = new HashMap<>();
        for (String memberId : memberIds) {
            String identity = groupSpec.memberSubscription(memberId).instanceId().orElse(memberId);
            if (memberOf.putIfAbsent(identity, memberId) != null) {
                identity = memberId; // two members claim one instance id: the coordinator fences one soon
                memberOf.put(identity, memberId);
            }
            identityOf.put(memberId, identity);
        }
        Map<Uuid, List<String>> readers = new TreeMap<>();
        for (String memberId : memberIds) {
            for (Uuid topicId : groupSpec.memberSubscription(memberId).subscribedTopicIds()) {
                readers.computeIfAbsent(topicId, t -> new ArrayList<>()).add(identityOf.get(memberId));
            }
        }
        List<IdPartition> partitions = new ArrayList<>();
        readers.forEach((topicId, who) -> {
            int count = describer.numPartitions(topicId);
            for (int p = 0; p < count; p++) {
                if (groupSpec.isPartitionAssignable(topicId, p)) {
                    partitions.add(new IdPartition(topicId, p));
                }
            }
        });
        Map<IdPartition, String> current = new HashMap<>();
        for (String memberId : memberIds) {
            groupSpec.memberAssignment(memberId).partitions().forEach((topicId, ps) ->
                    ps.forEach(p -> current.put(new IdPartition(topicId, p), identityOf.get(memberId))));
        }

        String group = memberIds.stream().map(groupOfMember::get).filter(g -> g != null).findFirst().orElse(null);
        boolean named = readers.keySet().stream().allMatch(topicNames::containsKey);
        boolean homogeneous = readers.values().stream().allMatch(who -> who.size() == memberIds.size());
        Map<IdPartition, String> target = null;
        String reason;
        if (memberIds.isEmpty() || partitions.isEmpty()) {
            reason = "nothing to assign";
        } else if (group == null) {
            reason = "the group of these members is not known yet";
        } else if (!named) {
            reason = "a subscribed topic's name is not known yet";
        } else if (!homogeneous) {
            reason = "members subscribe to different topics";
        } else {
            List<String> identities = memberIds.stream().map(identityOf::get).sorted().toList();
            List<TopicPartition> named_ = partitions.stream().map(this::named).toList();
            Map<TopicPartition, String> previous = new HashMap<>();
            current.forEach((p, identity) -> previous.put(named(p), identity));
            // The whole call runs on another thread, so this one waits for the bound and no longer (building the
            // request, a new connection); the HTTP timeout is longer, so a late answer still arrives and is kept.
            String askedFor = group;
            CompletableFuture<GroupfitService.Answer> asked = CompletableFuture
                    .supplyAsync(() -> service.ask(askedFor, capacity, identities, memberCapacities, named_, previous,
                            LATE), calls)
                    .thenCompose(future -> future);
            asked.thenAccept(answer -> latest.put(askedFor, new Latest(answer.owner(), Set.copyOf(identities))));
            try {
                Map<TopicPartition, String> owner = asked.get(
                        Math.max(0, timeout.toNanos() - (System.nanoTime() - started)), TimeUnit.NANOSECONDS).owner();
                target = new HashMap<>();
                for (IdPartition p : partitions) {
                    target.put(p, owner.get(named(p)));
                }
                reason = "";
            } catch (TimeoutException e) {
                reason = "no answer within " + timeout.toMillis() + " ms (a late one is kept for the next change)";
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                reason = "interrupted";
            } catch (Exception e) {
                reason = GroupfitService.reason(e);
            }
        }
        String source = target != null ? "service" : "fallback";
        if (target == null) {
            target = fallback(group, identityOf, readers, partitions, current);
        }
        GroupAssignment assignment = assignment(memberIds, identityOf, target);
        long micros = (System.nanoTime() - started) / 1000;
        lastReport = new Report(group, source, reason, memberIds.size(), partitions.size(), micros);
        prepare(group, memberIds, readers.keySet());
        log.info("groupfit assignor: group {}, {} partitions to {} members via {}{}; held the coordinator {} ms",
                group, partitions.size(), memberIds.size(), source, reason.isEmpty() ? "" : " (" + reason + ")",
                micros / 1000.0);
        return assignment;
    }

    private TopicPartition named(IdPartition p) {
        return new TopicPartition(topicNames.get(p.topicId()), p.partition());
    }

    /**
     * Without a fresh answer: groupfit's newest answer for the group when it was for these members (completed for
     * new partitions); else balanced counts per set of readers, sticky to that answer (members that left dropped)
     * or, without one, to the current assignment.
     */
    private Map<IdPartition, String> fallback(String group, Map<String, String> identityOf,
            Map<Uuid, List<String>> readers, List<IdPartition> partitions, Map<IdPartition, String> current) {
        Map<IdPartition, String> start = new HashMap<>(current);
        Latest newest = group == null ? null : latest.get(group);
        Set<String> present = new HashSet<>(identityOf.values());
        if (newest != null) {
            for (IdPartition p : partitions) {
                String name = topicNames.get(p.topicId());
                String owner = name == null ? null : newest.owner().get(new TopicPartition(name, p.partition()));
                if (owner != null && present.contains(owner)) {
                    start.put(p, owner);
                }
            }
        }
        boolean sameMembers = newest != null && newest.members().equals(present);
        Map<Uuid, List<String>> sortedReaders = new HashMap<>();
        Map<List<String>, List<IdPartition>> byReaders = new LinkedHashMap<>(); // partitions come in topic order
        for (IdPartition p : partitions) {
            List<String> who = sortedReaders.computeIfAbsent(p.topicId(), t -> readers.get(t).stream().sorted().toList());
            byReaders.computeIfAbsent(who, r -> new ArrayList<>()).add(p);
        }
        Map<IdPartition, String> owner = new HashMap<>();
        byReaders.forEach((who, share) -> owner.putAll(
                sameMembers ? Balance.complete(who, share, start) : Balance.sticky(who, share, start)));
        return owner;
    }

    private static GroupAssignment assignment(
            List<String> memberIds, Map<String, String> identityOf, Map<IdPartition, String> target) {
        Map<String, Map<Uuid, Set<Integer>>> byIdentity = new HashMap<>();
        target.forEach((p, identity) -> byIdentity.computeIfAbsent(identity, i -> new HashMap<>())
                .computeIfAbsent(p.topicId(), t -> new HashSet<>()).add(p.partition()));
        Map<String, MemberAssignment> members = new HashMap<>();
        for (String memberId : memberIds) {
            Map<Uuid, Set<Integer>> mine = byIdentity.getOrDefault(identityOf.get(memberId), Map.of());
            members.put(memberId, () -> mine);
        }
        return new GroupAssignment(members);
    }

    /** In the background: learn the group of unknown members and unknown topic names; refresh the group's rates. */
    private void prepare(String group, Collection<String> memberIds, Collection<Uuid> topicIds) {
        List<String> unknownMembers = memberIds.stream().filter(m -> !groupOfMember.containsKey(m)).toList();
        boolean unknownTopics = topicIds.stream().anyMatch(t -> !topicNames.containsKey(t));
        String key = group + "|" + unknownMembers + "|" + unknownTopics;
        if (!resolving.add(key)) {
            return;
        }
        background.execute(() -> {
            try {
                // A member's join is visible to DescribeGroups only once the coordinator wrote it: retry a while.
                for (int attempt = 0; attempt < 50; attempt++) {
                    if (unknownTopics && topicIds.stream().anyMatch(t -> !topicNames.containsKey(t))) {
                        for (TopicListing topic : admin().listTopics(new ListTopicsOptions().listInternal(true))
                                .listings().get(15, TimeUnit.SECONDS)) {
                            topicNames.put(topic.topicId(), topic.name());
                        }
                    }
                    if (unknownMembers.stream().anyMatch(m -> !groupOfMember.containsKey(m))) {
                        learnGroups();
                    }
                    boolean groupKnown = group != null || unknownMembers.stream().anyMatch(groupOfMember::containsKey);
                    if (groupKnown && topicIds.stream().allMatch(topicNames::containsKey)) {
                        break;
                    }
                    Thread.sleep(200);
                }
                String known = group != null ? group
                        : unknownMembers.stream().map(groupOfMember::get).filter(g -> g != null).findFirst().orElse(null);
                if (known != null) {
                    service.rates(known, Duration.ofSeconds(5)).get(5, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (Exception e) {
                log.warn("groupfit assignor: could not prepare group {}: {}", group, GroupfitService.reason(e));
            } finally {
                resolving.remove(key);
            }
        });
    }

    private void learnGroups() throws Exception {
        List<String> groups = new ArrayList<>();
        for (GroupListing listing : admin().listGroups(ListGroupsOptions.forConsumerGroups()).all().get(15, TimeUnit.SECONDS)) {
            groups.add(listing.groupId());
        }
        if (groups.isEmpty()) {
            return;
        }
        Map<String, ConsumerGroupDescription> described =
                admin().describeConsumerGroups(groups).all().get(15, TimeUnit.SECONDS);
        for (ConsumerGroupDescription description : described.values()) {
            Set<String> present = new HashSet<>();
            for (MemberDescription member : description.members()) {
                present.add(member.consumerId());
                groupOfMember.put(member.consumerId(), description.groupId());
            }
            // Members that left are forgotten, so the map stays as large as the groups are.
            groupOfMember.entrySet().removeIf(e -> e.getValue().equals(description.groupId()) && !present.contains(e.getKey()));
        }
    }

    private Admin admin() {
        if (admin == null) {
            synchronized (this) {
                if (admin == null) {
                    admin = Admin.create(adminConfig);
                }
            }
        }
        return admin;
    }

    @Override
    public void close() {
        background.shutdownNow();
        calls.shutdownNow();
        Optional.ofNullable(admin).ifPresent(a -> a.close(Duration.ZERO)); // pending look-ups are of no use any more
    }
}
