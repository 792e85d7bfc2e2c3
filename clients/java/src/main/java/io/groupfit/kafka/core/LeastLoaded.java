package io.groupfit.kafka.core;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Lag-aware Least-Loaded bin pack autoscaler (Ezzeddine, Baude, Huet, CLOSER 2024), as
 * {@code app/core/algorithms/least_loaded.py}: a consumer of consumption rate μ holds partitions whose rates sum
 * to at most μ·f and whose lags to at most μ·w_sla·f (Eq. 4-5); Least-Loaded packs the partitions largest first,
 * each to the least loaded consumer it fits, one consumer more when it fits nowhere. scaleNeeded (Procedure 1)
 * decides UP, DOWN, REASS or NONE against the current group; doScale (Procedure 2) packs the lag planned for the
 * rebalance, lag + λ·t_r (Eq. 6-7). Bins are named by overlap with the previous assignment.
 */
final class LeastLoaded {
    private LeastLoaded() {}

    record Params(Double mu, double wSla, double fUp, double fDown, double rebalanceS, boolean planRebalanceLag) {
        static Params of(Map<String, Object> raw) {
            Double mu = Algorithm.number(raw, "mu", null);
            double wSla = Algorithm.number(raw, "w_sla", 5.0);
            double fUp = Algorithm.number(raw, "f_up", 0.9);
            double fDown = Algorithm.number(raw, "f_down", 0.4);
            double rebalanceS = Algorithm.number(raw, "rebalance_s", 5.0);
            Object plan = raw.getOrDefault("plan_rebalance_lag", Boolean.TRUE);
            if (!(plan instanceof Boolean)) {
                throw new IllegalArgumentException("parameter 'plan_rebalance_lag' of least-loaded must be a boolean");
            }
            Algorithm.require(mu == null || mu > 0, "mu must be above 0");
            Algorithm.require(wSla > 0, "w_sla must be above 0");
            Algorithm.require(fUp > 0 && fUp <= 1, "f_up must be above 0 and at most 1");
            Algorithm.require(fDown > 0 && fDown < 1, "f_down must be above 0 and below 1");
            Algorithm.require(rebalanceS >= 0, "rebalance_s must be at least 0");
            Algorithm.require(fDown < fUp, "f_down must be below f_up");
            return new Params(mu, wSla, fUp, fDown, rebalanceS, (Boolean) plan);
        }
    }

    /** ⌈implied⌉ consumers, refused above the limit (and when not finite) before anything is allocated. */
    static int implied(double implied, int limit, String what) {
        if (!(implied <= limit)) {
            throw new IllegalArgumentException(what + " is " + implied + " consumers, more than one answer may have ("
                    + limit + "); check the capacity and rates (same unit?) or the algorithm's parameters");
        }
        return implied > 0 ? (int) Math.ceil(implied - 1e-9) : 0;
    }

    /** The least-loaded packing: each bin's partitions in the order placed; only bins that hold one. */
    static List<int[]> pack(double[] rates, double[] lags, int[] order, double rateCap, double lagCap, int start,
            double[] scales) {
        boolean uniform = true;
        for (double scale : scales) {
            uniform &= scale == 1.0;
        }
        int bins = Math.max(1, start);
        int capacity = Math.max(bins, 4);
        double[] scale = new double[capacity];
        double[] rateLoad = new double[capacity];
        double[] lagLoad = new double[capacity];
        int[] count = new int[capacity];
        int[] binOf = new int[rates.length];
        for (int b = 0; b < bins; b++) {
            scale[b] = b < scales.length ? scales[b] : 1.0;
        }
        int empty = bins;
        MinHeap heap = new MinHeap(capacity); // (rate load / scale, bin)
        for (int b = 0; b < bins; b++) {
            heap.set(b, 0.0, 0);
        }
        int[] skipped = new int[capacity];
        for (int j : order) {
            double rate = rates[j];
            double lag = lags[j];
            int skippedCount = 0;
            int chosen = -1;
            while (!heap.isEmpty()) {
                int b = heap.pop();
                boolean rateFits = Problem.within(rateLoad[b] + rate, rateCap * scale[b]);
                if (count[b] == 0 || (rateFits && Problem.within(lagLoad[b] + lag, lagCap * scale[b]))) {
                    chosen = b;
                    break;
                }
                if (skippedCount == skipped.length) {
                    skipped = Arrays.copyOf(skipped, skippedCount * 2);
                }
                skipped[skippedCount++] = b;
                if (uniform && empty == 0 && !rateFits) {
                    break; // every bin after this one carries at least its rate load: none fits in rate
                }
            }
            if (chosen < 0) { // fits nowhere: one consumer more
                chosen = bins++;
                if (chosen == scale.length) {
                    int grown = chosen * 2;
                    scale = Arrays.copyOf(scale, grown);
                    rateLoad = Arrays.copyOf(rateLoad, grown);
                    lagLoad = Arrays.copyOf(lagLoad, grown);
                    count = Arrays.copyOf(count, grown);
                }
                scale[chosen] = chosen < scales.length ? scales[chosen] : 1.0;
                empty++;
            }
            if (count[chosen]++ == 0) {
                empty--;
            }
            binOf[j] = chosen;
            rateLoad[chosen] += rate;
            lagLoad[chosen] += lag;
            heap.set(chosen, rateLoad[chosen] / scale[chosen], 0);
            for (int s = 0; s < skippedCount; s++) {
                int b = skipped[s];
                heap.set(b, rateLoad[b] / scale[b], 0);
            }
        }
        int[][] held = new int[bins][];
        int[] filled = new int[bins];
        for (int b = 0; b < bins; b++) {
            held[b] = new int[count[b]];
        }
        for (int j : order) {
            held[binOf[j]][filled[binOf[j]]++] = j;
        }
        List<int[]> packing = new ArrayList<>();
        for (int[] kept : held) {
            if (kept.length > 0) {
                packing.add(kept);
            }
        }
        return packing;
    }

