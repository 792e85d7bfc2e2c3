"""The errors and the closed set of error codes: a stable code and a sentence a person can act on.

Every code a client can receive is a member of `ErrorCode`; the API keys its HTTP status by it
(app/api/errors.py) and docs/api.md and the OpenAPI description list them all (tests check both). Every
error raised is a `GroupfitError`: `AssignmentError` for a request that cannot be served as sent (bad input, an
unknown group, a version conflict), `AccessDenied` for a token that does not allow it, `ComputeUnavailable`
for a computation refused or stopped; each kind carries only its own codes.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class ErrorCode(StrEnum):
    # bad input (422)
    INVALID_JSON = "invalid_json"
    INVALID_REQUEST = "invalid_request"
    INVALID_RATE = "invalid_rate"
    INVALID_CAPACITY = "invalid_capacity"
    DUPLICATE_PARTITION = "duplicate_partition"
    INVALID_PREVIOUS = "invalid_previous"
    INVALID_ASSIGNMENT = "invalid_assignment"
    INVALID_MEMBERS = "invalid_members"
    INVALID_RACKS = "invalid_racks"
    INVALID_PARAMETER = "invalid_parameter"
    UNKNOWN_ALGORITHM = "unknown_algorithm"
    NO_RATES = "no_rates"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    DELTA_TOO_LARGE = "delta_too_large"
    TOO_MANY_PARTITIONS = "too_many_partitions"
    TOO_LARGE_FOR_EXACT = "too_large_for_exact"
    TOO_MANY_CONSUMERS = "too_many_consumers"
    COMPUTE_FAILED = "compute_failed"
    # replica placement (POST /v1/placements)
    INVALID_BROKER = "invalid_broker"
    INVALID_REPLICAS = "invalid_replicas"
    REPLICA_TOO_LARGE = "replica_too_large"
    TOO_MANY_REPLICAS = "too_many_replicas"
    PLACEMENT_INFEASIBLE = "placement_infeasible"
    # the service and its state
    BODY_TOO_LARGE = "body_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    GROUP_NOT_FOUND = "group_not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    VERSION_CONFLICT = "version_conflict"
    STORE_UNAVAILABLE = "store_unavailable"
    COMPUTE_BUSY = "compute_busy"
    COMPUTE_TIMEOUT = "compute_timeout"
    INTERNAL_ERROR = "internal_error"


class GroupfitError(Exception):
    """A refusal: `code`, one of `ErrorCode`; `message`, what went wrong and what to do; `details`, plain data
    for the error body (a partition in it is a `(topic, partition)` tuple under the key "partition", or a list
    of them under "partitions", which the codec writes in the wire form). This base carries any code: the API
    answers with it what no layer below raises (no route, the store down, a bug)."""

    codes: ClassVar[frozenset[ErrorCode]] = frozenset(ErrorCode)
    """The codes this kind of error carries."""

    def __init__(self, code: ErrorCode, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)  # an unknown code is a bug: fail where it is raised
        if self.code not in self.codes:
            raise ValueError(f"{type(self).__name__} does not carry {self.code.value!r}")
        self.message = message
        self.details = details


class AccessDenied(GroupfitError):
    """No valid token (401), or a token that does not allow this (403)."""

    codes = frozenset({ErrorCode.UNAUTHORIZED, ErrorCode.FORBIDDEN})


class ComputeUnavailable(GroupfitError):
    """A computation refused (every compute worker busy and the queue full: 503) or stopped (past its deadline,
    or its client gone: 504); the same request may succeed later."""

    codes = frozenset({ErrorCode.COMPUTE_BUSY, ErrorCode.COMPUTE_TIMEOUT})


class AssignmentError(GroupfitError, ValueError):
    """A request that cannot be served as sent: bad input (422), too large (413), not JSON (415), an unknown
    group (404), a version conflict (409)."""

    codes = (
        frozenset(ErrorCode)
        - AccessDenied.codes
        - ComputeUnavailable.codes
        - {
            ErrorCode.NOT_FOUND,  # the API's own answers: no route, no method, the store down, a bug
            ErrorCode.METHOD_NOT_ALLOWED,
            ErrorCode.STORE_UNAVAILABLE,
            ErrorCode.INTERNAL_ERROR,
        }
    )
