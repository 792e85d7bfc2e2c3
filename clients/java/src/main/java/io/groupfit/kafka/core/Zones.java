package io.groupfit.kafka.core;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

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
    private final Map<String, Integer> index;
    /** Each partition's racks, sorted indices, each once; empty where it has none. */
    final int[][] ofPartition;
    /** The same as bits (rack r: bit r) where every rack's index is below 64, so {@link #local} is one test; else
     * null. */
    private final long[] bits;
    /** The racks known before the algorithm runs (the members', or the previous consumers'), by consumer index. */
    private final int[] ofConsumer;

    /** {@code partitionRacks[j]}: partition j's racks (null: none); {@code consumerRacks[c]}: known consumer c's
     * (null: none). */
    Zones(String[][] partitionRacks, String[] consumerRacks) {
        Map<String, Integer> found = new HashMap<>();
        for (String[] racks : partitionRacks) {
            if (racks != null) {
                for (String rack : racks) {
                    found.putIfAbsent(rack, 0);
                }
            }
        }
        for (String rack : consumerRacks) {
            if (rack != null) {
                found.putIfAbsent(rack, 0);
            }
        }
        names = found.keySet().toArray(new String[0]);
        Arrays.sort(names, Natural::compareCodePoints);
        for (int r = 0; r < names.length; r++) {
            found.put(names[r], r);
        }
        index = found;
        ofPartition = new int[partitionRacks.length][];
        bits = names.length <= 64 ? new long[partitionRacks.length] : null;
        int[] none = new int[0];
        int[][] single = new int[names.length][]; // one array per rack for the partitions of one rack (most)
        for (int j = 0; j < partitionRacks.length; j++) {
            String[] racks = partitionRacks[j];
            if (racks == null || racks.length == 0) {
                ofPartition[j] = none;
                continue;
            }
            if (racks.length == 1) {
                int r = found.get(racks[0]);
                ofPartition[j] = single[r] == null ? single[r] = new int[] {r} : single[r];
            } else {
                int[] indices = new int[racks.length];
                for (int i = 0; i < racks.length; i++) {
                    indices[i] = found.get(racks[i]);
                }
                Arrays.sort(indices);
                int kept = 1;
                for (int i = 1; i < indices.length; i++) {
                    if (indices[i] != indices[kept - 1]) {
                        indices[kept++] = indices[i];
                    }
                }
                ofPartition[j] = kept == indices.length ? indices : Arrays.copyOf(indices, kept);
            }
            if (bits != null) {
                for (int r : ofPartition[j]) {
                    bits[j] |= 1L << r;
                }
            }
        }
        ofConsumer = new int[consumerRacks.length];
        for (int c = 0; c < consumerRacks.length; c++) {
            ofConsumer[c] = consumerRacks[c] == null ? NO_RACK : found.get(consumerRacks[c]);
        }
    }

    int racks() {
        return names.length;
    }

    /** The index of a rack name. */
    int rack(String name) {
        return index.get(name);
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
