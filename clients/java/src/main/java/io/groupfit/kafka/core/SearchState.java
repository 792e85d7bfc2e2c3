package io.groupfit.kafka.core;

import java.nio.IntBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * The last step of the zone-aware Best and Worst Fit algorithms, as {@code finish_zoned} of
 * {@code app/core/algorithms/search.py} (and {@code native/src/search.rs}): the bins as an assignment under search,
 * then consumers closed ({@code consolidate}, {@code merge}), new consumers moved to their best rack
 * ({@code rerack}) and partitions brought into their zone ({@code localize}), with consumers before cross-zone rate
 * before moved rate (weights far apart), within the migration budget. Work is counted, never timed (one unit per
 * partition moved or examined, per consumer ranked), so the same input gives the same answer on any machine; every
 * float is added in the reference's order, so the answer is the reference's to the bit.
 */
final class SearchState {
    /** app.core.model.ROUNDING_ERROR */
    private static final double ROUNDING_ERROR = 1e-12;
    /** Consumers (those with the most room) a partition that fits nowhere may eject a smaller one from. */
    private static final int EJECTION_TRIES = 32;
    /** Consumers (those with the most room in its racks) a partition read across zones may swap with. */
    private static final int SWAP_TRIES = 8;
    /** The weight of a consumer (in units of C): consumers come before everything else. */
    private static final double CONSUMER_FIRST = 1e12;
    /** The weight of the cross-zone rate: it comes before the moved rate. */
    private static final double ZONE_FIRST = 1e6;
    /** {@code merge} stops after this many neighbourhoods in a row it could not improve. */
    private static final int FAILED_MERGES = 64;
    /** {@code localize} stops trying, for the rest of a pass, the partitions of the racks whose last this many failed. */
    private static final int FAILED_LOCALIZES = 64;
    /** {@code consolidate} stops a pass after this many consumers in a row it could not close (plus 4 per rack). */
    private static final int FAILED_CLOSES = 16;
    /** Consumers re-placed together by {@code improve}, and the branch-and-bound nodes one may take. */
    private static final int K = 4;
    private static final long NODES = 1_000;
    /** Out of every bin. */
    private static final int OUT = -1;
    /** The slack indices' probe: an entry below every bin of its slack. */
    private static final int PROBE = -1;

    private final Problem problem;
    private final double[] rates;
    private final double capacity;
    private final int[] rank;
    private final Zones zones;
    private final Consumers consumers;
    private final Pool pool;
    final ModifiedAnyFit.Spending spending;
    private final boolean[] isPrevious;

    int count;
    int[] ids = new int[16];
    private long[] tie = new long[16];
    private double[] cap = new double[16];
    int[][] held = new int[16][];
    int[] heldCount = new int[16];
    private double[] load = new double[16];
    int[] rack = new int[16];
    private final int[] owner;
    private final int[] previousBin;
    private double cross;
    private long work;
    /** The work {@code localize}'s exact re-placements may still spend. */
    private long exactLeft;
    /** The consumers emptied by the search, by rack (index rack + 1: 0 for those without one). */
    private final List<TreeSet<Integer>> idle = new ArrayList<>();
    /** The non-empty consumers by (load − capacity, id), all and per rack; each one's key while it is listed. */
    private double[] slack = new double[16];
    private boolean[] listed = new boolean[16];
    private double probe;
    private final TreeSet<Integer> bySlack;
    private final List<TreeSet<Integer>> rackSlack = new ArrayList<>();

    private SearchState(Bins bins, ModifiedAnyFit.Spending spending) {
        this.problem = bins.problem;
        this.rates = problem.rate;
        this.capacity = problem.capacity;
        this.rank = problem.decreasingRank;
        this.zones = bins.zones;
        this.consumers = problem.consumers;
        this.pool = bins.pool;
        this.spending = spending;
        isPrevious = new boolean[consumers.known()];
        for (int c : problem.previousIds) {
            isPrevious[c] = true;
        }
        owner = new int[problem.n];
        previousBin = new int[problem.n];
        Arrays.fill(owner, OUT);
        Arrays.fill(previousBin, OUT);
        Comparator<Integer> order = (a, b) -> {
            int x = a;
            int y = b;
            if (x == y) {
                return 0;
            }
            if (x == PROBE || y == PROBE) { // the probe before every entry of its slack
                int byKey = x == PROBE ? Sorting.compare(probe, slack[y]) : Sorting.compare(slack[x], probe);
                return byKey != 0 ? byKey : x == PROBE ? -1 : 1;
            }
            int byKey = Sorting.compare(slack[x], slack[y]);
            if (byKey != 0) {
                return byKey;
            }
            return tie[x] != tie[y] ? Long.compareUnsigned(tie[x], tie[y]) : Integer.compare(x, y);
        };
        bySlack = new TreeSet<>(order);
        for (int r = 0; r <= zones.racks(); r++) {
            idle.add(new TreeSet<>());
            if (r < zones.racks()) {
                rackSlack.add(new TreeSet<>(order));
            }
        }
    }

