package io.groupfit.kafka.core;

import java.util.Arrays;

/**
 * Zones, as {@code app/core/zones.py}: where a consumer runs (its rack) and where each partition is read without
 * crossing zones (its racks: the leader's, or every replica's where the brokers serve fetch-from-follower). A
 * partition is local on a consumer whose rack is known and is one of its racks; every other placement reads across
 * zones. Inside the algorithms a rack is its index in the sorted list of the request's racks (code point order, as
 * Python orders str), so a partition's racks are a few small integers and a consumer's rack one ({@link #NO_RACK}:
 * none known, or none chosen yet).
 */
final class Zones {
    /** A consumer whose rack is not known (or not chosen yet). */
    static final int NO_RACK = -1;
    /** The most distinct racks one request may name, the most one partition may list, and a rack's longest name
     * (app.core.model's MAX_RACKS, MAX_PARTITION_RACKS, MAX_RACK_LENGTH). */
    static final int MAX_RACKS = 1_000;
    static final int MAX_PARTITION_RACKS = 32;
    static final int MAX_RACK_LENGTH = 255;

    final String[] names;
    /** Each partition's racks, sorted indices, each once; empty where it has none. */
    final int[][] ofPartition;
    /** The same as bits (rack r: bit r) where every rack's index is below 64, so {@link #local} is one test; else
     * null. */
    private final long[] bits;
    /** The racks known before the algorithm runs (the members', or the previous consumers'), by consumer index. */
    private final int[] ofConsumer;

    /** The partitions' racks and {@code consumerRacks[c]}, known consumer c's (null: none). The partitions' are
     * used as they are where no consumer names a rack that no partition names. */
    Zones(PartitionRacks partitions, String[] consumerRacks) {
        java.util.TreeSet<String> more = null; // consumers' racks that no partition names
        for (String rack : consumerRacks) {
            if (rack != null && partitions.index(rack) < 0) {
                if (more == null) {
                    more = new java.util.TreeSet<>(Natural::compareCodePoints);
                }
                more.add(rack);
            }
        }
        if (more != null) {
            more.addAll(Arrays.asList(partitions.names));
            partitions = new PartitionRacks(partitions, more.toArray(new String[0]));
        }
        names = partitions.names;
        ofPartition = partitions.ofPartition;
        bits = partitions.bits;
        ofConsumer = new int[consumerRacks.length];
        for (int c = 0; c < consumerRacks.length; c++) {
            ofConsumer[c] = consumerRacks[c] == null ? NO_RACK : partitions.index(consumerRacks[c]);
        }
    }

    int racks() {
        return names.length;
    }

    /** The rack known for consumer c before the algorithm runs (minted ids: none). */
    int rackOf(int c) {
        return c < ofConsumer.length ? ofConsumer[c] : NO_RACK;
    }

    /** Whether partition j is read within its zone by a consumer in {@code rack}. */
    boolean local(int j, int rack) {
        if (rack < 0) {
            return false;
        }
        if (bits != null) {
            return (bits[j] >>> rack & 1) != 0;
        }
        for (int r : ofPartition[j]) {
            if (r == rack) {
                return true;
            }
        }
        return false;
    }

    /** The rate a consumer in {@code rack} holding {@code held[0..count)} reads across zones (math.fsum, as the
     * reference sums it). */
    double crossZone(double[] rates, int[] held, int count, int rack) {
        int[] across = new int[count];
        int k = 0;
        for (int i = 0; i < count; i++) {
            if (!local(held[i], rack)) {
                across[k++] = held[i];
            }
        }
        return Sums.fsum(rates, across, k);
    }

    /** The rack where the most of {@code held}'s rate is local (ties: the first by name); NO_RACK where none of it is
     * local anywhere. The sums are the reference's: each rack's rates added in the order held. */
    int bestRack(double[] rates, int[] held, int count) {
        double[] localRate = null;
        for (int i = 0; i < count; i++) {
            int j = held[i];
            for (int r : ofPartition[j]) {
                if (localRate == null) {
                    localRate = new double[names.length];
                    Arrays.fill(localRate, Double.NaN);
                }
                localRate[r] = (Double.isNaN(localRate[r]) ? 0.0 : localRate[r]) + rates[j];
            }
        }
        if (localRate == null) {
            return NO_RACK;
        }
        int best = NO_RACK;
        for (int r = 0; r < localRate.length; r++) {
            if (!Double.isNaN(localRate[r]) && (best < 0 || localRate[r] > localRate[best])) {
                best = r;
            }
        }
        return best;
    }
}