    /** Bins one dimension needs at least ({@code least_loaded.lower_bound}). */
    static int lowerBound(double[] values, double cap, double[] scales, int limit) {
        String what = "least-loaded's bound Σ/(μ·f)";
        if (scales.length > 0) {
            double total = 0;
            for (double value : values) {
                total += value;
            }
            total /= cap;
            double covered = 0.0;
            int count = 0;
            for (double scale : scales) {
                if (covered >= total - 1e-9) {
                    break;
                }
                covered += scale;
                count++;
            }
            return count + implied(total - covered, limit, what);
        }
        int alone = 0;
        int half = 0;
        double rest = 0;
        for (double value : values) {
            if (value > cap) {
                alone++;
            } else {
                rest += value;
            }
            if (value > cap / 2) {
                half++;
            }
        }
        return Math.max(alone + implied(rest / cap, limit, what), half);
    }

    /** {@code naming.candidates}: the members (pool order), or the previous consumers that still hold a partition
     * (id order), then fresh ids up to {@code count}. */
    static int[] candidates(Problem problem, int count) {
        Pool pool = new Pool(problem.consumers, problem.members);
        int[] known;
        if (pool.members != null) {
            known = pool.members;
        } else {
            int[] holding = new int[problem.previousIds.length];
            int k = 0;
            for (int i = 0; i < problem.previousIds.length; i++) {
                if (problem.previousHeld(i).length > 0) {
                    holding[k++] = problem.previousIds[i];
                }
            }
            problem.consumers.sort(holding, k);
            known = Arrays.copyOf(holding, k);
        }
        int[] ids = new int[Math.max(count, known.length)];
        int made = 0;
        for (int c : known) {
            ids[made++] = pool.open(c);
        }
        while (made < count) {
            ids[made++] = pool.open(Pool.NONE);
        }
        return ids;
    }

