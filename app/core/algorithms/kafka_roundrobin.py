"""Kafka's RoundRobinAssignor, a baseline: partitions in (topic, partition) order dealt to the consumers
in id order. Equal counts, rates ignored; kd_N of Landau et al. §VI-C is this over N consumers."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.core.algorithm import Algorithm, Placement, register
from app.core.bins import ConsumerPool
from app.core.errors import AssignmentError
from app.core.model import Problem, sorted_consumers


class FixedGroup(BaseModel):
    """Without members: how many consumers (default: as many as the previous assignment had, or the
    lower bound ⌈Σ rate / C⌉ for a new group)."""

    model_config = ConfigDict(extra="forbid")
    consumers: int | None = Field(None, ge=1, le=100_000)


def group_of(problem: Problem, params: FixedGroup) -> list[str]:
    """The consumers a fixed-size assignor deals to, in id order."""
    if problem.members is not None and params.consumers is not None:
        raise AssignmentError(
            "invalid_parameter", "'consumers' sizes a group without members; with 'members' the members are the group."
        )
    previous = [c for c, held in problem.previous_indices.items() if held]
    count = params.consumers or len(previous) or max(1, problem.lower_bound)
    return sorted_consumers(ConsumerPool(problem.members).open_group(previous, count))


def round_robin(problem: Problem, params: FixedGroup) -> Placement:
    consumers = group_of(problem, params)
    assignment: dict[str, list[int]] = {c: [] for c in consumers}
    for i, j in enumerate(problem.key_order):
        assignment[consumers[i % len(consumers)]].append(j)
    return Placement(assignment)


register(
    Algorithm(
        name="roundrobin",
        description="Kafka's RoundRobinAssignor: equal partition counts dealt in order, rates ignored (baseline).",
        place=round_robin,
        params=FixedGroup,
        source="Apache Kafka RoundRobinAssignor; kd_N in Landau et al. §VI-C",
    )
)
