"""What an operator reads: the groups listing, a group's rates history replayed through algorithms, and the
scaling signal."""

from __future__ import annotations

from itertools import starmap
from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from app.codec.evaluate import LatencyFigures
from app.codec.wire import PartitionRate


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
    algorithm: str
    capacity: float
    needed: Annotated[int, Meta(description="consumers the group's algorithm uses for the stored rates")]
    current: Annotated[int, Meta(description="consumers holding partitions in the stored assignment")]
    lower_bound: Annotated[int, Meta(description="⌈Σ rate / C⌉")]
    total_rate: float
    overloaded: Annotated[list[str], Meta(description="consumers of the stored assignment above C at these rates")]
    action: Annotated[str, Meta(description="up, down or none: needed against current")]
    reason: str
    rates_window_end: str
