package io.groupfit.kafka.core;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The partitions of a problem, immutable: each one's topic, number, rate and lag in request order (index j), and
 * the decreasing order (by rate, largest first, ties by (topic, partition)) with each partition's place in it.
 *
 * <p>What depends only on the partitions and their rates is computed once here, so a caller that assigns the same
 * partitions with the same rates again (a member joined or left; the rates were not re-read) hands the same
 * {@code Partitions} to {@link Problem.Builder#Builder(double, Partitions)} and sorts nothing. Facts are parallel
 * arrays: a further per-partition dimension (the racks a partition is read from without crossing zones) is one
 * more array beside these.
 */
public final class Partitions {
    final int n;
    final String[] topicNames;
    final int[] topic;
    final int[] partition;
    final double[] rate;
    /** The lag, 0 where none was given (the reference's {@code lag or 0.0}). */
    final double[] lag;
    /** Partition indices by rate, largest first, ties by (topic, partition); and each one's place there. */
    final int[] decreasing;
    final int[] decreasingRank;
    /** The rates in the decreasing order ({@code rate[decreasing[k]]}): a visit in that order reads them in memory
     * order, not one at random per partition. */
    final double[] decreasingRate;
    /** Partition indices in (topic, partition) order; null where that is the index order (partitions listed in
     * it, as the broker assignor lists them). */
    private final int[] byKey;

    private Partitions(Builder b) {
        n = b.n;
        topicNames = b.topicNames.toArray(new String[0]);
        // The builder's arrays are handed over (it is not used after build), trimmed when the hint was too large.
        topic = b.topic.length == n ? b.topic : Arrays.copyOf(b.topic, n);
        partition = b.partition.length == n ? b.partition : Arrays.copyOf(b.partition, n);
        rate = b.rate.length == n ? b.rate : Arrays.copyOf(b.rate, n);
        lag = b.lag.length == n ? b.lag : Arrays.copyOf(b.lag, n);
        byKey = keyOrder();
        decreasing = Sorting.decreasing(rate, byKey != null ? byKey : identity(n));
        decreasingRank = new int[n];
        decreasingRate = new double[n];
        for (int position = 0; position < n; position++) {
            decreasingRank[decreasing[position]] = position;
            decreasingRate[position] = rate[decreasing[position]];
        }
    }

    public int size() {
        return n;
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

    /**
     * A consumer's partitions ({@code partitions[0..count)}, each a valid index, none twice) as a {@link Holding}:
     * in the decreasing order, with their running sums. The array is not kept.
     */
    public Holding holding(int[] partitions, int count) {
        int[] ranks = new int[count];
        for (int i = 0; i < count; i++) {
            ranks[i] = decreasingRank[partitions[i]];
        }
        Arrays.sort(ranks);
        double[] sums = new double[count + 1];
        double sum = 0.0;
        for (int i = 0; i < count; i++) {
            int j = decreasing[ranks[i]];
            ranks[i] = j;
            sum += rate[j];
            sums[i + 1] = sum;
        }
        return new Holding(this, ranks, sums);
    }

    /**
     * The same partitions as {@code other} (made from partitions listed in the same order, e.g. before the rates
     * were read again) under these partitions' rates.
     */
    public Holding holding(Holding other) {
        if (other.partitions.n != n) {
            throw new IllegalArgumentException("the holding was made from partitions of another layout");
        }
        return holding(other.decreasing, other.decreasing.length);
    }

    /**
     * Sorts partition indices (none twice) by their place in the decreasing order: a sort of their places when they
     * are few, else one pass over the decreasing order picking those marked (the same order, in O(n)); all of them
     * (a group forming) are the decreasing order itself. The answer is read, never changed.
     */
    int[] decreasing(int[] partitions, int length) {
        if (length == n) {
            return decreasing;
        }
        if (length > n / 32) {
            boolean[] marked = new boolean[n];
            for (int i = 0; i < length; i++) {
                marked[decreasingRank[partitions[i]]] = true;
            }
            int[] sorted = new int[length];
            int k = 0;
            for (int position = 0; k < length; position++) {
                if (marked[position]) {
                    sorted[k++] = decreasing[position];
                }
            }
            return sorted;
        }
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
     * Each bin's partitions in (topic, partition) order, as the reference sorts keys: partition j is in bin {@code
     * binOf[j]}, {@code sizes[b]} of them in bin b (of {@code bins}). One pass over that order.
     */
    int[][] byKey(int[] binOf, int[] sizes, int bins) {
        int[][] held = new int[bins][];
        for (int b = 0; b < bins; b++) {
            held[b] = new int[sizes[b]];
        }
        int[] filled = new int[bins];
        for (int k = 0; k < n; k++) {
            int j = byKey == null ? k : byKey[k];
            int b = binOf[j];
            held[b][filled[b]++] = j;
        }
        return held;
    }

    private static int[] identity(int n) {
        int[] order = new int[n];
        for (int j = 0; j < n; j++) {
            order[j] = j;
        }
        return order;
    }

    /** Each topic's place in the order of topic names (code points, as Python orders str). */
    private int[] topicRanks() {
        int[] topicRank = new int[topicNames.length];
        Integer[] byName = new Integer[topicNames.length];
        for (int t = 0; t < byName.length; t++) {
            byName[t] = t;
        }
        Arrays.sort(byName, (a, b) -> Natural.compareCodePoints(topicNames[a], topicNames[b]));
        for (int r = 0; r < byName.length; r++) {
            topicRank[byName[r]] = r;
        }
        return topicRank;
    }

    /** Partition j's (topic, partition) as one integer that sorts as the pair. */
    private long key(int[] topicRank, int j) {
        return ((long) topicRank[topic[j]] << 32) | ((partition[j] ^ Integer.MIN_VALUE) & 0xffffffffL);
    }

    /** Partition indices in (topic, partition) order, null where that is the index order; a partition listed twice
     * throws. */
    private int[] keyOrder() {
        int[] topicRank = topicRanks();
        long[] key = new long[n];
        boolean sorted = true;
        for (int j = 0; j < n; j++) {
            key[j] = key(topicRank, j);
            sorted &= j == 0 || key[j - 1] < key[j];
        }
        if (sorted) {
            return null;
        }
        int[] order = identity(n);
        Sorting.byKey(order, key);
        for (int i = 1; i < n; i++) {
            if (key[order[i - 1]] == key[order[i]]) {
                int j = order[i];
                throw new IllegalArgumentException("partition " + topicNames[topic[j]] + "/" + partition[j]
                        + " is listed more than once; list each partition once");
            }
        }
        return order;
    }

    /** Partitions in request order; validates rates and lags as the service does (IllegalArgumentException). */
    public static final class Builder {
        private final List<String> topicNames = new ArrayList<>();
        private final Map<String, Integer> topicIndex = new HashMap<>();
        private int n;
        private int[] topic;
        private int[] partition;
        private double[] rate;
        private double[] lag;

        /** {@code expectedPartitions}: a size hint. */
        public Builder(int expectedPartitions) {
            int hint = Math.max(expectedPartitions, 4);
            topic = new int[hint];
            partition = new int[hint];
            rate = new double[hint];
            lag = new double[hint];
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

        String topicName(int t) {
            return topicNames.get(t);
        }

        int topicOf(int j) {
            return topic[j];
        }

        int numberOf(int j) {
            return partition[j];
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
            }
            topic[n] = topicIndex;
            partition[n] = number;
            rate[n] = rateValue == 0 ? 0.0 : rateValue; // -0.0 compares as 0.0
            lag[n] = Double.isNaN(lagValue) ? 0.0 : lagValue;
            return n++;
        }

        /** The partitions; the builder is used up (its arrays become theirs). */
        public Partitions build() {
            return new Partitions(this);
        }
    }
}
