"""The stored state of a group as the API shows it, the rates the pipeline writes, and the registry listing."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta, Struct

from app.codec.assign import Move
from app.codec.wire import PartitionRate, PartitionRef

HISTORY_MOVES = 100
"""Moves kept in a history entry: the console shows the last rebalance's; the count is always whole."""


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
    moved_rate: Annotated[float | None, Meta(description="Σ rate of the partitions that moved")] = None
    moves: Annotated[
        list[Move] | None, Meta(description=f"the partitions that moved (the first {HISTORY_MOVES} by rate)")
    ] = None


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


class Health(Struct):
    status: str
