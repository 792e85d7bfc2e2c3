"""The service's answers as typed values (field names as in openapi/openapi.json). Each result keeps the JSON
document it came from as `.raw`, so a field a newer service adds is still reachable."""

from __future__ import annotations

import datetime as dt
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
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    values = {name: converted[name] if name in converted else doc[name] for name in names if name != "raw"}
    return cls(**values, **({"raw": doc} if "raw" in names else {}))


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


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
        latency = doc.get("latency")
        return _build(
            cls,
            doc,
            latency=None if latency is None else _build(LatencyFigures, latency),
            optimum_excess=doc.get("optimum_excess"),
        )


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
