package io.groupfit.kafka;

import java.lang.ref.WeakReference;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;

/**
 * A rebalance when the rates drift and the membership does not (Ezzeddine et al., Algorithm 1 line 12: REASS), for
 * classic-protocol groups whose members use {@link GroupfitAssignor}. Call {@link #enforceIfDue} in the poll loop,
 * right after each {@code poll()}:
 *
 * <pre>{@code
 * while (running) {
 *     ConsumerRecords<K, V> records = consumer.poll(Duration.ofMillis(100));
 *     GroupfitRebalance.enforceIfDue(consumer);
 *     ...
 * }
 * }</pre>
 *
 * <p>On the member that led the group's last rebalance (its assignor computed it with groupfit), every
 * {@code groupfit.reassign.interval.ms} it asks {@code GET /v1/groups/{group}/scale} in the background; when the
 * answer is {@code reass} (the stored assignment violates a member's capacity, or leaves a partition without a member,
 * and the same members reassigned remove at least {@code groupfit.reassign.min.gain} of excess within the migration
 * budget) and the last triggered rebalance is at least {@code groupfit.reassign.min.interval.ms} ago, it calls
 * {@code consumer.enforceRebalance(reason)} (KIP-568): the leader's assignor then asks groupfit again with the same
 * members. Every other member's call, and every call of a consumer without a {@link GroupfitAssignor}, returns null at
 * once; the poll loop never waits on the service.
 *
 * <p>KIP-848 groups ({@code group.protocol=consumer}) have no leader and no client-side assignor; Kafka 4.4's consumer
 * logs a warning and ignores {@code enforceRebalance} there. Their broker-side assignor runs when the group epoch
 * changes, i.e. on a membership change: the autoscaler (docs/autoscaling.md) reassigns such a group.
 */
public final class GroupfitRebalance {
    /** How often the leader asks for the decision; 0 (the default) turns the check off. */
    public static final String INTERVAL_MS = "groupfit.reassign.interval.ms";
    /** The least time between two rebalances this check triggers (default 60000). */
    public static final String MIN_INTERVAL_MS = "groupfit.reassign.min.interval.ms";
    /** The least excess (in consumers' capacities) a reassignment must remove (default: the service's, 0.05). */
    public static final String MIN_GAIN = "groupfit.reassign.min.gain";
    /** The most Rscore (migrated rate / C) a triggered reassignment may spend (default: no cap). */
    public static final String MAX_RSCORE = "groupfit.reassign.max.rscore";
    /** The most partitions a triggered reassignment may move (default: no cap). */
    public static final String MAX_MOVES = "groupfit.reassign.max.moves";

    // The assignor of each consumer, by group and member id (a consumer reads both from groupMetadata()); weak, so
    // a closed consumer's assignor is not kept.
    private static final Map<String, WeakReference<Reassigner>> MEMBERS = new ConcurrentHashMap<>();

    private GroupfitRebalance() {}

    /**
     * Asks for the group's decision when this consumer leads its group and a check is due, and rebalances the group
     * when the answer is {@code reass} and the guards allow it. Returns the reason given to
     * {@code consumer.enforceRebalance(reason)}, or null when it did not call it. Call it on the consumer's own thread.
     */
    public static String enforceIfDue(Consumer<?, ?> consumer) {
        ConsumerGroupMetadata metadata;
        try {
            metadata = consumer.groupMetadata();
        } catch (RuntimeException noGroup) { // no group.id, or a closed consumer
            return null;
        }
        WeakReference<Reassigner> ref = MEMBERS.get(key(metadata.groupId(), metadata.memberId()));
        Reassigner reassigner = ref == null ? null : ref.get();
        return reassigner == null ? null : reassigner.enforceIfDue(consumer, metadata.generationId());
    }

    /** Where the consumer of member `memberId` finds its assignor's reassigner; `previous`: its last key, dropped. */
    static String register(String groupId, String memberId, String previous, Reassigner reassigner) {
        String key = key(groupId, memberId);
        if (previous != null && !previous.equals(key)) {
            MEMBERS.remove(previous);
        }
        MEMBERS.values().removeIf(r -> r.get() == null);
        MEMBERS.put(key, new WeakReference<>(reassigner));
        return key;
    }

    private static String key(String groupId, String memberId) {
        return groupId + "\u0000" + memberId;
    }
}
