"""The API's bodies as msgspec Structs: requests are decoded with them (10^5 partitions in tens of
milliseconds, wrong types rejected in C) and every body's JSON schema in openapi/openapi.json is
generated from them. Answers are built by app.core as plain dicts and must validate against these
(the API tests check it)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

GroupName = Annotated[str, Meta(pattern=r"^[!-.0-~]{1,255}$", description="consumer group id (no spaces or '/')")]
ConsumerId = Annotated[str, Meta(min_length=1, max_length=255)]
Topic = Annotated[str, Meta(min_length=1, max_length=255)]
PartitionNumber = Annotated[int, Meta(ge=0, le=2**31 - 1)]


# gc=False: these hold only strings and numbers (no cycles possible); 10^5 of them decoded per large
# request would otherwise be tracked by the cyclic collector (~25% of the decode time).
class PartitionRef(Struct, forbid_unknown_fields=True, gc=False):
    topic: Topic
    partition: PartitionNumber


class PartitionRate(Struct, forbid_unknown_fields=True, gc=False):
    topic: Topic
    partition: PartitionNumber
    rate: Annotated[float, Meta(description="observed rate, e.g. bytes/s; same unit as capacity")]
    lag: Annotated[float | None, Meta(description="records or bytes behind, as the caller counts")] = None


class AssignRequest(Struct, forbid_unknown_fields=True, kw_only=True):
    algorithm: Annotated[str, Meta(description="a name from GET /v1/algorithms", examples=["mwf"])]
    partitions: list[PartitionRate] | None = None
    capacity: Annotated[float | None, Meta(description="most rate one consumer may be given (C)")] = None
    consumer_throughput: Annotated[
        float | None, Meta(description="real consumer throughput C̄; C = C̄·(iteration_s − rebalance_s)/iteration_s")
    ] = None
    iteration_s: float = 30.0
    rebalance_s: float = 5.0
    previous: dict[ConsumerId, list[PartitionRef]] | None = None
    members: list[ConsumerId] | None = None
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    group: GroupName | None = None
    expected_version: Annotated[int, Meta(ge=0)] | None = None
    dry_run: bool = False


class ConsumerLoad(Struct):
    id: str
    load: float
    utilization: float
    partition_count: int


class Move(Struct):
    topic: str
    partition: int
    from_: str = msgspec.field(name="from")
    to: str
    rate: float


class Delta(Struct):
    rows: list[str]
    columns: list[PartitionRef]
    cells: list[Annotated[list[int], Meta(min_length=3, max_length=3, description="[row, column, -1 stop | +1 start]")]]
    matrix: list[list[int]] | UnsetType = UNSET


class OverloadedPartition(Struct):
    topic: str
    partition: int
    rate: float
    consumer: str


class AssignResponse(Struct):
    algorithm: str
    capacity: float
    assignment: dict[str, list[PartitionRef]]
    consumers: list[ConsumerLoad]
    moves: list[Move]
    delta: Delta
    rscore: float
    consumer_count: int
    lower_bound: int
    overloaded_partitions: list[OverloadedPartition]
    overloaded_members: list[str]
    recommended_consumers: int | None
    outputs: dict[str, Any]
    group: str | None
    version: int | None


class ErrorDetail(Struct):
    code: Annotated[str, Meta(description="stable, machine-readable")]
    message: Annotated[str, Meta(description="what went wrong and what to do")]
    details: Any = None


class ErrorResponse(Struct):
    error: ErrorDetail


class AlgorithmInfo(Struct):
    name: str
    description: str
    source: str
    params: dict[str, Any]


class AlgorithmList(Struct):
    algorithms: list[AlgorithmInfo]


class GroupState(Struct):
    group: str
    version: int
    algorithm: str
    capacity: float
    assignment: dict[str, list[PartitionRef]]
    updated_at: str


class HistoryEntry(Struct):
    version: int
    algorithm: str
    rscore: float
    consumer_count: int
    moves_count: int
    updated_at: str


class GroupHistory(Struct):
    group: str
    versions: list[HistoryEntry]


class RatesUpdate(Struct, forbid_unknown_fields=True):
    partitions: list[PartitionRate]
    window_end: Annotated[str, Meta(description="end of the measurement window, RFC 3339")]


class StoredRates(Struct):
    group: str
    partitions: list[PartitionRate]
    window_end: str
    updated_at: str


class RatesAck(Struct):
    group: str
    partition_count: int
    window_end: str
    updated_at: str


Measurement = dict[Topic, dict[Annotated[str, Meta(pattern=r"^[0-9]{1,10}$")], float]]


class LatencyOptions(Struct, forbid_unknown_fields=True, kw_only=True):
    consumer_throughput: Annotated[float, Meta(gt=0, description="C̄, a consumer's real throughput")] = 133.0
    iteration_s: Annotated[float, Meta(gt=0)] = 30.0
    rebalance_s: Annotated[float, Meta(ge=0)] = 5.0


class EvaluateRequest(Struct, forbid_unknown_fields=True, kw_only=True):
    stream: Annotated[list[Measurement], Meta(description="measurements, each topic → {partition: rate}")]
    capacity: Annotated[float, Meta(gt=0)]
    algorithms: Annotated[
        list[str], Meta(description="registered names and kd_<N> (Kafka's equal-count, N consumers)")
    ] = msgspec.field(
        default_factory=lambda: ["nf", "ff", "bf", "wf", "nfd", "ffd", "bfd", "wfd", "mwf", "mbf", "mwfp", "mbfp"]
    )
    latency: Annotated[LatencyOptions | None, Meta(description="add latency percentiles (§VI-C)")] = None


class LatencyFigures(Struct):
    """Seconds; null when unbounded (the model never reads some bytes: a consumer keeps ≥ C̄ and starts more)."""

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None


class AlgorithmRun(Struct):
    avg_consumers: float
    avg_rscore: float
    cbs: float
    iterations: int
    consumers: list[int]
    rscore: list[float]
    latency: LatencyFigures | UnsetType = UNSET


class EvaluateResponse(Struct):
    results: dict[str, AlgorithmRun]


class Health(Struct):
    status: str


ALL_SCHEMAS = (
    AssignRequest,
    AssignResponse,
    ErrorResponse,
    AlgorithmList,
    GroupState,
    GroupHistory,
    RatesUpdate,
    StoredRates,
    RatesAck,
    EvaluateRequest,
    EvaluateResponse,
    Health,
)
