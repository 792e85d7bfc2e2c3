"""The replica placement problem of "Constraint Based Kafka Partition Balancing" (seed 003): brokers are bins,
partition replicas are items.

Basic Model: every broker within its capacity, every replica placed exactly once, no two replicas of one replica
set on one broker ("anti-collocation"), and, as the seed proposes for future work, on one rack when racks are
given. Objectives: the seed's three criteria are a replica's disk size D, the broker's network capacity and the
topic's retention T, joined by the replica's throughput D/T ("common capacity limitation"); so each broker has a
disk and a network capacity, and a replica weighs its size on the first and its throughput on the second.

Every quantity the constraints compare is a whole number, so a placement fits or does not without a tolerance
and the exact model takes the numbers as they are: sizes, disk capacities and byte budgets are bytes (whole, as
Kafka counts them, at most MAX_BYTES); throughputs and network capacities are counted in thousandths of a byte/s
(RATE_STEPS per byte/s), a replica's throughput rounded up and a capacity rounded down, so a placement that fits
in these units never exceeds a real capacity. `build` checks every number at the boundary — its type, its range,
that its units are representable — and names what is wrong with the codes assign uses.

Brokers and partitions are addressed by index (brokers in id order, partitions in (topic, partition) order);
a placement is, per partition, the list of broker indices holding its replicas. A current replica on a broker
that is not given (a broker being removed) has the index -1: it has to move.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from itertools import pairwise

from app.core.errors import AssignmentError, ErrorCode

GONE = -1
"""The broker index of a current replica on a broker that is not in the problem."""

MAX_BYTES = 2**53
"""Most bytes of a broker's disk or of one replica (9.0e15, 9 PB): the largest whole number every JSON reader
carries exactly."""
RATE_STEPS = 1000
"""Network quantities are whole thousandths of a byte/s."""
MIN_RATE = 1 / RATE_STEPS
MAX_RATE = 1e12
"""Most bytes/s of a broker's network (8 Tbit/s); with RATE_STEPS, at most 10^15 units."""


class Objective(StrEnum):
    """What comes after feasibility, lexicographically."""

    MOVES = "moves"  # least bytes moved, then balance (the order)
    BALANCE = "balance"  # balance, then least bytes moved
    BROKERS = "brokers"  # fewest brokers used (the seed's "minimize the use of resources"), then bytes, balance


@dataclass(frozen=True)
class Broker:
    id: int
    disk: int  # bytes
    network: float  # bytes/s
    rack: str | None = None


@dataclass(frozen=True)
class Partition:
    topic: str
    partition: int
    replicas: tuple[int, ...]  # the current broker ids, preferred leader first
    size: int  # bytes, of one replica in steady state
    throughput: float  # bytes/s written to each replica

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class Options:
    objective: Objective = Objective.MOVES
    time_limit_ms: int = 1000
    max_bytes_moved: int | None = None  # a hard cap on the bytes copied
    max_utilization: float = 1.0  # each capacity counts only up to this share (headroom)


def throughput_of(size: int, retention_ms: int | None) -> float | None:
    """The seed's D/T: a replica of steady-state size D under time-based retention T writes D/T bytes per
    second. None when the retention is not time-based (absent, or Kafka's -1 for "forever")."""
    if retention_ms is None or retention_ms <= 0:
        return None
    return size * 1000 / retention_ms  # whole numbers: one correctly rounded division, never by zero


@dataclass
class PlacementProblem:
    brokers: list[Broker]
    partitions: list[Partition]
    options: Options
    # derived by `build`, every one a whole number (bytes, or network units of 1/RATE_STEPS byte/s)
    index: dict[int, int] = field(default_factory=dict)  # broker id → index
    current: list[list[int]] = field(default_factory=list)  # broker indices, GONE for a broker not given
    rack_of: list[int] = field(default_factory=list)  # rack index per broker; every broker its own without racks
    racks: int = 0  # number of racks (brokers when none given)
    flow: list[int] = field(default_factory=list)  # each partition's throughput in network units, rounded up
    network_full: list[int] = field(default_factory=list)  # each broker's network in units, rounded down
    disk_limit: list[int] = field(default_factory=list)  # ⌊capacity × max_utilization⌋
    network_limit: list[int] = field(default_factory=list)

    @property
    def rack_aware(self) -> bool:
        return bool(self.brokers) and self.brokers[0].rack is not None

    def fits(self, p: int, b: int, disk: Sequence[int], network: Sequence[int]) -> bool:
        """Whether one more replica of partition p fits on broker b with loads `disk`, `network`."""
        return (
            disk[b] + self.partitions[p].size <= self.disk_limit[b]
            and network[b] + self.flow[p] <= self.network_limit[b]
        )


