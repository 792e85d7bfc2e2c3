"""The service's answers as typed values (field names as in openapi/openapi.json). Each result keeps the JSON
document it came from as `.raw`, so a field a newer service adds is still reachable."""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, TypeVar

Json = dict[str, Any]
R = TypeVar("R")


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    @classmethod
    def from_json(cls, doc: Json) -> TopicPartition:
        return cls(doc["topic"], doc["partition"])

    def to_json(self) -> Json:
        return {"topic": self.topic, "partition": self.partition}


class PartitionRate(NamedTuple):
    """A partition's measured rate (same unit as the capacity) and, optionally, its lag."""

    topic: str
    partition: int
    rate: float
    lag: float | None = None

    @property
    def key(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @classmethod
    def from_json(cls, doc: Json) -> PartitionRate:
        return cls(doc["topic"], doc["partition"], doc["rate"], doc.get("lag"))

    def to_json(self) -> Json:
        doc: Json = {"topic": self.topic, "partition": self.partition, "rate": self.rate}
        if self.lag is not None:
            doc["lag"] = self.lag
        return doc


def _build(cls: type[R], doc: Json, **converted: Any) -> R:
    """A result of type `cls` (a dataclass) from its JSON document: each field is the document's value of the
    same name unless `converted` gives it, and `raw`, where the type has one, is the document itself."""
    names, has_raw = _fields(cls)  # type: ignore[arg-type]  # a class is hashable
    values = {name: converted[name] if name in converted else doc[name] for name in names}
    return cls(**values, **({"raw": doc} if has_raw else {}))


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, ...], bool]:
    """A result type's field names other than `raw`, and whether it has `raw` (looked up once per type: an
    answer of 10^3 partitions builds 10^3 results)."""
    names = tuple(f.name for f in fields(cls))
    return tuple(name for name in names if name != "raw"), "raw" in names


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def _time_or_none(text: str | None) -> dt.datetime | None:
    return None if text is None else _time(text)


def _assignment(doc: dict[str, list[Json]]) -> dict[str, list[TopicPartition]]:
    return {member: [TopicPartition.from_json(p) for p in held] for member, held in doc.items()}


class _HoldsAssignment:
    assignment: dict[str, list[TopicPartition]]  # consumer → its partitions

    @property
    def owner(self) -> dict[TopicPartition, str]:
        """Partition → the consumer it is assigned to."""
        return {tp: member for member, held in self.assignment.items() for tp in held}


@dataclass(frozen=True)
class ConsumerLoad:
    id: str
    load: float
    utilization: float
    partition_count: int


@dataclass(frozen=True)
class Move:
    """A partition that changes consumer: `from_` stops reading it, `to` starts."""

    partition: TopicPartition
    from_: str
    to: str
    rate: float

    @classmethod
    def from_json(cls, doc: Json) -> Move:
        return _build(cls, doc, partition=TopicPartition.from_json(doc), from_=doc["from"])


class DeltaCell(NamedTuple):
    row: int  # index into Delta.rows
    column: int  # index into Delta.columns
    change: int  # -1: the consumer stops reading the partition, +1: it starts


@dataclass(frozen=True)
class Delta:
    """The rebalance as a sparse consumers × partitions matrix; `matrix` is its dense form when asked for."""

    rows: list[str]
    columns: list[TopicPartition]
    cells: list[DeltaCell]
    matrix: list[list[int]] | None

    @classmethod
    def from_json(cls, doc: Json) -> Delta:
        columns = [TopicPartition.from_json(p) for p in doc["columns"]]
        cells = [DeltaCell(*cell) for cell in doc["cells"]]
        return _build(cls, doc, columns=columns, cells=cells, matrix=doc.get("matrix"))


@dataclass(frozen=True)
class OverloadedPartition:
    """A partition whose rate alone exceeds the capacity, and the consumer it went to anyway."""

    partition: TopicPartition
    rate: float
    consumer: str

    @classmethod
    def from_json(cls, doc: Json) -> OverloadedPartition:
        return _build(cls, doc, partition=TopicPartition.from_json(doc))


