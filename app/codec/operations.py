"""What an operator reads: the groups listing, a group's rates history replayed through algorithms, and the
scaling decision with what its caller may set."""

from __future__ import annotations

from itertools import starmap
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from app.codec.evaluate import LatencyFigures
from app.codec.wire import PartitionRate
from app.core.decision import Guards
from app.core.errors import AssignmentError, ErrorCode


class GroupSummary(Struct):
    group: str
    version: int | None
    algorithm: str | None
    capacity: float | None
    consumers: Annotated[int | None, Meta(description="consumers of the last stored version")]
    rscore: Annotated[float | None, Meta(description="Rscore of the last stored version")]
    updated_at: str | None
    rates_window_end: Annotated[str | None, Meta(description="end of the latest stored rates window")]
    rates_age_s: Annotated[float | None, Meta(description="seconds since the latest rates were stored")]
    partition_count: int | None


class GroupList(Struct):
    groups: list[GroupSummary]
    truncated: Annotated[bool, Meta(description="more groups may follow: ask for them with `after` = `next`")]
    next: Annotated[
        str | None,
        Meta(description="the cursor of the next page (the last group name this page looked at); null: no more"),
    ] = None


class ReplayRun(Struct):
    avg_consumers: float
    avg_rscore: float
    cbs: float
    consumers: list[int]
    rscore: list[float]
    moved_bytes: Annotated[float, Meta(description="Σ over windows of the rate moved × the window's duration")]
    overloaded_windows: Annotated[int, Meta(description="windows where a consumer holding 2+ partitions is above C")]
    latency: LatencyFigures | UnsetType = UNSET


class ReplayResponse(Struct):
    group: str
    capacity: float
    windows: int
    window_ends: list[str]
    iteration_s: Annotated[float, Meta(description="median time between stored windows, the replay's iteration")]
    results: dict[str, ReplayRun]


class RatesWindow(Struct):
    window_end: str
    updated_at: str
    partitions: list[PartitionRate]


class RatesHistory(Struct):
    group: str
    windows: list[RatesWindow]


class StoredWindow(Struct):
    """A window of the rates history as the store keeps it: partitions as [topic, partition, rate, lag]."""

    window_end: str
    updated_at: str
    partitions: list[tuple[str, int, float, float | None]]


_STORED_WINDOW = msgspec.json.Decoder(StoredWindow)


def stored_windows(windows: list[bytes]) -> list[StoredWindow]:
    return [_STORED_WINDOW.decode(window) for window in windows]


def rates_history(group: str, windows: list[bytes]) -> RatesHistory:
    """The answer of GET …/rates/history from the windows as stored, oldest first."""
    return RatesHistory(
        group,
        [
            RatesWindow(w.window_end, w.updated_at, list(starmap(PartitionRate, w.partitions)))
            for w in stored_windows(windows)
        ],
    )


class ScaleSignal(Struct):
    group: str
    algorithm: Annotated[str, Meta(description="the algorithm that sized the group (bfd where its own cannot)")]
    capacity: float
    needed: Annotated[
        int, Meta(description="consumers the action leads to: more on up, fewer on down, else the group's own count")
    ]
    current: Annotated[int, Meta(description="members of the stored assignment (those holding nothing included)")]
    lower_bound: Annotated[int, Meta(description="⌈Σ rate / C⌉")]
    total_rate: float
    overloaded: Annotated[
        list[str], Meta(description="members of the stored assignment above f_up × their capacity at these rates")
    ]
    action: Annotated[
        str,
        Meta(
            description="up, down, reass (same members, reassigned: trigger a rebalance) or none",
            examples=["up", "down", "reass", "none"],
        ),
    ]
    reason: str
    rates_window_end: str
    unowned: Annotated[int, Meta(description="partitions of the group's topics that no member holds")]
    remove: Annotated[
        list[str], Meta(description="on down: the members the smaller packing leaves out (stop these first)")
    ]
    rscore: Annotated[
        float | None, Meta(description="Rscore of the proposed reassignment (null when none was computed)")
    ]
    moves: Annotated[int | None, Meta(description="partitions the proposed reassignment moves")]
    gain: Annotated[
        float | None,
        Meta(description="excess above f_up × capacity the proposal removes, in consumers' capacities"),
    ]


class ScaleQuery(Struct, frozen=True, kw_only=True):
    """What a caller of GET /v1/groups/{group}/scale may set (app/core/decision.py says what each does)."""

    algorithm: str | None = None
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    member_capacities: dict[str, float] = msgspec.field(default_factory=dict)
    guards: Guards = Guards()


def scale_query(params: str | None, member_capacities: str | None, algorithm: str | None, guards: Guards) -> ScaleQuery:
    """The query of GET …/scale: `params` and `member_capacities` are JSON objects in their query parameters."""
    return ScaleQuery(
        algorithm=algorithm,
        params=_json_object("params", params, dict[str, Any], '{"mu": 200, "w_sla": 0.5}'),
        member_capacities=_json_object("member_capacities", member_capacities, dict[str, float], '{"c1": 200}'),
        guards=guards,
    )


def _json_object(name: str, text: str | None, kind: Any, example: str) -> Any:
    if text is None:
        return {}
    try:
        return msgspec.json.decode(text, type=kind)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise AssignmentError(
            ErrorCode.INVALID_PARAMETER, f"{name} must be a JSON object such as {example} ({exc})."
        ) from None
