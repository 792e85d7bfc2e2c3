"""The threshold autoscaler of KEDA and the cloud providers, a baseline (Landau et al. §II-C; Ezzeddine
et al. §1, §3: "the ratio of the arrival rate of events to the maximum consumption rate per replica"):
N = ⌈Σ rate / (μ·f)⌉ consumers, then Kafka's round-robin over them (rates decide the count, not the
placement)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.core.algorithm import Algorithm, Packing, register
from app.core.bins import ConsumerPool
from app.core.model import Problem, sorted_consumers


class LinearParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mu: float | None = Field(None, gt=0, description="rate one consumer handles (default: capacity)")
    f: float = Field(1.0, gt=0, le=1, description="target utilization of a consumer")


def linear(problem: Problem, params: LinearParams) -> Packing:
    mu = params.mu or problem.capacity
    # divided one factor at a time: μ·f may underflow to 0 where the quotient only overflows (and is refused)
    implied = problem.total_rate / mu / params.f
    count = max(1, problem.consumers_implied(implied, "linear's Σ rate / (μ·f)")) if problem.size else 0
    previous = [c for c, held in problem.previous_indices.items() if held]
    pool = ConsumerPool(problem.members)
    # With members: the first `count` of them, and surplus ids (solve() folds them into the members, and
    # recommended_consumers says how many the autoscaler wanted) when there are fewer members than that.
    group = pool.open_group(previous, count)[: max(count, 1)]
    consumers = sorted_consumers(group) + [pool.open() for _ in range(count - len(group))]
    assignment: dict[str, list[int]] = {c: [] for c in consumers}
    for i, j in enumerate(problem.key_order):
        assignment[consumers[i % len(consumers)]].append(j)
    return Packing(assignment, {"replicas": count})


register(
    Algorithm(
        name="linear",
        description="KEDA-style threshold autoscaler: ⌈Σ rate / (μ·f)⌉ consumers, round-robin (baseline).",
        pack=linear,
        params=LinearParams,
        source="KEDA Kafka scaler / cloud autoscalers: Landau et al. §II-C; the linear autoscaler of Ezzeddine et al. §1, §3",
        cheap=True,
    )
)