@dataclass(frozen=True)
class Assignment(_HoldsAssignment):
    """The answer of POST /v1/assign."""

    algorithm: str
    capacity: float
    assignment: dict[str, list[TopicPartition]]
    consumers: list[ConsumerLoad]
    moves: list[Move]
    delta: Delta
    rscore: float
    consumer_count: int
    lower_bound: int
    overloaded_partitions: list[OverloadedPartition]
    overloaded_members: list[str]
    recommended_consumers: int | None
    outputs: Json
    group: str | None
    version: int | None
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> Assignment:
        return _build(
            cls,
            doc,
            assignment=_assignment(doc["assignment"]),
            consumers=[_build(ConsumerLoad, c) for c in doc["consumers"]],
            moves=[Move.from_json(m) for m in doc["moves"]],
            delta=Delta.from_json(doc["delta"]),
            overloaded_partitions=[OverloadedPartition.from_json(p) for p in doc["overloaded_partitions"]],
        )


@dataclass(frozen=True)
class GroupState(_HoldsAssignment):
    """A group's stored assignment (GET /v1/groups/{group})."""

    group: str
    version: int
    algorithm: str
    capacity: float
    assignment: dict[str, list[TopicPartition]]
    updated_at: dt.datetime
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> GroupState:
        return _build(cls, doc, assignment=_assignment(doc["assignment"]), updated_at=_time(doc["updated_at"]))


@dataclass(frozen=True)
class HistoryEntry:
    """One stored version of a group's assignment (GET /v1/groups/{group}/history), newest first."""

    version: int
    algorithm: str
    rscore: float
    consumer_count: int
    moves_count: int
    updated_at: dt.datetime
    moved_rate: float | None  # None from a service that does not record it
    moves: list[Move] | None  # the largest moves of that rebalance
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> HistoryEntry:
        moves = doc.get("moves")
        return _build(
            cls,
            doc,
            updated_at=_time(doc["updated_at"]),
            moved_rate=doc.get("moved_rate"),
            moves=None if moves is None else [Move.from_json(m) for m in moves],
        )


@dataclass(frozen=True)
class StoredRates:
    """A group's latest measured rates (GET /v1/groups/{group}/rates)."""

    group: str
    partitions: list[PartitionRate]
    window_end: dt.datetime
    updated_at: dt.datetime
    raw: Json = field(repr=False, compare=False)

    @property
    def rates(self) -> dict[TopicPartition, float]:
        return {p.key: p.rate for p in self.partitions}

    @property
    def lags(self) -> dict[TopicPartition, float]:
        """The partitions whose lag was measured."""
        return {p.key: p.lag for p in self.partitions if p.lag is not None}

    @classmethod
    def from_json(cls, doc: Json) -> StoredRates:
        partitions = [PartitionRate.from_json(p) for p in doc["partitions"]]
        return _build(
            cls, doc, partitions=partitions, window_end=_time(doc["window_end"]), updated_at=_time(doc["updated_at"])
        )


@dataclass(frozen=True)
class RatesAck:
    """The answer of PUT /v1/groups/{group}/rates."""

    group: str
    partition_count: int
    window_end: dt.datetime
    updated_at: dt.datetime
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> RatesAck:
        return _build(cls, doc, window_end=_time(doc["window_end"]), updated_at=_time(doc["updated_at"]))


@dataclass(frozen=True)
class AlgorithmInfo:
    """An algorithm the service offers (GET /v1/algorithms)."""

    name: str
    description: str
    source: str
    params: Json
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> AlgorithmInfo:
        return _build(cls, doc)


@dataclass(frozen=True)
class LatencyFigures:
    """Percentiles of the simulated record latency, in seconds (None where no record was read)."""

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None


def _latency(run: Json) -> LatencyFigures | None:
    """A run's latency figures, present only when they were asked for."""
    latency = run.get("latency")
    return None if latency is None else _build(LatencyFigures, latency)


@dataclass(frozen=True)
class AlgorithmRun:
    """One algorithm replayed over an evaluation stream: per-iteration consumers and Rscore, their averages,
    the cumulative bytes moved (CBS) and, when asked for, the latency figures."""

    iterations: int
    consumers: list[int]
    rscore: list[float]
    avg_consumers: float
    avg_rscore: float
    cbs: float
    latency: LatencyFigures | None
    optimum_excess: float | None  # CBS against the exact optimum, when it was asked for
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> AlgorithmRun:
        return _build(cls, doc, latency=_latency(doc), optimum_excess=doc.get("optimum_excess"))


