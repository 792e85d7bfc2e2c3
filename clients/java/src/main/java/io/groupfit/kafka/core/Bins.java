package io.groupfit.kafka.core;

import java.util.Arrays;

/**
 * The open consumers (bins) of the assignment being built, and the Any Fit rule that picks one, as
 * {@code app.core.bins}: an empty bin accepts any partition, even one above capacity; Worst Fit takes the bin with
 * the most remaining capacity if it fits, Best Fit the one with the least that still fits, Next Fit only the bin
 * opened last; ties to the lowest id. Each bin has its consumer's own capacity. Bins are small integers in the
 * order they were opened; {@code ids[b]} is the consumer.
 *
 * <p>Zone mode (a zone-aware problem; the Best and Worst Fit rules): each bin has a rack, and the rule keeps one
 * index per rack beside the global one. A partition goes to an open bin of one of its racks by the rule, else into a
 * new bin in one of its racks (a free member there, or a new consumer started there), else to any open bin by the
 * rule (across zones), else into a new bin h(j,k). What that costs in consumers {@link SearchState#finishZoned} wins
 * back.
 */
final class Bins {
    enum Rule {
        NEXT, BEST, WORST
    }

    final Problem problem;
    final Consumers consumers;
    final Pool pool;
    private final Rule rule;
    private final double[] rates;
    int count;
    int[] ids = new int[16];
    double[] cap = new double[16];
    double[] limit = new double[16]; // cap up to float rounding of summed rates (Problem.within)
    double[] load = new double[16];
    int[][] held = new int[16][];
    int[] heldCount = new int[16];
    /** Per bin: how many of its partitions its consumer did not hold before; and the partitions placed away from
     * their previous consumer, as they were placed. The answer's moves and unchanged consumers come from these, not
     * from a pass over every partition (bins only ever gain partitions, so they stay exact). */
    int[] foreign = new int[16];
    int[] moved = new int[16];
    int movedCount;
    /** No partition had a consumer before (a group forming): nothing to look up when one is placed. */
    private final boolean nonePrevious;
    private long[] tie = new long[16];
    // Worst Fit: the open non-empty bins by (load − limit, tie, bin).
    private final MinHeap heap;
    // Best Fit: the open non-empty bins by (residual, tie, bin), a treap.
    private final Treap byResidual;
    /** Zone mode: the problem's zones (null: not in zone mode), each bin's rack, the rule's index per rack, and each
     * consumer's bin (-1: not open). */
    final Zones zones;
    int[] rack = new int[16];
    private final MinHeap[] rackHeap;
    private final Treap[] rackResidual;
    private int[] binOf;

    /** A {@link #localChoice}: the partition goes into a new bin of its racks. */
    static final int OPEN_LOCAL = -1;
    /** A {@link #localChoice}: the partition cannot be placed in its zone. */
    static final int NOT_LOCAL = -2;

    Bins(Problem problem, Rule rule) {
        this.problem = problem;
        this.consumers = problem.consumers;
        this.pool = new Pool(consumers, problem.members);
        this.rule = rule;
        this.rates = problem.rate;
        this.nonePrevious = problem.previousIds.length == 0;
        this.heap = rule == Rule.WORST ? new MinHeap(16) : null;
        this.byResidual = rule == Rule.BEST ? new Treap() : null;
        this.zones = rule == Rule.NEXT ? null : problem.zones;
        int racks = zones == null ? 0 : zones.racks();
        rackHeap = rule == Rule.WORST ? new MinHeap[racks] : null;
        rackResidual = rule == Rule.BEST ? new Treap[racks] : null;
        for (int r = 0; r < racks; r++) {
            if (rule == Rule.WORST) {
                rackHeap[r] = new MinHeap(4);
            } else {
                rackResidual[r] = new Treap();
            }
        }
        if (zones != null) {
            pool.zoned(zones, problem.previousIds);
            binOf = new int[Math.max(consumers.size(), 4)];
            Arrays.fill(binOf, -1);
        }
    }

    /** createConsumer: a new, empty bin for consumer h(j,k) ({@code preferred} = g(j,k), or NONE). */
    int open(int preferred) {
        return add(pool.open(preferred));
    }

    /** Zone mode: a new bin in one of j's racks (h(j,k) where j's previous consumer runs there), or -1. */
    int openLocal(int j) {
        int c = pool.openFor(zones.ofPartition[j], problem.previousOwner[j]);
        return c == Pool.NONE ? -1 : add(c);
    }

    /** Zone mode: consumer c's bin, or -1 where it is not open. */
    int binOf(int c) {
        return c < binOf.length ? binOf[c] : -1;
    }

