"""From a solver's replica sets to a plan an operator applies: ordered replica lists, moves, loads before and
after.

Order of a new replica list: every replica that stays keeps its position, and a replica that leaves is replaced
in place by a new one (the new brokers in id order), which is also the move (from, to). The first replica is
the preferred leader: it stays where it stays; a partition whose preferred leader leaves gets as leader the
broker of its new set with the least leader throughput so far (partitions by throughput, largest first), so
leaders' throughput spreads across brokers. Leadership is decided after the placement, as a lower objective.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.core.placement.model import GONE, Loads, PlacementProblem, bytes_moved, loads_of, peak_utilization
from app.core.placement.solver import Solution


@dataclass(frozen=True)
class Move:
    partition: int  # index into problem.partitions
    source: int  # broker id
    target: int  # broker id
    bytes: int


# A broker's use before and after the plan, sent as it is in PlacementResponse.brokers (no docstring: it would
# become the schema's description).
@dataclass(frozen=True)
class BrokerUtilization:
    id: int
    rack: str | None
    disk_before: float  # utilisation: load / capacity
    disk_after: float
    network_before: float
    network_after: float
    leader_throughput_before: float  # bytes/s of the partitions it is preferred leader of
    leader_throughput_after: float
    replicas_before: int
    replicas_after: int


@dataclass
class Plan:
    solver: str
    problem: PlacementProblem
    replicas: list[list[int]]  # broker ids per partition, preferred leader first
    moves: list[Move]
    bytes_moved: int
    brokers: list[BrokerUtilization]
    peak_before: tuple[float, float]  # (disk, network)
    peak_after: tuple[float, float]
    leaders_changed: int
    optimal: bool
    bounds: dict[str, float]
    outputs: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> list[int]:
        """Partitions whose replica list (or its order) changes: what kafka-reassign-partitions is given."""
        return [
            p for p, (part, new) in enumerate(zip(self.problem.partitions, self.replicas)) if list(part.replicas) != new
        ]


def plan_of(problem: PlacementProblem, solver: str, solution: Solution) -> Plan:
    ids = [b.id for b in problem.brokers]
    replicas: list[list[int]] = []
    moves: list[Move] = []
    for p, (part, held) in enumerate(zip(problem.partitions, solution.sets)):
        new = {ids[b] for b in held}
        added = iter(sorted(new - set(part.replicas)))
        ordered = []
        for old in part.replicas:
            if old in new:
                ordered.append(old)
            else:
                target = next(added)
                ordered.append(target)
                moves.append(Move(p, old, target, part.size))
        replicas.append(ordered)
    leaders_changed = _spread_leaders(problem, replicas)
    before, after = loads_of(problem, problem.current), loads_of(problem, solution.sets)
    return Plan(
        solver=solver,
        problem=problem,
        replicas=replicas,
        moves=moves,
        bytes_moved=bytes_moved(problem, solution.sets),
        brokers=_brokers(problem, replicas, before, after, solution.sets),
        peak_before=peak_utilization(problem, before),
        peak_after=peak_utilization(problem, after),
        leaders_changed=leaders_changed,
        optimal=solution.optimal,
        bounds=solution.bounds,
        outputs=solution.outputs,
    )


def _spread_leaders(problem: PlacementProblem, replicas: list[list[int]]) -> int:
    """Put a leader first in each list whose preferred leader left; the count of such partitions."""
    leader_load: dict[int, float] = {}
    orphans = []
    for p, (part, ordered) in enumerate(zip(problem.partitions, replicas)):
        if ordered[0] == part.replicas[0]:
            leader_load[ordered[0]] = leader_load.get(ordered[0], 0.0) + part.throughput
        else:
            orphans.append(p)
    orphans.sort(key=lambda p: (-problem.partitions[p].throughput, problem.partitions[p].key))
    for p in orphans:
        ordered = replicas[p]
        leader = min(ordered, key=lambda b: (leader_load.get(b, 0.0), b))
        ordered.remove(leader)
        ordered.insert(0, leader)
        leader_load[leader] = leader_load.get(leader, 0.0) + problem.partitions[p].throughput
    return len(orphans)


def _brokers(
    problem: PlacementProblem, replicas: list[list[int]], before: Loads, after: Loads, sets: list[list[int]]
) -> list[BrokerUtilization]:
    index = problem.index
    leading_before = [0.0] * len(problem.brokers)
    leading_after = [0.0] * len(problem.brokers)
    count_before = [0] * len(problem.brokers)
    count_after = [0] * len(problem.brokers)
    for part, ordered, current, held in zip(problem.partitions, replicas, problem.current, sets):
        if part.replicas[0] in index:
            leading_before[index[part.replicas[0]]] += part.throughput
        leading_after[index[ordered[0]]] += part.throughput
        for b in current:
            if b != GONE:
                count_before[b] += 1
        for b in held:
            count_after[b] += 1
    return [
        BrokerUtilization(
            id=broker.id,
            rack=broker.rack,
            disk_before=before.disk[b] / broker.disk,
            disk_after=after.disk[b] / broker.disk,
            network_before=before.network[b] / problem.network_full[b],
            network_after=after.network[b] / problem.network_full[b],
            leader_throughput_before=leading_before[b],
            leader_throughput_after=leading_after[b],
            replicas_before=count_before[b],
            replicas_after=count_after[b],
        )
        for b, broker in enumerate(problem.brokers)
    ]