def whole(value: object) -> int | None:
    """A count given as a whole number (an int, or a float with nothing after the point); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def rate_units(value: float) -> int:
    """A throughput in network units, rounded up (exactly: a float is a ratio of whole numbers)."""
    numerator, denominator = value.as_integer_ratio()
    return -(-numerator * RATE_STEPS // denominator)


def _floor_of(value: float, share: float) -> int:
    """⌊value × share⌋, exactly."""
    return math.floor(Fraction(value) * Fraction(share))


def build(brokers: Sequence[Broker], partitions: Sequence[Partition], options: Options) -> PlacementProblem:
    """The problem, checked: every number at the boundary, and every way the input can make a placement
    impossible, before a solver runs (the solvers can still find none when bins pack badly)."""
    if not brokers:
        raise AssignmentError(ErrorCode.INVALID_BROKER, "give at least one broker.")
    ordered = sorted((_checked_broker(b) for b in brokers), key=lambda b: b.id)
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
    options = _checked_options(options)
    ordered_partitions = sorted((_checked_partition(p) for p in partitions), key=lambda p: p.key)
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
    problem.network_full = [math.floor(Fraction(b.network) * RATE_STEPS) for b in ordered]
    problem.disk_limit = [_floor_of(b.disk, options.max_utilization) for b in ordered]
    problem.network_limit = [_floor_of(full, options.max_utilization) for full in problem.network_full]
    problem.current = [[problem.index.get(r, GONE) for r in p.replicas] for p in ordered_partitions]
    _check_partitions(problem)
    return problem


def _checked_broker(broker: Broker) -> Broker:
    disk = whole(broker.disk)
    if disk is None or not 1 <= disk <= MAX_BYTES:
        raise AssignmentError(
            ErrorCode.INVALID_CAPACITY,
            f"broker {broker.id}: disk capacity must be a whole number of bytes from 1 to {MAX_BYTES} (9 PB), got "
            f"{broker.disk!r}.",
            {"broker": broker.id},
        )
    network = broker.network
    if not (isinstance(network, int | float) and math.isfinite(network) and MIN_RATE <= network <= MAX_RATE):
        raise AssignmentError(
            ErrorCode.INVALID_CAPACITY,
            f"broker {broker.id}: network capacity must be from {MIN_RATE:g} to {MAX_RATE:g} bytes/s (the model "
            f"counts thousandths of a byte/s), got {network!r}.",
            {"broker": broker.id},
        )
    return dataclasses.replace(broker, disk=disk, network=float(network))


def _checked_options(options: Options) -> Options:
    utilization = options.max_utilization
    if not (isinstance(utilization, int | float) and 0 < utilization <= 1):
        raise AssignmentError(ErrorCode.INVALID_PARAMETER, f"max_utilization must be in (0, 1], got {utilization!r}.")
    budget = options.max_bytes_moved
    if budget is not None:
        budget = whole(budget)
        if budget is None or budget < 0:
            raise AssignmentError(
                ErrorCode.INVALID_PARAMETER,
                f"max_bytes_moved must be a whole number of bytes ≥ 0, got {options.max_bytes_moved!r}.",
            )
    return dataclasses.replace(options, max_bytes_moved=budget, max_utilization=float(utilization))


def _checked_partition(part: Partition) -> Partition:
    name = f"{part.topic}/{part.partition}"
    size = whole(part.size)
    if size is None or not 0 <= size <= MAX_BYTES:
        raise AssignmentError(
            ErrorCode.INVALID_RATE,
            f"partition {name}: size must be a whole number of bytes from 0 to {MAX_BYTES} (9 PB), got {part.size!r}.",
            {"partition": part.key},
        )
    throughput = part.throughput
    if not (isinstance(throughput, int | float) and math.isfinite(throughput) and throughput >= 0):
        raise AssignmentError(
            ErrorCode.INVALID_RATE,
            f"partition {name}: throughput must be a finite number of bytes/s ≥ 0, got {throughput!r}.",
            {"partition": part.key},
        )
    return dataclasses.replace(part, size=size, throughput=float(throughput))


def _check_partitions(problem: PlacementProblem) -> None:
    brokers, biggest_disk, biggest_network = problem.brokers, max(problem.disk_limit), max(problem.network_limit)
    problem.flow = [rate_units(p.throughput) for p in problem.partitions]
    for part, flow in zip(problem.partitions, problem.flow):
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
        if part.size > biggest_disk or flow > biggest_network:
            dimension, value, limit = (
                ("disk", part.size, biggest_disk)
                if part.size > biggest_disk
                else ("network", flow / RATE_STEPS, biggest_network / RATE_STEPS)  # as the model counts them
            )
            raise AssignmentError(
                ErrorCode.REPLICA_TOO_LARGE,
                f"a replica of partition {name} needs {value:.12g} of {dimension} but the largest broker offers "
                f"{limit:.12g} (capacity × max_utilization); no broker can hold it.",
                {"partition": part.key, "dimension": dimension, "needed": value, "largest": limit},
            )
    # whole numbers: the totals are exact, whatever their size
    for dimension, demand, supply, unit in (
        ("disk", sum(len(p.replicas) * p.size for p in problem.partitions), sum(problem.disk_limit), 1),
        (
            "network",
            sum(len(p.replicas) * f for p, f in zip(problem.partitions, problem.flow)),
            sum(problem.network_limit),
            RATE_STEPS,
        ),
    ):
        if demand > supply:
            raise AssignmentError(
                ErrorCode.PLACEMENT_INFEASIBLE,
                f"the replicas need {demand / unit:g} of {dimension} in total but the brokers offer "
                f"{supply / unit:g} (capacity × max_utilization); add brokers or capacity.",
                {"dimension": dimension, "needed": demand / unit, "offered": supply / unit},
            )


@dataclass
class Loads:
    disk: list[int]  # bytes
    network: list[int]  # network units


def loads_of(problem: PlacementProblem, sets: Sequence[Sequence[int]]) -> Loads:
    """Each broker's disk and network load under a placement (replicas on GONE brokers count nowhere)."""
    disk = [0] * len(problem.brokers)
    network = [0] * len(problem.brokers)
    for part, flow, held in zip(problem.partitions, problem.flow, sets):
        for b in held:
            if b != GONE:
                disk[b] += part.size
                network[b] += flow
    return Loads(disk, network)


