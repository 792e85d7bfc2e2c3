package io.groupfit.kafka.core;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Modified Any Fit: MWF, MBF, MWFP, MBFP (Landau et al. 2024, Algorithm 1 and Table II), with the migration
 * budget, as {@code app/core/algorithms/modified_any_fit.py} and {@code budget.py}.
 *
 * <p>The previous consumers are visited largest first (by cumulative rate, or by their largest partition; ties by
 * id). Each one's partitions try, smallest first, to migrate into consumers already open; at the first that fits
 * nowhere the consumer itself is opened and keeps the rest, largest first, until one does not fit; that one and
 * all after it join the unassigned set, which finally goes through the fit rule largest first, new consumers by
 * h(j,k). With a budget ({@code max_rscore}, {@code max_moves}) a move is made only while the budget affords it;
 * a partition the budget cannot move stays on its consumer, above capacity if need be. Partitions of a consumer
 * that is gone must move and are charged even beyond the budget.
 *
 * <p>Zone mode (a zone-aware problem; {@link Bins}): partitions migrate only into open consumers of their racks, and
 * the unassigned set goes to a consumer of their racks (open, else new) before any other. A previous consumer treats
 * the partitions it reads across zones apart: without members it lets go of them (a consumer can be started in their
 * zone), and one the budget cannot move stays; with members it keeps them after its others, while they fit. The last
 * step ({@link SearchState#finishZoned}) closes consumers and brings partitions into their zones where room is left.
 */
final class ModifiedAnyFit {
    private ModifiedAnyFit() {}

    /** Caps on the Rscore (Eq. 11) and on the partitions that change consumer; what is spent of them. */
    static final class Spending {
        private final double[] rates;
        final Double maxRscore;
        final Long maxMoves;
        final double maxRate; // the Rscore cap as a rate, up to float rounding of summed rates; NaN: none
        double rate;
        long moves; // (a search refunds the moves it undoes: below 0 where the algorithm charged none)
        long refused;

        Spending(Problem problem, Double maxRscore, Number maxMoves) {
            this.rates = problem.rate;
            this.maxRscore = maxRscore;
            // a cap of 2^63 or more caps nothing a group can move: the largest long, as in the compiled core
            this.maxMoves = maxMoves == null ? null
                    : maxMoves instanceof BigInteger big && big.bitLength() > 63 ? Long.MAX_VALUE : maxMoves.longValue();
            this.maxRate = maxRscore == null ? Double.NaN : maxRscore * problem.capacity * (1 + 1e-12);
        }

        boolean limited() {
            return maxRscore != null || maxMoves != null;
        }

        boolean affords(int j) {
            if (maxMoves != null && moves + 1 > maxMoves) {
                return false;
            }
            return maxRscore == null || rate + rates[j] <= maxRate;
        }

        /** Whether what is spent is within both caps. */
        boolean within() {
            if (maxMoves != null && moves > maxMoves) {
                return false;
            }
            return maxRscore == null || rate <= maxRate;
        }

        void spend(int j) {
            rate += rates[j];
            moves++;
        }
    }

    /** {@code array}, or a copy grown, with room for {@code more} after its first {@code count}. */
    private static int[] room(int[] array, int count, int more) {
        return count + more <= array.length ? array : Arrays.copyOf(array, Math.max(2 * array.length, count + more));
    }

    static Placement place(Problem problem, Bins.Rule rule, boolean cumulative, Double maxRscore, Number maxMoves) {
        double[] rates = problem.rate;
        int known = problem.consumers.known();
        Spending spending = new Spending(problem, maxRscore, maxMoves);
        // Line 5 for every consumer at once: its partitions, largest first, and their running sums.
        Holding[] holdings = problem.holdings();
        Holding[] holdingOf = new Holding[known];
        int[] order = new int[holdings.length];
        int consumersSeen = 0;
        int held = 0;
        for (int i = 0; i < holdings.length; i++) {
            if (holdings[i].size() > 0) {
                int c = problem.previousIds[i];
                holdingOf[c] = holdings[i];
                order[consumersSeen++] = c;
                held += holdings[i].size();
            }
        }
        // U: the partitions no consumer held (new ones), in any order (sorted before use); grown as consumers add
        int[] unassigned = new int[problem.n - held + 16];
        int unassignedCount = 0;
        if (held < problem.n) {
            for (int j = 0; j < problem.n; j++) {
                if (problem.previousOwner[j] == Pool.NONE) {
                    unassigned[unassignedCount++] = j;
                }
            }
        }
        // Line 2: largest first, ties by id (stable radix sorts: by id, then by size, largest first).
        long[] size = new long[known];
        for (int i = 0; i < consumersSeen; i++) {
            Holding holding = holdingOf[order[i]];
            size[order[i]] = ~Sorting.ordered(cumulative ? holding.sums[holding.size()] : rates[holding.decreasing[0]]);
        }
        problem.consumers.sort(order, consumersSeen);
        Sorting.byKey(order, consumersSeen, size);

        Bins bins = new Bins(problem, rule);
        Zones zones = bins.zones;
        boolean[] letGo = zones == null ? null : new boolean[problem.n]; // zone mode: read across zones, let go
        int[] home = new int[known];
        Arrays.fill(home, -1);
        for (int i = 0; i < consumersSeen; i++) { // line 3
            int consumer = order[i];
            Holding holding = holdingOf[consumer];
            int[] pset = holding.decreasing;
            int end = pset.length;
            boolean stays = bins.pool.allowed(consumer); // a consumer that is gone keeps nothing
            if (zones != null && stays) {
                // its partitions read across zones go (without members: a consumer can be started in their zones), or
                // come after its others (with members: kept while they fit)
                int rack = zones.rackOf(consumer);
                int[] own = new int[end];
                int[] across = new int[end];
                int owned = 0;
                int crossing = 0;
                for (int j : pset) {
                    if (zones.ofPartition[j].length > 0 && !zones.local(j, rack)) {
                        across[crossing++] = j;
                    } else {
                        own[owned++] = j;
                    }
                }
                if (problem.members == null) {
                    unassigned = room(unassigned, unassignedCount, crossing);
                    for (int k = 0; k < crossing; k++) {
                        letGo[across[k]] = true;
                        unassigned[unassignedCount++] = across[k];
                    }
                    end = owned;
                } else {
                    System.arraycopy(across, 0, own, owned, crossing);
                }
                pset = own;
            }
            // lines 6-13: smallest first into open bins, while the budget affords the move
            while (end > 0) {
                int j = pset[end - 1];
                if (!(spending.affords(j) || !stays) || !bins.placeOpen(j)) {
                    break;
                }
                spending.spend(j);
                end--;
            }
            if (end == 0) {
                continue; // lines 14-16
            }
            int own = bins.open(consumer); // line 17: createConsumer(c)
            // lines 18-25 (zone mode: its partitions reordered, filled one by one)
            int taken = zones == null ? bins.fill(own, holding, end) : bins.fill(own, pset, end);
            if (stays) {
                home[consumer] = own;
            } else { // opened under another id: what it kept moved too
                for (int k = 0; k < taken; k++) {
                    spending.spend(pset[k]);
                }
            }
            unassigned = room(unassigned, unassignedCount, end - taken);
            System.arraycopy(pset, taken, unassigned, unassignedCount, end - taken);
            unassignedCount += end - taken;
        }
        int[] visit = problem.decreasing(unassigned, unassignedCount); // lines 27-30
        if (holdings.length == 0) {
            // a group forming: every partition by the rule, none with a consumer to stay with or a move to charge
            // (their rates read in the decreasing order: in memory order)
            bins.placeAll(visit, problem.partitions.decreasingRate, visit.length);
        } else {
            placeUnassigned(bins, spending, home, letGo, visit);
        }
        SearchState state = zones == null ? null : SearchState.finishZoned(bins, spending);
        Map<String, Object> outputs = Map.of();
        if (spending.limited()) {
            int[] over = state != null ? state.overloaded() : new int[bins.count];
            int overCount = state != null ? over.length : 0;
            for (int b = 0; state == null && b < bins.count; b++) {
                if (bins.heldCount[b] > 1 && !Problem.within(bins.load[b], bins.cap[b])) {
                    over[overCount++] = bins.ids[b];
                }
            }
            problem.consumers.sort(over, overCount);
            List<String> overloaded = new ArrayList<>();
            for (int i = 0; i < overCount; i++) {
                overloaded.add(problem.consumers.name(over[i]));
            }
            Map<String, Object> budget = new LinkedHashMap<>();
            budget.put("max_rscore", maxRscore);
            budget.put("max_moves", maxMoves);
            budget.put("rscore", spending.rate / problem.capacity);
            budget.put("moves", spending.moves);
            budget.put("refused_moves", spending.refused);
            outputs = new LinkedHashMap<>();
            outputs.put("budget", budget);
            outputs.put("overloaded_consumers", overloaded);
        }
        return state != null ? state.placement(outputs) : Placement.of(bins, outputs);
    }

    /** Lines 27-30 where partitions had consumers: one stays where it is when the fit rule would move it and the
     * budget does not afford the move. */
    private static void placeUnassigned(Bins bins, Spending spending, int[] home, boolean[] letGo, int[] visit) {
        int[] previousOwner = bins.problem.previousOwner;
        for (int j : visit) {
            int was = previousOwner[j];
            if (letGo != null && letGo[j]) {
                placeLetGo(bins, spending, home, j, was);
                continue;
            }
            int b = bins.choose(j);
            int stay = was == Pool.NONE ? -1 : home[was];
            if (stay < 0 || b == stay) {
                b = bins.placeChosen(j, b);
                if (was != Pool.NONE && bins.ids[b] != was) {
                    spending.spend(j);
                }
            } else if (spending.affords(j)) {
                bins.place(j);
                spending.spend(j);
            } else { // the budget is spent: j stays where it is
                spending.refused++;
                bins.put(stay, j);
            }
        }
    }

    /** Zone mode without members: a partition its consumer {@code was} reads across zones goes to a consumer of its
     * racks (open, else new) if the budget affords the move; else it stays with {@code was}. */
    private static void placeLetGo(Bins bins, Spending spending, int[] home, int j, int was) {
        int target = bins.localChoice(j); // a consumer can always be started in its racks
        if (spending.affords(j)) {
            bins.put(target >= 0 ? target : bins.openLocal(j), j);
            spending.spend(j);
            return;
        }
        spending.refused++;
        int stay = home[was] >= 0 ? home[was] : bins.binOf(was);
        home[was] = stay = stay >= 0 ? stay : bins.open(was);
        bins.put(stay, j);
    }
}
