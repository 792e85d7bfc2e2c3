"""The stored state of a group as the API shows it, the rates the pipeline writes, and the registry listing."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import UNSET, Meta, Struct, UnsetType

from app.codec.assign import Move
from app.codec.wire import PartitionRate, PartitionRef
from app.core.algorithm import algorithms

HISTORY_MOVES = 100
"""Moves kept in a history entry: the console shows the last rebalance's; the count is always whole."""


class AlgorithmInfo(Struct):
    name: str
    description: str
    source: str
    params: Annotated[dict[str, Any], Meta(description="JSON schema of its `params`")]
    paper: Annotated[
        int | None,
        Meta(
            description="its place among the twelve algorithms of Landau et al. §VI-A (1 = nf … 12 = mbfp); null: not one"
        ),
    ]
    cheap: Annotated[
        bool,
        Meta(
            description="n log n work, no search budget: a request of up to GROUPFIT_COMPUTE_INLINE_PARTITIONS is "
            "computed on the event loop, a larger one (or any of another algorithm) by a compute worker"
        ),
    ]
    compiled: Annotated[
        bool, Meta(description="this service computes it with the compiled core (installed, and GROUPFIT_CORE)")
    ]


class AlgorithmList(Struct):
    algorithms: list[AlgorithmInfo]


def algorithm_list(native: bool) -> AlgorithmList:
    """The registry; `native`: whether the compiled core computes (GROUPFIT_CORE)."""
    return AlgorithmList(
        [
            AlgorithmInfo(a.name, a.description, a.source, a.params_schema(), a.paper, a.cheap, native and a.compiled)
            for a in algorithms().values()
        ]
    )


class GroupState(Struct):
    group: str
    version: int
    algorithm: str
    capacity: float
    assignment: dict[str, list[PartitionRef]]
    updated_at: str
    racks: Annotated[
        dict[str, str] | UnsetType,
        Meta(description="the rack each consumer runs in, as the last zone-aware version named them"),
    ] = UNSET
    loads: Annotated[
        dict[str, float] | UnsetType,
        Meta(
            description="each consumer's load as this version's answer gave it (`consumers[].load`: the rates of "
            "that request); absent for a version stored before loads were kept"
        ),
    ] = UNSET


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
    cross_zone_rate: Annotated[
        float | UnsetType, Meta(description="the rate read across zones (zone-aware versions only)")
    ] = UNSET


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


class RatesDocument(Struct):
    """The latest rates as the store keeps them: StoredRates without its group."""

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
