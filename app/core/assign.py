"""One rebalance end to end: problem → algorithm → assignment, delta, moves, Rscore.

`solve` is what the service, the CLI and the replay share; the answer's wire form is built from its
`Outcome` by the codec (app/codec/assign.py). This module is the reference; `app.core.native` runs the
same algorithms compiled (`solve(..., native=True)`) and must give the same Outcome.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

from app.core import native as compiled
from app.core.algorithm import Algorithm
from app.core.delta import Delta, delta, dense_size, migrated, rscore
from app.core.model import Problem, consumer_sort_key, sorted_consumers, within


@dataclass
class Outcome:
    algorithm: str
    problem: Problem
    assignment: dict[str, list[int]]
    consumers: list[str]
    """The assignment's consumers in id order."""
    owner: list[str]
    loads: dict[str, float]
    moved: list[int]
    moved_from: list[str]
    """Each moved partition's previous consumer."""
    rscore: float
    overloaded: list[int]
    """Partitions whose rate alone exceeds their consumer's capacity: each still has a consumer."""
    outputs: dict[str, Any]
    bins_used: int
    sparse: Delta | None = None
    """The sparse delta when the core computed it with the rest."""

    @property
    def consumer_count(self) -> int:
        """z(k): consumers that hold at least one partition."""
        return sum(1 for held in self.assignment.values() if held)

    @property
    def recommended_consumers(self) -> int | None:
        """In member mode, how many consumers the algorithm wanted (it may differ from the members)."""
        return self.bins_used if self.problem.members is not None else None

    def utilization(self, consumer: str) -> float:
        """The consumer's load over its own capacity."""
        return self.loads[consumer] / self.problem.capacity_of(consumer)

    def overloaded_members(self) -> list[str]:
        """Members above their own capacity."""
        if self.problem.members is None:
            return []
        capacity_of = self.problem.capacity_of
        return [c for c in self.consumers if not within(self.loads[c], capacity_of(c))]

    def delta(self, full: bool = False) -> Delta:
        if self.sparse is not None and not full:
            return self.sparse
        return delta(self.problem, self.owner, full)

    def dense_delta_size(self) -> int:
        return dense_size(self.problem, self.owner)


def solve(problem: Problem, algorithm: Algorithm, params: Any, native: bool = False) -> Outcome:
    """The algorithm's outcome on `problem`; `native`: by the compiled core where it runs this algorithm."""
    if native:
        parts = compiled.solve(problem, algorithm.name, params)
        if parts is not None:
            assignment, consumers, owner, loads, moved, moved_from, score, overloaded, used, outputs, *sparse = parts
            return Outcome(
                algorithm.name, problem, assignment, consumers, owner, loads, moved, moved_from, score, overloaded,
                outputs, used, Delta(*sparse),
            )  # fmt: skip
    packing = algorithm.pack(problem, params)
    assignment = {c: held for c, held in packing.assignment.items() if held}
    bins_used = len(assignment)
    if problem.members is not None:
        assignment = _fold_into_members(problem, assignment)
    owner, loads = _owners_and_loads(problem, assignment, algorithm.name)
    moved = migrated(problem, owner)
    previous_owner, capacity_of, rates = problem.previous_owner, problem.capacity_of, problem.rates
    return Outcome(
        algorithm=algorithm.name,
        problem=problem,
        assignment=assignment,
        consumers=sorted_consumers(assignment),
        owner=owner,
        loads=loads,
        moved=moved,
        moved_from=[previous_owner[j] or "" for j in moved],
        rscore=rscore(problem, moved),
        overloaded=[j for j, rate in enumerate(rates) if rate > capacity_of(owner[j])],
        outputs=packing.outputs,
        bins_used=bins_used,
    )


def _fold_into_members(problem: Problem, assignment: dict[str, list[int]]) -> dict[str, list[int]]:
    """Member mode: bins beyond the members go, largest partition first, to the member with the most
    remaining capacity (ties to the lowest id); members the algorithm left unused get empty assignments."""
    members = sorted_consumers(problem.members or [])
    result = {m: list(assignment.get(m, ())) for m in members}
    surplus = [j for c, held in assignment.items() if c not in result for j in held]
    if surplus:
        rates = problem.rates
        # (load − capacity): the smallest has the most room left; ties by id.
        heap = [
            (sum(map(rates.__getitem__, result[m])) - problem.capacity_of(m), consumer_sort_key(m), m) for m in members
        ]
        heapq.heapify(heap)
        for j in problem.decreasing(surplus):
            excess, key, member = heapq.heappop(heap)
            result[member].append(j)
            heapq.heappush(heap, (excess + rates[j], key, member))
    return result


def _owners_and_loads(
    problem: Problem, assignment: dict[str, list[int]], name: str
) -> tuple[list[str], dict[str, float]]:
    """owner[j]: partition j's consumer, and each consumer's load. An algorithm that places a
    partition twice or never is a bug, not bad input."""
    owner: list[str | None] = [None] * problem.size
    loads: dict[str, float] = {}
    rates = problem.rates
    placed = 0
    for consumer, held in assignment.items():
        placed += len(held)
        load = 0.0
        for j in held:
            owner[j] = consumer
            load += rates[j]
        loads[consumer] = load
    if placed != problem.size or None in owner:
        raise RuntimeError(f"algorithm {name!r} did not place every partition exactly once")
    return owner, loads  # type: ignore[return-value]