    /**
     * The last step of a zone-aware Best or Worst Fit algorithm (see the class): its bins as a search state, then
     * consolidate, merge, rerack, localize. Work: at most 20 units per partition and 50 000, so it stays n log n; of
     * it, {@code localize}'s exact re-placements take at most one unit per partition and 50 000 (past a few hundred
     * of them, each of a thousand nodes, they bring little: a short zone's consumers are full).
     */
    static SearchState finishZoned(Bins bins, ModifiedAnyFit.Spending spending) {
        SearchState state = new SearchState(bins, spending);
        Problem problem = bins.problem;
        int[] binOf = new int[problem.consumers.size()];
        Arrays.fill(binOf, OUT);
        for (int b = 0; b < bins.count; b++) {
            int c = bins.ids[b];
            state.add(c);
            state.held[b] = bins.held[b];
            state.heldCount[b] = bins.heldCount[b];
            state.load[b] = bins.load[b];
            for (int i = 0; i < bins.heldCount[b]; i++) {
                state.owner[bins.held[b][i]] = b;
            }
            binOf[c] = b;
        }
        for (int j = 0; j < problem.n; j++) {
            int was = problem.previousOwner[j];
            if (was != Pool.NONE) {
                state.previousBin[j] = binOf[was];
            }
        }
        double cross = 0.0;
        for (int b = 0; b < state.count; b++) {
            if (state.heldCount[b] > 0) {
                state.track(b);
            }
            cross += state.zones.crossZone(state.rates, state.held[b], state.heldCount[b], state.rack[b]);
        }
        state.cross = cross;
        long limit = 20L * problem.n + 50_000;
        state.exactLeft = problem.n + 50_000L;
        state.consolidate(limit / 2);
        state.merge(limit);
        state.rerack();
        state.localize(limit);
        return state;
    }

    // -- the state -----------------------------------------------------------------------------------------------

    /** a + b, or the largest long where that overflows (both at least 0). */
    private static long saturatedSum(long a, long b) {
        return a > Long.MAX_VALUE - b ? Long.MAX_VALUE : a + b;
    }

    /** A consumer the pool opened, as an empty bin. */
    private int add(int c) {
        int b = count++;
        if (b == ids.length) {
            int grown = b * 2;
            ids = Arrays.copyOf(ids, grown);
            tie = Arrays.copyOf(tie, grown);
            cap = Arrays.copyOf(cap, grown);
            held = Arrays.copyOf(held, grown);
            heldCount = Arrays.copyOf(heldCount, grown);
            load = Arrays.copyOf(load, grown);
            rack = Arrays.copyOf(rack, grown);
            slack = Arrays.copyOf(slack, grown);
            listed = Arrays.copyOf(listed, grown);
        }
        ids[b] = c;
        tie[b] = consumers.tie(c);
        cap[b] = consumers.cap(c);
        held[b] = new int[4];
        heldCount[b] = 0;
        load[b] = 0.0;
        rack[b] = pool.rackOf(c);
        return b;
    }

    private TreeSet<Integer> idleOf(int b) {
        return idle.get(rack[b] + 1);
    }

    private void put(int b, int j) {
        if (heldCount[b] == 0) {
            idleOf(b).remove(b);
        }
        if (heldCount[b] == held[b].length) {
            held[b] = Arrays.copyOf(held[b], heldCount[b] * 2);
        }
        held[b][heldCount[b]++] = j;
        load[b] += rates[j];
        owner[j] = b;
        if (!local(j, b)) {
            cross += rates[j];
        }
        track(b);
    }

