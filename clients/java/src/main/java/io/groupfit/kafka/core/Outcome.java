package io.groupfit.kafka.core;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * One rebalance's answer, as {@code app.core.assign.Outcome}: the assignment (in member mode the surplus bins
 * folded into the members exactly as {@code _fold_into_members}), each consumer's load, the moves and the Rscore
 * (Eq. 11: Σ moved rate / C, over the current rates).
 */
public final class Outcome {
    private final String algorithm;
    private final Problem problem;
    private final int[] consumers; // in natural order
    private final int[][] held; // per consumer, in placement order
    private final double[] loads;
    private volatile int[] owner; // per partition: index into consumers + 1; made when first asked (owners())
    private final int moves;
    private final boolean[] unchanged; // per consumer: it holds exactly what it held before
    private final double rscore;
    private final int binsUsed;
    private final Map<String, Object> outputs;
    private ZoneReport zones;

    private Outcome(String algorithm, Problem problem, int[] consumers, int[][] held, double[] loads, int[] owner,
            int moves, boolean[] unchanged, double rscore, int binsUsed, Map<String, Object> outputs) {
        this.algorithm = algorithm;
        this.problem = problem;
        this.consumers = consumers;
        this.held = held;
        this.loads = loads;
        this.owner = owner;
        this.moves = moves;
        this.unchanged = unchanged;
        this.rscore = rscore;
        this.binsUsed = binsUsed;
        this.outputs = outputs;
    }

    /** A consumer's partitions are not one bin's: the fold added some (its bin's tally does not describe it). */
    private static final int MERGED = -2;

