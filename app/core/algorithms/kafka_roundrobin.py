"""Kafka's RoundRobinAssignor, a baseline: partitions in (topic, partition) order dealt to the consumers
in id order. Equal counts, rates ignored; kd_N of Landau et al. §VI-C is this over N consumers."""

from __future__ import annotations

from app.core.algorithm import Algorithm, Packing, register
from app.core.algorithms.naming import group_of
from app.core.algorithms.params import FixedGroup
from app.core.model import Problem


def round_robin(problem: Problem, params: FixedGroup) -> Packing:
    consumers = group_of(problem, params)
    assignment: dict[str, list[int]] = {c: [] for c in consumers}
    for i, j in enumerate(problem.key_order):
        assignment[consumers[i % len(consumers)]].append(j)
    return Packing(assignment)


register(
    Algorithm(
        name="roundrobin",
        description="Kafka's RoundRobinAssignor: equal partition counts dealt in order, rates ignored (baseline).",
        pack=round_robin,
        params=FixedGroup,
        source="Apache Kafka RoundRobinAssignor; kd_N in Landau et al. §VI-C",
        cheap=True,
    )
)