    private void take(int b, int j) {
        int[] list = held[b];
        int at = 0;
        while (list[at] != j) {
            at++;
        }
        System.arraycopy(list, at + 1, list, at, heldCount[b] - at - 1);
        if (--heldCount[b] == 0) {
            idleOf(b).add(b);
        }
        load[b] -= rates[j];
        owner[j] = OUT;
        if (!local(j, b)) {
            cross -= rates[j];
        }
        track(b);
    }

    private void track(int b) {
        TreeSet<Integer> ofRack = rack[b] != Zones.NO_RACK ? rackSlack.get(rack[b]) : null;
        if (listed[b]) {
            bySlack.remove(b);
            if (ofRack != null) {
                ofRack.remove(b);
            }
            listed[b] = false;
        }
        if (heldCount[b] > 0) {
            slack[b] = load[b] - cap[b];
            listed[b] = true;
            bySlack.add(b);
            if (ofRack != null) {
                ofRack.add(b);
            }
        }
    }

    private boolean local(int j, int b) {
        return zones.local(j, rack[b]);
    }

    private boolean fits(int b, int j) {
        return heldCount[b] == 0 || Problem.within(load[b] + rates[j], cap[b]);
    }

    /** Whether partition j on bin b is a move (it had another consumer). */
    private boolean cost(int j, int b) {
        return problem.previousOwner[j] != Pool.NONE && previousBin[j] != b;
    }

    /** The open consumer with the least remaining capacity that takes {@code rate} (among {@code runs}: one rack's),
     * other than {@code excluded}, or -1. The entries below slack −rate (up to rounding) fit. */
    private int bestFit(double rate, int excluded, TreeSet<Integer> runs) {
        probe = capacity * ROUNDING_ERROR - rate;
        Integer found = runs.lower(PROBE);
        if (found != null && found == excluded) { // the next one down has more room
            found = runs.lower(found);
        }
        if (found == null) {
            return -1;
        }
        int b = found;
        return Problem.within(load[b] + rate, cap[b]) ? b : -1;
    }

    /** The consumer of one of j's racks with the least remaining capacity that takes j, or -1. */
    private int bestFitLocal(int j) {
        int best = -1;
        for (int r : zones.ofPartition[j]) {
            int b = bestFit(rates[j], OUT, rackSlack.get(r));
            if (b >= 0 && (best < 0 || bySlack.comparator().compare(b, best) > 0)) {
                best = b;
            }
        }
        return best;
    }

    /** Partition j to bin b (OUT: out of every bin), its cost charged or refunded (one unit of work). */
    private void moveTo(int j, int b) {
        work++;
        int was = owner[j];
        if (was != OUT) {
            if (cost(j, was)) {
                spending.rate -= rates[j];
                spending.moves--;
            }
            take(was, j);
        }
        if (b != OUT) {
            put(b, j);
            if (cost(j, b)) {
                spending.spend(j);
            }
        }
    }

    // -- steps ---------------------------------------------------------------------------------------------------

    /** Open consumers, least utilised first, ties by id (one unit of work each). */
    private int[] targets() {
        work += count;
        int[] open = new int[count];
        int k = 0;
        for (int b = 0; b < count; b++) {
            if (heldCount[b] > 0) {
                open[k++] = b;
            }
        }
        Sorting.stable(open, k, (a, b) -> {
            int byUse = Sorting.compare(load[a] / cap[a], load[b] / cap[b]);
            return byUse != 0 ? byUse : Long.compareUnsigned(tie[a], tie[b]);
        });
        return Arrays.copyOf(open, k);
    }

    /** Partitions in the decreasing order (largest first, ties by (topic, partition)). */
    private int[] byRank(int[] partitions, int length) {
        return problem.decreasing(partitions, length);
    }

    /** Close the target if each of its partitions, largest first, finds another consumer and that lowers the
     * objective within the budget; else leave everything as it was. */
    private boolean dissolve(int target) {
        int[] items = byRank(held[target], heldCount[target]);
        double beforeRate = spending.rate;
        long beforeMoves = spending.moves;
        double beforeCross = cross;
        List<int[]> journal = new ArrayList<>(); // (partition, the bin it was in), to undo
        for (int j : items) {
            journal.add(new int[] {j, target});
            moveTo(j, OUT);
        }
        boolean closed = true;
        for (int j : items) {
            if (!relocate(j, target, journal)) {
                closed = false;
                break;
            }
        }
        double gain = CONSUMER_FIRST * capacity - (spending.rate - beforeRate);
        gain -= ZONE_FIRST * (cross - beforeCross);
        if (closed && gain > 1e-9 && spending.within()) {
            return true;
        }
        for (int i = journal.size() - 1; i >= 0; i--) {
            moveTo(journal.get(i)[0], journal.get(i)[1]);
        }
        // exactly, without float drift
        spending.rate = beforeRate;
        spending.moves = beforeMoves;
        cross = beforeCross;
        return false;
    }

