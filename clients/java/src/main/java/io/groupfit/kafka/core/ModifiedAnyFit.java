package io.groupfit.kafka.core;

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
 */
final class ModifiedAnyFit {
    private ModifiedAnyFit() {}

    /** Caps on the Rscore (Eq. 11) and on the partitions that change consumer; what is spent of them. */
    static final class Spending {
        private final double[] rates;
        final Double maxRscore;
        final Long maxMoves;
        private final double maxRate; // the Rscore cap as a rate, up to float rounding of summed rates; NaN: none
        double rate;
        long moves;
        long refused;

        Spending(Problem problem, Double maxRscore, Long maxMoves) {
            this.rates = problem.rate;
            this.maxRscore = maxRscore;
            this.maxMoves = maxMoves;
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

        void spend(int j) {
            rate += rates[j];
            moves++;
        }
    }

    static Placement place(Problem problem, Bins.Rule rule, boolean cumulative, Double maxRscore, Long maxMoves) {
        double[] rates = problem.rate;
        int known = problem.consumers.known();
        Spending spending = new Spending(problem, maxRscore, maxMoves);
        // Line 5 for every consumer at once: its partitions, largest first (one array, a run per consumer).
        int[] count = new int[known];
        int[] order = new int[known]; // consumers by first appearance in the decreasing order
        int consumersSeen = 0;
        int unassignedCount = 0;
        for (int j : problem.decreasing) {
            int owner = problem.previousOwner[j];
            if (owner == Pool.NONE) {
                unassignedCount++;
            } else if (count[owner]++ == 0) {
                order[consumersSeen++] = owner;
            }
        }
        int[] start = new int[known + 1];
        for (int c = 0; c < known; c++) {
            start[c + 1] = start[c] + count[c];
        }
        int[] psets = new int[problem.n - unassignedCount];
        int[] end = Arrays.copyOf(start, known); // where each run ends (grows while filled, shrinks while popped)
        int[] unassigned = new int[problem.n];
        unassignedCount = 0;
        for (int j : problem.decreasing) {
            int owner = problem.previousOwner[j];
            if (owner == Pool.NONE) {
                unassigned[unassignedCount++] = j;
            } else {
                psets[end[owner]++] = j;
            }
        }
        // Line 2: largest first, ties by id (a stable sort of the first-appearance order, as the reference's).
        double[] size = new double[known];
        for (int i = 0; i < consumersSeen; i++) {
            int c = order[i];
            if (cumulative) {
                double sum = 0;
                for (int k = start[c]; k < end[c]; k++) {
                    sum += rates[psets[k]];
                }
                size[c] = sum;
            } else {
                size[c] = rates[psets[start[c]]];
            }
        }
        problem.consumers.sort(order, consumersSeen);
        Sorting.stable(order, consumersSeen, (a, b) -> Sorting.compare(size[b], size[a]));

        Bins bins = new Bins(problem, rule);
        int[] home = new int[known];
        Arrays.fill(home, -1);
        for (int i = 0; i < consumersSeen; i++) { // line 3
            int consumer = order[i];
            boolean stays = bins.pool.allowed(consumer); // a consumer that is gone keeps nothing
            // lines 6-13: smallest first into open bins, while the budget affords the move
            while (end[consumer] > start[consumer]) {
                int j = psets[end[consumer] - 1];
                if (!(spending.affords(j) || !stays) || !bins.placeOpen(j)) {
                    break;
                }
                spending.spend(j);
                end[consumer]--;
            }
            if (end[consumer] == start[consumer]) {
                continue; // lines 14-16
            }
            int own = bins.open(consumer); // line 17: createConsumer(c)
            int taken = bins.fill(own, psets, start[consumer], end[consumer]); // lines 18-25
            if (stays) {
                home[consumer] = own;
            } else { // opened under another id: what it kept moved too
                for (int k = start[consumer]; k < start[consumer] + taken; k++) {
                    spending.spend(psets[k]);
                }
            }
            for (int k = start[consumer] + taken; k < end[consumer]; k++) {
                unassigned[unassignedCount++] = psets[k];
            }
        }
        for (int j : problem.decreasing(unassigned, unassignedCount)) { // lines 27-30
            int b = bins.find(j);
            int was = problem.previousOwner[j];
            int stay = was == Pool.NONE ? -1 : home[was];
            if (stay < 0 || b == stay) {
                b = bins.place(j);
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
        Map<String, Object> outputs = Map.of();
        if (spending.limited()) {
            int[] over = new int[bins.count];
            int overCount = 0;
            for (int b = 0; b < bins.count; b++) {
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
        return Placement.of(bins, outputs);
    }
}
