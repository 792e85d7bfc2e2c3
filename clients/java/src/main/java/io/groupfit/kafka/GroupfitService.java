package io.groupfit.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.common.TopicPartition;

/**
 * One assignment from groupfit for a group, as both assignors ask it: the group's stored rates (GET
 * /v1/groups/{group}/rates), then POST /v1/assign with the group, its members, its partitions with those rates
 * and the previous owners, the answer checked against the group before anyone uses it.
 */
public final class GroupfitService {
    /** The service's answer, partition → member identity, and what it said about it. */
    public record Answer(Map<TopicPartition, String> owner, Api.AssignResponse response) {}

    /** The service answered, but nothing this group can use (no rates, a partition missing, a stranger). */
    public static final class UnusableAnswer extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public UnusableAnswer(String message) {
            super(message);
        }
    }

    private record CachedRates(CompletableFuture<Map<TopicPartition, Api.PartitionRate>> rates, long startedNanos) {}

    private final GroupfitClient client;
    private final String algorithm;
    private final Map<String, Object> params;
    private final long ratesMaxAgeNanos;
    private final Map<String, CachedRates> ratesCache = new ConcurrentHashMap<>();
    // What the last successful reads said, for a fallback that assigns by rate without the service.
    private final Map<String, Map<TopicPartition, Api.PartitionRate>> lastRates = new ConcurrentHashMap<>();
    private final Map<String, Double> lastCapacity = new ConcurrentHashMap<>();

    /** {@code ratesMaxAge}: how long stored rates read once are reused (zero: read them for every answer). */
    public GroupfitService(GroupfitClient client, String algorithm, Duration ratesMaxAge) {
        this(client, algorithm, null, ratesMaxAge);
    }

    /** {@code params}: the algorithm's parameters, sent with every request (null: the service's defaults). */
    public GroupfitService(GroupfitClient client, String algorithm, Map<String, Object> params, Duration ratesMaxAge) {
        this.client = client;
        this.algorithm = algorithm;
        this.params = params == null ? null : Map.copyOf(params);
        this.ratesMaxAgeNanos = ratesMaxAge.toNanos();
    }

    public GroupfitClient client() {
        return client;
    }

    public String algorithm() {
        return algorithm;
    }

    /** The group's rates as the last successful read found them (null: none read, or none stored). */
    public Map<TopicPartition, Api.PartitionRate> lastRates(String group) {
        return lastRates.get(group);
    }

    /** The capacity of the last answer the service gave for the group (null: none yet). */
    public Double lastCapacity(String group) {
        return lastCapacity.get(group);
    }

    /** The algorithm's parameters (null: none set). */
    public Map<String, Object> params() {
        return params;
    }

    /**
     * The group's stored rates by partition. A read started less than the configured age ago (finished or still
     * under way) is shared, so a read started early (e.g. while the group is joining) serves the assignment.
     */
    public CompletableFuture<Map<TopicPartition, Api.PartitionRate>> rates(String group, Duration timeout) {
        CachedRates cached = ratesCache.get(group);
        if (cached != null && System.nanoTime() - cached.startedNanos() < ratesMaxAgeNanos
                && !cached.rates().isCompletedExceptionally()) {
            return cached.rates();
        }
        CompletableFuture<Map<TopicPartition, Api.PartitionRate>> read = client.rates(group, timeout).handle((stored, error) -> {
            Map<TopicPartition, Api.PartitionRate> rates = new HashMap<>();
            if (error != null) {
                Throwable cause = error instanceof CompletionException && error.getCause() != null
                        ? error.getCause() : error;
                if (!(cause instanceof GroupfitException g && "group_not_found".equals(g.code()))) {
                    throw error instanceof CompletionException c ? c : new CompletionException(cause);
                }
            } else {
                for (Api.PartitionRate rate : stored.partitions()) {
                    rates.put(new TopicPartition(rate.topic(), rate.partition()), rate);
                }
                lastRates.put(group, rates);
            }
            return rates;
        });
        if (ratesMaxAgeNanos > 0) {
            ratesCache.put(group, new CachedRates(read, System.nanoTime()));
        }
        return read;
    }

    /**
     * Ask for `group`'s assignment of `partitions` over `members` (identities), starting from `previousOwner`. A
     * member in `sizes` is sent with that capacity of its own; the others have `capacity` (null: the group's stored
     * capacity). A member in `racks` is sent with its rack, a partition in `partitionRacks` with its racks (a
     * zone-aware request when both name some). Both calls share `timeout`.
     */
    public CompletableFuture<Answer> ask(
            String group,
            Double capacity,
            List<String> members,
            Map<String, Double> sizes,
            Map<String, String> racks,
            List<TopicPartition> partitions,
            Map<TopicPartition, List<String>> partitionRacks,
            Map<TopicPartition, String> previousOwner,
            Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        return rates(group, timeout).thenCompose(rates -> {
            if (partitions.stream().noneMatch(rates::containsKey)) {
                // All rates zero would put every partition on one member; balanced counts serve better.
                throw new UnusableAnswer("no rates are stored for group " + group + "'s partitions");
            }
            List<Api.RequestPartition> withRates = new ArrayList<>(partitions.size());
            for (TopicPartition tp : partitions) {
                Api.PartitionRate known = rates.get(tp);
                withRates.add(new Api.RequestPartition(tp.topic(), tp.partition(), known == null ? 0.0 : known.rate(),
                        known == null ? null : known.lag(), partitionRacks.get(tp)));
            }
            Map<String, List<Api.PartitionRef>> previous = new TreeMap<>();
            previousOwner.forEach((tp, member) -> previous.computeIfAbsent(member, m -> new ArrayList<>())
                    .add(new Api.PartitionRef(tp.topic(), tp.partition())));
            List<Object> sized = members.stream().map(id -> Api.member(id, sizes.get(id), racks.get(id))).toList();
            Api.AssignRequest request =
                    new Api.AssignRequest(algorithm, capacity, group, sized, withRates, previous, params);
            long remaining = deadline - System.nanoTime();
            if (remaining <= 0) {
                throw new UnusableAnswer("the timeout passed while reading the rates");
            }
            return client.assign(request, Duration.ofNanos(remaining)).thenApply(response -> {
                lastCapacity.put(group, response.capacity());
                return new Answer(check(response, members, partitions), response);
            });
        });
    }

    /** partition → member of the answer, if it gives every partition to exactly one member of the group. */
    static Map<TopicPartition, String> check(
            Api.AssignResponse response, List<String> members, List<TopicPartition> partitions) {
        Set<String> known = new HashSet<>(members);
        Set<TopicPartition> wanted = new HashSet<>(partitions);
        Map<TopicPartition, String> owner = new HashMap<>();
        for (Map.Entry<String, List<Api.PartitionRef>> entry : response.assignment().entrySet()) {
            if (!known.contains(entry.getKey())) {
                throw new UnusableAnswer("the answer names " + entry.getKey() + ", who is not a member");
            }
            for (Api.PartitionRef ref : entry.getValue()) {
                TopicPartition tp = new TopicPartition(ref.topic(), ref.partition());
                if (!wanted.contains(tp)) {
                    throw new UnusableAnswer("the answer assigns " + tp + ", which the group does not read");
                }
                if (owner.put(tp, entry.getKey()) != null) {
                    throw new UnusableAnswer("the answer assigns " + tp + " twice");
                }
            }
        }
        if (owner.size() != wanted.size()) {
            throw new UnusableAnswer("the answer leaves " + (wanted.size() - owner.size()) + " partitions unassigned");
        }
        return owner;
    }

    /** The cause a failed future carries, for a log line. */
    public static String reason(Throwable error) {
        Throwable cause = error;
        while ((cause instanceof CompletionException || cause instanceof java.util.concurrent.ExecutionException)
                && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause instanceof java.util.concurrent.TimeoutException || cause instanceof java.net.http.HttpTimeoutException
                ? "no answer within the timeout"
                : cause.getClass().getSimpleName() + ": " + cause.getMessage();
    }
}