    /**
     * Put j (out of every bin) on another open consumer: a consumer of j's racks first (its previous one, else Best
     * Fit among them), then its previous one, then Best Fit, then by ejecting a smaller partition from one of the
     * EJECTION_TRIES consumers with the most room into Best Fit elsewhere.
     */
    private boolean relocate(int j, int target, List<int[]> journal) {
        work++;
        int home = previousBin[j];
        boolean homeOpen = home != OUT && home != target && heldCount[home] > 0;
        if (homeOpen && local(j, home) && fits(home, j)) {
            moveTo(j, home);
            return true;
        }
        int b = bestFitLocal(j);
        if (b >= 0) {
            moveTo(j, b);
            return true;
        }
        if (homeOpen && fits(home, j)) {
            moveTo(j, home);
            return true;
        }
        b = bestFit(rates[j], OUT, bySlack);
        if (b >= 0) {
            moveTo(j, b);
            return true;
        }
        int[] roomiest = first(bySlack, EJECTION_TRIES); // moves below reorder it
        for (int bin : roomiest) {
            int[] smaller = Arrays.copyOf(held[bin], heldCount[bin]); // smallest first, ties by (topic, partition)
            Sorting.stable(smaller, (x, y) -> {
                int byRate = Sorting.compare(rates[x], rates[y]);
                return byRate != 0 ? byRate : Integer.compare(rank[x], rank[y]);
            });
            for (int y : smaller) {
                work++;
                double ry = rates[y];
                double rj = rates[j];
                if (ry >= rj || !Problem.within(load[bin] - ry + rj, cap[bin])) {
                    continue;
                }
                journal.add(new int[] {y, bin});
                moveTo(y, OUT);
                int other = bestFit(ry, bin, bySlack);
                if (other < 0) {
                    moveTo(y, bin);
                    journal.remove(journal.size() - 1);
                    continue;
                }
                moveTo(y, other);
                moveTo(j, bin);
                return true;
            }
        }
        return false;
    }

    private static int[] first(TreeSet<Integer> runs, int most) {
        int[] taken = new int[Math.min(most, runs.size())];
        Iterator<Integer> it = runs.iterator();
        for (int i = 0; i < taken.length; i++) {
            taken[i] = it.next();
        }
        return taken;
    }

    /** Re-place the partitions of {@code bins} among them exactly ({@link Neighbourhood}); whether a better
     * placement was kept. */
    private boolean improve(int[] bins, long limit) {
        long cutoff = Math.min(NODES, limit - work);
        long setup = 0;
        for (int b : bins) {
            setup += heldCount[b];
        }
        setup *= bins.length;
        if (setup + 1 > cutoff) {
            // the search stops at its first node, having found nothing: count it without setting it up
            work += setup + 1;
            return false;
        }
        Neighbourhood hood = new Neighbourhood(bins);
        boolean better = hood.solve(cutoff);
        work += hood.nodes;
        if (better) {
            for (int i = 0; i < hood.items.length; i++) {
                int j = hood.items[i];
                int b = bins[hood.best[i]];
                if (owner[j] != b) {
                    moveTo(j, b);
                }
            }
        }
        return better;
    }

    /** The target and the K − 1 other open consumers with the most remaining capacity (ties by id). */
    private int[] neighbourhood(int target) {
        int[] chosen = new int[Math.min(K, bySlack.size() + 1)];
        int k = 0;
        chosen[k++] = target;
        for (int b : bySlack) {
            if (k == K) {
                break;
            }
            if (b != target) {
                chosen[k++] = b;
            }
        }
        return Arrays.copyOf(chosen, k);
    }

