package io.groupfit.kafka;

import com.fasterxml.jackson.core.type.TypeReference;
import io.groupfit.kafka.core.Algorithm;
import io.groupfit.kafka.core.Holding;
import io.groupfit.kafka.core.Outcome;
import io.groupfit.kafka.core.Problem;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
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
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A broker-side assignor for KIP-848 consumer groups that assigns by rate in the broker (broker: {@code
 * group.consumer.assignors=uniform,range,io.groupfit.kafka.GroupfitBrokerAssignor}; consumers: {@code
 * group.remote.assignor=groupfit}).
 *
 * <p>The coordinator calls {@link #assign} on its own thread whenever a group's epoch changes, and an answer that
 * arrives later is applied only at the next change. So {@code assign()} waits on nothing: it computes the
 * assignment with groupfit's algorithms in Java ({@link io.groupfit.kafka.core}) from what a background thread
 * learnt before, and hands the answer to another thread that reports it to groupfit (POST /v1/assign with the
 * assignment given), so the group's history, metrics and console stay whole. The background thread learns from
 * the broker itself, through an Admin client, what the group spec does not say (which group each member id is
 * in; each topic id's name), and from groupfit, every {@code groupfit.refresh.ms}, each group's stored rates and
 * its algorithm and capacity (GET /v1/groups/{group}/rates and GET /v1/groups/{group}).
 *
 * <p>Until the group, its topics, its rates and a capacity are known (the group's very first assignments), or when
 * members subscribe to different topics, the assignment is a uniform sticky one ({@link Balance#sticky}) over the
 * current assignment, logged. Member identities are the members' group.instance.id, else their member id; a
 * member's capacity is what {@code groupfit.member.capacities} says for its identity, else the capacity.
 *
 * <p>Zones: when a member has a rack (its client.rack) and a partition has racks (the describer's: every replica's
 * broker's rack), the Java core computes the zone-aware assignment itself (its zone mode, byte-identical to the
 * service's), with the same algorithm as for any group, and the report carries the racks (the service records the
 * cross-zone rate). No call on the calling thread waits on the network, zone-aware or not.
 */
public class GroupfitBrokerAssignor implements ConsumerGroupPartitionAssignor, Configurable, AutoCloseable {
    public static final String URL = "groupfit.url";
    public static final String TOKEN = "groupfit.token";
    public static final String CAPACITY = "groupfit.capacity";
    public static final String MEMBER_CAPACITIES = "groupfit.member.capacities";
    public static final String ALGORITHM = "groupfit.algorithm";
    public static final String PARAMS = "groupfit.params";
    public static final String REFRESH_MS = "groupfit.refresh.ms";
    public static final String BOOTSTRAP_SERVERS = "groupfit.bootstrap.servers";

    private static final Logger log = LoggerFactory.getLogger(GroupfitBrokerAssignor.class);
    /** How long one background read or report may take. */
    private static final Duration CALL = Duration.ofSeconds(10);
    /** Reports waiting to be sent; past it the oldest is dropped (logged): the service is far behind or down. */
    private static final int REPORTS_QUEUED = 64;

    /** A topic's stored rates and lags, by partition number (NaN: none stored). */
    record TopicRates(double[] rate, double[] lag) {
        boolean sameAs(TopicRates other) {
            return Arrays.equals(rate, other.rate) && Arrays.equals(lag, other.lag);
        }
    }

    /**
     * What the background knows of a group: its stored rates by topic (null: none stored yet), the algorithm the
     * core runs for it (the group's stored one when the core runs it, else the configured one) and the group's
     * stored capacity (null: none).
     */
    record Knowledge(Map<String, TopicRates> rates, Algorithm algorithm, Double storedCapacity) {
        /** The same rates, algorithm and capacity (a read that found nothing new). */
        boolean sameAs(Knowledge other) {
            if (!algorithm.name().equals(other.algorithm.name()) || !algorithm.params().equals(other.algorithm.params())
                    || !java.util.Objects.equals(storedCapacity, other.storedCapacity)) {
                return false;
            }
            if (rates == null || other.rates == null) {
                return rates == other.rates;
            }
            return rates.keySet().equals(other.rates.keySet())
                    && rates.entrySet().stream().allMatch(e -> e.getValue().sameAs(other.rates.get(e.getKey())));
        }
    }

    /** How one assign() went: where the target came from, why, and how long it held the calling thread. */
    public record Report(String group, String source, String algorithm, String reason, int members, int partitions,
            int moves, double rscore, Double crossZoneRate, long micros) {}

    private GroupfitClient client;
    private Double capacity;
    private Map<String, Double> memberCapacities;
    private Algorithm configured;
    private Duration refresh;
    private Properties adminConfig;
    private final Map<String, String> groupOfMember = new ConcurrentHashMap<>();
    private final Map<Uuid, String> topicNames = new ConcurrentHashMap<>();
    final Map<String, Knowledge> knowledge = new ConcurrentHashMap<>(); // by group; read by tests
    final Map<String, GroupMemo> memos = new ConcurrentHashMap<>(); // by group, as long as its knowledge
    private final Set<String> resolving = ConcurrentHashMap.newKeySet();
    private final ScheduledExecutorService background = Executors.newSingleThreadScheduledExecutor(runnable -> {
        Thread thread = new Thread(runnable, "groupfit-assignor-background");
        thread.setDaemon(true);
        return thread;
    });
    private final ThreadPoolExecutor reporter = new ThreadPoolExecutor(1, 1, 0, TimeUnit.MILLISECONDS,
            new ArrayBlockingQueue<>(REPORTS_QUEUED), runnable -> {
                Thread thread = new Thread(runnable, "groupfit-assignor-report");
                thread.setDaemon(true);
                return thread;
            }, (dropped, executor) -> {
                executor.getQueue().poll();
                executor.getQueue().offer(dropped);
                log.warn("groupfit assignor: {} reports wait for groupfit; the oldest is dropped", REPORTS_QUEUED);
            });
    private volatile Admin admin;
    volatile CompletableFuture<Void> warm = CompletableFuture.completedFuture(null);
    private volatile Report lastReport;

    @Override
    public String name() {
        return "groupfit";
    }

    /** The client the background and the reports use (a test counts who calls it). */
    GroupfitClient client(String url, String token) {
        return new GroupfitClient(url, token, Duration.ofSeconds(2));
    }

    @Override
    public void configure(Map<String, ?> configs) {
        String url = GroupfitAssignor.setting(configs, URL, "");
        if (url.isBlank()) {
            throw new ConfigException(URL, url, "GroupfitBrokerAssignor needs groupfit's URL, e.g. http://groupfit:8000");
        }
        String capacitySetting = GroupfitAssignor.setting(configs, CAPACITY, "");
        capacity = capacitySetting.isBlank() ? null : GroupfitAssignor.positive(CAPACITY, capacitySetting);
        memberCapacities = memberCapacities(GroupfitAssignor.setting(configs, MEMBER_CAPACITIES, ""));
        configured = algorithm(GroupfitAssignor.setting(configs, ALGORITHM, "mwf"),
                GroupfitAssignor.setting(configs, PARAMS, ""));
        refresh = Duration.ofMillis(Long.parseLong(GroupfitAssignor.setting(configs, REFRESH_MS, "10000")));
        client = client(url, GroupfitAssignor.setting(configs, TOKEN, ""));
        adminConfig = new Properties();
        adminConfig.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap(configs));
        adminConfig.put(AdminClientConfig.CLIENT_ID_CONFIG, "groupfit-broker-assignor");
        adminConfig.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        adminConfig.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        background.scheduleWithFixedDelay(this::refreshAll, refresh.toMillis(), refresh.toMillis(), TimeUnit.MILLISECONDS);
        warm = CompletableFuture.runAsync(GroupfitBrokerAssignor::warmUp, background);
    }

    /** groupfit.algorithm and groupfit.params (a JSON object), checked now: a typo fails the broker's start. */
    static Algorithm algorithm(String name, String params) {
        try {
            Map<String, Object> parsed = params.isBlank() ? Map.of()
                    : GroupfitClient.JSON.readValue(params, new TypeReference<Map<String, Object>>() {});
            return Algorithm.of(name, parsed);
        } catch (IllegalArgumentException | java.io.IOException e) {
            throw new ConfigException(ALGORITHM + " / " + PARAMS, name + " " + params, e.getMessage());
        }
    }

    /** Loads and compiles the core's classes on a small group now, so the first assign() is not a cold one. */
    private static void warmUp() {
        for (int round = 0; round < 200; round++) {
            Problem.Builder builder = new Problem.Builder(10, 64);
            int topic = builder.topic("warm-up");
            for (int p = 0; p < 64; p++) {
                builder.partition(topic, p, (p * 7 + round) % 11, Double.NaN);
            }
            for (int m = 0; m < 4; m++) {
                builder.member(builder.consumer("m" + m), Double.NaN);
            }
            for (int p = 0; p < 64; p++) {
                builder.previous(builder.consumer("m" + (p % 4)), p);
            }
            Algorithm.of("mwf", Map.of()).solve(builder.build());
        }
    }

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

    /** What the background would learn from the broker (for tests and the benchmark without one). */
    void remember(Map<String, String> groups, Map<Uuid, String> names) {
        groupOfMember.putAll(groups);
        topicNames.putAll(names);
    }

    /** What the background would learn from groupfit (for the benchmark without a service). */
    void remember(String group, Api.StoredRates rates, Api.GroupState state) {
        knowledge.put(group, knowledge(rates, state));
    }

    @Override
    public GroupAssignment assign(GroupSpec groupSpec, SubscribedTopicDescriber describer)
            throws PartitionAssignorException {
        long started = System.nanoTime();
        Collection<String> ids = groupSpec.memberIds();
        String[] memberIds = ids.toArray(new String[0]);
        Map<String, String> identityOf = new HashMap<>(2 * memberIds.length);
        Map<String, String> memberOf = new HashMap<>(2 * memberIds.length);
        if (!identities(groupSpec, memberIds, identityOf, memberOf)) {
            // two members claim one instance id (the coordinator fences one soon): the first by member id keeps it
            Arrays.sort(memberIds);
            identityOf.clear();
            memberOf.clear();
            identities(groupSpec, memberIds, identityOf, memberOf);
        }
        Set<Uuid> subscribed;
        boolean homogeneous = true;
        if (groupSpec.subscriptionType() == SubscriptionType.HOMOGENEOUS && memberIds.length > 0) {
            subscribed = groupSpec.memberSubscription(memberIds[0]).subscribedTopicIds();
        } else {
            subscribed = new HashSet<>();
            for (String memberId : memberIds) {
                subscribed.addAll(groupSpec.memberSubscription(memberId).subscribedTopicIds());
            }
            for (String memberId : memberIds) {
                homogeneous &= groupSpec.memberSubscription(memberId).subscribedTopicIds().size() == subscribed.size();
            }
        }
        String group = null;
        for (String memberId : memberIds) {
            group = groupOfMember.get(memberId);
            if (group != null) {
                break;
            }
        }
        boolean named = true;
        for (Uuid topicId : subscribed) {
            named &= topicNames.containsKey(topicId);
        }
        Knowledge known = group == null ? null : knowledge.get(group);
        Double used = capacity != null ? capacity : known == null ? null : known.storedCapacity();
        String reason;
        GroupAssignment assignment = null;
        Outcome outcome = null;
        if (memberIds.length == 0 || subscribed.isEmpty()) {
            reason = "nothing to assign";
        } else if (group == null) {
            reason = "the group of these members is not known yet";
        } else if (!named) {
            reason = "a subscribed topic's name is not known yet";
        } else if (!homogeneous) {
            reason = "members subscribe to different topics";
        } else if (known == null || known.rates() == null) {
            reason = "no rates are known for the group yet";
        } else if (used == null) {
            reason = "no capacity: set " + CAPACITY + " or store one for the group";
        } else {
            reason = "";
            try {
                Computed computed = compute(memos.computeIfAbsent(group, g -> new GroupMemo()), groupSpec, describer,
                        identityOf, memberOf, subscribed, known, used);
                if (computed == null) {
                    reason = "no rates are stored for the group's partitions";
                } else {
                    outcome = computed.outcome();
                    assignment = computed.assignment();
                    Outcome computedOutcome = outcome;
                    Algorithm ran = known.algorithm();
                    String reported = group;
                    double capacityUsed = used;
                    // a zone-aware outcome's report carries the racks: the service records the cross-zone rate
                    report(group, () -> reportRequest(reported, ran, capacityUsed, computedOutcome, known.rates()));
                }
            } catch (IllegalArgumentException e) {
                reason = e.getMessage();
            }
        }
        int partitions;
        if (assignment == null) {
            Fallback fallback = fallback(groupSpec, describer, memberIds, identityOf, subscribed);
            assignment = fallback.assignment();
            partitions = fallback.partitions();
        } else {
            partitions = outcome.problem().size();
        }
        long micros = (System.nanoTime() - started) / 1000;
        String source = outcome != null ? "core" : "fallback";
        String algorithm = outcome != null ? outcome.algorithm() : "uniform-sticky";
        int moves = outcome == null ? 0 : outcome.moves();
        double rscore = outcome == null ? 0 : outcome.rscore();
        Double crossZoneRate = outcome == null || outcome.zones() == null ? null : outcome.zones().crossZoneRate();
        lastReport = new Report(group, source, algorithm, reason, memberIds.length, partitions, moves, rscore,
                crossZoneRate, micros);
        prepare(group, memberIds, subscribed);
        if (!log.isInfoEnabled()) {
            return assignment;
        }
        if (outcome != null) {
            log.info("groupfit assignor: group {}, {} partitions to {} members via core ({}{}; rscore {}, {} moves, "
                    + "overloaded {}{}); held the coordinator {} ms", group, partitions, memberIds.length, algorithm,
                    crossZoneRate == null ? "" : " zone-aware", outcome.rscore(), outcome.moves(), outcome.overloaded(),
                    crossZoneRate == null ? "" : ", cross-zone rate " + crossZoneRate, micros / 1000.0);
        } else {
            log.info("groupfit assignor: group {}, {} partitions to {} members via fallback ({}); held the "
                    + "coordinator {} ms", group, partitions, memberIds.length, reason, micros / 1000.0);
        }
        return assignment;
    }

    /** Each member's identity (its instance id, else its member id) both ways; false when two members claim one. */
    private static boolean identities(GroupSpec groupSpec, String[] memberIds, Map<String, String> identityOf,
            Map<String, String> memberOf) {
        boolean distinct = true;
        for (String memberId : memberIds) {
            String identity = groupSpec.memberSubscription(memberId).instanceId().orElse(memberId);
            if (memberOf.putIfAbsent(identity, memberId) != null) {
                distinct = false;
                identity = memberId;
                memberOf.put(identity, memberId);
            }
            identityOf.put(memberId, identity);
        }
        return distinct;
    }

    private record Computed(Outcome outcome, GroupAssignment assignment, Uuid[] topicIds) {}

    /**
     * The core's assignment, or null when none of the partitions has a stored rate. What the memo kept is used
     * where it was made from the same inputs (the layout and rates, a member's very assignment map, the identities),
     * so the call costs what changed since the last one; a member whose partitions stay the same gets the
     * coordinator's own assignment object back (the coordinator then sees it unchanged at once), the others compact
     * sets.
     */
    private Computed compute(GroupMemo memo, GroupSpec groupSpec, SubscribedTopicDescriber describer,
            Map<String, String> identityOf, Map<String, String> memberOf, Set<Uuid> subscribed, Knowledge known,
            double used) {
        GroupMemo.State before = memo.state;
        GroupMemo.Table kept = before.table();
        // Topics by name, partitions by number: the request order is the (topic, partition) order.
        boolean sameTopics = kept != null && kept.topicIds().length == subscribed.size();
        for (Uuid topicId : sameTopics ? subscribed : Set.<Uuid>of()) {
            sameTopics &= kept.topicOf().containsKey(topicId);
        }
        Uuid[] topicIds = sameTopics ? kept.topicIds() : byName(subscribed);
        int[] counts = new int[topicIds.length];
        for (int t = 0; t < topicIds.length; t++) {
            counts[t] = describer.numPartitions(topicIds[t]);
        }
        int[] unassignable = unassignable(groupSpec, topicIds, counts);
        GroupMemo.Table table = GroupMemo.table(kept, known, topicIds, counts, unassignable, topicNames::get);
        if (table == null) {
            return null;
        }
        GroupMemo.Order order = GroupMemo.natural(before.natural(), memberOf.keySet());
        String[] natural = order.natural();
        Map<String, GroupMemo.Seen> seen = new HashMap<>(2 * natural.length);
        String[] memberOfConsumer = new String[natural.length];
        MemberAssignment[] current = new MemberAssignment[natural.length];
        Holding[] holdings = new Holding[natural.length];
        for (int c = 0; c < natural.length; c++) { // consumers in natural order: the core's sorts find them sorted
            String memberId = memberOf.get(natural[c]);
            memberOfConsumer[c] = memberId;
            MemberAssignment assigned = groupSpec.memberAssignment(memberId);
            Map<Uuid, Set<Integer>> assignment = assigned.partitions();
            GroupMemo.Seen was = before.seen().get(memberId);
            Holding holding = GroupMemo.holding(was, assignment, table);
            seen.put(memberId, was != null && was.holding() == holding ? was : new GroupMemo.Seen(assignment, holding));
            current[c] = assigned;
            holdings[c] = holding;
        }
        // the previous owners from the last call's, where only the changed members' are written again
        int[] owners = GroupMemo.owners(before, table, order, holdings);
        Problem.Builder builder = owners != null ? new Problem.Builder(used, table.partitions(), owners)
                : new Problem.Builder(used, table.partitions());
        boolean racked = false;
        for (int c = 0; c < natural.length; c++) {
            String identity = natural[c];
            builder.member(builder.consumer(identity), // c: the consumers are numbered in the order given
                    memberCapacities.isEmpty() ? Double.NaN : memberCapacities.getOrDefault(identity, Double.NaN));
            Optional<String> rack = groupSpec.memberSubscription(memberOfConsumer[c]).rackId();
            if (rack.isPresent() && !rack.get().isEmpty()) {
                builder.rack(c, rack.get());
                racked = true;
            }
        }
        // zone-aware where partitions have racks (the describer is asked only when a member has one)
        GroupMemo.Racks racks = racked ? GroupMemo.racks(before.racks(), table, describer) : before.racks();
        if (racked) {
            builder.racks(racks.racks());
        }
        for (int c = 0; c < natural.length; c++) {
            if (holdings[c].size() > 0) {
                builder.previous(c, holdings[c]);
            }
        }
        Problem problem = builder.build();
        Outcome outcome = known.algorithm().solve(problem);
        memo.publish(new GroupMemo.State(table, seen, natural, racks, holdings, problem.previousOwners()));
        Map<Uuid, Set<Integer>>[] changed = changedAssignments(outcome, table);
        Map<String, MemberAssignment> members = new HashMap<>(2 * natural.length);
        for (int i = 0; i < outcome.consumerCount(); i++) {
            int c = outcome.consumerIndex(i);
            if (c >= natural.length) {
                throw new IllegalStateException("the core answered a consumer that is not a member: " + outcome.consumer(i));
            }
            Map<Uuid, Set<Integer>> mine = changed[i];
            members.put(memberOfConsumer[c], mine == null ? current[c] : () -> mine);
        }
        if (outcome.consumerCount() < memberOfConsumer.length) { // in member mode the answer names every member
            for (String memberId : memberOfConsumer) {
                members.putIfAbsent(memberId, Map::of);
            }
        }
        return new Computed(outcome, new GroupAssignment(members), topicIds);
    }

    /** The partitions the coordinator does not let be assigned, numbered across the topics in order. */
    private static int[] unassignable(GroupSpec groupSpec, Uuid[] topicIds, int[] counts) {
        int[] unassignable = new int[0];
        int count = 0;
        int global = 0;
        for (int t = 0; t < topicIds.length; t++) {
            Uuid topicId = topicIds[t];
            for (int p = 0; p < counts[t]; p++, global++) {
                if (!groupSpec.isPartitionAssignable(topicId, p)) {
                    if (count == unassignable.length) {
                        unassignable = Arrays.copyOf(unassignable, Math.max(16, 2 * count));
                    }
                    unassignable[count++] = global;
                }
            }
        }
        return count == unassignable.length ? unassignable : Arrays.copyOf(unassignable, count);
    }

    /**
     * The topics sorted by name (the request's order). Iterated: the coordinator's set of a member's topic ids
     * (TopicIds) throws on toArray.
     */
    private Uuid[] byName(Set<Uuid> topics) {
        Uuid[] sorted = new Uuid[topics.size()];
        int i = 0;
        for (Uuid topicId : topics) {
            sorted[i++] = topicId;
        }
        Arrays.sort(sorted, (a, b) -> topicNames.get(a).compareTo(topicNames.get(b)));
        return sorted;
    }

    /**
     * Each changed consumer's assignment as the coordinator takes it (null for those that hold what they held: their
     * current assignment is handed back): its partition numbers ascending, a run per topic, in one array ({@link
     * MemberPartitions}), which is its partitions in index order (the (topic, partition) order). When the changed
     * consumers hold few of the partitions (a member joined or left a settled group), each one's are sorted; when
     * they hold many (the group forms), one pass over the partitions in index order puts them in that order.
     */
    @SuppressWarnings("unchecked")
    private static Map<Uuid, Set<Integer>>[] changedAssignments(Outcome outcome, GroupMemo.Table table) {
        int count = outcome.consumerCount();
        Map<Uuid, Set<Integer>>[] assignments = new Map[count];
        int[][] numbers = new int[count][];
        int[][] runTopic = new int[count][];
        int[][] runEnd = new int[count][];
        int topics = table.topicIds().length;
        long changed = 0;
        for (int i = 0; i < count; i++) {
            if (!outcome.unchanged(i)) {
                int size = outcome.partitions(i).length;
                numbers[i] = new int[size];
                runTopic[i] = new int[Math.min(topics, size)];
                runEnd[i] = new int[runTopic[i].length];
                changed += size;
            }
        }
        if (changed == 0) {
            return assignments;
        }
        Problem problem = outcome.problem();
        int[] filled = new int[count];
        int[] runs = new int[count];
        if (changed * 16 < problem.size()) {
            int[] lastTopic = new int[count]; // of each one's current run (beside the counts: one cache line less a step)
            Arrays.fill(lastTopic, -1);
            for (int i = 0; i < count; i++) {
                if (numbers[i] != null) {
                    int[] mine = outcome.partitions(i).clone();
                    Arrays.sort(mine);
                    for (int j : mine) {
                        run(problem, i, j, numbers, runTopic, runEnd, filled, runs, lastTopic);
                    }
                }
            }
        } else {
            // topic by topic (a topic's partitions are consecutive indices from its base), each one's run of the
            // topic closed after it: per partition only its number is written
            int[] owners = outcome.ownersPlusOne();
            int[] base = table.base();
            for (int t = 0, n = problem.size(); t < topics; t++) {
                for (int j = base[t], end = t + 1 < topics ? base[t + 1] : n; j < end; j++) {
                    int i = owners[j] - 1;
                    int[] mine = numbers[i];
                    if (mine != null) {
                        mine[filled[i]++] = problem.partition(j);
                    }
                }
                for (int i = 0; i < count; i++) {
                    int k = runs[i];
                    if (numbers[i] != null && filled[i] > (k == 0 ? 0 : runEnd[i][k - 1])) {
                        runTopic[i][k] = t;
                        runEnd[i][k] = filled[i];
                        runs[i] = k + 1;
                    }
                }
            }
        }
        for (int i = 0; i < count; i++) {
            if (numbers[i] != null) {
                if (runs[i] > 0) {
                    runEnd[i][runs[i] - 1] = filled[i];
                }
                assignments[i] = new MemberPartitions(table.topicIds(), table.topicOf(), numbers[i], runTopic[i],
                        runEnd[i], runs[i]);
            }
        }
        return assignments;
    }

    /** Partition j, the next of consumer i's in index order, into its numbers and runs. */
    private static void run(Problem problem, int i, int j, int[][] numbers, int[][] runTopic, int[][] runEnd,
            int[] filled, int[] runs, int[] lastTopic) {
        int t = problem.topicIndex(j);
        if (t != lastTopic[i]) {
            int k = runs[i]++;
            if (k > 0) {
                runEnd[i][k - 1] = filled[i];
            }
            runTopic[i][k] = t;
            lastTopic[i] = t;
        }
        numbers[i][filled[i]++] = problem.partition(j);
    }

    /** The core's outcome as the request's assignment: consumer → its partitions. */
    private static Map<String, List<Api.PartitionRef>> given(Outcome outcome) {
        Problem problem = outcome.problem();
        Map<String, List<Api.PartitionRef>> assignment = new LinkedHashMap<>();
        for (int i = 0; i < outcome.consumerCount(); i++) {
            List<Api.PartitionRef> held = new ArrayList<>();
            for (int j : outcome.partitions(i)) {
                held.add(new Api.PartitionRef(problem.topic(j), problem.partition(j)));
            }
            assignment.put(outcome.consumer(i), held);
        }
        return assignment;
    }

    /**
     * Hands the answer to the reporting thread: POST /v1/assign with it given, as the group's next version (the
     * benchmark leaves it out: on two cores the reports of a tight loop would take the CPU it measures).
     */
    void report(String group, Supplier<Api.AssignRequest> request) {
        reporter.execute(() -> {
            CompletableFuture<Api.AssignResponse> sent;
            try {
                sent = client.assign(request.get(), CALL);
            } catch (RuntimeException e) {
                sent = CompletableFuture.failedFuture(e);
            }
            try {
                Api.AssignResponse stored = sent.get(CALL.toMillis() + 1000, TimeUnit.MILLISECONDS);
                log.debug("groupfit assignor: group {}'s assignment stored as version {}", group, stored.version());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (Exception e) {
                log.warn("groupfit assignor: group {}'s assignment was not stored by groupfit: {}", group,
                        GroupfitService.reason(e));
            }
        });
    }

    static Api.AssignRequest reportRequest(String group, Algorithm algorithm, double used, Outcome outcome,
            Map<String, TopicRates> rates) {
        Problem problem = outcome.problem();
        int n = problem.size();
        List<Api.RequestPartition> partitions = new ArrayList<>(n);
        Map<String, List<Api.PartitionRef>> previous = new TreeMap<>();
        for (int j = 0; j < n; j++) {
            String topic = problem.topic(j);
            int p = problem.partition(j);
            TopicRates known = rates.get(topic);
            double lag = known == null || p >= known.lag().length ? Double.NaN : known.lag()[p];
            List<String> racks = problem.racks(j);
            partitions.add(new Api.RequestPartition(topic, p, problem.rate(j), Double.isNaN(lag) ? null : lag,
                    racks.isEmpty() ? null : racks));
            String owner = problem.previousOwner(j);
            if (owner != null) {
                previous.computeIfAbsent(owner, o -> new ArrayList<>()).add(new Api.PartitionRef(topic, p));
            }
        }
        List<Object> members = new ArrayList<>();
        for (int i = 0; i < outcome.consumerCount(); i++) {
            String consumer = outcome.consumer(i);
            double own = problem.capacityOf(consumer);
            members.add(Api.member(consumer, own == used ? null : own, problem.rack(consumer)));
        }
        Map<String, List<Api.PartitionRef>> assignment = given(outcome);
        Map<String, Object> params = algorithm.params();
        return new Api.AssignRequest(algorithm.name(), used, group, members, partitions, previous,
                params.isEmpty() ? null : params, assignment);
    }

    private record Fallback(GroupAssignment assignment, int partitions) {}

    /** Balanced counts per set of readers, sticky to the current assignment ({@link Balance#sticky}). */
    private static Fallback fallback(GroupSpec groupSpec, SubscribedTopicDescriber describer, String[] memberIds,
            Map<String, String> identityOf, Set<Uuid> subscribed) {
        Map<Uuid, List<String>> readers = new TreeMap<>();
        for (String memberId : memberIds) {
            for (Uuid topicId : groupSpec.memberSubscription(memberId).subscribedTopicIds()) {
                readers.computeIfAbsent(topicId, t -> new ArrayList<>()).add(identityOf.get(memberId));
            }
        }
        Map<List<String>, List<TopicIdPartition>> byReaders = new LinkedHashMap<>();
        int count = 0;
        for (Map.Entry<Uuid, List<String>> entry : readers.entrySet()) {
            List<String> who = entry.getValue().stream().sorted().toList();
            int partitions = describer.numPartitions(entry.getKey());
            for (int p = 0; p < partitions; p++) {
                if (groupSpec.isPartitionAssignable(entry.getKey(), p)) {
                    byReaders.computeIfAbsent(who, r -> new ArrayList<>()).add(new TopicIdPartition(entry.getKey(), p));
                    count++;
                }
            }
        }
        Map<TopicIdPartition, String> current = new HashMap<>();
        for (String memberId : memberIds) {
            groupSpec.memberAssignment(memberId).partitions().forEach((topicId, ps) ->
                    ps.forEach(p -> current.put(new TopicIdPartition(topicId, p), identityOf.get(memberId))));
        }
        Map<String, Map<Uuid, Set<Integer>>> byIdentity = new HashMap<>();
        byReaders.forEach((who, share) -> Balance.sticky(who, share, current).forEach((p, identity) ->
                byIdentity.computeIfAbsent(identity, i -> new HashMap<>())
                        .computeIfAbsent(p.topicId(), t -> new HashSet<>()).add(p.partition())));
        Map<String, MemberAssignment> members = new HashMap<>();
        for (String memberId : memberIds) {
            Map<Uuid, Set<Integer>> mine = byIdentity.getOrDefault(identityOf.get(memberId), Map.of());
            members.put(memberId, () -> mine);
        }
        return new Fallback(new GroupAssignment(members), count);
    }

    /** A partition as the group spec names it. */
    private record TopicIdPartition(Uuid topicId, int partition) {}

    /**
     * In the background: learn the group of unknown members and unknown topic names; start refreshing a group the
     * first time it is met.
     */
    private void prepare(String group, String[] memberIds, Collection<Uuid> topicIds) {
        boolean allKnown = true;
        for (String memberId : memberIds) {
            allKnown &= groupOfMember.containsKey(memberId);
        }
        List<String> unknownMembers = allKnown ? List.of()
                : Arrays.stream(memberIds).filter(m -> !groupOfMember.containsKey(m)).toList();
        boolean topicsKnown = true;
        for (Uuid topicId : topicIds) {
            topicsKnown &= topicNames.containsKey(topicId);
        }
        boolean unknownTopics = !topicsKnown;
        if (group != null && unknownMembers.isEmpty() && !unknownTopics) {
            if (!knowledge.containsKey(group) && resolving.add(group)) {
                background.execute(() -> {
                    try {
                        refresh(group);
                    } finally {
                        resolving.remove(group);
                    }
                });
            }
            return;
        }
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
                String found = group != null ? group
                        : unknownMembers.stream().map(groupOfMember::get).filter(g -> g != null).findFirst().orElse(null);
                if (found != null && !knowledge.containsKey(found)) {
                    refresh(found);
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

    /** Every group met so far, read again from groupfit (on the background thread, every groupfit.refresh.ms). */
    private void refreshAll() {
        for (String group : List.copyOf(knowledge.keySet())) {
            refresh(group);
        }
    }

    /** Reads the group's stored rates and state from groupfit; keeps what was known when a read fails. */
    void refresh(String group) {
        try {
            Api.StoredRates rates = absentIfNotFound(client.rates(group, CALL));
            Api.GroupState state = absentIfNotFound(client.group(group, CALL));
            Knowledge learnt = knowledge(rates, state);
            Knowledge before = knowledge.get(group);
            if (before != null && before.sameAs(learnt)) {
                return; // kept as it is: what assign() made from it stays valid
            }
            knowledge.put(group, learnt);
            GroupMemo memo = memos.get(group);
            if (memo != null) {
                memo.prepare(learnt, topicNames::get); // the coordinator's next call finds the new rates sorted
            }
            if (learnt.rates() != null && (before == null || before.rates() == null)) {
                log.info("groupfit assignor: group {} learnt: rates of {} partitions, algorithm {}, stored capacity {}",
                        group, rates.partitions().size(), learnt.algorithm().name(), learnt.storedCapacity());
            }
        } catch (Exception e) {
            knowledge.putIfAbsent(group, new Knowledge(null, configured, null));
            log.warn("groupfit assignor: could not read group {} from groupfit: {}", group, GroupfitService.reason(e));
        }
    }

    private static <T> T absentIfNotFound(CompletableFuture<T> call) throws Exception {
        try {
            return call.get(CALL.toMillis() + 1000, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            Throwable cause = e.getCause() instanceof CompletionException c && c.getCause() != null ? c.getCause()
                    : e.getCause();
            if (cause instanceof GroupfitException g && "group_not_found".equals(g.code())) {
                return null;
            }
            throw e;
        }
    }

    private Knowledge knowledge(Api.StoredRates stored, Api.GroupState state) {
        Map<String, TopicRates> rates = null;
        if (stored != null) {
            Map<String, Integer> sizes = new HashMap<>();
            for (Api.PartitionRate rate : stored.partitions()) {
                sizes.merge(rate.topic(), rate.partition() + 1, Math::max);
            }
            rates = new HashMap<>();
            for (Map.Entry<String, Integer> size : sizes.entrySet()) {
                double[] rate = new double[size.getValue()];
                double[] lag = new double[size.getValue()];
                Arrays.fill(rate, Double.NaN);
                Arrays.fill(lag, Double.NaN);
                rates.put(size.getKey(), new TopicRates(rate, lag));
            }
            for (Api.PartitionRate rate : stored.partitions()) {
                if (rate.partition() >= 0) {
                    TopicRates topic = rates.get(rate.topic());
                    topic.rate()[rate.partition()] = rate.rate();
                    topic.lag()[rate.partition()] = rate.lag() == null ? Double.NaN : rate.lag();
                }
            }
        }
        Algorithm algorithm = configured;
        if (state != null && !state.algorithm().equals(configured.name())) {
            if (Algorithm.runs(state.algorithm())) {
                algorithm = Algorithm.of(state.algorithm(), Map.of());
            } else {
                log.warn("groupfit assignor: group {}'s algorithm {} is not one the broker runs ({}); it runs {}",
                        state.group(), state.algorithm(), Algorithm.NAMES, configured.name());
            }
        }
        return new Knowledge(rates, algorithm, state == null ? null : state.capacity());
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
            Set<String> present = new TreeSet<>();
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
        reporter.shutdownNow();
        Optional.ofNullable(admin).ifPresent(a -> a.close(Duration.ZERO)); // pending look-ups are of no use any more
    }
}
