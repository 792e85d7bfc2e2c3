"""Consumer ids for a packing that ignores history (least-loaded, exact): the h(j,k) idea of Landau et
al. Eq. 14 for whole bins — each bin keeps the previous consumer it shares the most rate with, so what
can stay put does, and the other bins get the remaining ids (f(k), Eq. 12)."""

from __future__ import annotations

from app.core.algorithms.params import FixedGroup
from app.core.bins import ConsumerPool
from app.core.errors import AssignmentError
from app.core.model import Problem, consumer_sort_key, sorted_consumers


def candidates(problem: Problem, count: int) -> list[str]:
    """The ids `count` bins may take: the members, or the previous consumers that still hold a partition,
    then as many fresh ids (ConsumerPool) as `count` needs beyond them, in id order within each part."""
    pool = ConsumerPool(problem.members)
    if problem.members is not None:
        known = list(pool.members or [])
    else:
        known = sorted_consumers(c for c, held in problem.previous_indices.items() if held)
    ids = [pool.open(c) for c in known]
    return ids + [pool.open() for _ in range(count - len(ids))]


def name_by_overlap(problem: Problem, packing: list[list[int]], ids: list[str]) -> dict[str, list[int]]:
    """Each bin gets the id among `ids` it shares the most previous rate with (largest overlap first,
    ties by bin, then id); the other bins the unused ids in order. Empty bins are dropped."""
    rates, owner = problem.rates, problem.previous_owner
    overlap: dict[tuple[int, str], float] = {}
    for b, held in enumerate(packing):
        for j in held:
            consumer = owner[j]
            if consumer is not None:
                overlap[b, consumer] = overlap.get((b, consumer), 0.0) + rates[j]
    allowed = set(ids)
    names: dict[int, str] = {}
    by_overlap = sorted(overlap.items(), key=lambda item: (-item[1], item[0][0], consumer_sort_key(item[0][1])))
    for (b, consumer), _ in by_overlap:
        if b not in names and consumer in allowed:
            names[b] = consumer
            allowed.discard(consumer)
    free = iter(c for c in ids if c in allowed)
    return {names[b] if b in names else next(free): held for b, held in enumerate(packing) if held}


def group_of(problem: Problem, params: FixedGroup) -> list[str]:
    """The consumers a fixed-size assignor deals to, in id order."""
    if problem.members is not None and params.consumers is not None:
        raise AssignmentError(
            "invalid_parameter", "'consumers' sizes a group without members; with 'members' the members are the group."
        )
    previous = [c for c, held in problem.previous_indices.items() if held]
    count = params.consumers or len(previous) or max(1, problem.lower_bound)
    return sorted_consumers(ConsumerPool(problem.members).open_group(previous, count))
