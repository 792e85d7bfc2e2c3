"""One rebalance end to end: problem → algorithm → assignment, delta, moves, Rscore.

`solve` is what the service, the CLI and the replay share (`record`: an assignment computed elsewhere, taken as
it is); the answer's wire form is built from its
`Outcome` by the codec (app/codec/assign.py). This module is the reference; `app.core.native` runs the
same algorithms compiled (`solve(..., native=True)`) and must give the same Outcome.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core import native as compiled
from app.core.algorithm import Algorithm
from app.core.delta import Delta, delta, dense_size, migrated, rscore
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import ROUNDING, PartitionKey, Problem, consumer_sort_key, sorted_consumers, within
from app.core.zones import NO_RACK


@dataclass
class ZoneReport:
    """What a zone-aware answer says of zones: each consumer's rack (None: not known) and the rate it reads
    across zones."""

    racks: dict[str, str | None]
    cross_zone: dict[str, float]

    @property
    def cross_zone_rate(self) -> float:
        return math.fsum(self.cross_zone.values())


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
    zones: ZoneReport | None = None
    """For a zone-aware request (`Problem.zones`): the consumers' racks and cross-zone rates."""

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
            return compiled_outcome(problem, algorithm.name, parts)
    packing = algorithm.pack(problem, params)
    assignment = {c: held for c, held in packing.assignment.items() if held}
    bins_used = len(assignment)
    if problem.members is not None:
        assignment = _fold_into_members(problem, assignment)
    owner, loads = _owners_and_loads(problem, assignment, algorithm.name)
    return _outcome(problem, algorithm.name, assignment, owner, loads, packing.outputs, bins_used, packing.racks)


def compiled_outcome(problem: Problem, algorithm: str, parts: Sequence[Any]) -> Outcome:
    """The Outcome of the compiled core's parts (`Solution.parts()`)."""
    assignment, consumers, owner, loads, moved, moved_from, score, overloaded, used, outputs, *sparse, zones = parts
    return Outcome(
        algorithm, problem, assignment, consumers, owner, loads, moved, moved_from, score, overloaded, outputs, used,
        Delta(*sparse), None if zones is None else ZoneReport(*zones),
    )  # fmt: skip


def record(problem: Problem, algorithm: str, given: Mapping[str, Sequence[PartitionKey]]) -> Outcome:
    """The outcome of an assignment computed elsewhere (a broker-side assignor, a leader's local fallback),
    named by the algorithm that computed it: nothing is computed but its moves, loads and Rscore. It must place
    every partition exactly once, on members when the problem has them (`invalid_assignment` otherwise)."""
    index, members = problem.index, problem.members
    member_set = None if members is None else set(members)
    owner: list[str | None] = [None] * problem.size
    assignment: dict[str, list[int]] = {}
    for consumer, keys in given.items():
        if not consumer or (member_set is not None and consumer not in member_set):
            raise AssignmentError(
                ErrorCode.INVALID_ASSIGNMENT,
                f"the assignment names consumer {consumer!r}, which is not a member; give partitions only to members.",
                {"consumer": consumer},
            )
        held = assignment.setdefault(consumer, [])
        for key in keys:
            j = index.get(tuple(key))  # type: ignore[arg-type]
            if j is None or owner[j] is not None:
                why = "is not among the partitions" if j is None else f"is also given to {owner[j]!r}"
                raise AssignmentError(
                    ErrorCode.INVALID_ASSIGNMENT,
                    f"partition {key[0]}/{key[1]} {why}; the assignment must place each partition once.",
                    {"partition": tuple(key), "consumer": consumer},
                )
            owner[j] = consumer
            held.append(j)
    unplaced = [problem.keys[j] for j, o in enumerate(owner) if o is None]
    if unplaced:
        raise AssignmentError(
            ErrorCode.INVALID_ASSIGNMENT,
            f"partition {unplaced[0][0]}/{unplaced[0][1]} has no consumer in the assignment ({len(unplaced)} in all); "
            "the assignment must place each partition once.",
            {"partitions": unplaced[:20]},
        )
    # as an algorithm's answer: members keep their place even when given nothing; other consumers only with partitions
    if members is not None:
        assignment = {m: assignment.get(m, []) for m in members}
    else:
        assignment = {c: held for c, held in assignment.items() if held}
    bins_used = sum(1 for held in assignment.values() if held)
    placed, loads = _owners_and_loads(problem, assignment, algorithm)
    return _outcome(problem, algorithm, assignment, placed, loads, {"given": True}, bins_used, {})