    /** A consumer the pool opened, as an empty bin. */
    private int add(int c) {
        int b = count++;
        if (b == ids.length) {
            int grown = b * 2;
            ids = Arrays.copyOf(ids, grown);
            cap = Arrays.copyOf(cap, grown);
            limit = Arrays.copyOf(limit, grown);
            load = Arrays.copyOf(load, grown);
            held = Arrays.copyOf(held, grown);
            heldCount = Arrays.copyOf(heldCount, grown);
            foreign = Arrays.copyOf(foreign, grown);
            tie = Arrays.copyOf(tie, grown);
            rack = Arrays.copyOf(rack, grown);
        }
        if (zones != null) {
            if (c >= binOf.length) {
                int old = binOf.length;
                binOf = Arrays.copyOf(binOf, Math.max(c + 1, old * 2));
                Arrays.fill(binOf, old, binOf.length, -1);
            }
            binOf[c] = b;
            rack[b] = pool.rackOf(c);
        }
        ids[b] = c;
        cap[b] = consumers.cap(c);
        limit[b] = cap[b] * Problem.ROUNDING;
        load[b] = 0.0;
        held[b] = new int[4];
        heldCount[b] = 0;
        foreign[b] = 0;
        tie[b] = consumers.tie(c);
        return b;
    }

    private void hold(int b, int j) {
        if (heldCount[b] == held[b].length) {
            held[b] = Arrays.copyOf(held[b], heldCount[b] * 2);
        }
        held[b][heldCount[b]++] = j;
        if (nonePrevious) {
            foreign[b]++;
        } else {
            arrived(b, j, problem.previousOwner[j]);
        }
    }

    /** {@link #hold} of {@code order[from..to)} ({@code order} null: the indices from..to) at once. */
    private void holdAll(int b, int[] order, int from, int to) {
        int first = heldCount[b];
        int after = first + to - from;
        if (after > held[b].length) {
            held[b] = Arrays.copyOf(held[b], Math.max(after, 2 * held[b].length));
        }
        int[] kept = held[b];
        for (int k = from; k < to; k++) {
            kept[first + k - from] = order == null ? k : order[k];
        }
        heldCount[b] = after;
        if (nonePrevious) {
            foreign[b] += to - from;
        } else {
            for (int i = first; i < after; i++) {
                arrived(b, kept[i], problem.previousOwner[kept[i]]);
            }
        }
    }

    /** Partition j, of consumer {@code was} before (or NONE), went into bin b. */
    private void arrived(int b, int j, int was) {
        if (was == ids[b]) {
            return;
        }
        foreign[b]++;
        if (was != Pool.NONE) {
            if (movedCount == moved.length) {
                moved = Arrays.copyOf(moved, 2 * movedCount);
            }
            moved[movedCount++] = j;
        }
    }

    /** An open bin that takes partition j under this rule, or -1. */
    int find(int j) {
        return find(rates[j]);
    }

    /** An open bin that takes a partition of rate {@code need} under this rule, or -1. */
    private int find(double need) {
        switch (rule) {
            case NEXT: {
                int b = count - 1;
                return b >= 0 && (heldCount[b] == 0 || load[b] + need <= limit[b]) ? b : -1;
            }
            case BEST:
                return byResidual.ceiling(need);
            default: {
                if (heap.isEmpty()) {
                    return -1;
                }
                int b = heap.top();
                return load[b] + need <= limit[b] ? b : -1;
            }
        }
    }

    /** Records bin b's new load in the rule's index. */
    private void track(int b) {
        boolean local = zones != null && rack[b] != Zones.NO_RACK;
        if (rule == Rule.WORST) {
            heap.set(b, load[b] - limit[b], tie[b]);
            if (local) {
                rackHeap[rack[b]].set(b, load[b] - limit[b], tie[b]);
            }
        } else if (rule == Rule.BEST) {
            byResidual.update(b, limit[b] - load[b]);
            if (local) {
                rackResidual[rack[b]].update(b, limit[b] - load[b]);
            }
        }
    }

    /** Zone mode: an open bin of one of j's racks that takes j under this rule, or -1. */
    int findLocal(int j) {
        double need = rates[j];
        int best = -1;
        for (int r : zones.ofPartition[j]) {
            int b;
            if (rule == Rule.WORST) {
                MinHeap index = rackHeap[r];
                b = index.isEmpty() || load[index.top()] + need > limit[index.top()] ? -1 : index.top();
                // the most room first: (load − limit, tie, bin) least
                if (b >= 0 && (best < 0 || before(load[b] - limit[b], b, load[best] - limit[best], best))) {
                    best = b;
                }
            } else {
                b = rackResidual[r].ceiling(need);
                // the least room that fits first: (residual, tie, bin) least
                if (b >= 0 && (best < 0 || before(limit[b] - load[b], b, limit[best] - load[best], best))) {
                    best = b;
                }
            }
        }
        return best;
    }

