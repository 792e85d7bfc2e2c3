"""Consumer ids for a packing that ignores history (least-loaded, exact): the h(j,k) idea of Landau et
al. Eq. 14 for whole bins — each bin keeps the previous consumer it shares the most rate with, so what
can stay put does, and the other bins get the remaining ids (f(k), Eq. 12)."""

from __future__ import annotations

from collections.abc import Iterator

from app.core.algorithms.params import FixedGroup
from app.core.bins import ConsumerPool
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import Problem, consumer_sort_key, sorted_consumers


def candidates(problem: Problem, count: int) -> list[str]:
    """The ids `count` bins may take: the members, or the previous consumers that still hold a partition,
    then as many fresh ids (ConsumerPool) as `count` needs beyond them, each part in the pool's order."""
    pool = ConsumerPool(problem.members, problem.capacity_of)
    if problem.members is not None:
        known = list(pool.members or [])
    else:
        known = sorted_consumers(c for c, held in problem.previous_indices.items() if held)
    ids = [pool.open(c) for c in known]
    return ids + [pool.open() for _ in range(count - len(ids))]


def name_by_overlap(
    problem: Problem, packing: list[list[int]], ids: list[str], sizes: list[float] | None = None
) -> dict[str, list[int]]:
    """Each bin gets the id among `ids` it shares the most previous rate with (largest overlap first,
    ties by bin, then id); the other bins the unused ids in order. Empty bins are dropped. With `sizes`
    (the capacity bin b was packed for), a bin only takes an id of that capacity."""
    size_of = problem.capacity_of
    fits = (lambda b, consumer: True) if sizes is None else (lambda b, consumer: size_of(consumer) == sizes[b])
    rates, owner = problem.rates, problem.previous_owner
    overlap: dict[tuple[int, str], float] = {}
    for b, held in enumerate(packing):
        for j in held:
            consumer = owner[j]
            if consumer is not None:
                overlap[b, consumer] = overlap.get((b, consumer), 0.0) + rates[j]
    allowed = set(ids)
    names: dict[int, str] = {}
    tie = {consumer: consumer_sort_key(consumer) for _, consumer in overlap}  # once per id, not per pair
    by_overlap = sorted(overlap.items(), key=lambda item: (-item[1], item[0][0], tie[item[0][1]]))
    for (b, consumer), _ in by_overlap:
        if b not in names and consumer in allowed and fits(b, consumer):
            names[b] = consumer
            allowed.discard(consumer)
    # The other bins: the unused ids in order, one queue per capacity (an id skipped once is never usable
    # again for that capacity, so each queue only moves forward).
    queues: dict[float | None, Iterator[str]] = {}
    for b, held in enumerate(packing):
        if held and b not in names:
            size = None if sizes is None else sizes[b]
            queue = queues.setdefault(size, iter(ids))
            names[b] = next(c for c in queue if c in allowed and fits(b, c))
            allowed.discard(names[b])
    return {names[b]: held for b, held in enumerate(packing) if held}


def group_of(problem: Problem, params: FixedGroup) -> list[str]:
    """The consumers a fixed-size assignor deals to, in id order."""
    if problem.members is not None and params.consumers is not None:
        raise AssignmentError(
            ErrorCode.INVALID_PARAMETER,
            "'consumers' sizes a group without members; with 'members' the members are the group.",
        )
    previous = [c for c, held in problem.previous_indices.items() if held]
    count = params.consumers or len(previous) or max(1, problem.lower_bound)
    problem.consumers_implied(count, "the consumer count")
    return sorted_consumers(ConsumerPool(problem.members).open_group(previous, count))
