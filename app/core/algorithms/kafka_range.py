"""Kafka's RangeAssignor, a baseline: per topic, the partitions in order are cut into contiguous ranges,
one per consumer in id order; the first (partitions mod consumers) consumers get one more."""

from __future__ import annotations

from itertools import groupby

from app.core.algorithm import Algorithm, Packing, register
from app.core.algorithms.naming import group_of
from app.core.algorithms.params import FixedGroup
from app.core.model import Problem


def range_assign(problem: Problem, params: FixedGroup) -> Packing:
    consumers = group_of(problem, params)
    assignment: dict[str, list[int]] = {c: [] for c in consumers}
    keys = problem.keys
    for _, topic_partitions in groupby(problem.key_order, key=lambda j: keys[j][0]):
        partitions = list(topic_partitions)
        share, extra = divmod(len(partitions), len(consumers))
        start = 0
        for i, consumer in enumerate(consumers):
            end = start + share + (i < extra)
            assignment[consumer].extend(partitions[start:end])
            start = end
    return Packing(assignment)


register(
    Algorithm(
        name="range",
        description="Kafka's RangeAssignor: contiguous ranges per topic, equal counts, rates ignored (baseline).",
        pack=range_assign,
        params=FixedGroup,
        source="Apache Kafka RangeAssignor",
        cheap=True,
    )
)
