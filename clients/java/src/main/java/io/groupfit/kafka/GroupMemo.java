package io.groupfit.kafka;

import io.groupfit.kafka.GroupfitBrokerAssignor.Knowledge;
import io.groupfit.kafka.GroupfitBrokerAssignor.TopicRates;
import io.groupfit.kafka.core.Holding;
import io.groupfit.kafka.core.Natural;
import io.groupfit.kafka.core.PartitionRacks;
import io.groupfit.kafka.core.Partitions;
import io.groupfit.kafka.core.Problem;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;

/**
 * What {@link GroupfitBrokerAssignor#assign} keeps of one group between calls, so that an epoch change (a member
 * joins or leaves, the rates unchanged) costs what changed, not the whole group: the core's {@link Partitions} for
 * the group's layout and rates (the decreasing order is sorted once, and again by the background thread when the
 * rates change, not on the coordinator's), each member's current assignment read into a {@link Holding} (read
 * again only when the coordinator hands a different map: it hands the same immutable map for a member whose
 * target did not change), and the members' identities in natural order. None of it changes an answer: a table,
 * a holding or an order is used only for the very inputs it was made from.
 *
 * <p>The state is one immutable snapshot behind a volatile reference: the coordinator's thread reads it, computes,
 * and publishes the next; the background publishes a table for new rates. Two calls for one group at once (the
 * coordinator makes none) would each compute from what they read, and the last to publish would win.
 */
final class GroupMemo {
    /**
     * The group's partitions as the core numbers them, for one layout (the subscribed topics by name, their
     * partition counts, the partitions the coordinator does not let be assigned) and one read of the rates.
     * Partition p of topic t is index {@code base[t] + p} when every partition is assignable, else {@code
     * index[t][p]} (-1: not assignable).
     */
    record Table(Knowledge knowledge, Uuid[] topicIds, int[] counts, int[] unassignable, Partitions partitions,
            Map<Uuid, Integer> topicOf, int[] base, int[][] index) {
        /** Partition p of topic t, or -1 when it is not one of the problem's. */
        int partition(int t, int p) {
            if (p < 0 || p >= counts[t]) {
                return -1;
            }
            return index == null ? base[t] + p : index[t][p];
        }

        boolean sameLayout(Uuid[] otherTopics, int[] otherCounts, int[] otherUnassignable) {
            return Arrays.equals(topicIds, otherTopics) && Arrays.equals(counts, otherCounts)
                    && Arrays.equals(unassignable, otherUnassignable);
        }
    }

    /** A member's current assignment as the coordinator handed it, and what it was read into. */
    record Seen(Map<Uuid, Set<Integer>> assignment, Holding holding) {}

    /**
     * The partitions' racks last read, from this describer, for the table of this layout (the topics, their
     * partition counts, the partitions not assignable). The describer is kept to be compared with the next call's:
     * Kafka's keeps the metadata image it describes reachable until then (images share what did not change).
     */
    record Racks(PartitionRacks racks, SubscribedTopicDescriber describer, Uuid[] topicIds, int[] counts,
            int[] unassignable) {}

    /**
     * Everything kept, immutable; {@code racks}: null until racks were read. {@code owners}: the last problem's
     * previous owner of each partition of {@code table}'s layout (consumer c is {@code natural[c]}), made from {@code
     * held} (what each one held, parallel to {@code natural}); null where none is kept.
     */
    record State(Table table, Map<String, Seen> seen, String[] natural, Racks racks, Holding[] held, int[] owners) {}

    static final State EMPTY = new State(null, Map.of(), new String[0], null, null, null);

    /** The identities in natural order, and where each was in the order kept (-1: not in it). */
    record Order(String[] natural, int[] from) {}

    volatile State state = EMPTY;

