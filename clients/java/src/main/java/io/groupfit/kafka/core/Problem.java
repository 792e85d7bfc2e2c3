package io.groupfit.kafka.core;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One rebalance on arrays (Landau et al. §III, as {@code app.core.model.Problem}): partitions in request order
 * (index j) with their topic, number, rate and lag; the capacity C; the consumers as small integers with their
 * own capacities; g(j,k), the previous owner of each partition; the members (null: the algorithm sizes the
 * group). Build one with {@link Builder}, which validates.
 *
 * <p>Per-partition and per-consumer facts are parallel arrays, so a further dimension (a consumer's rack, the
 * racks a partition can be read from without crossing zones) is one more array beside these.
 */
public final class Problem {
    /** The most consumers one answer may have (the service's default GROUPFIT_MAX_CONSUMERS). */
    public static final int MAX_CONSUMERS = 100_000;
    /** A load counts as within a capacity up to this factor: absorbs float rounding of summed rates. */
    static final double ROUNDING = 1 + 1e-12;

    static boolean within(double load, double capacity) {
        return load <= capacity * ROUNDING;
    }

    final int n;
    final String[] topicNames;
    final int[] topic;
    final int[] partition;
    final double[] rate;
    /** The lag, 0 where none was given (the reference's {@code lag or 0.0}). */
    final double[] lag;
    final double capacity;
    final Consumers consumers;
    /** g(j,k): the consumer that held partition j, {@link Pool#NONE} for a new partition. */
    final int[] previousOwner;
    /** The consumers the previous assignment lists (in its order), and what each held that still exists. */
    final int[] previousIds;
    final int[][] previousHeld;
    /** The members in request order, or null. */
    final int[] members;
    final boolean uniform;
    /** Partitions by rate, largest first, ties by (topic, partition); and each one's place there. */
    final int[] decreasing;
    final int[] decreasingRank;

    private Problem(Builder b, Consumers consumers, int[] previousIds, int[][] previousHeld, int[] members,
            boolean uniform, int[] decreasing) {
        this.n = b.n;
        this.topicNames = b.topicNames.toArray(new String[0]);
        // The builder's arrays are handed over (it is not used after build), trimmed when the hint was too large.
        this.topic = b.topic.length == n ? b.topic : Arrays.copyOf(b.topic, n);
        this.partition = b.partition.length == n ? b.partition : Arrays.copyOf(b.partition, n);
        this.rate = b.rate.length == n ? b.rate : Arrays.copyOf(b.rate, n);
        this.lag = b.lag.length == n ? b.lag : Arrays.copyOf(b.lag, n);
        this.capacity = b.capacity;
        this.consumers = consumers;
        this.previousOwner = b.previousOwner.length == n ? b.previousOwner : Arrays.copyOf(b.previousOwner, n);
        this.previousIds = previousIds;
        this.previousHeld = previousHeld;
        this.members = members;
        this.uniform = uniform;
        this.decreasing = decreasing;
        this.decreasingRank = new int[n];
        for (int position = 0; position < n; position++) {
            decreasingRank[decreasing[position]] = position;
        }
    }

    public int size() {
        return n;
    }

    public double capacity() {
        return capacity;
    }

    public double rate(int j) {
        return rate[j];
    }

    public String topic(int j) {
        return topicNames[topic[j]];
    }

    /** The index of partition j's topic, as {@link Builder#topic} gave it. */
    public int topicIndex(int j) {
        return topic[j];
    }

    public int partition(int j) {
        return partition[j];
    }

    /** The previous owner of partition j, or null for a new partition. */
    public String previousOwner(int j) {
        return previousOwner[j] < 0 ? null : consumers.name(previousOwner[j]);
    }

    /** Whether the members (if any) are the group, so surplus bins are folded into them. */
    public boolean hasMembers() {
        return members != null;
    }

    /** The capacity of a known consumer (its own, else C). */
    public double capacityOf(String consumer) {
        Integer c = consumerIndex(consumer);
        return c == null ? capacity : consumers.cap(c);
    }

    private Map<String, Integer> index;

    private Integer consumerIndex(String consumer) {
        if (index == null) {
            Map<String, Integer> made = new HashMap<>();
            for (int c = 0; c < consumers.known(); c++) {
                made.put(consumers.name(c), c);
            }
            index = made;
        }
        return index.get(consumer);
    }

    /** Sorts partition indices by their place in the decreasing order. */
    int[] decreasing(int[] partitions, int length) {
        int[] ranks = new int[length];
        for (int i = 0; i < length; i++) {
            ranks[i] = decreasingRank[partitions[i]];
        }
        Arrays.sort(ranks);
        for (int i = 0; i < length; i++) {
            ranks[i] = decreasing[ranks[i]];
        }
        return ranks;
    }

