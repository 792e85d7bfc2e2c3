"""The service's answers as typed values (field names as in openapi/openapi.json). Each is declared here once
and read by the one reader of `_wire` (its `from_json`), which follows the annotations; the contract test
(tests/clients/test_contract.py) checks them field by field. Each result keeps the JSON document it came from as
`.raw`, so a field a newer service adds is still reachable."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from groupfit_client._wire import Readable, TopicPartition

Json = dict[str, Any]


class PartitionRate(NamedTuple):
    """A partition's measured rate (same unit as the capacity) and, optionally, its lag and its racks (where a
    consumer reads it without crossing zones: its leader's rack, or its replicas' with fetch-from-follower)."""

    topic: str
    partition: int
    rate: float
    lag: float | None = None
    racks: list[str] | None = None

    @property
    def key(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_json(self) -> Json:
        doc: Json = {"topic": self.topic, "partition": self.partition, "rate": self.rate}
        if self.lag is not None:
            doc["lag"] = self.lag
        if self.racks is not None:
            doc["racks"] = list(self.racks)
        return doc


class _HoldsAssignment(Readable):
    assignment: dict[str, list[TopicPartition]]  # consumer → its partitions

    @property
    def owner(self) -> dict[TopicPartition, str]:
        """Partition → the consumer it is assigned to."""
        return {tp: member for member, held in self.assignment.items() for tp in held}


@dataclass(frozen=True)
class ConsumerLoad(Readable):
    id: str
    load: float
    utilization: float
    partition_count: int
    rack: str | None = None  # zone-aware answers: the rack it runs in or should be started in (None: not known)
    cross_zone_rate: float | None = None  # zone-aware answers: the rate it reads across zones


@dataclass(frozen=True)
class Move(Readable):
    """A partition that changes consumer: `from_` stops reading it, `to` starts."""

    partition: TopicPartition
    from_: str
    to: str
    rate: float


class DeltaCell(NamedTuple):
    row: int  # index into Delta.rows
    column: int  # index into Delta.columns
    change: int  # -1: the consumer stops reading the partition, +1: it starts


@dataclass(frozen=True)
class Delta(Readable):
    """The rebalance as a sparse consumers × partitions matrix; `matrix` is its dense form when asked for."""

    rows: list[str]
    columns: list[TopicPartition]
    cells: list[DeltaCell]
    matrix: list[list[int]] | None


@dataclass(frozen=True)
class OverloadedPartition(Readable):
    """A partition whose rate alone exceeds the capacity, and the consumer it went to anyway."""

    partition: TopicPartition
    rate: float
    consumer: str


@dataclass(frozen=True)
class Assignment(_HoldsAssignment):
    """The answer of POST /v1/assign."""

    algorithm: str
    capacity: float
    assignment: dict[str, list[TopicPartition]]
    consumers: list[ConsumerLoad]
    moves: list[Move]
    delta: Delta | None  # None when asked for without it (delta="none")
    rscore: float
    consumer_count: int
    lower_bound: int
    overloaded_partitions: list[OverloadedPartition]
    overloaded_members: list[str]
    recommended_consumers: int | None
    outputs: Json
    cross_zone_rate: float | None  # zone-aware answers: the rate read across zones
    group: str | None
    version: int | None
    raw: Json = field(repr=False, compare=False)


@dataclass(frozen=True)
class GroupState(_HoldsAssignment):
    """A group's stored assignment (GET /v1/groups/{group})."""

    group: str
    version: int
    algorithm: str
    capacity: float
    assignment: dict[str, list[TopicPartition]]
    updated_at: dt.datetime
    racks: dict[str, str] | None  # the rack each consumer runs in, as the last zone-aware version named them
    loads: dict[str, float] | None  # each consumer's load as this version's answer gave it (None: not kept)
    raw: Json = field(repr=False, compare=False)


@dataclass(frozen=True)
class HistoryEntry(Readable):
    """One stored version of a group's assignment (GET /v1/groups/{group}/history), newest first."""

    version: int
    algorithm: str
    rscore: float
    consumer_count: int
    moves_count: int
    updated_at: dt.datetime
    moved_rate: float | None  # None from a service that does not record it
    moves: list[Move] | None  # the largest moves of that rebalance
    cross_zone_rate: float | None  # zone-aware versions: the rate read across zones
    raw: Json = field(repr=False, compare=False)


@dataclass(frozen=True)
class StoredRates(Readable):
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