    /**
     * The table for these topics (sorted by name), counts and unassignable partitions under these rates: the one
     * kept when it was made for exactly them, else a new one; null when no partition has a stored rate.
     */
    static Table table(Table kept, Knowledge known, Uuid[] topicIds, int[] counts, int[] unassignable,
            Function<Uuid, String> names) {
        if (kept != null && kept.knowledge() == known && kept.sameLayout(topicIds, counts, unassignable)) {
            return kept;
        }
        int total = 0;
        for (int count : counts) {
            total += count;
        }
        Partitions.Builder builder = new Partitions.Builder(total - unassignable.length);
        int[] base = new int[topicIds.length];
        int[][] index = unassignable.length == 0 ? null : new int[topicIds.length][];
        Map<Uuid, Integer> topicOf = new HashMap<>(2 * topicIds.length);
        boolean anyRate = false;
        int global = 0; // partition p of topic t in the layout, counting unassignable ones
        int skip = 0; // the next unassignable one
        for (int t = 0; t < topicIds.length; t++) {
            String name = names.apply(topicIds[t]);
            int topic = builder.topic(name);
            topicOf.put(topicIds[t], t);
            TopicRates rates = known.rates().get(name);
            base[t] = global - skip;
            if (index != null) {
                index[t] = new int[counts[t]];
            }
            for (int p = 0; p < counts[t]; p++, global++) {
                if (skip < unassignable.length && unassignable[skip] == global) {
                    skip++;
                    index[t][p] = -1;
                    continue;
                }
                double rate = rates == null || p >= rates.rate().length ? Double.NaN : rates.rate()[p];
                anyRate |= !Double.isNaN(rate);
                int j = builder.partition(topic, p, Double.isNaN(rate) ? 0.0 : rate,
                        rates == null || p >= rates.lag().length ? Double.NaN : rates.lag()[p]);
                if (index != null) {
                    index[t][p] = j;
                }
            }
        }
        if (!anyRate) {
            return null; // all rates zero would put every partition on one member: balanced counts serve better
        }
        return new Table(known, topicIds, counts, unassignable, builder.build(), topicOf, base, index);
    }

    /** A member's assignment as a holding of the table's partitions: the one seen before for this very map, else
     * read now (partitions of topics not subscribed, beyond a topic's count or not assignable are left out). */
    static Holding holding(Seen seen, Map<Uuid, Set<Integer>> assignment, Table table) {
        if (seen != null && seen.assignment() == assignment && seen.holding().partitions() == table.partitions()) {
            return seen.holding();
        }
        int size = 0;
        for (Set<Integer> partitions : assignment.values()) {
            size += partitions.size();
        }
        int[] held = new int[size];
        int count = 0;
        for (Map.Entry<Uuid, Set<Integer>> topic : assignment.entrySet()) {
            Integer t = table.topicOf().get(topic.getKey());
            if (t == null) {
                continue; // a topic no longer subscribed
            }
            for (int p : topic.getValue()) {
                int j = table.partition(t, p);
                if (j >= 0) {
                    held[count++] = j;
                }
            }
        }
        return table.partitions().holding(held, count);
    }

    /**
     * The racks of the table's partitions as the describer gives them now. The ones kept when the describer is equal
     * to the one they were read from (Kafka's describers are equal when they describe one metadata image: the
     * coordinator makes one per call, on the image it holds) and the layout is the same; else each partition's racks
     * are read and compared, and kept when all are the same; else they are indexed again.
     */
    static Racks racks(Racks kept, Table table, SubscribedTopicDescriber describer) {
        if (kept != null && describer.equals(kept.describer())
                && table.sameLayout(kept.topicIds(), kept.counts(), kept.unassignable())) {
            return kept;
        }
        Partitions partitions = table.partitions();
        Uuid[] topicIds = table.topicIds();
        int n = partitions.size();
        PartitionRacks racks = kept == null ? null : kept.racks();
        int same = 0;
        if (racks != null && racks.size() == n) {
            while (same < n && racks.sameAs(same, describer.racksForPartition(topicIds[partitions.topicIndex(same)],
                    partitions.partition(same)))) {
                same++;
            }
        }
        if (racks == null || same < n) {
            PartitionRacks.Builder read = new PartitionRacks.Builder(partitions);
            for (int j = 0; j < n; j++) {
                read.racks(j, describer.racksForPartition(topicIds[partitions.topicIndex(j)], partitions.partition(j)));
            }
            racks = read.build();
        }
        return new Racks(racks, describer, table.topicIds(), table.counts(), table.unassignable());
    }

