package io.groupfit.kafka.core;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One rebalance on arrays (Landau et al. §III, as {@code app.core.model.Problem}): the {@link Partitions} (index j:
 * topic, number, rate, lag, the decreasing order); the capacity C; the consumers as small integers with their own
 * capacities; g(j,k), the previous owner of each partition, and what each previous consumer held; the members
 * (null: the algorithm sizes the group). Build one with {@link Builder}, which validates.
 *
 * <p>Per-partition and per-consumer facts are parallel arrays, so a further dimension (a consumer's rack, the
 * racks a partition can be read from without crossing zones) is one more array beside these.
 */
public final class Problem {
    /** A partition's previous owner where it had none ({@link Builder#Builder(double, Partitions, int[])}). */
    public static final int NO_OWNER = Pool.NONE;
    /** The most consumers one answer may have (the service's default GROUPFIT_MAX_CONSUMERS). */
    public static final int MAX_CONSUMERS = 100_000;
    /** A load counts as within a capacity up to this factor: absorbs float rounding of summed rates. */
    static final double ROUNDING = 1 + 1e-12;

    static boolean within(double load, double capacity) {
        return load <= capacity * ROUNDING;
    }

    final Partitions partitions;
    final int n;
    final String[] topicNames;
    final int[] topic;
    final int[] partition;
    final double[] rate;
    final double[] lag;
    final int[] decreasing;
    final int[] decreasingRank;
    final double capacity;
    final Consumers consumers;
    /** g(j,k): the consumer that held partition j, {@link Pool#NONE} for a new partition. */
    final int[] previousOwner;
    /** The consumers the previous assignment lists (in its order). */
    final int[] previousIds;
    /** What each of them held that still exists, in the order listed; null where it was given as a Holding. */
    private final int[][] listed;
    /** What each of them held as a Holding; null until {@link #holdings} makes those that were listed. */
    private final Holding[] holdings;
    /** The members in request order, or null. */
    final int[] members;
    final boolean uniform;
    /** The racks of a zone-aware problem (a partition names its racks and, with members, a member its rack); null:
     * racks change nothing, as {@code app.core.model.Problem.zones}. */
    final Zones zones;

    private Problem(Partitions partitions, double capacity, Consumers consumers, int[] previousOwner,
            int[] previousIds, int[][] listed, Holding[] holdings, int[] members, boolean uniform, Zones zones) {
        this.partitions = partitions;
        this.n = partitions.n;
        this.topicNames = partitions.topicNames;
        this.topic = partitions.topic;
        this.partition = partitions.partition;
        this.rate = partitions.rate;
        this.lag = partitions.lag;
        this.decreasing = partitions.decreasing;
        this.decreasingRank = partitions.decreasingRank;
        this.capacity = capacity;
        this.consumers = consumers;
        this.previousOwner = previousOwner;
        this.previousIds = previousIds;
        this.listed = listed;
        this.holdings = holdings;
        this.members = members;
        this.uniform = uniform;
        this.zones = zones;
    }

    /** Whether the problem is zone-aware: the zone-aware algorithms weigh racks and the outcome reports them. */
    public boolean zoneAware() {
        return zones != null;
    }

    /** Partition j's racks in name order (a zone-aware problem's; else none). */
    public List<String> racks(int j) {
        if (zones == null) {
            return List.of();
        }
        List<String> names = new ArrayList<>(zones.ofPartition[j].length);
        for (int r : zones.ofPartition[j]) {
            names.add(zones.names[r]);
        }
        return names;
    }

    /** The rack known for a consumer before the algorithm runs (a zone-aware problem's), or null. */
    public String rack(String consumer) {
        Integer c = zones == null ? null : consumerIndex(consumer);
        int rack = c == null ? Zones.NO_RACK : zones.rackOf(c);
        return rack == Zones.NO_RACK ? null : zones.names[rack];
    }

    public Partitions partitions() {
        return partitions;
    }

    public int size() {
        return n;
    }

    public double capacity() {
        return capacity;
    }

    // partition j's fields: the partitions' own (the arrays above are theirs, for the algorithms' loops)

    public double rate(int j) {
        return partitions.rate(j);
    }

    public String topic(int j) {
        return partitions.topic(j);
    }

    /** The index of partition j's topic, as {@link Builder#topic} gave it. */
    public int topicIndex(int j) {
        return partitions.topicIndex(j);
    }

    public int partition(int j) {
        return partitions.partition(j);
    }