    static Outcome of(String algorithm, Problem problem, Placement placement) {
        int bins = 0;
        for (int[] kept : placement.held()) {
            bins += kept.length > 0 ? 1 : 0;
        }
        int[] consumer = new int[bins];
        int[][] held = new int[bins][];
        int[] bin = new int[bins]; // the placement's bin each one's partitions are, -1: none, or MERGED
        int k = 0;
        for (int b = 0; b < placement.held().length; b++) {
            if (placement.held()[b].length > 0) {
                consumer[k] = placement.consumer()[b];
                bin[k] = b;
                held[k++] = placement.held()[b];
            }
        }
        if (problem.members != null) {
            int[][][] folded = new int[1][][];
            int[][] foldedBin = new int[1][];
            consumer = fold(problem, consumer, held, bin, folded, foldedBin);
            held = folded[0];
            bin = foldedBin[0];
        }
        // With the bins' tally, the loads, moves and unchanged consumers cost O(consumers + moves), not a pass over
        // every partition (a change of the group keeps most partitions where they were).
        Placement.Tally tally = placement.tally();
        boolean tallied = tally != null;
        for (int b : bin) {
            tallied &= b != MERGED;
        }
        Consumers consumers = problem.consumers;
        int n = problem.n;
        int[] order = new int[consumer.length];
        long[] tie = new long[consumer.length];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
            tie[i] = consumers.tie(consumer[i]);
        }
        Sorting.byKey(order, tie); // natural order (stable, as ties are unsigned)
        int[] sortedConsumers = new int[order.length];
        int[][] sortedHeld = new int[order.length][];
        double[] loads = new double[order.length];
        int[] owner = tallied ? null : new int[n]; // the consumer's index + 1: 0 until placed
        int[] before = problem.previousCounts(); // per known consumer: partitions it held before
        int[] moved = tallied ? tally.moved() : new int[16]; // grown as needed: a change moves few partitions
        int moves = tallied ? tally.movedCount() : 0;
        boolean[] unchanged = new boolean[order.length];
        int placed = 0;
        // Without a tally, one pass over each consumer's partitions: its load, the partitions that came from another
        // consumer, and whether it holds exactly what it held before.
        for (int i = 0; i < order.length; i++) {
            int c = consumer[order[i]];
            int[] mine = held[order[i]];
            sortedConsumers[i] = c;
            sortedHeld[i] = mine;
            int heldBefore = c < before.length ? before[c] : 0;
            if (tallied) {
                int b = bin[order[i]];
                int kept = mine.length - (b < 0 ? 0 : tally.foreign()[b]);
                placed += mine.length;
                loads[i] = b < 0 ? 0.0 : tally.load()[b];
                unchanged[i] = kept == mine.length && heldBefore == kept;
                continue;
            }
            double load = 0.0;
            int kept = 0;
            for (int j : mine) {
                if (owner[j] != 0) {
                    throw new IllegalStateException("algorithm " + algorithm + " placed a partition twice");
                }
                owner[j] = i + 1;
                load += problem.rate[j];
                int was = problem.previousOwner[j];
                if (was == c) {
                    kept++;
                } else if (was != Pool.NONE) {
                    if (moves == moved.length) {
                        moved = Arrays.copyOf(moved, 2 * moves);
                    }
                    moved[moves++] = j;
                }
            }
            placed += mine.length;
            loads[i] = load;
            unchanged[i] = kept == mine.length && heldBefore == kept;
        }
        if (placed != n) {
            throw new IllegalStateException("algorithm " + algorithm + " did not place every partition");
        }
        double rscore = Sums.fsum(problem.rate, moved, moves) / problem.capacity;
        Outcome outcome = new Outcome(algorithm, problem, sortedConsumers, sortedHeld, loads, owner, moves, unchanged,
                rscore, bins, placement.outputs());
        if (problem.zones != null) {
            outcome.zones = ZoneReport.of(problem, sortedConsumers, sortedHeld, placement);
        }
        return outcome;
    }

    /**
     * Member mode: bins beyond the members go, largest partition first, to the member with the most remaining
     * capacity (ties to the lowest id); members the algorithm left unused get empty assignments.
     */
    private static int[] fold(Problem problem, int[] consumer, int[][] held, int[] bin, int[][][] foldedHeld,
            int[][] foldedBin) {
        Consumers consumers = problem.consumers;
        int[] members = problem.members.clone();
        consumers.sort(members, members.length); // slots in natural order (no two ids have one tie)
        int[] slot = new int[consumers.size()];
        Arrays.fill(slot, -1);
        for (int i = 0; i < members.length; i++) {
            slot[members[i]] = i;
        }
        int[][] result = new int[members.length][];
        int[] resultBin = new int[members.length];
        Arrays.fill(resultBin, -1);
        int surplusCount = 0;
        for (int b = 0; b < consumer.length; b++) {
            if (slot[consumer[b]] >= 0) {
                result[slot[consumer[b]]] = held[b];
                resultBin[slot[consumer[b]]] = bin[b];
            } else {
                surplusCount += held[b].length;
            }
        }
        for (int i = 0; i < members.length; i++) {
            if (result[i] == null) {
                result[i] = new int[0];
            }
        }
        if (surplusCount > 0) {
            int[] surplus = new int[surplusCount];
            int k = 0;
            for (int b = 0; b < consumer.length; b++) {
                if (slot[consumer[b]] < 0) {
                    System.arraycopy(held[b], 0, surplus, k, held[b].length);
                    k += held[b].length;
                }
            }
            double[] rates = problem.rate;
            int[] added = new int[members.length];
            int[][] extra = new int[members.length][];
            if (problem.zones != null) {
                foldZoned(problem, members, result, problem.decreasing(surplus, surplusCount), added, extra);
            } else {
                MinHeap heap = new MinHeap(members.length); // (load − capacity, natural key, id): most room first
                for (int i = 0; i < members.length; i++) {
                    double load = 0;
                    for (int j : result[i]) {
                        load += rates[j];
                    }
                    heap.set(i, load - consumers.cap(members[i]), consumers.tie(members[i]));
                }
                for (int j : problem.decreasing(surplus, surplusCount)) {
                    int i = heap.top();
                    append(extra, added, i, j);
                    heap.set(i, heap.value(i) + rates[j], consumers.tie(members[i]));
                }
            }
            for (int i = 0; i < members.length; i++) {
                if (added[i] > 0) {
                    int[] merged = Arrays.copyOf(result[i], result[i].length + added[i]);
                    System.arraycopy(extra[i], 0, merged, result[i].length, added[i]);
                    result[i] = merged;
                    resultBin[i] = MERGED;
                }
            }
        }
        foldedHeld[0] = result;
        foldedBin[0] = resultBin;
        return members;
    }

    private static void append(int[][] extra, int[] added, int i, int j) {
        if (extra[i] == null) {
            extra[i] = new int[4];
        } else if (added[i] == extra[i].length) {
            extra[i] = Arrays.copyOf(extra[i], added[i] * 2);
        }
        extra[i][added[i]++] = j;
    }

    /**
     * The fold of a zone-aware problem ({@code app.core.assign._fold_zoned}): a partition goes to the member of one of
     * its racks with the most remaining capacity if it fits there, else to the member with the most remaining
     * capacity; {@code members} in (natural key, id) order, each one's load summed exactly (math.fsum).
     */
    private static void foldZoned(Problem problem, int[] members, int[][] result, int[] surplus, int[] added,
            int[][] extra) {
        Zones zones = problem.zones;
        Consumers consumers = problem.consumers;
        double[] rates = problem.rate;
        MinHeap every = new MinHeap(members.length); // (load − capacity, natural key, id): most room first
        MinHeap[] byRack = new MinHeap[zones.racks()];
        for (int i = 0; i < members.length; i++) {
            double excess = Sums.fsum(rates, result[i], result[i].length) - consumers.cap(members[i]);
            every.set(i, excess, consumers.tie(members[i]));
            int rack = zones.rackOf(members[i]);
            if (rack != Zones.NO_RACK) {
                if (byRack[rack] == null) {
                    byRack[rack] = new MinHeap(4);
                }
                byRack[rack].set(i, excess, consumers.tie(members[i]));
            }
        }
        for (int j : surplus) {
            int best = -1;
            for (int r : zones.ofPartition[j]) {
                if (byRack[r] != null && !byRack[r].isEmpty()) {
                    int top = byRack[r].top();
                    if (best < 0 || every.value(top) < every.value(best) || (every.value(top) == every.value(best)
                            && (consumers.tie(members[top]) != consumers.tie(members[best])
                                    ? Long.compareUnsigned(consumers.tie(members[top]), consumers.tie(members[best])) < 0
                                    : top < best))) {
                        best = top;
                    }
                }
            }
            if (best < 0 || every.value(best) + rates[j] > consumers.cap(members[best]) * (Problem.ROUNDING - 1)) {
                best = every.top();
            }
            append(extra, added, best, j);
            double excess = every.value(best) + rates[j];
            every.set(best, excess, consumers.tie(members[best]));
            int rack = zones.rackOf(members[best]);
            if (rack != Zones.NO_RACK) {
                byRack[rack].set(best, excess, consumers.tie(members[best]));
            }
        }
    }

    public String algorithm() {
        return algorithm;
    }

    public Problem problem() {
        return problem;
    }

    /** The consumers of the answer, in natural order (in member mode: every member). */
    public List<String> consumers() {
        List<String> names = new ArrayList<>(consumers.length);
        for (int c : consumers) {
            names.add(problem.consumers.name(c));
        }
        return names;
    }

    public int consumerCount() {
        return consumers.length;
    }

    /** The i-th consumer's index, as {@link Problem.Builder#consumer} gave it (minted ids come after the known). */
    public int consumerIndex(int i) {
        return consumers[i];
    }

    public String consumer(int i) {
        return problem.consumers.name(consumers[i]);
    }

    /** The partitions (indices j) of the i-th consumer. */
    public int[] partitions(int i) {
        return held[i];
    }

    public double load(int i) {
        return loads[i];
    }

    /** Per partition, its consumer's index + 1; made when first asked where the outcome was made without it. */
    private int[] owners() {
        int[] known = owner;
        return known != null ? known : madeOwners();
    }

    private synchronized int[] madeOwners() {
        if (owner == null) {
            int[] made = new int[problem.n];
            for (int i = 0; i < held.length; i++) {
                for (int j : held[i]) {
                    if (made[j] != 0) {
                        throw new IllegalStateException("algorithm " + algorithm + " placed a partition twice");
                    }
                    made[j] = i + 1;
                }
            }
            owner = made;
        }
        return owner;
    }

    /**
     * Per partition j, the index (into {@link #consumer}) of its consumer plus one: the outcome's own array, to be read
     * only (a pass over every partition reads it without a call per partition).
     */
    public int[] ownersPlusOne() {
        return owners();
    }

    /** The index (into {@link #consumer}) of partition j's consumer. */
    public int ownerIndex(int j) {
        return owners()[j] - 1;
    }

    public String owner(int j) {
        return consumer(owners()[j] - 1);
    }

    /** Partitions that changed consumer (new partitions do not count). */
    public int moves() {
        return moves;
    }

    /** Whether the i-th consumer holds exactly the partitions it held before (none moved in or out). */
    public boolean unchanged(int i) {
        return unchanged[i];
    }

    /** Eq. 11: Σ rate of the moved partitions / C. */
    public double rscore() {
        return rscore;
    }

    /** The bins the algorithm used before the fold (the recommended consumer count in member mode). */
    public int binsUsed() {
        return binsUsed;
    }

    public Map<String, Object> outputs() {
        return outputs;
    }

    /** The racks and cross-zone rates of a zone-aware problem's answer; null where the problem is not zone-aware. */
    public ZoneReport zones() {
        return zones;
    }

    /** Consumers above their own capacity, in natural order. */
    public List<String> overloaded() {
        List<String> over = new ArrayList<>();
        for (int i = 0; i < consumers.length; i++) {
            if (!Problem.within(loads[i], problem.consumers.cap(consumers[i]))) {
                over.add(consumer(i));
            }
        }
        return over;
    }
}