    /** Passes of {@code dissolve} over the consumers, least utilised first, until a pass closes none, it fails too
     * often in a row, or {@code limit} units of work are spent. */
    private void consolidate(long limit) {
        int giveUp = FAILED_CLOSES + 4 * zones.racks();
        int closed = 0;
        while (true) {
            int failures = 0;
            int before = closed;
            double free = freeRoom();
            for (int target : targets()) {
                if (work >= limit || failures >= giveUp) {
                    break;
                }
                double room = positive(cap[target] * Problem.ROUNDING - load[target]);
                if (heldCount[target] == 0 || load[target] > free - room) { // the others cannot hold it
                    continue;
                }
                if (dissolve(target)) {
                    closed++;
                    failures = 0;
                    free = freeRoom();
                } else {
                    failures++;
                }
            }
            if (closed == before || work >= limit) {
                return;
            }
        }
    }

    /** The capacity left on the open consumers (one unit of work each). */
    private double freeRoom() {
        work += count;
        double sum = 0.0;
        for (int b = 0; b < count; b++) {
            if (heldCount[b] > 0) {
                sum += positive(cap[b] * Problem.ROUNDING - load[b]);
            }
        }
        return sum;
    }

    private static double positive(double x) {
        return x > 0.0 ? x : 0.0;
    }

    /** One pass of {@code improve} over the consumers, least utilised first, each with the consumers of the most
     * room, until it fails FAILED_MERGES times in a row or {@code limit} units of work are spent. */
    private void merge(long limit) {
        int failures = 0;
        for (int target : targets()) {
            if (work >= limit || failures >= FAILED_MERGES) {
                break;
            }
            if (heldCount[target] == 0) {
                continue;
            }
            int[] bins = neighbourhood(target);
            double loads = 0.0;
            double caps = 0.0;
            double least = Double.POSITIVE_INFINITY;
            for (int b : bins) {
                loads += load[b];
                caps += cap[b];
                least = Math.min(least, cap[b]);
            }
            if (loads > (caps - least) * Problem.ROUNDING) {
                continue; // no consumer can go
            }
            if (improve(bins, limit)) {
                failures = 0;
            } else {
                failures++;
            }
        }
    }

    /** Without members: each new consumer (one that did not run before) runs in the rack where the most of its rate
     * is local (ties: its rack, then the first by name). */
    private void rerack() {
        if (problem.members != null) {
            return;
        }
        for (int b = 0; b < count; b++) {
            int c = ids[b];
            if (heldCount[b] == 0 || (c < isPrevious.length && isPrevious[c])) {
                continue;
            }
            work += heldCount[b];
            int best = zones.bestRack(rates, held[b], heldCount[b]);
            if (best == Zones.NO_RACK || best == rack[b]) {
                continue;
            }
            if (zones.crossZone(rates, held[b], heldCount[b], best)
                    >= zones.crossZone(rates, held[b], heldCount[b], rack[b])) {
                continue; // a tie: it stays where it was opened
            }
            int[] items = Arrays.copyOf(held[b], heldCount[b]);
            for (int j : items) {
                take(b, j);
            }
            idleOf(b).remove(b);
            rack[b] = best;
            pool.move(c, best);
            for (int j : items) {
                put(b, j);
            }
        }
    }

    /**
     * Each partition read across zones, largest first, moves into its zone or swaps with a partition there,
     * whichever lowers Z·cross-zone rate + moved rate the most within the budget; where neither does, its consumer
     * and those of its racks with the most room are re-placed exactly. Passes until one keeps nothing or
     * {@code limit} units of work are spent; within a pass, the partitions of racks whose last FAILED_LOCALIZES
     * failed are not tried (where a zone has no room left, the smaller ones fail alike).
     */
    private void localize(long limit) {
        int kept = 0;
        int n = owner.length;
        int[] crossing = new int[n];
        while (work < limit) {
            work += n / 16 + 1;
            int k = 0;
            for (int j = 0; j < n; j++) {
                if (zones.ofPartition[j].length > 0 && !local(j, owner[j])) {
                    crossing[k++] = j;
                }
            }
            int before = kept;
            // per racks (an IntBuffer compares its contents): partitions in a row left across zones
            Map<IntBuffer, Integer> failed = new HashMap<>();
            for (int j : byRank(crossing, k)) {
                if (work >= limit) {
                    break;
                }
                IntBuffer racks = IntBuffer.wrap(zones.ofPartition[j]);
                if (local(j, owner[j]) || failed.getOrDefault(racks, 0) >= FAILED_LOCALIZES) {
                    continue;
                }
                if (localizeOne(j, limit)) {
                    kept++;
                    failed.put(racks, 0);
                } else {
                    failed.merge(racks, 1, Integer::sum);
                }
            }
            if (kept == before) {
                break;
            }
        }
    }