    /** The previous owner of partition j, or null for a new partition. */
    public String previousOwner(int j) {
        return previousOwner[j] < 0 ? null : consumers.name(previousOwner[j]);
    }

    /**
     * g(j,k) for every partition: the previous owner's consumer index ({@link Builder#consumer}), {@link #NO_OWNER}
     * for a new partition. The problem's own array, to be read only (a caller keeps it to build the next problem's
     * with {@link Builder#Builder(double, Partitions, int[])}).
     */
    public int[] previousOwners() {
        return previousOwner;
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
        return this.partitions.decreasing(partitions, length);
    }

    /** What each previous consumer held (parallel to {@link #previousIds}), in the decreasing order. */
    Holding[] holdings() {
        boolean missing = false;
        for (Holding holding : holdings) {
            missing |= holding == null;
        }
        if (missing) {
            // one pass over the decreasing order puts every listed consumer's partitions in that order
            int[] slot = new int[consumers.known()];
            Arrays.fill(slot, -1);
            int[][] made = new int[previousIds.length][];
            for (int i = 0; i < previousIds.length; i++) {
                if (holdings[i] == null) {
                    slot[previousIds[i]] = i;
                    made[i] = new int[listed[i].length];
                }
            }
            int[] count = new int[previousIds.length];
            for (int j : decreasing) {
                int owner = previousOwner[j];
                if (owner != Pool.NONE && slot[owner] >= 0) {
                    made[slot[owner]][count[slot[owner]]++] = j;
                }
            }
            for (int i = 0; i < previousIds.length; i++) {
                if (holdings[i] == null) {
                    double[] sums = new double[made[i].length + 1];
                    double sum = 0.0;
                    for (int k = 0; k < made[i].length; k++) {
                        sum += rate[made[i][k]];
                        sums[k + 1] = sum;
                    }
                    holdings[i] = new Holding(partitions, made[i], sums);
                }
            }
        }
        return holdings;
    }

    /** Per known consumer: how many partitions it held (that still exist). */
    int[] previousCounts() {
        int[] counts = new int[consumers.known()];
        for (int i = 0; i < previousIds.length; i++) {
            counts[previousIds[i]] = listed[i] != null ? listed[i].length : holdings[i].size();
        }
        return counts;
    }

    /** What each previous consumer held (parallel to {@link #previousIds}), in the order listed; a holding given
     * as such is listed in (topic, partition) order, as a request built from this problem lists it. */
    int[] previousHeld(int i) {
        if (listed[i] != null) {
            return listed[i];
        }
        int[] held = holdings[i].decreasing.clone();
        Arrays.sort(held);
        return held;
    }

    /**
     * Builds a problem: partitions in request order (or given, built before), consumers by id, members with their
     * own capacities, the previous assignment. Checks what the service checks for these fields (rates finite and
     * at least 0, each partition once, a partition held once before, capacities positive) and throws
     * IllegalArgumentException.
     */
    public static final class Builder {
        private final double capacity;
        private final Partitions given;
        private final Partitions.Builder partitions;
        private int[] previousOwner;
        private boolean ownersGiven; // the previous owners were given written: a holding given writes none
        private final List<String> consumerNames = new ArrayList<>();
        private final Map<String, Integer> consumerIndex = new HashMap<>();
        private double[] own = new double[16];
        private boolean[] member = new boolean[16];
        private int[] members = new int[16];
        private int memberCount = -1; // -1: no members (autoscale)
        private int[] listed = new int[16]; // consumers in the previous assignment's order
        private int[] listing = new int[16]; // each consumer's place in it, -1: not listed
        private Holding[] holdingOf = new Holding[16]; // by place in the listing: given as a Holding
        private boolean[] givenSingly = new boolean[16]; // by place in the listing: given one by one
        private int listedCount;
        private int[] heldConsumer; // (consumer, partition) pairs given one by one
        private int[] heldPartition;
        private int heldCount;
        private String[][] partitionRacks; // by partition, null: none named yet
        private PartitionRacks givenRacks; // or all of them, built before
        private String[] consumerRack = new String[16];

        public Builder(double capacity) {
            this(capacity, 16);
        }

        /** {@code expectedPartitions}: a size hint. */
        public Builder(double capacity, int expectedPartitions) {
            this(capacity, null, new Partitions.Builder(expectedPartitions), expectedPartitions);
        }