@dataclass(frozen=True)
class RatesAck(Readable):
    """The answer of PUT /v1/groups/{group}/rates."""

    group: str
    partition_count: int
    window_end: dt.datetime
    updated_at: dt.datetime
    raw: Json = field(repr=False, compare=False)


@dataclass(frozen=True)
class AlgorithmInfo(Readable):
    """An algorithm the service offers (GET /v1/algorithms)."""

    name: str
    description: str
    source: str
    params: Json
    paper: int | None
    """Its place among the twelve algorithms of Landau et al. §VI-A (1 = nf … 12 = mbfp); None: not one."""
    cheap: bool
    """Computed on the service's event loop when small (n log n work, no search budget)."""
    compiled: bool
    """The service computes it with its compiled core."""
    raw: Json = field(repr=False, compare=False)


@dataclass(frozen=True)
class LatencyFigures(Readable):
    """Percentiles of the simulated record latency, in seconds (None where no record was read)."""

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None


@dataclass(frozen=True)
class AlgorithmRun(Readable):
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


@dataclass(frozen=True)
class Optimum(Readable):
    """The exact algorithm's fewest consumers per measurement, its proven bounds, how many it proved optimal."""

    avg_consumers: float
    proven: int
    consumers: list[int]
    consumers_bound: list[int]


@dataclass(frozen=True)
class Evaluation(Readable):
    """The answer of POST /v1/evaluate: algorithm name → its run (and the optimum, when asked for)."""

    results: dict[str, AlgorithmRun]
    optimum: Optimum | None
    raw: Json = field(repr=False, compare=False)


@dataclass(frozen=True)
class GroupSummary(Readable):
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


@dataclass(frozen=True)
class GroupList(Readable):
    """One page of GET /v1/groups: the groups the token may read, in name order; `next` the cursor of the next
    page (pass it as `after`; None at the end), `truncated` whether there is one."""

    groups: list[GroupSummary]
    truncated: bool
    next: str | None  # None at the end (or from a service that does not page)
    raw: Json = field(repr=False, compare=False)


@dataclass(frozen=True)
class RatesWindow(Readable):
    """One stored rates window of a group (GET /v1/groups/{group}/rates/history), oldest first."""

    window_end: dt.datetime
    updated_at: dt.datetime
    partitions: list[PartitionRate]
    raw: Json = field(repr=False, compare=False)

    @property
    def rates(self) -> dict[TopicPartition, float]:
        return {p.key: p.rate for p in self.partitions}


@dataclass(frozen=True)
class ReplayRun(Readable):
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


@dataclass(frozen=True)
class Replay(Readable):
    """The answer of GET /v1/groups/{group}/replay: algorithm name → its run over the stored windows, replayed
    with the group's capacity, one iteration every `iteration_s` seconds (the median gap between windows)."""

    group: str
    capacity: float
    windows: int
    window_ends: list[dt.datetime]
    iteration_s: float
    results: dict[str, ReplayRun]
    raw: Json = field(repr=False, compare=False)


@dataclass(frozen=True)
class ScaleSignal(Readable):
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


@dataclass(frozen=True)
class PartitionPlacement(Readable):
    """A partition's replica list after the plan (preferred leader first) and before it."""

    partition: TopicPartition
    replicas: list[int]
    previous: list[int]


@dataclass(frozen=True)
class ReplicaMove(Readable):
    """A replica copied from broker `from_` to broker `to`: `bytes` of data."""

    partition: TopicPartition
    from_: int
    to: int
    bytes: int


@dataclass(frozen=True)
class BrokerUtilization(Readable):
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
class Peak(Readable):
    """The highest share of a broker's disk and of a broker's network in use."""

    disk: float
    network: float


@dataclass(frozen=True)
class ReassignmentPartition(Readable):
    partition: TopicPartition
    replicas: list[int]


@dataclass(frozen=True)
class Reassignment(Readable):
    """The partitions that change; `raw` is the file `kafka-reassign-partitions --execute
    --reassignment-json-file` reads."""

    version: int
    partitions: list[ReassignmentPartition]
    raw: Json = field(repr=False, compare=False)


@dataclass(frozen=True)
class Placement(Readable):
    """The answer of POST /v1/placements: every partition's new replica list, the replica moves and bytes they
    copy, each broker's use before and after, the peaks, whether the solver proved the plan optimal (and the
    bounds it proved), and the reassignment plan."""

    solver: str
    objective: str
    partitions: list[PartitionPlacement]
    moves: list[ReplicaMove]
    bytes_moved: int
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
