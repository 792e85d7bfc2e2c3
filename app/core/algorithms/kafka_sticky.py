"""Kafka's sticky balance, a baseline: partition counts differ by at most one, and every consumer keeps
as many of its previous partitions as that balance allows. Rates ignored."""

from __future__ import annotations

import heapq

from app.core.algorithm import Algorithm, Packing, register
from app.core.algorithms.naming import group_of
from app.core.algorithms.params import FixedGroup
from app.core.model import Problem, consumer_sort_key


def sticky(problem: Problem, params: FixedGroup) -> Packing:
    consumers = group_of(problem, params)
    kept = {c: sorted(problem.previous_indices.get(c, []), key=problem.keys.__getitem__) for c in consumers}
    share, extra = divmod(problem.size, len(consumers))
    # The one-more slots go to the consumers that held the most, so the fewest partitions move.
    by_held = sorted(consumers, key=lambda c: (-len(kept[c]), consumer_sort_key(c)))
    quota = {c: share + (i < extra) for i, c in enumerate(by_held)}
    assignment = {c: kept[c][: quota[c]] for c in consumers}
    placed = {j for held in assignment.values() for j in held}
    # The rest, in (topic, partition) order, to the consumer with the fewest partitions below quota.
    open_slots = [(len(assignment[c]), consumer_sort_key(c), c) for c in consumers if len(assignment[c]) < quota[c]]
    heapq.heapify(open_slots)
    for j in problem.key_order:
        if j in placed:
            continue
        count, key, consumer = heapq.heappop(open_slots)
        assignment[consumer].append(j)
        if count + 1 < quota[consumer]:
            heapq.heappush(open_slots, (count + 1, key, consumer))
    return Packing(assignment)


register(
    Algorithm(
        name="sticky",
        description="Kafka's sticky balance: counts differ by at most one, previous owners kept (baseline).",
        pack=sticky,
        params=FixedGroup,
        source="Apache Kafka StickyAssignor (KIP-54)",
        cheap=True,
    )
)
