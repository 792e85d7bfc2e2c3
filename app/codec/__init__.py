"""The one codec at the boundary: every body the CLI, the API and the evaluator read or write is a msgspec
Struct here. Decoding checks types and shapes in C and maps a failure to the same error code wherever it
happens; the core never sees a JSON document, only typed values; answers are built here from the core's
results. The OpenAPI schemas are generated from these Structs (`ALL_SCHEMAS`)."""

from __future__ import annotations

from app.codec.assign import AssignRequest, AssignResponse
from app.codec.evaluate import EvaluateRequest, EvaluateResponse
from app.codec.groups import AlgorithmList, GroupHistory, GroupState, Health, RatesAck, RatesUpdate, StoredRates
from app.codec.operations import GroupList, RatesHistory, ReplayResponse, ScaleSignal
from app.codec.placement import PlacementRequest, PlacementResponse
from app.codec.wire import ErrorResponse

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
    PlacementRequest,
    PlacementResponse,
    GroupList,
    RatesHistory,
    ReplayResponse,
    ScaleSignal,
)
