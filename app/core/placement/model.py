"""The replica placement problem of "Constraint Based Kafka Partition Balancing" (seed 003): brokers are bins,
partition replicas are items.

Basic Model: every broker within its capacity, every replica placed exactly once, no two replicas of one replica
set on one broker ("anti-collocation"), and, as the seed proposes for future work, on one rack when racks are
given. Objectives: the seed's three criteria are a replica's disk size D, the broker's network capacity and the
topic's retention T, joined by the replica's throughput D/T ("common capacity limitation"); so each broker has a
disk and a network capacity, and a replica weighs its size on the first and its throughput on the second.

Brokers and partitions are addressed by index (brokers in id order, partitions in (topic, partition) order);
a placement is, per partition, the list of broker indices holding its replicas. A current replica on a broker
that is not given (a broker being removed) has the index -1: it has to move.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import pairwise

from app.core.errors import AssignmentError, ErrorCode

GONE = -1
"""The broker index of a current replica on a broker that is not in the problem."""

ROUNDING = 1 + 1e-9
"""A load counts as within a capacity up to this factor: absorbs float rounding of summed sizes."""


class Objective(StrEnum):
    """What comes after feasibility, lexicographically."""

    MOVES = "moves"  # least bytes moved, then balance (the order)
    BALANCE = "balance"  # balance, then least bytes moved
    BROKERS = "brokers"  # fewest brokers used (the seed's "minimize the use of resources"), then bytes, balance


@dataclass(frozen=True)
class Broker:
    id: int
    disk: float  # bytes
    network: float  # bytes/s
    rack: str | None = None


@dataclass(frozen=True)
class Partition:
    topic: str
    partition: int
    replicas: tuple[int, ...]  # the current broker ids, preferred leader first
    size: float  # bytes, of one replica in steady state
    throughput: float  # bytes/s written to each replica

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class Options:
    objective: Objective = Objective.MOVES
    time_limit_ms: int = 1000
    max_bytes_moved: float | None = None  # a hard cap on the bytes copied
    max_utilization: float = 1.0  # each capacity counts only up to this share (headroom)


def throughput_of(size: float, retention_ms: float | None) -> float | None:
    """The seed's D/T: a replica of steady-state size D under time-based retention T writes D/T bytes per
    second. None when the retention is not time-based (absent, or Kafka's -1 for "forever")."""
    if retention_ms is None or retention_ms <= 0:
        return None
    return size / (retention_ms / 1000)


@dataclass
class PlacementProblem:
    brokers: list[Broker]
    partitions: list[Partition]
    options: Options
    # derived by `build`
    index: dict[int, int] = field(default_factory=dict)  # broker id → index
    current: list[list[int]] = field(default_factory=list)  # broker indices, GONE for a broker not given
    rack_of: list[int] = field(default_factory=list)  # rack index per broker; every broker its own without racks
    racks: int = 0  # number of racks (brokers when none given)
    disk_limit: list[float] = field(default_factory=list)  # capacity × max_utilization
    network_limit: list[float] = field(default_factory=list)

    @property
    def rack_aware(self) -> bool:
        return bool(self.brokers) and self.brokers[0].rack is not None

    def fits(self, p: int, b: int, disk: Sequence[float], network: Sequence[float]) -> bool:
        """Whether one more replica of partition p fits on broker b with loads `disk`, `network`."""
        part = self.partitions[p]
        return (
            disk[b] + part.size <= self.disk_limit[b] * ROUNDING
            and network[b] + part.throughput <= self.network_limit[b] * ROUNDING
        )


def build(brokers: Sequence[Broker], partitions: Sequence[Partition], options: Options) -> PlacementProblem:
    """The problem, checked: every way the input can make a placement impossible is named here, before a solver
    runs (the solvers can still find none when bins pack badly)."""
    if not brokers:
        raise AssignmentError(ErrorCode.INVALID_BROKER, "give at least one broker.")
    ordered = sorted(brokers, key=lambda b: b.id)
    for first, second in pairwise(ordered):
        if first.id == second.id:
            raise AssignmentError(ErrorCode.INVALID_BROKER, f"broker {first.id} is listed twice.", {"broker": first.id})
    with_rack = [b.id for b in ordered if b.rack is not None]
    if with_rack and len(with_rack) != len(ordered):
        missing = [b.id for b in ordered if b.rack is None]
        raise AssignmentError(
            ErrorCode.INVALID_BROKER,
            f"brokers {missing} have no rack while others have one; give every broker a rack, or none.",
            {"brokers": missing},
        )
    for b in ordered:
        for name, value in (("disk", b.disk), ("network", b.network)):
            if not (math.isfinite(value) and value > 0):
                raise AssignmentError(
                    ErrorCode.INVALID_CAPACITY,
                    f"broker {b.id}: {name} capacity must be a finite number above 0, got {value!r}.",
                    {"broker": b.id},
                )
    if not 0 < options.max_utilization <= 1:
        raise AssignmentError(ErrorCode.INVALID_PARAMETER, "max_utilization must be in (0, 1].")
    ordered_partitions = sorted(partitions, key=lambda p: p.key)
    for one, other in pairwise(ordered_partitions):
        if one.key == other.key:
            raise AssignmentError(
                ErrorCode.DUPLICATE_PARTITION,
                f"partition {one.topic}/{one.partition} is listed more than once; list each partition once.",
                {"partition": one.key},
            )
    problem = PlacementProblem(list(ordered), ordered_partitions, options)
    problem.index = {b.id: i for i, b in enumerate(ordered)}
    rack_names = sorted({b.rack for b in ordered if b.rack is not None})
    problem.rack_of = [rack_names.index(b.rack) if b.rack is not None else i for i, b in enumerate(ordered)]
    problem.racks = len(rack_names) if rack_names else len(ordered)
    problem.disk_limit = [b.disk * options.max_utilization for b in ordered]
    problem.network_limit = [b.network * options.max_utilization for b in ordered]
    problem.current = [[problem.index.get(r, GONE) for r in p.replicas] for p in ordered_partitions]
    _check_partitions(problem)
    return problem


def _check_partitions(problem: PlacementProblem) -> None:
    brokers, biggest_disk, biggest_network = problem.brokers, max(problem.disk_limit), max(problem.network_limit)
    for part in problem.partitions:
        name = f"{part.topic}/{part.partition}"
        if not part.replicas:
            raise AssignmentError(
                ErrorCode.INVALID_REPLICAS, f"partition {name} has no replicas.", {"partition": part.key}
            )
        if len(set(part.replicas)) != len(part.replicas):
            raise AssignmentError(
                ErrorCode.INVALID_REPLICAS,
                f"partition {name} lists broker(s) twice in its replicas {list(part.replicas)}.",
                {"partition": part.key},
            )
        for what, value in (("size", part.size), ("throughput", part.throughput)):
            if not (math.isfinite(value) and value >= 0):
                raise AssignmentError(
                    ErrorCode.INVALID_RATE,
                    f"partition {name}: {what} must be a finite number ≥ 0, got {value!r}.",
                    {"partition": part.key},
                )
        factor = len(part.replicas)
        if factor > len(brokers):
            raise AssignmentError(
                ErrorCode.TOO_MANY_REPLICAS,
                f"partition {name} has {factor} replicas but there are {len(brokers)} brokers; no two replicas of a "
                "partition may share a broker. Add brokers or lower its replication factor.",
                {"partition": part.key, "replicas": factor, "brokers": len(brokers)},
            )
        if problem.rack_aware and factor > problem.racks:
            raise AssignmentError(
                ErrorCode.TOO_MANY_REPLICAS,
                f"partition {name} has {factor} replicas but the brokers are in {problem.racks} racks; no two "
                "replicas of a partition may share a rack. Add racks or lower its replication factor.",
                {"partition": part.key, "replicas": factor, "racks": problem.racks},
            )
        if part.size > biggest_disk * ROUNDING or part.throughput > biggest_network * ROUNDING:
            dimension, value, limit = (
                ("disk", part.size, biggest_disk)
                if part.size > biggest_disk * ROUNDING
                else ("network", part.throughput, biggest_network)
            )
            raise AssignmentError(
                ErrorCode.REPLICA_TOO_LARGE,
                f"a replica of partition {name} needs {value:g} of {dimension} but the largest broker offers "
                f"{limit:g} (capacity × max_utilization); no broker can hold it.",
                {"partition": part.key, "dimension": dimension, "needed": value, "largest": limit},
            )
    for dimension, demand, supply in (
        ("disk", math.fsum(len(p.replicas) * p.size for p in problem.partitions), math.fsum(problem.disk_limit)),
        (
            "network",
            math.fsum(len(p.replicas) * p.throughput for p in problem.partitions),
            math.fsum(problem.network_limit),
        ),
    ):
        if demand > supply * ROUNDING:
            raise AssignmentError(
                ErrorCode.PLACEMENT_INFEASIBLE,
                f"the replicas need {demand:g} of {dimension} in total but the brokers offer {supply:g} "
                "(capacity × max_utilization); add brokers or capacity.",
                {"dimension": dimension, "needed": demand, "offered": supply},
            )


@dataclass
class Loads:
    disk: list[float]
    network: list[float]


def loads_of(problem: PlacementProblem, sets: Sequence[Sequence[int]]) -> Loads:
    """Each broker's disk and network load under a placement (replicas on GONE brokers count nowhere)."""
    disk = [0.0] * len(problem.brokers)
    network = [0.0] * len(problem.brokers)
    for part, held in zip(problem.partitions, sets):
        for b in held:
            if b != GONE:
                disk[b] += part.size
                network[b] += part.throughput
    return Loads(disk, network)


def bytes_moved(problem: PlacementProblem, sets: Sequence[Sequence[int]]) -> float:
    """Bytes to copy: a replica on a broker that did not hold the partition before is copied whole."""
    return math.fsum(
        part.size * sum(1 for b in held if b not in current)
        for part, held, current in zip(problem.partitions, sets, problem.current)
    )


def peak_utilization(problem: PlacementProblem, loads: Loads) -> tuple[float, float]:
    """(peak disk, peak network) utilisation against the brokers' full capacities."""
    brokers = problem.brokers
    return (
        max(load / b.disk for load, b in zip(loads.disk, brokers)),
        max(load / b.network for load, b in zip(loads.network, brokers)),
    )


ORDER = {
    Objective.MOVES: ("bytes_moved", "utilization"),
    Objective.BALANCE: ("utilization", "bytes_moved"),
    Objective.BROKERS: ("brokers", "bytes_moved", "utilization"),
}
"""Each objective's criteria after feasibility, in lexicographic order. Balance ("utilization") is the most
loaded broker's utilisation on either dimension."""


def objective_values(problem: PlacementProblem, sets: Sequence[Sequence[int]]) -> dict[str, float]:
    """A placement's value on every criterion."""
    return {
        "bytes_moved": bytes_moved(problem, sets),
        "utilization": max(peak_utilization(problem, loads_of(problem, sets))),
        "brokers": float(len({b for held in sets for b in held})),
    }


def lower_bounds(problem: PlacementProblem) -> dict[str, float]:
    """Bounds every placement obeys, cheap at any size. Bytes moved: each replica that leaves a broker is copied
    whole onto one where its partition was not, so at least every broker's disk excess leaves, and every replica
    on a broker that is gone. Utilisation: the peak is at least the total load over the total capacity, on each
    dimension, and at least the largest replica on the largest broker."""
    loads = loads_of(problem, problem.current)
    excess = math.fsum(max(0.0, load - limit) for load, limit in zip(loads.disk, problem.disk_limit))
    gone = math.fsum(
        part.size * held.count(GONE) for part, held in zip(problem.partitions, problem.current) if GONE in held
    )
    disk = math.fsum(len(p.replicas) * p.size for p in problem.partitions)
    network = math.fsum(len(p.replicas) * p.throughput for p in problem.partitions)
    largest = max((p.size for p in problem.partitions), default=0.0) / max(b.disk for b in problem.brokers)
    return {
        "bytes_moved": excess + gone,
        "utilization": max(
            disk / math.fsum(b.disk for b in problem.brokers),
            network / math.fsum(b.network for b in problem.brokers),
            largest,
        ),
    }


def violations(problem: PlacementProblem, sets: Sequence[Sequence[int]]) -> list[str]:
    """Every constraint of the Basic Model a placement breaks, in words (empty: feasible)."""
    found = []
    loads = loads_of(problem, sets)
    for b, broker in enumerate(problem.brokers):
        if loads.disk[b] > problem.disk_limit[b] * ROUNDING:
            found.append(f"broker {broker.id} above its disk capacity")
        if loads.network[b] > problem.network_limit[b] * ROUNDING:
            found.append(f"broker {broker.id} above its network capacity")
    for part, held in zip(problem.partitions, sets):
        name = f"{part.topic}/{part.partition}"
        if len(held) != len(part.replicas) or GONE in held:
            found.append(f"{name} does not have {len(part.replicas)} placed replicas")
        if len(set(held)) != len(held):
            found.append(f"{name} has two replicas on one broker")
        elif problem.rack_aware and len({problem.rack_of[b] for b in held if b != GONE}) != len(held):
            found.append(f"{name} has two replicas in one rack")
    if problem.options.max_bytes_moved is not None and bytes_moved(problem, sets) > problem.options.max_bytes_moved:
        found.append("more bytes moved than max_bytes_moved")
    return found