        /** A problem on partitions built before: {@link #topic} and {@link #partition} are not called. */
        public Builder(double capacity, Partitions partitions) {
            this(capacity, partitions, null, 0);
            previousOwner = new int[partitions.n];
            Arrays.fill(previousOwner, Pool.NONE);
        }

        /**
         * A problem on partitions built before whose previous owners the caller wrote already: {@code owners[j]} is
         * the consumer (as {@link #consumer} numbers them, in the order they will be given) whose holding {@link
         * #previous(int, Holding)} will give partition j, {@link #NO_OWNER} for one no holding gives. Exactly those:
         * nothing checks it (for a caller that keeps them from a previous problem and rewrites what changed). The
         * array becomes the problem's; it must not be changed after.
         */
        public Builder(double capacity, Partitions partitions, int[] owners) {
            this(capacity, partitions, null, 0);
            if (owners.length != partitions.n) {
                throw new IllegalArgumentException("the previous owners were made for other partitions than the problem's");
            }
            previousOwner = owners;
            ownersGiven = true;
        }

        private Builder(double capacity, Partitions given, Partitions.Builder partitions, int expectedPartitions) {
            if (!(capacity > 0 && Double.isFinite(capacity))) {
                throw new IllegalArgumentException("capacity must be a finite number above 0, got " + capacity);
            }
            this.capacity = capacity;
            this.given = given;
            this.partitions = partitions;
            int hint = Math.max(expectedPartitions, 4);
            previousOwner = new int[hint];
            heldConsumer = new int[hint];
            heldPartition = new int[hint];
            Arrays.fill(listing, -1);
        }

        private Partitions.Builder partitions() {
            if (partitions == null) {
                throw new IllegalStateException("the partitions were given built");
            }
            return partitions;
        }

        /** The index of a topic name. */
        public int topic(String name) {
            return partitions().topic(name);
        }

        /** Adds a partition (the next index j, request order); {@code lagValue} NaN: none. */
        public int partition(int topicIndex, int number, double rateValue, double lagValue) {
            int j = partitions().partition(topicIndex, number, rateValue, lagValue);
            if (j == previousOwner.length) {
                previousOwner = Arrays.copyOf(previousOwner, j * 2);
            }
            previousOwner[j] = Pool.NONE;
            return j;
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
                consumerRack = Arrays.copyOf(consumerRack, c * 2);
                listing = Arrays.copyOf(listing, c * 2);
                Arrays.fill(listing, c, c * 2, -1);
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
            if (listing[c] < 0) {
                if (listedCount == listed.length) {
                    listed = Arrays.copyOf(listed, listedCount * 2);
                    holdingOf = Arrays.copyOf(holdingOf, listedCount * 2);
                    givenSingly = Arrays.copyOf(givenSingly, listedCount * 2);
                }
                listing[c] = listedCount;
                listed[listedCount++] = c;
            }
            return this;
        }

        private void hold(int c, int j) {
            if (previousOwner[j] != Pool.NONE) {
                throw new IllegalArgumentException("partition " + topicName(j) + " appears twice in the previous "
                        + "assignment (" + consumerNames.get(previousOwner[j]) + " and " + consumerNames.get(c)
                        + "); a partition has one consumer");
            }
            previousOwner[j] = c;
        }

        private String topicName(int j) {
            return given != null ? given.topic(j) + "/" + given.partition(j)
                    : partitions.topicName(partitions.topicOf(j)) + "/" + partitions.numberOf(j);
        }

        /** Consumer c held partition j (in the order its previous list names them). */
        public Builder previous(int c, int j) {
            if (ownersGiven) {
                throw new IllegalStateException("the previous owners were given written: give holdings");
            }
            previousConsumer(c);
            if (holdingOf[listing[c]] != null) {
                throw new IllegalStateException("consumer " + consumerNames.get(c) + "'s partitions were given as a holding");
            }
            hold(c, j);
            givenSingly[listing[c]] = true;
            if (heldCount == heldConsumer.length) {
                heldConsumer = Arrays.copyOf(heldConsumer, heldCount * 2);
                heldPartition = Arrays.copyOf(heldPartition, heldCount * 2);
            }
            heldConsumer[heldCount] = c;
            heldPartition[heldCount++] = j;
            return this;
        }