    /**
     * {@code naming.name_by_overlap}: each bin gets the id among {@code ids} it shares the most previous rate with
     * (largest overlap first, ties by bin, then id), the other bins the unused ids in order; with {@code sizes},
     * only an id of the capacity that bin was packed for.
     */
    static Placement nameByOverlap(Problem problem, List<int[]> packing, int[] ids, double[] sizes) {
        Consumers consumers = problem.consumers;
        List<double[]> overlaps = new ArrayList<>(); // (bin, consumer, overlap), in first-seen order
        Map<Integer, double[]> local = new LinkedHashMap<>();
        for (int b = 0; b < packing.size(); b++) {
            local.clear();
            for (int j : packing.get(b)) {
                int c = problem.previousOwner[j];
                if (c == Pool.NONE) {
                    continue;
                }
                double[] entry = local.get(c);
                if (entry == null) {
                    local.put(c, new double[] {b, c, 0.0 + problem.rate[j]});
                } else {
                    entry[2] += problem.rate[j];
                }
            }
            overlaps.addAll(local.values());
        }
        overlaps.sort((x, y) -> {
            int order = Sorting.compare(y[2], x[2]);
            if (order != 0) {
                return order;
            }
            order = Integer.compare((int) x[0], (int) y[0]);
            return order != 0 ? order : Long.compareUnsigned(consumers.tie((int) x[1]), consumers.tie((int) y[1]));
        });
        boolean[] allowed = new boolean[consumers.size()];
        for (int c : ids) {
            allowed[c] = true;
        }
        int[] names = new int[packing.size()];
        Arrays.fill(names, Pool.NONE);
        for (double[] entry : overlaps) {
            int b = (int) entry[0];
            int c = (int) entry[1];
            if (names[b] == Pool.NONE && allowed[c] && (sizes == null || consumers.cap(c) == sizes[b])) {
                names[b] = c;
                allowed[c] = false;
            }
        }
        // The other bins: the unused ids in order, one queue per capacity (an id skipped once is never usable again
        // for that capacity, so each queue only moves forward).
        Map<Long, Integer> next = new HashMap<>();
        for (int b = 0; b < packing.size(); b++) {
            if (names[b] != Pool.NONE) {
                continue;
            }
            long size = sizes == null ? 0 : Double.doubleToLongBits(sizes[b]);
            int i = next.getOrDefault(size, 0);
            while (!(allowed[ids[i]] && (sizes == null || consumers.cap(ids[i]) == sizes[b]))) {
                i++;
            }
            names[b] = ids[i];
            allowed[ids[i]] = false;
            next.put(size, i);
        }
        return new Placement(names, packing.toArray(new int[0][]), Map.of(), null);
    }