    /** Whether (key a, tie, a) sorts before (key b, tie, b). */
    private boolean before(double keyA, int a, double keyB, int b) {
        if (keyA != keyB) {
            return keyA < keyB;
        }
        return tie[a] != tie[b] ? Long.compareUnsigned(tie[a], tie[b]) < 0 : a < b;
    }

    /** Zone mode: the open bin of j's racks {@link #place} puts j into, {@link #OPEN_LOCAL} where it opens one there,
     * {@link #NOT_LOCAL} where j cannot be placed in its zone. */
    int localChoice(int j) {
        int b = findLocal(j);
        if (b >= 0) {
            return b;
        }
        return pool.canOpenFor(zones.ofPartition[j]) ? OPEN_LOCAL : NOT_LOCAL;
    }

    /** The open bin {@link #place} puts j into, or -1 where it opens one. */
    int choose(int j) {
        return choose(j, rates[j]);
    }

    /** {@link #choose} with j's rate read by the caller (from {@link Partitions#decreasingRate}: in memory order). */
    private int choose(int j, double rate) {
        if (zones == null) {
            return find(rate);
        }
        int b = localChoice(j);
        return b == NOT_LOCAL ? find(rate) : b;
    }

    /** {@link #place} with {@link #choose}'s choice for j made. */
    int placeChosen(int j, int chosen) {
        return placeChosen(j, chosen, rates[j]);
    }

    /** {@link #placeChosen(int, int)} with j's rate read by the caller. */
    private int placeChosen(int j, int chosen, double rate) {
        int b = chosen;
        if (b < 0 && zones != null) {
            b = openLocal(j);
        }
        if (b < 0) {
            b = open(nonePrevious ? Pool.NONE : problem.previousOwner[j]);
        }
        put(b, j, rate);
        return b;
    }

    void put(int b, int j) {
        put(b, j, rates[j]);
    }

    private void put(int b, int j, double rate) {
        load[b] += rate;
        hold(b, j);
        track(b);
    }

    /**
     * Fills the new bin b with {@code holding}'s first {@code end} partitions, largest first, until the first that
     * does not fit (an empty bin takes the first whatever its rate); how many went in. The running sums are the
     * loads the bin would reach adding them one by one, so where it stops is a binary search.
     */
    int fill(int b, Holding holding, int end) {
        int taken = holding.fits(end, limit[b]);
        // exact: most bins get no later put (hold grows it, into a copy: the holding's own array is never written)
        // (zone mode's last step edits bins' arrays in place, but zone mode fills from lists, not holdings)
        int[] kept = taken == holding.decreasing.length ? holding.decreasing : Arrays.copyOf(holding.decreasing, taken);
        held[b] = kept;
        heldCount[b] = taken;
        load[b] = holding.sums[taken];
        int was = problem.previousOwner[kept[0]]; // the holding's consumer: the bin's own, unless that one is gone
        for (int k = 0; was != ids[b] && k < taken; k++) {
            arrived(b, kept[k], was);
        }
        track(b);
        return taken;
    }

    /**
     * Fills the new bin b with {@code pset[0..end)} in order until the first that does not fit (an empty bin takes
     * the first whatever its rate); how many went in. For a list not in the decreasing order (zone mode), which
     * {@link #fill(int, Holding, int)} takes.
     */
    int fill(int b, int[] pset, int end) {
        double bound = limit[b];
        double sum = load[b];
        int taken = 0;
        while (taken < end && (heldCount[b] == 0 || sum + rates[pset[taken]] <= bound)) {
            sum += rates[pset[taken]];
            hold(b, pset[taken++]);
        }
        load[b] = sum;
        track(b);
        return taken;
    }

    /** assignOpenBin (Algorithm 1, line 8): into an open bin by the rule, never a new one (zone mode: one of j's
     * racks). */
    boolean placeOpen(int j) {
        int b = zones == null ? find(j) : findLocal(j);
        if (b < 0) {
            return false;
        }
        put(b, j);
        return true;
    }

    /** assignBin: by the rule, else into a new bin h(j,k) (Eq. 14). Next Fit's first bin is f(k). */
    int place(int j) {
        return place(j, rates[j]);
    }

    /** {@link #place(int)} with j's rate read by the caller. */
    private int place(int j, double rate) {
        if (rule == Rule.NEXT && count == 0) {
            open(Pool.NONE);
        }
        return placeChosen(j, choose(j, rate), rate);
    }

