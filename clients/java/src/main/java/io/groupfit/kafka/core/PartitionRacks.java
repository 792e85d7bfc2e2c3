package io.groupfit.kafka.core;

import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.function.IntFunction;

/**
 * The racks each partition of a problem is read from without crossing zones (index j, as the problem's partitions),
 * immutable, in the form the zone mode uses: a rack is its index in the sorted list of the racks named (code point
 * order, as Python orders str), a partition's racks a few sorted indices, each once ({@link Zones} adds the
 * consumers' racks). A caller that assigns partitions whose racks did not change (the broker assignor, from one
 * epoch of a group to the next) checks them with {@link #sameAs} and hands the same object to {@link
 * Problem.Builder#racks(PartitionRacks)}, so the racks are not indexed again.
 */
public final class PartitionRacks {
    /** The racks named, sorted. */
    final String[] names;
    /** Each partition's racks, sorted indices into {@link #names}, each once; empty where it has none. */
    final int[][] ofPartition;
    /** The same as bits (rack r: bit r) where every rack's index is below 64; else null. */
    final long[] bits;
    /** Whether any partition names a rack. */
    final boolean named;

    /**
     * {@code listed[j]}: partition j's racks as {@link #listed} checked them (null: none); throws when more than
     * {@link Zones#MAX_RACKS} distinct racks are named.
     */
    PartitionRacks(String[][] listed) {
        Map<String, Integer> found = new HashMap<>();
        boolean any = false;
        for (String[] racks : listed) {
            if (racks != null) {
                any |= racks.length > 0;
                for (String rack : racks) {
                    found.putIfAbsent(rack, 0);
                }
            }
        }
        if (found.size() > Zones.MAX_RACKS) {
            throw new IllegalArgumentException("the partitions name " + found.size() + " distinct racks, more "
                    + "than " + Zones.MAX_RACKS + "; racks are zones or racks of brokers, not brokers or hosts");
        }
        named = any;
        names = found.keySet().toArray(new String[0]);
        Arrays.sort(names, Natural::compareCodePoints);
        for (int r = 0; r < names.length; r++) {
            found.put(names[r], r);
        }
        ofPartition = new int[listed.length][];
        int[] none = new int[0];
        int[][] single = new int[names.length][]; // one array per rack for the partitions of one rack (most)
        for (int j = 0; j < listed.length; j++) {
            String[] racks = listed[j];
            if (racks == null || racks.length == 0) {
                ofPartition[j] = none;
            } else if (racks.length == 1) {
                int r = found.get(racks[0]);
                ofPartition[j] = single[r] == null ? single[r] = new int[] {r} : single[r];
            } else {
                int[] indices = new int[racks.length];
                for (int i = 0; i < racks.length; i++) {
                    indices[i] = found.get(racks[i]);
                }
                ofPartition[j] = distinctSorted(indices);
            }
        }
        bits = bits(ofPartition, names.length);
    }

    /** The same partitions' racks under more rack names ({@code names}: a sorted superset of {@code racks.names}). */
    PartitionRacks(PartitionRacks racks, String[] names) {
        int[] renamed = new int[racks.names.length];
        for (int r = 0, s = 0; r < renamed.length; r++) {
            while (!names[s].equals(racks.names[r])) {
                s++;
            }
            renamed[r] = s;
        }
        this.names = names;
        this.named = racks.named;
        ofPartition = new int[racks.ofPartition.length][];
        for (int j = 0; j < ofPartition.length; j++) {
            int[] indices = racks.ofPartition[j].clone(); // renaming keeps the order: both lists are sorted
            for (int i = 0; i < indices.length; i++) {
                indices[i] = renamed[indices[i]];
            }
            ofPartition[j] = indices;
        }
        bits = bits(ofPartition, names.length);
    }

    private static int[] distinctSorted(int[] indices) {
        Arrays.sort(indices);
        int kept = 1;
        for (int i = 1; i < indices.length; i++) {
            if (indices[i] != indices[kept - 1]) {
                indices[kept++] = indices[i];
            }
        }
        return kept == indices.length ? indices : Arrays.copyOf(indices, kept);
    }

    private static long[] bits(int[][] ofPartition, int racks) {
        if (racks > 64) {
            return null;
        }
        long[] bits = new long[ofPartition.length];
        for (int j = 0; j < ofPartition.length; j++) {
            for (int r : ofPartition[j]) {
                bits[j] |= 1L << r;
            }
        }
        return bits;
    }

    /** The number of partitions. */
    public int size() {
        return ofPartition.length;
    }

    /**
     * Whether partition j's racks are exactly {@code racks} (as a set: a collection that lists a rack twice is not
     * the same, and is read again by whoever asks).
     */
    public boolean sameAs(int j, Collection<String> racks) {
        int[] mine = ofPartition[j];
        if (racks.size() != mine.length) {
            return false;
        }
        for (int r : mine) {
            if (!racks.contains(names[r])) {
                return false;
            }
        }
        return true;
    }

    /** The index of a rack name, or a negative number when no partition names it. */
    int index(String rack) {
        return Arrays.binarySearch(names, rack, Natural::compareCodePoints);
    }

    /**
     * A partition's racks, checked as the service checks them (at most {@link Zones#MAX_PARTITION_RACKS}, each a
     * valid rack name); {@code where} names the partition in the error.
     */
    static String[] listed(Collection<String> racks, IntFunction<String> where, int j) {
        if (racks.size() > Zones.MAX_PARTITION_RACKS) {
            throw new IllegalArgumentException(where.apply(j) + " lists " + racks.size() + " racks, more than "
                    + Zones.MAX_PARTITION_RACKS + "; list the racks of its replicas, each once");
        }
        String[] listed = new String[racks.size()];
        int i = 0;
        for (String rack : racks) {
            if (!validRack(rack)) {
                throw badRack(rack, where.apply(j));
            }
            listed[i++] = rack;
        }
        return listed;
    }

    static boolean validRack(String rack) {
        return rack != null && !rack.isEmpty() && (rack.length() <= Zones.MAX_RACK_LENGTH
                || rack.codePointCount(0, rack.length()) <= Zones.MAX_RACK_LENGTH);
    }

    static IllegalArgumentException badRack(String rack, String where) {
        return new IllegalArgumentException(where + " has rack '" + rack + "'; a rack is a non-empty string of at "
                + "most " + Zones.MAX_RACK_LENGTH + " characters (as broker.rack and client.rack)");
    }

    /** The racks of the partitions of a {@link Partitions}, one partition at a time. */
    public static final class Builder {
        private final Partitions partitions;
        private final String[][] listed;

        public Builder(Partitions partitions) {
            this.partitions = partitions;
            this.listed = new String[partitions.n][];
        }

        /** Partition j is read without crossing zones by a consumer in one of {@code racks} (a rack listed twice
         * counts once). */
        public Builder racks(int j, Collection<String> racks) {
            listed[j] = listed(racks, this::name, j);
            return this;
        }

        private String name(int j) {
            return "partition " + partitions.topic(j) + "/" + partitions.partition(j);
        }

        /** The racks; throws when more than {@link Zones#MAX_RACKS} distinct racks are named. */
        public PartitionRacks build() {
            return new PartitionRacks(listed);
        }
    }
}