    /**
     * The identities in natural order ({@link Natural#compare}), from the order kept: those still present keep
     * their places, new ones are sorted and merged in.
     */
    static Order natural(String[] kept, Collection<String> identities) {
        Set<String> present = identities instanceof Set<String> set ? set : new HashSet<>(identities);
        String[] order = new String[identities.size()];
        int[] from = new int[order.length];
        int count = 0;
        for (int i = 0; i < kept.length; i++) {
            if (count < order.length && present.contains(kept[i])) {
                from[count] = i;
                order[count++] = kept[i];
            }
        }
        if (count == order.length) {
            return new Order(order, from);
        }
        Set<String> placed = new HashSet<>(Arrays.asList(order).subList(0, count));
        List<String> added = new ArrayList<>();
        for (String identity : identities) {
            if (!placed.contains(identity)) {
                added.add(identity);
            }
        }
        added.sort(Natural::compare);
        String[] merged = new String[order.length];
        int[] mergedFrom = new int[order.length];
        int i = 0;
        int k = 0;
        for (int m = 0; m < merged.length; m++) {
            if (k == added.size() || (i < count && Natural.compare(order[i], added.get(k)) < 0)) {
                mergedFrom[m] = from[i];
                merged[m] = order[i++];
            } else {
                mergedFrom[m] = -1;
                merged[m] = added.get(k++);
            }
        }
        return new Order(merged, mergedFrom);
    }

    /**
     * The previous owner of each of the table's partitions for these holdings (consumer c holds {@code holdings[c]},
     * c the index in {@code order}), from the table the last call kept: an entry of a consumer whose holding is the
     * very one it had is still right (renumbered), one of a consumer that left goes, and only the partitions of
     * consumers whose holding changed are written (a member joined or left: a sequential pass and a few writes,
     * where writing every consumer's partitions is a write per partition at random). Null where it cannot be made
     * so: nothing kept for this layout, or a partition in two holdings ({@link Problem.Builder} then reads them one
     * by one and says which). The array is new; the kept one is not changed.
     */
    static int[] owners(State before, Table table, Order order, Holding[] holdings) {
        int[] kept = before.owners();
        if (kept == null || before.table() == null
                || !before.table().sameLayout(table.topicIds(), table.counts(), table.unassignable())) {
            return null;
        }
        Holding[] held = before.held();
        int[] to = new int[held.length]; // the kept consumer's index now, or NONE
        Arrays.fill(to, NONE);
        boolean[] changed = new boolean[holdings.length];
        for (int c = 0; c < holdings.length; c++) {
            int was = order.from()[c];
            if (was >= 0) {
                to[was] = c;
            }
            changed[c] = was < 0 || held[was] != holdings[c];
        }
        int[] owners = new int[kept.length];
        for (int j = 0; j < kept.length; j++) {
            int was = kept[j];
            owners[j] = was == NONE ? NONE : to[was];
        }
        for (int c = 0; c < holdings.length; c++) {
            int was = order.from()[c];
            if (changed[c] && was >= 0) {
                for (int i = 0; i < held[was].size(); i++) {
                    owners[held[was].partition(i)] = NONE;
                }
            }
        }
        for (int c = 0; c < holdings.length; c++) {
            if (changed[c]) {
                for (int i = 0; i < holdings[c].size(); i++) {
                    int j = holdings[c].partition(i);
                    if (owners[j] != NONE) {
                        return null;
                    }
                    owners[j] = c;
                }
            }
        }
        return owners;
    }

    /** No previous owner, as {@link Problem} marks it. */
    static final int NONE = Problem.NO_OWNER;

    /**
     * For the background, after the rates were read again: the kept layout's table under the new rates and the
     * holdings seen made again on it, so the coordinator's next call finds them ready.
     */
    void prepare(Knowledge known, Function<Uuid, String> names) {
        State before = state;
        Table kept = before.table();
        if (kept == null || kept.knowledge() == known || known.rates() == null
                || !Arrays.stream(kept.topicIds()).allMatch(t -> names.apply(t) != null)) {
            return;
        }
        Table table = table(null, known, kept.topicIds(), kept.counts(), kept.unassignable(), names);
        if (table == null) {
            return;
        }
        Map<String, Seen> seen = new HashMap<>(2 * before.seen().size());
        before.seen().forEach((member, was) -> {
            if (was.holding().partitions() == kept.partitions()) {
                seen.put(member, new Seen(was.assignment(), table.partitions().holding(was.holding())));
            }
        });
        // published only if no call published in between (that one's state is as fresh)
        synchronized (this) {
            if (state == before) {
                // the previous owners are the same partitions' but the holdings are new: the next call writes them all
                state = new State(table, seen, before.natural(), before.racks(), null, null);
            }
        }
    }

    /** Publishes the state a call computed with. */
    synchronized void publish(State next) {
        state = next;
    }
}
