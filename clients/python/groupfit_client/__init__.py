"""Client of the groupfit assignment service: the HTTP API (sync and async) with typed results, a partition
assignor for aiokafka (extra `kafka`) and controller mode (extra `controller`).

The assignor and the controller are imported on first use, so `import groupfit_client` needs only httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from groupfit_client.client import AsyncGroupfitClient, GroupfitClient
from groupfit_client.errors import GroupfitError
from groupfit_client.results import (
    AlgorithmInfo,
    AlgorithmRun,
    Assignment,
    BrokerUtilization,
    ConsumerLoad,
    Delta,
    DeltaCell,
    Evaluation,
    GroupList,
    GroupState,
    GroupSummary,
    HistoryEntry,
    LatencyFigures,
    Move,
    Optimum,
    OverloadedPartition,
    PartitionPlacement,
    PartitionRate,
    Peak,
    Placement,
    RatesAck,
    RatesWindow,
    Reassignment,
    ReassignmentPartition,
    Replay,
    ReplayRun,
    ReplicaMove,
    ScaleSignal,
    StoredRates,
    TopicPartition,
)

if TYPE_CHECKING:
    from groupfit_client.assignor import groupfit_assignor
    from groupfit_client.controller import ConsumerProcesses, ControlledConsumer, Controller, LocalProcesses

# Public names that need an optional dependency, and the module each comes from.
_LAZY = {
    "groupfit_assignor": "groupfit_client.assignor",
    "ConsumerProcesses": "groupfit_client.controller",
    "ControlledConsumer": "groupfit_client.controller",
    "Controller": "groupfit_client.controller",
    "LocalProcesses": "groupfit_client.controller",
}

__all__ = [
    "AlgorithmInfo",
    "AlgorithmRun",
    "Assignment",
    "AsyncGroupfitClient",
    "BrokerUtilization",
    "ConsumerLoad",
    "ConsumerProcesses",
    "ControlledConsumer",
    "Controller",
    "Delta",
    "DeltaCell",
    "Evaluation",
    "GroupList",
    "GroupState",
    "GroupSummary",
    "GroupfitClient",
    "GroupfitError",
    "HistoryEntry",
    "LatencyFigures",
    "LocalProcesses",
    "Move",
    "Optimum",
    "OverloadedPartition",
    "PartitionPlacement",
    "PartitionRate",
    "Peak",
    "Placement",
    "RatesAck",
    "RatesWindow",
    "Reassignment",
    "ReassignmentPartition",
    "Replay",
    "ReplayRun",
    "ReplicaMove",
    "ScaleSignal",
    "StoredRates",
    "TopicPartition",
    "groupfit_assignor",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # the next access is a plain lookup
    return value