def _outcome(
    problem: Problem,
    algorithm: str,
    assignment: dict[str, list[int]],
    owner: list[str],
    loads: dict[str, float],
    outputs: dict[str, Any],
    bins_used: int,
    racks: dict[str, str],
) -> Outcome:
    """An assignment's outcome: its moves from the previous one, their Rscore, the partitions above capacity, and
    (zone-aware) the consumers' racks (`racks`: those the algorithm chose) and cross-zone rates."""
    zones = None if problem.zones is None else zone_report(problem, assignment, racks)
    moved = migrated(problem, owner)
    previous_owner, capacity_of, rates = problem.previous_owner, problem.capacity_of, problem.rates
    return Outcome(
        algorithm=algorithm,
        problem=problem,
        assignment=assignment,
        consumers=sorted_consumers(assignment),
        owner=owner,
        loads=loads,
        moved=moved,
        moved_from=[previous_owner[j] or "" for j in moved],
        rscore=rscore(problem, moved),
        overloaded=[j for j, rate in enumerate(rates) if rate > capacity_of(owner[j])],
        outputs=outputs,
        bins_used=bins_used,
        zones=zones,
    )


def zone_report(problem: Problem, assignment: dict[str, list[int]], chosen: dict[str, str]) -> ZoneReport:
    """Each consumer's rack: the one the algorithm chose, else the one known (a member's, a previous consumer's),
    else for a new consumer of a group groupfit sizes the rack where the most of its rate is local (what an
    algorithm that does not weigh zones leaves open); and the rate each reads across zones."""
    zones, rates = problem.zones, problem.rates
    assert zones is not None
    racks: dict[str, str | None] = {}
    cross: dict[str, float] = {}
    for consumer in sorted_consumers(assignment):
        held = assignment[consumer]
        name = chosen.get(consumer) or problem.consumer_racks.get(consumer)
        if name is None and problem.members is None and consumer not in problem.previous:
            rack = zones.best_rack(rates, held)
            name = zones.names[rack] if rack != NO_RACK else None
        racks[consumer] = name
        cross[consumer] = zones.cross_zone(rates, held, NO_RACK if name is None else zones.rack(name))
    return ZoneReport(racks, cross)


def _fold_into_members(problem: Problem, assignment: dict[str, list[int]]) -> dict[str, list[int]]:
    """Member mode: bins beyond the members go, largest partition first, to the member with the most
    remaining capacity (ties to the lowest id); members the algorithm left unused get empty assignments."""
    members = sorted_consumers(problem.members or [])
    result = {m: list(assignment.get(m, ())) for m in members}
    surplus = [j for c, held in assignment.items() if c not in result for j in held]
    if surplus and problem.zones is not None:
        _fold_zoned(problem, result, surplus)
    elif surplus:
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


def _fold_zoned(problem: Problem, result: dict[str, list[int]], surplus: list[int]) -> None:
    """Zone mode of the fold: a partition goes to the member of one of its racks with the most remaining capacity
    if it fits there, else to the member with the most remaining capacity (heaps of (load − capacity, id), the
    stale entries of a member whose load changed dropped when they come up)."""
    zones, rates = problem.zones, problem.rates
    assert zones is not None
    excess = {m: math.fsum(rates[j] for j in held) - problem.capacity_of(m) for m, held in result.items()}
    tie = {m: consumer_sort_key(m) for m in result}
    every = [(excess[m], tie[m], m) for m in result]
    by_rack: dict[int, list[tuple]] = {}
    for entry in every:
        rack = zones.rack_of(entry[2])
        if rack != NO_RACK:
            by_rack.setdefault(rack, []).append(entry)
    for heap in [every, *by_rack.values()]:
        heapq.heapify(heap)

    def top(heap: list[tuple]) -> tuple | None:
        while heap and heap[0][0] != excess[heap[0][2]]:
            heapq.heappop(heap)
        return heap[0] if heap else None

    for j in problem.decreasing(surplus):
        local = [found for r in zones.of_partition[j] if (found := top(by_rack.get(r, []))) is not None]
        best = min(local, default=None)
        if best is None or best[0] + rates[j] > problem.capacity_of(best[2]) * (ROUNDING - 1):
            best = top(every)
        assert best is not None
        member = best[2]
        result[member].append(j)
        excess[member] += rates[j]
        updated = (excess[member], tie[member], member)
        heapq.heappush(every, updated)
        rack = zones.rack_of(member)
        if rack != NO_RACK:
            heapq.heappush(by_rack[rack], updated)


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