    /** What moving j from bin a to bin b lowers Z·cross + moved rate by. */
    private double gain(int j, int a, int b) {
        double rate = rates[j];
        double zone = ZONE_FIRST * rate * ((local(j, b) ? 1 : 0) - (local(j, a) ? 1 : 0));
        return zone - rate * ((cost(j, b) ? 1 : 0) - (cost(j, a) ? 1 : 0));
    }

    private boolean localizeOne(int j, long limit) {
        int a = owner[j];
        int home = previousBin[j];
        int b = home != OUT && home != a && local(j, home) && fits(home, j) ? home : bestFitLocal(j);
        double best = 1e-9 * capacity;
        int stepBin = -1;
        int stepSwap = -1;
        if (b >= 0) {
            work++;
            double gained = gain(j, a, b);
            if (gained > best && (!cost(j, b) || cost(j, a) || spending.affords(j))) {
                best = gained;
                stepBin = b;
            }
        }
        double roomA = cap[a] * Problem.ROUNDING - load[a];
        int[] racks = zones.ofPartition[j];
        int[] tries = new int[racks.length * SWAP_TRIES];
        int triesCount = 0;
        for (int r : racks) {
            for (int other : first(rackSlack.get(r), SWAP_TRIES)) {
                tries[triesCount++] = other;
            }
        }
        double rj = rates[j];
        for (int t = 0; t < triesCount; t++) {
            int other = tries[t];
            if (other == a) {
                continue;
            }
            double room = cap[other] * Problem.ROUNDING - load[other];
            for (int i = 0; i < heldCount[other]; i++) {
                int y = held[other][i];
                work++;
                double ry = rates[y];
                if (!(rj - room <= ry && ry <= rj + roomA)) {
                    continue;
                }
                double gained = gain(j, a, other) + gain(y, other, a);
                if (gained > best) {
                    best = gained;
                    stepBin = other;
                    stepSwap = y;
                }
            }
        }
        if (stepBin < 0) { // its consumer, an idle one of its racks and those of its racks with the most room
            int[] bins = new int[K];
            int k = 0;
            bins[k++] = a;
            for (int t = 0; t < triesCount && k < K - 1; t++) {
                if (tries[t] != a && !containsBin(bins, k, tries[t])) {
                    bins[k++] = tries[t];
                }
            }
            int spare = idleIn(racks);
            if (spare >= 0) {
                bins[k++] = spare;
            }
            if (k < 2 || exactLeft <= 0) {
                return false;
            }
            long before = work;
            boolean better = improve(Arrays.copyOf(bins, k), limit);
            exactLeft -= work - before;
            return better;
        }
        double beforeRate = spending.rate;
        long beforeMoves = spending.moves;
        double beforeCross = cross;
        exchange(j, stepBin, stepSwap, a);
        if (spending.within() || (spending.moves <= beforeMoves && spending.rate <= beforeRate)) {
            return true;
        }
        exchange(j, a, stepSwap, stepBin); // undone
        spending.rate = beforeRate;
        spending.moves = beforeMoves;
        cross = beforeCross;
        return false;
    }

    private static boolean containsBin(int[] bins, int count, int b) {
        for (int i = 0; i < count; i++) {
            if (bins[i] == b) {
                return true;
            }
        }
        return false;
    }

    /** j to bin {@code toJ} and y (unless -1) to bin {@code toY}, y out first so that each finds its room. */
    private void exchange(int j, int toJ, int y, int toY) {
        if (y >= 0) {
            moveTo(y, OUT);
        }
        moveTo(j, toJ);
        if (y >= 0) {
            moveTo(y, toY);
        }
    }

    /** An empty consumer in one of {@code racks} (one closed before, else one the pool opens there), or -1: with it
     * a neighbourhood can trade the consumer it closes for one of another zone. */
    private int idleIn(int[] racks) {
        int found = -1;
        for (int r : racks) {
            TreeSet<Integer> empty = idle.get(r + 1);
            if (!empty.isEmpty() && (found < 0 || empty.first() < found)) {
                found = empty.first();
            }
        }
        if (found >= 0) {
            return found;
        }
        int c = pool.openFor(racks, Pool.NONE);
        if (c == Pool.NONE) {
            return -1;
        }
        int b = add(c);
        idleOf(b).add(b);
        return b;
    }

