"""Every call of the groupfit API (v1) described once, as a `Call`: method, path (every segment quoted), query,
headers, body, whether repeating it is safe, and how to read the answer into a typed result. The sync and
async clients send these descriptions and differ only in how they send and wait, as httpx's own Client and
AsyncClient share one request-building base.

Retries: connection errors and 503 are retried with exponential backoff, only for calls that are safe to
repeat: reads, PUT of rates, DELETE, evaluation, placement, and POST /v1/assign when it stores nothing (no group, or a
dry run) or carries an Idempotency-Key. Field names are those of openapi/openapi.json (a test checks them).
"""

from __future__ import annotations

import datetime as dt
import json
import typing
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from groupfit_client._wire import read
from groupfit_client.errors import GroupfitError
from groupfit_client.results import (
    AlgorithmInfo,
    Assignment,
    Evaluation,
    GroupList,
    GroupState,
    HistoryEntry,
    Json,
    PartitionRate,
    Placement,
    RatesAck,
    RatesWindow,
    Replay,
    ScaleSignal,
    StoredRates,
    TopicPartition,
)

T = TypeVar("T")
Outcome = httpx.Response | httpx.TransportError
RETRYABLE_STATUS = frozenset({503})
DeltaForm = Literal["sparse", "dense", "none"]
JSON_HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request to the service and how to read its answer."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]  # the answer as a typed value; raises GroupfitError on an error answer
    params: Mapping[str, str | int | float] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    json: Json | None = None
    repeatable: bool = True  # sending it twice is safe: retried on connection errors and 503
    timeout: float | None = None  # seconds for this call; None: the client's timeout
    unreachable: Callable[[httpx.TransportError], T] | None = None  # the answer when the service cannot be reached

    def request(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        timeout = httpx.USE_CLIENT_DEFAULT if self.timeout is None else self.timeout
        if self.json is None:
            return http.build_request(self.method, self.path, params=self.params, headers=self.headers, timeout=timeout)
        # msgspec, not httpx's json.dumps: a body of 10^3 partitions encodes 4× faster
        return http.build_request(
            self.method,
            self.path,
            params=self.params,
            headers={**JSON_HEADERS, **self.headers},
            content=msgspec.json.encode(self.json),
            timeout=timeout,
        )

    def result(self, outcome: Outcome) -> T:
        """The final outcome as this call's result: the answer read, or a connection error raised (or answered)."""
        if isinstance(outcome, httpx.Response):
            return self.read(outcome)
        if self.unreachable is None:
            raise outcome
        return self.unreachable(outcome)


@dataclass(frozen=True)
class RetryPolicy:
    retries: int  # attempts after the first, for calls safe to repeat
    backoff_s: float  # wait before the first retry; doubled before each next one

    def delay(self, call: Call[Any], outcome: Outcome, attempt: int) -> float | None:
        """Seconds to wait before sending `call` again after `outcome` of attempt `attempt` (0 first), or None
        when the outcome is final."""
        transient = not isinstance(outcome, httpx.Response) or outcome.status_code in RETRYABLE_STATUS
        if not (transient and call.repeatable and attempt < self.retries):
            return None
        return self.backoff_s * 2**attempt


def path(*segments: str) -> str:
    """An absolute path from its segments, each percent-encoded whole ('/', '#', '?' and '%' too), so a group
    name is always exactly one segment; a name of dots is encoded too, since URL normalisation drops '.' and
    '..' segments."""
    quoted = [quote(segment, safe="") for segment in segments]
    return "".join("/" + (q.replace(".", "%2E") if q in (".", "..") else q) for q in quoted)


def raise_for_error(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise GroupfitError.from_response(response)


@dataclass(frozen=True)
class Answer(Generic[T]):
    """Reads a JSON answer as `type` (a result type, or a list of them), or, where the result is one property of
    the answer's document, that property (`field`); raises GroupfitError on an error answer."""

    type: type[T]
    field: str | None = None

    def __call__(self, response: httpx.Response) -> T:
        raise_for_error(response)
        doc = msgspec.json.decode(response.content)
        return typing.cast(T, read(self.type, doc if self.field is None else doc[self.field]))


def _partition_json(value: tuple[Any, ...] | Mapping[str, Any]) -> Json:
    """A partition's wire form, from a TopicPartition or PartitionRate (or a plain tuple of their fields) or
    from its JSON form."""
    if isinstance(value, PartitionRate | TopicPartition):
        return value.to_json()
    if isinstance(value, tuple):
        return (PartitionRate(*value) if len(value) > 2 else TopicPartition(*value)).to_json()
    return value if isinstance(value, dict) else dict(value)  # sent as it is, never changed


def _assign_json(request: Mapping[str, Any]) -> Json:
    doc = dict(request)
    if doc.get("partitions") is not None and not isinstance(doc["partitions"], msgspec.Raw):  # Raw: encoded already
        doc["partitions"] = [_partition_json(p) for p in doc["partitions"]]
    if doc.get("previous") is not None:
        doc["previous"] = {member: [_partition_json(p) for p in held] for member, held in doc["previous"].items()}
    return doc


def _rfc3339(value: str | dt.datetime) -> str:
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError(f"window_end {value!r} has no time zone; give an aware datetime (e.g. in UTC)")
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


# -- the calls -------------------------------------------------------------------------------------


def assign(
    request: Mapping[str, Any],
    *,
    delta: DeltaForm = "sparse",
    dense: bool = False,
    idempotency_key: str | None = None,
    timeout: float | None = None,
) -> Call[Assignment]:
    """POST /v1/assign: an assignment for `request`, an AssignRequest document (its `partitions` and
    `previous` may hold PartitionRate and TopicPartition values — a partition given as a TopicPartition takes its
    group's stored rate and lag; `partitions` may also be a msgspec.Raw of their JSON). `delta`: the delta's form — "dense" adds its matrix, "none" leaves it out (the answer's `delta` is then
    None; the moves tell the rebalance). `dense=True` is the former spelling of `delta="dense"` (deprecated). With a
    `group` (and not a dry run) the answer is stored as the group's next version, so the call is retried only with
    an `idempotency_key` (assign_idempotent makes one)."""
    if dense:
        warnings.warn('assign(dense=True) is deprecated; use delta="dense"', DeprecationWarning, stacklevel=3)
        delta = "dense"
    stores = bool(request.get("group")) and not request.get("dry_run", False)
    return Call(
        "POST",
        path("v1", "assign"),
        Answer(Assignment),
        params={} if delta == "sparse" else {"delta": delta},
        headers={"Idempotency-Key": idempotency_key} if idempotency_key else {},
        json=_assign_json(request),
        repeatable=not stores or idempotency_key is not None,
        timeout=timeout,
    )


def assign_idempotent(
    request: Mapping[str, Any], *, delta: DeltaForm = "sparse", dense: bool = False, timeout: float | None = None
) -> Call[Assignment]:
    """POST /v1/assign with a fresh Idempotency-Key: retried safely, stored once."""
    return assign(request, delta=delta, dense=dense, idempotency_key=uuid.uuid4().hex, timeout=timeout)


def algorithms(*, timeout: float | None = None) -> Call[list[AlgorithmInfo]]:
    """GET /v1/algorithms: the algorithms the service offers."""
    read = Answer(list[AlgorithmInfo], "algorithms")
    return Call("GET", path("v1", "algorithms"), read, timeout=timeout)


def group(group: str, *, timeout: float | None = None) -> Call[GroupState]:
    """GET /v1/groups/{group}: the group's stored assignment (GroupfitError group_not_found if none)."""
    return Call("GET", path("v1", "groups", group), Answer(GroupState), timeout=timeout)


def history(group: str, limit: int = 100, *, timeout: float | None = None) -> Call[list[HistoryEntry]]:
    """GET /v1/groups/{group}/history: the group's last `limit` versions, newest first."""
    read = Answer(list[HistoryEntry], "versions")  # the group asked for is left out
    return Call("GET", path("v1", "groups", group, "history"), read, params={"limit": limit}, timeout=timeout)


def delete_group(group: str, *, timeout: float | None = None) -> Call[None]:
    """DELETE /v1/groups/{group}: forget the group's assignment, history and rates."""
    return Call("DELETE", path("v1", "groups", group), raise_for_error, timeout=timeout)


def put_rates(
    group: str,
    partitions: Iterable[tuple[Any, ...] | Mapping[str, Any]],
    window_end: str | dt.datetime,
    *,
    timeout: float | None = None,
) -> Call[RatesAck]:
    """PUT /v1/groups/{group}/rates: the group's rates measured over a window ending at `window_end` (RFC 3339
    text or an aware datetime); each partition a PartitionRate or its JSON form."""
    body = {
        "partitions": [_partition_json(p) for p in partitions],
        "window_end": _rfc3339(window_end),
    }
    return Call("PUT", path("v1", "groups", group, "rates"), Answer(RatesAck), json=body, timeout=timeout)


def rates(group: str, *, timeout: float | None = None) -> Call[StoredRates]:
    """GET /v1/groups/{group}/rates: the group's latest stored rates (GroupfitError group_not_found if none)."""
    return Call("GET", path("v1", "groups", group, "rates"), Answer(StoredRates), timeout=timeout)


def evaluate(
    stream: list[Mapping[str, Mapping[str, float]]],
    capacity: float,
    algorithms: list[str],
    latency: Mapping[str, float] | None = None,
    optimum: Mapping[str, int] | None = None,
    *,
    timeout: float | None = None,
) -> Call[Evaluation]:
    """POST /v1/evaluate: replay `stream` (measurements, each topic → {partition: rate}) through `algorithms`
    at `capacity`; `latency` (LatencyOptions) adds simulated latency figures, `optimum` (OptimumOptions) the
    exact algorithm's fewest consumers per measurement."""
    body: Json = {"stream": stream, "capacity": capacity, "algorithms": algorithms}
    if latency is not None:
        body["latency"] = dict(latency)
    if optimum is not None:
        body["optimum"] = dict(optimum)
    return Call("POST", path("v1", "evaluate"), Answer(Evaluation), json=body, timeout=timeout)


def groups(contains: str = "", limit: int = 1000, after: str = "", *, timeout: float | None = None) -> Call[GroupList]:
    """GET /v1/groups: one page of the stored groups the token may read whose name contains `contains`, in name
    order, at most `limit` (at most 1000) after the cursor `after` (the `next` of the page before; "" first)."""
    params: dict[str, str | int | float] = {"contains": contains, "limit": limit, "after": after}
    return Call("GET", path("v1", "groups"), Answer(GroupList), params=params, timeout=timeout)


def scale(
    group: str,
    *,
    algorithm: str | None = None,
    params: Mapping[str, Any] | None = None,
    member_capacities: Mapping[str, float] | None = None,
    f_up: float | None = None,
    f_down: float | None = None,
    min_gain: float | None = None,
    max_rscore: float | None = None,
    max_moves: int | None = None,
    min_interval_s: float | None = None,
    timeout: float | None = None,
) -> Call[ScaleSignal]:
    """GET /v1/groups/{group}/scale: what the group needs for its stored rates — `action` up, down, reass (the
    same members, reassigned) or none, with its reason — by `algorithm` (default: the group's own) with its
    `params`; `member_capacities` for members of their own size; up when packing into f_up·C needs more
    consumers, down when packing into f_down·C still needs fewer; a reassignment must remove `min_gain` of
    excess, spend at most `max_rscore` / `max_moves` and wait `min_interval_s` after the stored assignment.
    Unset arguments take the service's defaults (GroupfitError group_not_found without an assignment, no_rates
    without rates)."""
    query: dict[str, str | int | float] = {
        name: value
        for name, value in (
            ("algorithm", algorithm),
            ("f_up", f_up),
            ("f_down", f_down),
            ("min_gain", min_gain),
            ("max_rscore", max_rscore),
            ("max_moves", max_moves),
            ("min_interval_s", min_interval_s),
        )
        if value is not None
    }
    for name, document in (("params", params), ("member_capacities", member_capacities)):
        if document is not None:
            query[name] = json.dumps(dict(document), separators=(",", ":"))
    return Call("GET", path("v1", "groups", group, "scale"), Answer(ScaleSignal), params=query, timeout=timeout)


def rates_history(group: str, limit: int = 1000, *, timeout: float | None = None) -> Call[list[RatesWindow]]:
    """GET /v1/groups/{group}/rates/history: the group's newest `limit` stored rates windows, oldest first
    (GroupfitError group_not_found if none)."""
    read = Answer(list[RatesWindow], "windows")  # the group asked for is left out
    return Call("GET", path("v1", "groups", group, "rates", "history"), read, params={"limit": limit}, timeout=timeout)


def replay(
    group: str,
    algorithms: Iterable[str] = ("mwf", "bfd"),
    windows: int = 200,
    *,
    latency: bool = True,
    consumer_throughput: float | None = None,
    rebalance_s: float = 5.0,
    timeout: float | None = None,
) -> Call[Replay]:
    """GET /v1/groups/{group}/replay: the group's newest `windows` stored rates windows replayed through
    `algorithms` with its capacity; `latency` adds the latency figures, with `consumer_throughput` (C̄; default
    1.33 × the capacity) and `rebalance_s` (each rebalance's pause) as the latency model's parameters."""
    params: dict[str, str | int | float] = {
        "algorithms": ",".join(algorithms),
        "windows": windows,
        "latency": "true" if latency else "false",
        "rebalance_s": rebalance_s,
    }
    if consumer_throughput is not None:
        params["consumer_throughput"] = consumer_throughput
    return Call("GET", path("v1", "groups", group, "replay"), Answer(Replay), params=params, timeout=timeout)


def place_replicas(request: Mapping[str, Any], *, timeout: float | None = None) -> Call[Placement]:
    """POST /v1/placements: a replica placement for `request`, a PlacementRequest document (brokers, topics,
    partitions with their current replicas, solver, options); needs a token for the cluster (write, no `groups`
    list). Stateless, so retried like a read; the exact solver may take options.time_limit_ms, so give a
    `timeout` above it."""
    return Call("POST", path("v1", "placements"), Answer(Placement), json=dict(request), timeout=timeout)


def healthy(*, timeout: float | None = None) -> Call[bool]:
    """GET /readyz: whether the service is ready now (False when it cannot be reached); asked once, never
    retried."""
    return Call(
        "GET",
        path("readyz"),
        lambda response: response.status_code == 200,
        repeatable=False,
        timeout=timeout,
        unreachable=lambda error: False,
    )
