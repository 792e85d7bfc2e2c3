"""Lag-aware Least-Loaded bin pack autoscaler (Ezzeddine, Baude, Huet, CLOSER 2024).

Two-dimensional packing: a consumer of consumption rate μ holds partitions whose arrival rates sum to at
most μ·f and whose lags sum to at most μ·w_sla·f (Eq. 4-5). Least-Loaded (Ajiro and Tanaka 2007): the
partitions largest first, each to the least loaded consumer it fits; if one fits nowhere, one consumer
more. scaleNeeded (Procedure 1) decides UP, DOWN, REASS or NONE against the
current group; doScale (Procedure 2) packs with the lag planned for the rebalance, lag + λ·t_r (Eq. 6-7).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.core.algorithm import Algorithm, Packing, register
from app.core.algorithms.naming import candidates, name_by_overlap
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import Problem, consumer_count, consumers_implied, within


class LeastLoadedParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mu: float | None = Field(None, gt=0, description="consumption rate μ of one consumer (default: capacity)")
    w_sla: float = Field(5.0, gt=0, description="latency SLA in seconds: a consumer's lag must drain within it")
    f_up: float = Field(0.9, gt=0, le=1, description="fill factor when scaling up or reassigning")
    f_down: float = Field(0.4, gt=0, lt=1, description="fill factor when checking whether to scale down")
    rebalance_s: float = Field(5.0, ge=0, description="t_r: how long a rebalance blocks consumption")
    plan_rebalance_lag: bool = Field(True, description="pack lag + rate·t_r, the lag after the rebalance (§4.1)")

    @model_validator(mode="after")
    def _ordered(self) -> LeastLoadedParams:
        if not self.f_down < self.f_up:
            raise ValueError("f_down must be below f_up")
        return self


def least_loaded(
    rates: Sequence[float],
    lags: Sequence[float],
    order: list[int],
    rate_cap: float,
    lag_cap: float,
    start: int,
    scales: Sequence[float] = (),
) -> list[list[int]]:
    """Least-Loaded from `start` bins: each partition to the least loaded bin it fits; a partition that fits
    nowhere opens one bin more (Ajiro and Tanaka start the packing over with one bin more instead: a pass per
    bin added, quadratic at 10^6 partitions).
    Bin b is a consumer of `scales[b]` times the capacity (1 beyond the list): its caps are rate_cap·scale and
    lag_cap·scale, and "least loaded" is its rate load over its scale (ties to the lowest bin). An empty bin
    takes any partition. Only bins that hold a partition are returned."""
    bins = max(1, start)
    uniform = all(scale == 1.0 for scale in scales)
    scale = [scales[b] if b < len(scales) else 1.0 for b in range(bins)]
    held: list[list[int]] = [[] for _ in range(bins)]
    rate_load = [0.0] * bins
    lag_load = [0.0] * bins
    empty = bins
    heap = [(0.0, b) for b in range(bins)]  # (rate load / scale, bin)
    for j in order:
        skipped = []
        chosen = -1
        while heap:
            entry = heapq.heappop(heap)
            b = entry[1]
            rate_fits = within(rate_load[b] + rates[j], rate_cap * scale[b])
            if not held[b] or (rate_fits and within(lag_load[b] + lags[j], lag_cap * scale[b])):
                chosen = b
                break
            skipped.append(entry)
            if uniform and not empty and not rate_fits:
                break  # every bin after this one carries at least its rate load: none fits in rate
        if chosen < 0:  # fits nowhere: one consumer more
            chosen = len(held)
            scale.append(scales[chosen] if chosen < len(scales) else 1.0)
            held.append([])
            rate_load.append(0.0)
            lag_load.append(0.0)
            empty += 1
        if not held[chosen]:
            empty -= 1
        held[chosen].append(j)
        rate_load[chosen] += rates[j]
        lag_load[chosen] += lags[j]
        heapq.heappush(heap, (rate_load[chosen] / scale[chosen], chosen))
        for entry in skipped:
            heapq.heappush(heap, entry)
    return [kept for kept in held if kept]


def lower_bound(values: Sequence[float], cap: float, scales: Sequence[float] = ()) -> int:
    """Bins one dimension needs at least. A value above its cap sits alone (nothing fits beside it), so
    with equal bins: those, plus the rest's total over the cap, and at least the values above half the
    cap (no two share a bin). With bins of `scales` (largest first): the fewest whose caps hold the total.
    Not checked against the service's limit: `check_totals` did that, once for both cores, with the totals
    (a second check here, on sums added in another order, could disagree with it in the last bit)."""
    if scales:
        total, covered, count = sum(values) / cap, 0.0, 0
        for scale in scales:
            if covered >= total - 1e-9:
                break
            covered += scale
            count += 1
        return count + consumer_count(total - covered)
    alone = sum(1 for value in values if value > cap)
    rest = sum(value for value in values if value <= cap)
    return max(alone + consumer_count(rest / cap), sum(1 for value in values if value > cap / 2))


def planned_lags(problem: Problem, params: LeastLoadedParams) -> list[float]:
    """Eq. 6-7: totalLag = lag + λ·t_r, the lag a partition will have when the rebalance is over."""
    lags = [lag or 0.0 for lag in problem.lags]
    if not params.plan_rebalance_lag:
        return lags
    return [lag + rate * params.rebalance_s for lag, rate in zip(lags, problem.rates)]


def check(problem: Problem, params: LeastLoadedParams) -> None:
    """What the parameters imply, refused before any bin exists (by either core): see `check_totals` and
    `check_scales`."""
    lags = [lag or 0.0 for lag in problem.lags]
    planned = planned_lags(problem, params)
    check_totals(problem.capacity, problem.total_rate, sum(lags), sum(planned), params, problem.max_consumers)
    check_scales(problem.capacity, problem.member_capacities)


def check_scales(capacity: float, member_capacities: Mapping[str, float]) -> None:
    """A member's caps are μ·f and μ·w_sla·f scaled by its capacity / C, and a bin's load is divided by that
    ratio: one that underflows to 0 (or overflows) leaves nothing to scale by."""
    for member, own in member_capacities.items():
        if not 0 < own / capacity < math.inf:
            raise AssignmentError(
                ErrorCode.INVALID_CAPACITY,
                f"member {member!r} has capacity {own!r}, too far from capacity {capacity!r} for least-loaded to "
                "scale by (their ratio is not a positive finite float); give capacities of one magnitude.",
                {"consumers": [member]},
            )


def check_totals(
    capacity: float, total_rate: float, lag_sum: float, planned_sum: float, params: LeastLoadedParams, limit: int
) -> None:
    """Planned lags that overflow, caps μ·f and μ·w_sla·f that underflow to 0, and Eq. 5's count in each
    dimension above the service's limit (a partition above a cap sits alone, so the packing's own bounds can be
    far lower). `lag_sum`, `planned_sum`: the lags' and the planned lags' sums (`planned_lags`)."""
    mu = params.mu or capacity
    if not math.isfinite(planned_sum):
        raise AssignmentError(
            ErrorCode.INVALID_PARAMETER,
            "the lags planned for the rebalance (lag + rate·rebalance_s) overflow; lower rebalance_s.",
        )
    for f in (params.f_up, params.f_down):
        if not (mu * f > 0 and mu * params.w_sla * f > 0):
            raise AssignmentError(
                ErrorCode.INVALID_PARAMETER, "μ·f and μ·w_sla·f underflow to 0; give larger mu, w_sla or f."
            )
        consumers_implied(total_rate / mu / f, limit, "least-loaded's Σ rate / (μ·f)")
        for total in (lag_sum, planned_sum):
            consumers_implied(total / mu / params.w_sla / f, limit, "least-loaded's Σ lag / (μ·w_sla·f)")


def pack(problem: Problem, params: LeastLoadedParams) -> Packing:
    check(problem, params)
    mu = params.mu or problem.capacity
    rates = problem.rates
    # Consumers of different sizes: bin b is the b-th candidate (members largest first, then surplus bins of
    # C), and μ scales with its capacity / C. With one size the bins are anonymous and named by overlap.
    ids = [] if problem.uniform else candidates(problem, problem.size)
    scales = [problem.capacity_of(c) / problem.capacity for c in ids]
    lags = [lag or 0.0 for lag in problem.lags]
    planned = planned_lags(problem, params)
    order = sorted(problem.decreasing_order, key=lambda j: -lags[j])  # stable: by lag, then rate, then key
    order.sort(key=rates.__getitem__, reverse=True)

    def pack(lag_values: Sequence[float], f: float) -> list[list[int]]:
        """Least-Loaded (λ, lag, μ·f, μ·w_sla·f): the consumers Eq. 5 asks for, by the heuristic."""
        if not rates:
            return []
        rate_cap, lag_cap = mu * f, mu * params.w_sla * f
        # Start from a lower bound in each dimension, so the restarts are few (check() refused, before any bin
        # exists, parameters that imply too many consumers).
        start = max(lower_bound(rates, rate_cap, scales), lower_bound(lag_values, lag_cap, scales), 1)
        return least_loaded(rates, lag_values, order, rate_cap, lag_cap, start, scales)

    # G_current: the members (every one is a replica, busy or not), or the consumers that held a partition.
    if problem.members is not None:
        current = {m: problem.previous_indices.get(m, []) for m in problem.members}
    else:
        current = {c: held for c, held in problem.previous_indices.items() if held}
    owned = sum(len(held) for held in current.values())

    def violates(f: float) -> bool:
        """assignmentViolatesTheSLA(f): Eq. 4 at f for some consumer, or a partition nobody in G_current holds."""

        def over(c: str, held: list[int]) -> bool:
            own = mu * f * problem.capacity_of(c) / problem.capacity
            return not within(sum(lags[j] for j in held), own * params.w_sla) or not within(
                sum(rates[j] for j in held), own
            )

        return owned < problem.size or any(over(c, held) for c, held in current.items())

    # Procedure 1, scaleNeeded, on the current lags.
    if len(pack(lags, params.f_up)) > len(current):
        action = "UP"
    elif len(pack(lags, params.f_down)) < len(current):
        action = "DOWN"
    elif violates(params.f_up):
        action = "REASS"
    else:
        action = "NONE"
    # Procedure 2, doScale, on the planned lags.
    packing = None
    if action == "DOWN":
        packing = pack(planned, params.f_down)
        if len(packing) >= len(current):
            # The planned lag leaves nothing to remove. Procedure 2 then does nothing; groupfit finishes
            # Procedure 1's checks instead, so an assignment that violates Eq. 4 is still reassigned.
            action, packing = ("REASS", None) if violates(params.f_up) else ("NONE", None)
    if action in ("UP", "REASS"):
        packing = pack(planned, params.f_up)
    if packing is None:
        assignment = current
    elif problem.uniform:
        assignment = name_by_overlap(problem, packing, candidates(problem, len(packing)))
    else:
        assignment = name_by_overlap(problem, packing, ids, [problem.capacity_of(c) for c in ids])
    return Packing(
        assignment,
        {
            "scale_action": action,
            "consumers_before": len(current),
            "consumers_after": sum(1 for held in assignment.values() if held),
            "rate_capacity": mu * params.f_up,
            "lag_capacity": mu * params.w_sla * params.f_up,
        },
    )


register(
    Algorithm(
        name="least-loaded",
        description="Lag-aware Least-Loaded autoscaler: packs rate ≤ μ·f and lag ≤ μ·w_sla·f, decides UP/DOWN/REASS/NONE.",
        pack=pack,
        params=LeastLoadedParams,
        source="Ezzeddine, Baude, Huet, CLOSER 2024, Eq. 4-7, Algorithm 2, Procedures 1-2",
    )
)