    /** Consumers holding more than one partition above their capacity. */
    int[] overloaded() {
        int[] over = new int[count];
        int k = 0;
        for (int b = 0; b < count; b++) {
            if (heldCount[b] > 1 && !Problem.within(load[b], cap[b])) {
                over[k++] = ids[b];
            }
        }
        return Arrays.copyOf(over, k);
    }

    /** The bins holding partitions, each with its partitions in (topic, partition) order, and each one's rack (known
     * or chosen; NO_RACK: none). */
    Placement placement(Map<String, Object> outputs) {
        int bins = 0;
        for (int b = 0; b < count; b++) {
            bins += heldCount[b] > 0 ? 1 : 0;
        }
        int[] consumer = new int[bins];
        int[] racks = new int[bins];
        int[] sizes = new int[bins];
        int[] slot = new int[count]; // the bins holding partitions, numbered again
        int k = 0;
        for (int b = 0; b < count; b++) {
            if (heldCount[b] > 0) {
                slot[b] = k;
                consumer[k] = ids[b];
                sizes[k] = heldCount[b];
                racks[k++] = rack[b];
            }
        }
        int[] binOf = new int[problem.n];
        for (int j = 0; j < problem.n; j++) {
            binOf[j] = slot[owner[j]];
        }
        return new Placement(consumer, problem.partitions.byKey(binOf, sizes, bins), outputs, racks);
    }

    /**
     * The partitions of a few consumers, re-placed among them for the least W·used + moved rate / C + Z·cross-zone
     * rate / C, by branch and bound (its tables flat: item i's entry for slot s at i·k + s).
     */
    private final class Neighbourhood {
        final int[] bins;
        final int[] items;
        private final double[] itemRates;
        private final double[] costs;
        private final double[] values;
        private final boolean[] moves;
        private final double[] caps;
        private final int[] order;
        private final int[] equalFrom;
        private double bestValue;
        final int[] best;
        private boolean found;
        private final double[] suffix;
        private final double freeRate; // NaN: no cap
        private final long freeMoves; // -1: no cap
        private final boolean capsMoves;
        private final double[] slotLoad;
        private final int[] slotCount;
        private final int[] chosen;
        long nodes;
        private long limit;
        private final double total;

        Neighbourhood(int[] bins) {
            this.bins = bins;
            int k = bins.length;
            int all = 0;
            for (int b : bins) {
                all += heldCount[b];
            }
            int[] gathered = new int[all];
            int at = 0;
            for (int b : bins) {
                System.arraycopy(held[b], 0, gathered, at, heldCount[b]);
                at += heldCount[b];
            }
            items = byRank(gathered, all);
            int n = items.length;
            double zone = ZONE_FIRST / capacity;
            itemRates = new double[n];
            moves = new boolean[n * k];
            costs = new double[n * k];
            values = new double[n * k];
            for (int i = 0; i < n; i++) {
                int j = items[i];
                double rate = rates[j];
                itemRates[i] = rate;
                for (int s = 0; s < k; s++) {
                    boolean isMove = cost(j, bins[s]);
                    double stepCost = isMove ? rate / capacity : 0.0;
                    moves[i * k + s] = isMove;
                    costs[i * k + s] = stepCost;
                    values[i * k + s] = stepCost + (local(j, bins[s]) ? 0.0 : zone * rate);
                }
            }
            caps = new double[k];
            for (int s = 0; s < k; s++) {
                caps[s] = cap[bins[s]] * Problem.ROUNDING;
            }
            // each partition tries the consumers it costs least on first (ties: the target, then by slack)
            order = new int[n * k];
            for (int i = 0; i < n; i++) {
                int from = i * k;
                for (int s = 0; s < k; s++) {
                    order[from + s] = s;
                }
                for (int a = 1; a < k; a++) { // a stable insertion sort of the few slots by (value, move)
                    int p = a;
                    while (p > 0 && slotBefore(from, order[from + p], order[from + p - 1])) {
                        int swap = order[from + p];
                        order[from + p] = order[from + p - 1];
                        order[from + p - 1] = swap;
                        p--;
                    }
                }
            }
            // equalFrom[s·k + t]: from which partition on slots s and t are alike (same capacity, same costs for
            // every partition after): an empty one is then not tried after the other
            equalFrom = new int[k * k];
            Arrays.fill(equalFrom, n + 1);
            for (int a = 0; a < k; a++) {
                for (int b = a + 1; b < k; b++) {
                    if (caps[a] != caps[b]) {
                        continue;
                    }
                    int i = n;
                    while (i > 0 && moves[(i - 1) * k + a] == moves[(i - 1) * k + b]
                            && values[(i - 1) * k + a] == values[(i - 1) * k + b]) {
                        i--;
                    }
                    equalFrom[a * k + b] = i;
                    equalFrom[b * k + a] = i;
                }
            }
            double moved = 0.0;
            double value = 0.0;
            int usedSlots = 0;
            long inside = 0;
            for (int i = 0; i < n; i++) {
                int j = items[i];
                int slot = 0;
                while (bins[slot] != owner[j]) {
                    slot++;
                }
                usedSlots |= 1 << slot;
                moved += costs[i * k + slot];
                value += values[i * k + slot];
                inside += cost(j, owner[j]) ? 1 : 0;
            }
            bestValue = CONSUMER_FIRST * Integer.bitCount(usedSlots) + value - 1e-9;
            suffix = new double[n + 1];
            for (int i = n - 1; i >= 0; i--) {
                suffix[i] = suffix[i + 1] + itemRates[i];
            }
            total = suffix[0];
            freeRate = spending.maxRscore == null ? Double.NaN : (spending.maxRate - spending.rate) / capacity + moved;
            capsMoves = spending.maxMoves != null;
            // saturating: a cap given as 2^63 or more is Long.MAX_VALUE here
            freeMoves = capsMoves ? saturatedSum(spending.maxMoves - spending.moves, inside) : 0;
            slotLoad = new double[k];
            slotCount = new int[k];
            chosen = new int[n];
            best = new int[n];
            nodes = (long) n * k;
        }