    /**
     * Builds a problem: partitions in request order, consumers by id, members with their own capacities, the
     * previous assignment. Checks what the service checks for these fields (rates finite and at least 0, each
     * partition once, a partition held once before, capacities positive) and throws IllegalArgumentException.
     */
    public static final class Builder {
        private final double capacity;
        private final List<String> topicNames = new ArrayList<>();
        private final Map<String, Integer> topicIndex = new HashMap<>();
        private int n;
        private int[] topic;
        private int[] partition;
        private double[] rate;
        private double[] lag;
        private int[] previousOwner;
        private final List<String> consumerNames = new ArrayList<>();
        private final Map<String, Integer> consumerIndex = new HashMap<>();
        private double[] own = new double[16];
        private boolean[] member = new boolean[16];
        private int[] members = new int[16];
        private int memberCount = -1; // -1: no members (autoscale)
        private int[] listed = new int[16]; // consumers in the previous assignment's order
        private boolean[] isListed = new boolean[16];
        private int listedCount;
        private int[] heldConsumer; // (consumer, partition) pairs of the previous assignment
        private int[] heldPartition;
        private int heldCount;

        public Builder(double capacity) {
            this(capacity, 16);
        }

        /** {@code expectedPartitions}: a size hint. */
        public Builder(double capacity, int expectedPartitions) {
            if (!(capacity > 0 && Double.isFinite(capacity))) {
                throw new IllegalArgumentException("capacity must be a finite number above 0, got " + capacity);
            }
            this.capacity = capacity;
            int hint = Math.max(expectedPartitions, 4);
            heldConsumer = new int[hint];
            heldPartition = new int[hint];
            topic = new int[hint];
            partition = new int[hint];
            rate = new double[hint];
            lag = new double[hint];
            previousOwner = new int[hint];
        }

        /** The index of a topic name. */
        public int topic(String name) {
            Integer known = topicIndex.get(name);
            if (known != null) {
                return known;
            }
            topicNames.add(name);
            topicIndex.put(name, topicNames.size() - 1);
            return topicNames.size() - 1;
        }

        /** Adds a partition (the next index j, request order); {@code lagValue} NaN: none. */
        public int partition(int topicIndex, int number, double rateValue, double lagValue) {
            if (!(rateValue >= 0 && rateValue < Double.POSITIVE_INFINITY)) {
                throw new IllegalArgumentException("partition " + topicNames.get(topicIndex) + "/" + number
                        + " has rate " + rateValue + "; rates must be finite and at least 0");
            }
            if (!Double.isNaN(lagValue) && !(lagValue >= 0 && lagValue < Double.POSITIVE_INFINITY)) {
                throw new IllegalArgumentException("partition " + topicNames.get(topicIndex) + "/" + number
                        + " has lag " + lagValue + "; lags must be finite and at least 0");
            }
            if (n == topic.length) {
                int grown = n * 2;
                topic = Arrays.copyOf(topic, grown);
                partition = Arrays.copyOf(partition, grown);
                rate = Arrays.copyOf(rate, grown);
                lag = Arrays.copyOf(lag, grown);
                previousOwner = Arrays.copyOf(previousOwner, grown);
            }
            topic[n] = topicIndex;
            partition[n] = number;
            rate[n] = rateValue == 0 ? 0.0 : rateValue; // -0.0 compares as 0.0
            lag[n] = Double.isNaN(lagValue) ? 0.0 : lagValue;
            previousOwner[n] = Pool.NONE;
            return n++;
        }

        /** The index of a consumer id (a member, a previous consumer). */
        public int consumer(String id) {
            Integer known = consumerIndex.get(id);
            if (known != null) {
                return known;
            }
            if (id.isEmpty()) {
                throw new IllegalArgumentException("consumer ids must not be empty");
            }
            int c = consumerNames.size();
            consumerNames.add(id);
            consumerIndex.put(id, c);
            if (c == own.length) {
                own = Arrays.copyOf(own, c * 2);
                member = Arrays.copyOf(member, c * 2);
                isListed = Arrays.copyOf(isListed, c * 2);
            }
            own[c] = Double.NaN;
            return c;
        }