    static Placement place(Problem problem, Params params) {
        double capacity = problem.capacity;
        double mu = params.mu() != null ? params.mu() : capacity;
        int n = problem.n;
        double[] rates = problem.rate;
        double[] lags = problem.lag;
        double[] planned = lags;
        if (params.planRebalanceLag()) {
            planned = new double[n];
            for (int j = 0; j < n; j++) {
                planned[j] = lags[j] + rates[j] * params.rebalanceS();
            }
        }
        check(problem, params, mu, planned);
        // Consumers of different sizes: bin b is the b-th candidate, and μ scales with its capacity / C.
        int[] ids = problem.uniform ? new int[0] : candidates(problem, n);
        double[] scales = new double[ids.length];
        for (int b = 0; b < ids.length; b++) {
            scales[b] = problem.consumers.cap(ids[b]) / capacity;
        }
        // By rate, then lag, largest first, then (topic, partition): each run of equal rates in the decreasing order
        // sorted by lag, stably.
        int[] order = problem.decreasing.clone();
        for (int from = 0; from < n; ) {
            int to = from + 1;
            while (to < n && rates[order[to]] == rates[order[from]]) {
                to++;
            }
            if (to - from > 1) {
                int[] run = Arrays.copyOfRange(order, from, to);
                Sorting.stable(run, (a, b) -> Sorting.compare(lags[b], lags[a]));
                System.arraycopy(run, 0, order, from, run.length);
            }
            from = to;
        }
        // G_current: the members (every one is a replica, busy or not), or the consumers that held a partition.
        List<int[]> current = new ArrayList<>(); // (consumer, partitions...)
        if (problem.members != null) {
            Map<Integer, int[]> heldOf = new HashMap<>();
            for (int i = 0; i < problem.previousIds.length; i++) {
                heldOf.put(problem.previousIds[i], problem.previousHeld(i));
            }
            for (int m : problem.members) {
                current.add(withConsumer(m, heldOf.getOrDefault(m, new int[0])));
            }
        } else {
            for (int i = 0; i < problem.previousIds.length; i++) {
                if (problem.previousHeld(i).length > 0) {
                    current.add(withConsumer(problem.previousIds[i], problem.previousHeld(i)));
                }
            }
        }
        int owned = 0;
        for (int[] entry : current) {
            owned += entry.length - 1;
        }
        int currentCount = current.size();
        int ownedCount = owned;
        double[] scaleArray = scales;
        java.util.function.BiFunction<double[], Double, List<int[]>> packOf = (lagValues, f) -> {
            if (n == 0) {
                return List.of();
            }
            double rateCap = mu * f;
            double lagCap = mu * params.wSla() * f;
            int limit = Problem.MAX_CONSUMERS;
            int start = Math.max(Math.max(lowerBound(rates, rateCap, scaleArray, limit),
                    lowerBound(lagValues, lagCap, scaleArray, limit)), 1);
            return pack(rates, lagValues, order, rateCap, lagCap, start, scaleArray);
        };
        java.util.function.DoublePredicate violates = f -> {
            if (ownedCount < n) {
                return true;
            }
            for (int[] entry : current) {
                double own = mu * f * problem.consumers.cap(entry[0]) / capacity;
                double lag = 0;
                double rate = 0;
                for (int k = 1; k < entry.length; k++) {
                    lag += lags[entry[k]];
                }
                for (int k = 1; k < entry.length; k++) {
                    rate += rates[entry[k]];
                }
                if (!Problem.within(lag, own * params.wSla()) || !Problem.within(rate, own)) {
                    return true;
                }
            }
            return false;
        };
        // Procedure 1, scaleNeeded, on the current lags.
        String action;
        if (packOf.apply(lags, params.fUp()).size() > currentCount) {
            action = "UP";
        } else if (packOf.apply(lags, params.fDown()).size() < currentCount) {
            action = "DOWN";
        } else if (violates.test(params.fUp())) {
            action = "REASS";
        } else {
            action = "NONE";
        }
        // Procedure 2, doScale, on the planned lags.
        List<int[]> packing = null;
        if (action.equals("DOWN")) {
            packing = packOf.apply(planned, params.fDown());
            if (packing.size() >= currentCount) {
                // The planned lag leaves nothing to remove: finish Procedure 1's checks instead.
                action = violates.test(params.fUp()) ? "REASS" : "NONE";
                packing = null;
            }
        }
        if (action.equals("UP") || action.equals("REASS")) {
            packing = packOf.apply(planned, params.fUp());
        }
        Placement assignment;
        if (packing == null) {
            int[] consumer = new int[currentCount];
            int[][] held = new int[currentCount][];
            for (int i = 0; i < currentCount; i++) {
                consumer[i] = current.get(i)[0];
                held[i] = Arrays.copyOfRange(current.get(i), 1, current.get(i).length);
            }
            assignment = new Placement(consumer, held, Map.of(), null);
        } else if (problem.uniform) {
            assignment = nameByOverlap(problem, packing, candidates(problem, packing.size()), null);
        } else {
            double[] sizes = new double[ids.length];
            for (int b = 0; b < ids.length; b++) {
                sizes[b] = problem.consumers.cap(ids[b]);
            }
            assignment = nameByOverlap(problem, packing, ids, sizes);
        }
        int after = 0;
        for (int[] held : assignment.held()) {
            after += held.length > 0 ? 1 : 0;
        }
        Map<String, Object> outputs = new LinkedHashMap<>();
        outputs.put("scale_action", action);
        outputs.put("consumers_before", currentCount);
        outputs.put("consumers_after", after);
        outputs.put("rate_capacity", mu * params.fUp());
        outputs.put("lag_capacity", mu * params.wSla() * params.fUp());
        return new Placement(assignment.consumer(), assignment.held(), outputs, null);
    }

    private static int[] withConsumer(int consumer, int[] held) {
        int[] entry = new int[held.length + 1];
        entry[0] = consumer;
        System.arraycopy(held, 0, entry, 1, held.length);
        return entry;
    }

    /** What the parameters imply, refused before any bin exists ({@code least_loaded.check_totals}). */
    private static void check(Problem problem, Params params, double mu, double[] planned) {
        double totalRate = Sums.fsum(problem.rate, null, problem.n);
        double lagSum = 0;
        for (double lag : problem.lag) {
            lagSum += lag;
        }
        double plannedSum = 0;
        for (double lag : planned) {
            plannedSum += lag;
        }
        Algorithm.require(Double.isFinite(plannedSum),
                "the lags planned for the rebalance (lag + rate·rebalance_s) overflow; lower rebalance_s");
        for (double f : new double[] {params.fUp(), params.fDown()}) {
            Algorithm.require(mu * f > 0 && mu * params.wSla() * f > 0,
                    "μ·f and μ·w_sla·f underflow to 0; give larger mu, w_sla or f");
            implied(totalRate / mu / f, Problem.MAX_CONSUMERS, "least-loaded's Σ rate / (μ·f)");
            for (double total : new double[] {lagSum, plannedSum}) {
                implied(total / mu / params.wSla() / f, Problem.MAX_CONSUMERS, "least-loaded's Σ lag / (μ·w_sla·f)");
            }
        }
    }
}