def bytes_moved(problem: PlacementProblem, sets: Sequence[Sequence[int]]) -> int:
    """Bytes to copy: a replica on a broker that did not hold the partition before is copied whole."""
    return sum(
        part.size * sum(1 for b in held if b not in current)
        for part, held, current in zip(problem.partitions, sets, problem.current)
    )


def peak_utilization(problem: PlacementProblem, loads: Loads) -> tuple[float, float]:
    """(peak disk, peak network) utilisation against the brokers' full capacities."""
    return (
        max(load / b.disk for load, b in zip(loads.disk, problem.brokers)),
        max(load / full for load, full in zip(loads.network, problem.network_full)),
    )


ORDER = {
    Objective.MOVES: ("bytes_moved", "utilization"),
    Objective.BALANCE: ("utilization", "bytes_moved"),
    Objective.BROKERS: ("brokers", "bytes_moved", "utilization"),
}
"""Each objective's criteria after feasibility, in lexicographic order. Balance ("utilization") is the most
loaded broker's utilisation on either dimension."""


UTILIZATION_STEPS = 10**4
"""Solvers compare balance in steps of 0.01 % (`utilization_steps`): whole numbers, like every other criterion."""


def utilization_steps(problem: PlacementProblem, loads: Loads) -> int:
    """The most utilised broker's utilisation on either dimension in steps of 1/UTILIZATION_STEPS, rounded up
    (exactly: ⌈UTILIZATION_STEPS × load / capacity⌉ on whole numbers)."""
    return max(
        -(-UTILIZATION_STEPS * load // full)
        for loads_of_dimension, capacities in (
            (loads.disk, [b.disk for b in problem.brokers]),
            (loads.network, problem.network_full),
        )
        for load, full in zip(loads_of_dimension, capacities)
    )


def criteria(problem: PlacementProblem, sets: Sequence[Sequence[int]]) -> dict[str, int]:
    """A placement's value on every criterion as the solvers compare placements: whole numbers, so a tie is a
    tie (bytes moved, brokers used, the peak in steps)."""
    return {
        "bytes_moved": bytes_moved(problem, sets),
        "utilization": utilization_steps(problem, loads_of(problem, sets)),
        "brokers": len({b for held in sets for b in held}),
    }


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
    excess = sum(max(0, load - limit) for load, limit in zip(loads.disk, problem.disk_limit))
    gone = sum(part.size * held.count(GONE) for part, held in zip(problem.partitions, problem.current))
    disk = sum(len(p.replicas) * p.size for p in problem.partitions)
    network = sum(len(p.replicas) * flow for p, flow in zip(problem.partitions, problem.flow))
    largest = max((p.size for p in problem.partitions), default=0) / max(b.disk for b in problem.brokers)
    return {
        "bytes_moved": excess + gone,
        "utilization": max(disk / sum(b.disk for b in problem.brokers), network / sum(problem.network_full), largest),
    }


def violations(problem: PlacementProblem, sets: Sequence[Sequence[int]]) -> list[str]:
    """Every constraint of the Basic Model a placement breaks, in words (empty: feasible)."""
    found = []
    loads = loads_of(problem, sets)
    for b, broker in enumerate(problem.brokers):
        if loads.disk[b] > problem.disk_limit[b]:
            found.append(f"broker {broker.id} above its disk capacity")
        if loads.network[b] > problem.network_limit[b]:
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