        /** Whether slot s sorts before slot t for item row {@code from} (by (value, move)). */
        private boolean slotBefore(int from, int s, int t) {
            double vs = values[from + s];
            double vt = values[from + t];
            if (vs != vt) {
                return vs < vt;
            }
            return !moves[from + s] && moves[from + t];
        }

        /** Whether a better placement was found ({@link #best}: each item's slot); {@link #nodes}: the work spent. */
        boolean solve(long cutoff) {
            limit = cutoff;
            dfs(0, 0, 0.0, 0.0, 0.0, 0);
            return found;
        }

        private void dfs(int i, int used, double usedCap, double value, double moved, long moveCount) {
            nodes++;
            int n = items.length;
            int k = bins.length;
            if (i == n) {
                if (CONSUMER_FIRST * used + value < bestValue) {
                    bestValue = CONSUMER_FIRST * used + value;
                    System.arraycopy(chosen, 0, best, 0, n);
                    found = true;
                }
                return;
            }
            // the rest needs a consumer more unless the used ones have room for all of it
            int extra = suffix[i] <= usedCap - (total - suffix[i]) ? 0 : 1;
            if (CONSUMER_FIRST * (used + extra) + value >= bestValue || nodes > limit) {
                return;
            }
            double rate = itemRates[i];
            int triedEmpty = 0; // slots, k ≤ 32
            for (int o = 0; o < k; o++) {
                int slot = order[i * k + o];
                boolean empty = slotCount[slot] == 0;
                if (empty) {
                    boolean alike = false;
                    for (int t = 0; t < k && !alike; t++) {
                        alike = (triedEmpty >> t & 1) == 1 && equalFrom[t * k + slot] <= i;
                    }
                    if (alike) {
                        continue;
                    }
                    triedEmpty |= 1 << slot;
                } else if (slotLoad[slot] + rate > caps[slot]) {
                    continue;
                }
                double step = costs[i * k + slot];
                boolean isMove = moves[i * k + slot];
                if (isMove && ((!Double.isNaN(freeRate) && moved + step > freeRate + ROUNDING_ERROR)
                        || (capsMoves && moveCount >= freeMoves))) {
                    continue;
                }
                slotLoad[slot] += rate;
                slotCount[slot]++;
                chosen[i] = slot;
                double worth = values[i * k + slot];
                dfs(i + 1, empty ? used + 1 : used, empty ? usedCap + caps[slot] : usedCap, value + worth,
                        moved + step, moveCount + (isMove ? 1 : 0));
                slotLoad[slot] -= rate;
                slotCount[slot]--;
            }
        }
    }
}