@dataclass(frozen=True)
class Optimum:
    """The exact algorithm's fewest consumers per measurement, its proven bounds, how many it proved optimal."""

    avg_consumers: float
    proven: int
    consumers: list[int]
    consumers_bound: list[int]


@dataclass(frozen=True)
class Evaluation:
    """The answer of POST /v1/evaluate: algorithm name → its run (and the optimum, when asked for)."""

    results: dict[str, AlgorithmRun]
    optimum: Optimum | None
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> Evaluation:
        optimum = doc.get("optimum")
        return _build(
            cls,
            doc,
            results={name: AlgorithmRun.from_json(run) for name, run in doc["results"].items()},
            optimum=None if optimum is None else _build(Optimum, optimum),
        )


@dataclass(frozen=True)
class GroupSummary:
    """A stored group in the listing (GET /v1/groups); None where the group has no assignment or no rates yet."""

    group: str
    version: int | None
    algorithm: str | None
    capacity: float | None
    consumers: int | None  # consumers of the last stored version
    rscore: float | None  # Rscore of the last stored version
    updated_at: dt.datetime | None
    rates_window_end: dt.datetime | None  # end of the latest stored rates window
    rates_age_s: float | None  # seconds since the latest rates were stored
    partition_count: int | None
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> GroupSummary:
        return _build(
            cls,
            doc,
            updated_at=_time_or_none(doc["updated_at"]),
            rates_window_end=_time_or_none(doc["rates_window_end"]),
        )


@dataclass(frozen=True)
class GroupList:
    """The answer of GET /v1/groups: the groups the token may read, in name order; `truncated` when more matched
    than the limit."""

    groups: list[GroupSummary]
    truncated: bool
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> GroupList:
        return _build(cls, doc, groups=[GroupSummary.from_json(g) for g in doc["groups"]])


@dataclass(frozen=True)
class RatesWindow:
    """One stored rates window of a group (GET /v1/groups/{group}/rates/history), oldest first."""

    window_end: dt.datetime
    updated_at: dt.datetime
    partitions: list[PartitionRate]
    raw: Json = field(repr=False, compare=False)

    @property
    def rates(self) -> dict[TopicPartition, float]:
        return {p.key: p.rate for p in self.partitions}

    @classmethod
    def from_json(cls, doc: Json) -> RatesWindow:
        return _build(
            cls,
            doc,
            window_end=_time(doc["window_end"]),
            updated_at=_time(doc["updated_at"]),
            partitions=[PartitionRate.from_json(p) for p in doc["partitions"]],
        )


@dataclass(frozen=True)
class ReplayRun:
    """One algorithm replayed over the group's stored windows: per-window consumers and Rscore, their averages,
    CBS, the rate moved × each window's duration (`moved_bytes`), the windows where a consumer holding 2+
    partitions is above capacity and, when asked for, the latency figures."""

    avg_consumers: float
    avg_rscore: float
    cbs: float
    consumers: list[int]
    rscore: list[float]
    moved_bytes: float
    overloaded_windows: int
    latency: LatencyFigures | None
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> ReplayRun:
        return _build(cls, doc, latency=_latency(doc))


@dataclass(frozen=True)
class Replay:
    """The answer of GET /v1/groups/{group}/replay: algorithm name → its run over the stored windows, replayed
    with the group's capacity, one iteration every `iteration_s` seconds (the median gap between windows)."""

    group: str
    capacity: float
    windows: int
    window_ends: list[dt.datetime]
    iteration_s: float
    results: dict[str, ReplayRun]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> Replay:
        return _build(
            cls,
            doc,
            window_ends=[_time(end) for end in doc["window_ends"]],
            results={name: ReplayRun.from_json(run) for name, run in doc["results"].items()},
        )