        /** Makes consumer c a member (the members are then the group); {@code ownCapacity} NaN: it has C. */
        public Builder member(int c, double ownCapacity) {
            if (member[c]) {
                throw new IllegalArgumentException("member " + consumerNames.get(c) + " is listed twice");
            }
            if (!Double.isNaN(ownCapacity) && !(ownCapacity > 0 && Double.isFinite(ownCapacity))) {
                throw new IllegalArgumentException("member " + consumerNames.get(c) + " has capacity " + ownCapacity
                        + "; a capacity must be a finite number above 0");
            }
            if (memberCount < 0) {
                memberCount = 0;
            }
            if (memberCount == members.length) {
                members = Arrays.copyOf(members, memberCount * 2);
            }
            members[memberCount++] = c;
            member[c] = true;
            own[c] = ownCapacity;
            return this;
        }

        /** Consumer c is listed in the previous assignment (with or without partitions that still exist). */
        public Builder previousConsumer(int c) {
            if (!isListed[c]) {
                isListed[c] = true;
                if (listedCount == listed.length) {
                    listed = Arrays.copyOf(listed, listedCount * 2);
                }
                listed[listedCount++] = c;
            }
            return this;
        }

        /** Consumer c held partition j (in the order its previous list names them). */
        public Builder previous(int c, int j) {
            previousConsumer(c);
            if (previousOwner[j] != Pool.NONE) {
                throw new IllegalArgumentException("partition " + topicNames.get(topic[j]) + "/" + partition[j]
                        + " appears twice in the previous assignment (" + consumerNames.get(previousOwner[j]) + " and "
                        + consumerNames.get(c) + "); a partition has one consumer");
            }
            previousOwner[j] = c;
            if (heldCount == heldConsumer.length) {
                heldConsumer = Arrays.copyOf(heldConsumer, heldCount * 2);
                heldPartition = Arrays.copyOf(heldPartition, heldCount * 2);
            }
            heldConsumer[heldCount] = c;
            heldPartition[heldCount++] = j;
            return this;
        }

        /** The problem; the builder is used up (its arrays become the problem's). */
        public Problem build() {
            int known = consumerNames.size();
            if (memberCount == 0) {
                throw new IllegalArgumentException("members is empty; give none to let the algorithm size the group");
            }
            double[] capacities = new double[known];
            boolean uniform = true;
            for (int c = 0; c < known; c++) {
                // A capacity equal to C is no capacity of its own, so a group of equal consumers is uniform.
                capacities[c] = Double.isNaN(own[c]) ? capacity : own[c];
                uniform &= capacities[c] == capacity;
            }
            Consumers consumers = new Consumers(consumerNames, consumerIndex, capacities, Arrays.copyOf(member, known),
                    capacity);
            int[] previousIds = Arrays.copyOf(listed, listedCount);
            int[] slot = new int[known];
            Arrays.fill(slot, -1);
            for (int i = 0; i < listedCount; i++) {
                slot[listed[i]] = i;
            }
            int[] counts = new int[listedCount];
            for (int h = 0; h < heldCount; h++) {
                counts[slot[heldConsumer[h]]]++;
            }
            int[][] previousHeld = new int[listedCount][];
            for (int i = 0; i < listedCount; i++) {
                previousHeld[i] = new int[counts[i]];
                counts[i] = 0;
            }
            for (int h = 0; h < heldCount; h++) {
                int i = slot[heldConsumer[h]];
                previousHeld[i][counts[i]++] = heldPartition[h];
            }
            return new Problem(this, consumers, previousIds, previousHeld,
                    memberCount < 0 ? null : Arrays.copyOf(members, memberCount), uniform, decreasingOrder());
        }

        /** Partition indices by rate, largest first, ties by (topic, partition); a partition listed twice throws. */
        private int[] decreasingOrder() {
            int[] topicRank = new int[topicNames.size()];
            Integer[] byName = new Integer[topicNames.size()];
            for (int t = 0; t < byName.length; t++) {
                byName[t] = t;
            }
            Arrays.sort(byName, (a, b) -> Natural.compareCodePoints(topicNames.get(a), topicNames.get(b)));
            for (int r = 0; r < byName.length; r++) {
                topicRank[byName[r]] = r;
            }
            long[] key = new long[n];
            int[] order = new int[n];
            boolean sorted = true;
            for (int j = 0; j < n; j++) {
                key[j] = ((long) topicRank[topic[j]] << 32) | ((partition[j] ^ Integer.MIN_VALUE) & 0xffffffffL);
                order[j] = j;
                sorted &= j == 0 || key[j - 1] < key[j];
            }
            if (!sorted) {
                Sorting.byKey(order, key);
            }
            for (int i = 1; i < n; i++) {
                if (key[order[i - 1]] == key[order[i]]) {
                    int j = order[i];
                    throw new IllegalArgumentException("partition " + topicNames.get(topic[j]) + "/" + partition[j]
                            + " is listed more than once; list each partition once");
                }
            }
            return Sorting.decreasing(rate, order);
        }
    }
}