    /**
     * Places {@code order[0..length)} one after the other as {@link #place(int, double)} does ({@code orderRates[k]}:
     * {@code order[k]}'s rate; {@code order} null: the partitions in index order). Worst Fit outside zone mode places
     * in runs: after a partition went into the bin with the most room, the next ones that fit go into it too while it
     * keeps more room than the runner-up (the heap's second, which no other change moves meanwhile), each without a
     * heap update; the heap is updated once per run, with the load each put would have left. The bins and every
     * choice are those of placing one by one.
     */
    void placeAll(int[] order, double[] orderRates, int length) {
        boolean runs = rule == Rule.WORST && zones == null;
        int k = 0;
        while (k < length) {
            int b = place(order == null ? k : order[k], orderRates[k]);
            k++;
            if (!runs || heap.top() != b) {
                continue;
            }
            int second = heap.secondPlace();
            double bound = limit[b];
            double sum = load[b];
            int start = k;
            while (k < length && sum + orderRates[k] <= bound) { // fits into the top bin: find()'s test
                sum += orderRates[k++];
                if (second >= 0 && heap.before(second, sum - bound, tie[b], b)) {
                    break; // it sinks below the runner-up: the heap is updated and the next choice made anew
                }
            }
            if (k > start) {
                holdAll(b, order, start, k);
                load[b] = sum;
                track(b);
            }
        }
    }

    /** Bin b's partitions: its own array when exactly full (the bins are not used after), else a copy. */
    int[] heldOf(int b) {
        return heldCount[b] == held[b].length ? held[b] : Arrays.copyOf(held[b], heldCount[b]);
    }

    /**
     * Best Fit's index: the bins that hold a partition, ordered by (residual, tie, bin), with the first whose
     * residual is at least a rate found in O(log bins). A treap on arrays indexed by bin (priorities from a fixed
     * sequence: the order, and so every answer, depends only on the keys).
     */
    private final class Treap {
        private int[] left = new int[16];
        private int[] right = new int[16];
        private int[] priority = new int[16];
        private double[] key = new double[16];
        private boolean[] present = new boolean[16];
        private int root = -1;
        private int seed = 0x2545F491;

        private boolean before(int a, double keyA, int b) {
            double keyB = key[b];
            if (keyA != keyB) {
                return keyA < keyB;
            }
            return tie[a] != tie[b] ? Long.compareUnsigned(tie[a], tie[b]) < 0 : a < b;
        }

        void update(int b, double residual) {
            if (b >= present.length) {
                int grown = Math.max(b + 1, present.length * 2);
                left = Arrays.copyOf(left, grown);
                right = Arrays.copyOf(right, grown);
                priority = Arrays.copyOf(priority, grown);
                key = Arrays.copyOf(key, grown);
                present = Arrays.copyOf(present, grown);
            }
            if (present[b]) {
                root = remove(root, b);
            } else {
                seed ^= seed << 13;
                seed ^= seed >>> 17;
                seed ^= seed << 5;
                priority[b] = seed;
                present[b] = true;
            }
            key[b] = residual;
            left[b] = -1;
            right[b] = -1;
            root = insert(root, b);
        }

        private int insert(int node, int b) {
            if (node < 0) {
                return b;
            }
            if (before(b, key[b], node)) {
                left[node] = insert(left[node], b);
                if (priority[left[node]] > priority[node]) {
                    int child = left[node];
                    left[node] = right[child];
                    right[child] = node;
                    return child;
                }
            } else {
                right[node] = insert(right[node], b);
                if (priority[right[node]] > priority[node]) {
                    int child = right[node];
                    right[node] = left[child];
                    left[child] = node;
                    return child;
                }
            }
            return node;
        }

        private int remove(int node, int b) {
            if (node == b) {
                return merge(left[node], right[node]);
            }
            if (before(b, key[b], node)) {
                left[node] = remove(left[node], b);
            } else {
                right[node] = remove(right[node], b);
            }
            return node;
        }

        private int merge(int a, int b) {
            if (a < 0) {
                return b;
            }
            if (b < 0) {
                return a;
            }
            if (priority[a] > priority[b]) {
                right[a] = merge(right[a], b);
                return a;
            }
            left[b] = merge(a, left[b]);
            return b;
        }

        /** The first bin in order whose residual is at least {@code need}, or -1. */
        int ceiling(double need) {
            int found = -1;
            int node = root;
            while (node >= 0) {
                if (key[node] >= need) {
                    found = node;
                    node = left[node];
                } else {
                    node = right[node];
                }
            }
            return found;
        }
    }
}