        /** Consumer c held these partitions, made from the partitions this problem was given. */
        public Builder previous(int c, Holding holding) {
            if (holding.partitions != given) {
                throw new IllegalArgumentException("the holding was made from other partitions than the problem's");
            }
            previousConsumer(c);
            int place = listing[c];
            if (holdingOf[place] != null || givenSingly[place]) {
                throw new IllegalStateException("consumer " + consumerNames.get(c) + "'s partitions were given twice");
            }
            for (int k = 0; !ownersGiven && k < holding.decreasing.length; k++) {
                hold(c, holding.decreasing[k]);
            }
            holdingOf[place] = holding;
            return this;
        }

        /** Consumer c runs in {@code rack} (its client.rack): a member, or without members a previous consumer. */
        public Builder rack(int c, String rack) {
            if (!PartitionRacks.validRack(rack)) {
                throw PartitionRacks.badRack(rack, "consumer '" + consumerNames.get(c) + "'");
            }
            consumerRack[c] = rack;
            return this;
        }

        /** Partition j is read without crossing zones by a consumer in one of {@code racks} (a rack listed twice
         * counts once). */
        public Builder racks(int j, java.util.Collection<String> racks) {
            if (givenRacks != null) {
                throw new IllegalStateException("the partitions' racks were given built");
            }
            String[] listed = PartitionRacks.listed(racks, k -> "partition " + topicName(k), j);
            if (partitionRacks == null) {
                partitionRacks = new String[Math.max(previousOwner.length, j + 1)][];
            } else if (j >= partitionRacks.length) {
                partitionRacks = Arrays.copyOf(partitionRacks, Math.max(j + 1, partitionRacks.length * 2));
            }
            partitionRacks[j] = listed;
            return this;
        }

        /** Every partition's racks, built before for the partitions this problem was given. */
        public Builder racks(PartitionRacks racks) {
            if (given == null || racks.size() != given.n) {
                throw new IllegalArgumentException("the racks were made for other partitions than the problem's");
            }
            if (partitionRacks != null) {
                throw new IllegalStateException("racks were given partition by partition");
            }
            givenRacks = racks;
            return this;
        }

        /** The zones of the problem, or null where racks change nothing (as app.core.model.Problem.zones). */
        private Zones zones(int n, int known, int[] previousIds) {
            PartitionRacks racks = givenRacks != null || partitionRacks == null ? givenRacks
                    : new PartitionRacks(partitionRacks.length == n ? partitionRacks : Arrays.copyOf(partitionRacks, n));
            boolean[] previous = new boolean[known];
            for (int c : previousIds) {
                previous[c] = true;
            }
            boolean anyConsumer = false;
            for (int c = 0; c < known; c++) {
                if (consumerRack[c] != null) {
                    boolean runs = memberCount >= 0 ? member[c] : previous[c];
                    if (!runs) {
                        throw new IllegalArgumentException("a rack is given for '" + consumerNames.get(c) + "', which is "
                                + "not " + (memberCount >= 0 ? "a member" : "a consumer of the previous assignment")
                                + "; racks are known only for consumers that run already");
                    }
                    anyConsumer = true;
                }
            }
            if (racks == null || !racks.named || (memberCount >= 0 && !anyConsumer)) {
                return null;
            }
            return new Zones(racks, Arrays.copyOf(consumerRack, known));
        }

        /** The problem; the builder is used up (its arrays become the problem's). */
        public Problem build() {
            int known = consumerNames.size();
            if (memberCount == 0) {
                throw new IllegalArgumentException("members is empty; give none to let the algorithm size the group");
            }
            Partitions built = given != null ? given : partitions.build();
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
            int[] counts = new int[listedCount];
            for (int h = 0; h < heldCount; h++) {
                counts[listing[heldConsumer[h]]]++;
            }
            int[][] held = new int[listedCount][];
            for (int i = 0; i < listedCount; i++) {
                if (holdingOf[i] == null) {
                    held[i] = new int[counts[i]];
                    counts[i] = 0;
                }
            }
            for (int h = 0; h < heldCount; h++) {
                int i = listing[heldConsumer[h]];
                held[i][counts[i]++] = heldPartition[h];
            }
            int n = built.n;
            Zones zones = zones(n, known, previousIds);
            return new Problem(built, capacity, consumers,
                    previousOwner.length == n ? previousOwner : Arrays.copyOf(previousOwner, n), previousIds, held,
                    Arrays.copyOf(holdingOf, listedCount), memberCount < 0 ? null : Arrays.copyOf(members, memberCount),
                    uniform, zones);
        }
    }
}
