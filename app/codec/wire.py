"""What every body shares: the wire form of a partition, the error envelope, and decoding with one
mapping from a decoding failure to an error code."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from itertools import starmap
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from app.core.errors import AssignmentError, ErrorCode, GroupfitError
from app.core.model import MAX_PARTITION_RACKS, MAX_RACK_LENGTH, PartitionKey

INLINE_BYTES = 64 * 1024
"""JSON up to this size is decoded on the event loop (well under a millisecond); larger bodies and stored values
are decoded where they are computed, in a compute worker, so the server only moves their bytes."""

READ_INLINE_BYTES = 1024 * 1024
"""JSON up to this size is read on the event loop by the compiled reader (~2 ms at most): a body, or the stored rates
it fills rate-less partitions from; larger ones off it."""

GROUP_PATTERN = r"^[!-.0-~]{1,255}$"
GroupName = Annotated[str, Meta(pattern=GROUP_PATTERN, description="consumer group id (no spaces or '/')")]
ConsumerId = Annotated[str, Meta(min_length=1, max_length=255)]
Topic = Annotated[str, Meta(min_length=1, max_length=255)]
PartitionNumber = Annotated[int, Meta(ge=0, le=2**31 - 1)]
Rack = Annotated[
    str, Meta(min_length=1, max_length=MAX_RACK_LENGTH, description="a rack or zone, as broker.rack and client.rack")
]


# gc=False: these hold only strings and numbers (no cycles possible); 10^5 of them decoded per large
# request would otherwise be tracked by the cyclic collector (~25% of the decode time).
class PartitionRef(Struct, forbid_unknown_fields=True, gc=False):
    topic: Topic
    partition: PartitionNumber


Lag = Annotated[float | None, Meta(description="records or bytes behind, as the caller counts")]
PartitionRacks = Annotated[
    list[Rack],
    Meta(
        max_length=MAX_PARTITION_RACKS,
        description="the racks a consumer reads it from without crossing zones: the leader's, or every "
        "replica's where the brokers serve fetch-from-follower (KIP-392); a rack listed twice counts once",
    ),
]


class PartitionRate(Struct, forbid_unknown_fields=True, gc=False):
    topic: Topic
    partition: PartitionNumber
    rate: Annotated[float, Meta(description="observed rate, e.g. bytes/s; same unit as capacity")]
    lag: Lag = None
    racks: PartitionRacks | UnsetType = UNSET


class RequestPartition(Struct, forbid_unknown_fields=True, gc=False):
    """A partition of an assignment request: a PartitionRate whose rate may be left out for its group's stored one
    (so a consumer leader lists what its group reads and sends no rates: one round trip)."""

    topic: Topic
    partition: PartitionNumber
    rate: (
        Annotated[
            float,
            Meta(
                description="observed rate, e.g. bytes/s; same unit as capacity. Left out: the rate stored for the "
                "group (PUT /v1/groups/{group}/rates), with its stored lag unless 'lag' is given; 0 if none is "
                "stored for this partition"
            ),
        ]
        | UnsetType
    ) = UNSET
    lag: Lag = None
    racks: PartitionRacks | UnsetType = UNSET


def partition_ref(key: PartitionKey) -> PartitionRef:
    """The wire form of a partition: built here and nowhere else."""
    return PartitionRef(key[0], key[1])


def partition_refs(keys: Iterable[PartitionKey]) -> list[PartitionRef]:
    """The wire form of many partitions (at C speed: no Python call per partition)."""
    return list(starmap(PartitionRef, keys))


def keys_of(refs: Iterable[PartitionRef | PartitionRate | RequestPartition]) -> list[PartitionKey]:
    return [(ref.topic, ref.partition) for ref in refs]


class ErrorDetail(Struct):
    code: Annotated[str, Meta(description="stable, machine-readable; one of the codes listed in the API description")]
    message: Annotated[str, Meta(description="what went wrong and what to do")]
    details: Any = None


class ErrorResponse(Struct):
    error: ErrorDetail


def wired(value: Any) -> Any:
    """Free-form data of the core (error details, an algorithm's outputs) in the wire form: a partition there is
    a (topic, partition) tuple, written as a partition object."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int):
        return partition_ref(value)
    if isinstance(value, dict):
        return {k: wired(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [wired(v) for v in value]
    return value


def error_body(exc: GroupfitError) -> bytes:
    return encode(ErrorResponse(ErrorDetail(exc.code.value, exc.message, wired(exc.details))))


# Which code a type or shape error gets, by the field it is in (msgspec names it: "at `$.partitions[3].rate`").
_FIELD_CODES = (
    (re.compile(r"^\$\.(partitions\[\d+\]\.(rate|lag)|stream\[\d+\]\[\.\.\.\]\[\.\.\.\])$"), ErrorCode.INVALID_RATE),
    (re.compile(r"^\$\.(capacity|consumer_throughput|iteration_s|rebalance_s)$"), ErrorCode.INVALID_CAPACITY),
    (re.compile(r"^\$\.(partitions\[\d+\]\.racks|members\[\d+\]\.rack|previous_racks)\b"), ErrorCode.INVALID_RACKS),
    (re.compile(r"^\$\.previous\b"), ErrorCode.INVALID_PREVIOUS),
    (re.compile(r"^\$\.members\b"), ErrorCode.INVALID_MEMBERS),
    (re.compile(r"^\$\.(params|latency|optimum)\b"), ErrorCode.INVALID_PARAMETER),
    # POST /v1/placements
    (re.compile(r"^\$\.brokers\[\d+\]\.(disk|network)$"), ErrorCode.INVALID_CAPACITY),
    (re.compile(r"^\$\.brokers\b"), ErrorCode.INVALID_BROKER),
    (re.compile(r"^\$\.partitions\[\d+\]\.replicas\b"), ErrorCode.INVALID_REPLICAS),
    (re.compile(r"^\$\.partitions\[\d+\]\.(size|throughput)$"), ErrorCode.INVALID_RATE),
    (re.compile(r"^\$\.(options|topics)\b"), ErrorCode.INVALID_PARAMETER),
)
_AT = re.compile(r" - at `([^`]*)`$")

T = TypeVar("T")


def decode(decoder: msgspec.json.Decoder[T], body: bytes, unique_keys: bool = True) -> T:
    """A body → its Struct, or the AssignmentError the CLI and the API both answer. `unique_keys=False`
    leaves the duplicate-key check (as costly as the decoding) to the caller: `check_unique_keys`."""
    if not body.strip():
        raise AssignmentError(ErrorCode.INVALID_REQUEST, "the request body is empty; send a JSON object.")
    try:
        decoded = decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise _invalid(exc) from None
    except msgspec.DecodeError as exc:
        raise AssignmentError(ErrorCode.INVALID_JSON, f"the request is not valid JSON: {exc}.") from None
    except UnicodeDecodeError as exc:
        raise AssignmentError(ErrorCode.INVALID_JSON, f"the request is not UTF-8 text: {exc.reason}.") from None
    except RecursionError:
        raise AssignmentError(ErrorCode.INVALID_JSON, "the request is nested too deep.") from None
    if unique_keys:
        check_unique_keys(body)
    return decoded


def check_unique_keys(body: bytes) -> None:
    """No key twice in one object (msgspec keeps the last silently). Only for a body msgspec decoded."""
    try:
        json.loads(body, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise AssignmentError(ErrorCode.INVALID_JSON, "the request is nested too deep.") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> None:
    """json.loads's hook: fails on a key twice in one object; builds nothing (only the check is wanted)."""
    if len(pairs) > 1 and len({key for key, _ in pairs}) < len(pairs):
        seen: set[str] = set()
        duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise AssignmentError(
            ErrorCode.INVALID_JSON, f"the key {duplicate[:100]!r} appears twice in one object; send it once."
        )


def convert(value: Any, type_: type[T]) -> T:
    """Python values (command-line flags, stored documents) → a Struct, with the checks and codes of `decode`."""
    try:
        return msgspec.convert(value, type_)
    except msgspec.ValidationError as exc:
        raise _invalid(exc) from None


def _invalid(exc: msgspec.ValidationError) -> AssignmentError:
    text = str(exc)
    where = _AT.search(text)
    path = where.group(1) if where else "$"
    code = next((code for pattern, code in _FIELD_CODES if pattern.match(path)), ErrorCode.INVALID_REQUEST)
    return AssignmentError(code, f"the request is not valid: {text}.", {"at": path})


_encoder = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    return _encoder.encode(value)
