package io.groupfit.kafka.core;

import java.util.Map;

/**
 * The Any Fit heuristics adapted to consumer groups (Landau et al. 2024, §II-B and §VI-A), as
 * {@code app/core/algorithms/any_fit.py}: NF, BF, WF take the partitions in request order, NFD, BFD, WFD in
 * decreasing rate order (ties by (topic, partition)); when no open bin takes partition j, the new bin is h(j,k)
 * (Eq. 14): j's previous consumer if it is not open yet, else the lowest unused consumer f(k) (Eq. 12). For a
 * zone-aware problem Best and Worst Fit run in zone mode ({@link Bins}) and end on {@link SearchState#finishZoned};
 * Next Fit, defined by an order of consumers that a split by rack does not keep, does not.
 */
final class AnyFit {
    private AnyFit() {}

    static Placement place(Problem problem, Bins.Rule rule, boolean decreasing) {
        Bins bins = new Bins(problem, rule);
        // (in the decreasing order its rates are read from an array in that order: in memory order)
        bins.placeAll(decreasing ? problem.decreasing : null,
                decreasing ? problem.partitions.decreasingRate : problem.rate, problem.n);
        if (bins.zones != null) {
            return SearchState.finishZoned(bins, new ModifiedAnyFit.Spending(problem, null, null)).placement(Map.of());
        }
        return Placement.of(bins, Map.of());
    }
}