@dataclass(frozen=True)
class ScaleSignal:
    """The answer of GET /v1/groups/{group}/scale: `action` is up, down, reass (the same members, reassigned:
    trigger a rebalance) or none, with its `reason`; `needed` is the consumers it leads to (the group's own count
    unless up or down), `current` the members of the stored assignment."""

    group: str
    algorithm: str  # the algorithm that sized the group (bfd where the group's own cannot without members)
    capacity: float
    needed: int
    current: int
    lower_bound: int  # ⌈Σ rate / C⌉
    total_rate: float
    overloaded: list[str]  # members of the stored assignment above f_up × their capacity at these rates
    action: str
    reason: str
    rates_window_end: dt.datetime
    unowned: int  # partitions of the group's topics no member holds
    remove: list[str]  # on down: the members the smaller packing leaves out
    rscore: float | None  # of the proposed reassignment, when one was computed
    moves: int | None
    gain: float | None  # excess above f_up × capacity the proposal removes, in consumers' capacities
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> ScaleSignal:
        return _build(cls, doc, rates_window_end=_time(doc["rates_window_end"]))


@dataclass(frozen=True)
class PartitionPlacement:
    """A partition's replica list after the plan (preferred leader first) and before it."""

    partition: TopicPartition
    replicas: list[int]
    previous: list[int]

    @classmethod
    def from_json(cls, doc: Json) -> PartitionPlacement:
        return _build(cls, doc, partition=TopicPartition.from_json(doc))


@dataclass(frozen=True)
class ReplicaMove:
    """A replica copied from broker `from_` to broker `to`: `bytes` of data."""

    partition: TopicPartition
    from_: int
    to: int
    bytes: float

    @classmethod
    def from_json(cls, doc: Json) -> ReplicaMove:
        return _build(cls, doc, partition=TopicPartition.from_json(doc), from_=doc["from"])


@dataclass(frozen=True)
class BrokerUtilization:
    """A broker's disk and network use, leader throughput and replica count before and after the plan."""

    id: int
    rack: str | None
    disk_before: float
    disk_after: float
    network_before: float
    network_after: float
    leader_throughput_before: float
    leader_throughput_after: float
    replicas_before: int
    replicas_after: int


@dataclass(frozen=True)
class Peak:
    """The highest share of a broker's disk and of a broker's network in use."""

    disk: float
    network: float


@dataclass(frozen=True)
class ReassignmentPartition:
    partition: TopicPartition
    replicas: list[int]

    @classmethod
    def from_json(cls, doc: Json) -> ReassignmentPartition:
        return _build(cls, doc, partition=TopicPartition.from_json(doc))


@dataclass(frozen=True)
class Reassignment:
    """The partitions that change; `raw` is the file `kafka-reassign-partitions --execute
    --reassignment-json-file` reads."""

    version: int
    partitions: list[ReassignmentPartition]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> Reassignment:
        return _build(cls, doc, partitions=[ReassignmentPartition.from_json(p) for p in doc["partitions"]])


@dataclass(frozen=True)
class Placement:
    """The answer of POST /v1/placements: every partition's new replica list, the replica moves and bytes they
    copy, each broker's use before and after, the peaks, whether the solver proved the plan optimal (and the
    bounds it proved), and the reassignment plan."""

    solver: str
    objective: str
    partitions: list[PartitionPlacement]
    moves: list[ReplicaMove]
    bytes_moved: float
    brokers: list[BrokerUtilization]
    peak_before: Peak
    peak_after: Peak
    leaders_changed: int  # partitions whose preferred leader left and got a new one
    optimal: bool
    bounds: dict[str, float]  # lower bound per objective (bytes_moved, utilization, brokers)
    outputs: Json
    reassignment: Reassignment
    raw: Json = field(repr=False, compare=False)

    @property
    def replicas(self) -> dict[TopicPartition, list[int]]:
        """Partition → its brokers after the plan, preferred leader first."""
        return {p.partition: p.replicas for p in self.partitions}

    @classmethod
    def from_json(cls, doc: Json) -> Placement:
        return _build(
            cls,
            doc,
            partitions=[PartitionPlacement.from_json(p) for p in doc["partitions"]],
            moves=[ReplicaMove.from_json(m) for m in doc["moves"]],
            brokers=[_build(BrokerUtilization, b) for b in doc["brokers"]],
            peak_before=_build(Peak, doc["peak_before"]),
            peak_after=_build(Peak, doc["peak_after"]),
            reassignment=Reassignment.from_json(doc["reassignment"]),
        )
