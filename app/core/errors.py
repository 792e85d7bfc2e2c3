"""The one error type and the closed set of error codes: a stable code and a sentence a person can act on.

Every code a client can receive is a member of `ErrorCode`; the API keys its HTTP status by it
(app/api/errors.py) and docs/api.md and the OpenAPI description list them all (tests check both).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    # bad input (422)
    INVALID_JSON = "invalid_json"
    INVALID_REQUEST = "invalid_request"
    INVALID_RATE = "invalid_rate"
    INVALID_CAPACITY = "invalid_capacity"
    DUPLICATE_PARTITION = "duplicate_partition"
    INVALID_PREVIOUS = "invalid_previous"
    INVALID_MEMBERS = "invalid_members"
    INVALID_PARAMETER = "invalid_parameter"
    UNKNOWN_ALGORITHM = "unknown_algorithm"
    NO_RATES = "no_rates"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    DELTA_TOO_LARGE = "delta_too_large"
    TOO_MANY_PARTITIONS = "too_many_partitions"
    TOO_LARGE_FOR_EXACT = "too_large_for_exact"
    TOO_MANY_CONSUMERS = "too_many_consumers"
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


class AssignmentError(ValueError):
    """Bad input, or a request the service cannot serve. `code` is one of `ErrorCode`.

    `details` is plain data for the error body; a partition in it is a `(topic, partition)` tuple under the
    key "partition" (or a list of them under "partitions"), which the codec writes in the wire form.
    """

    def __init__(self, code: ErrorCode | str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)  # an unknown code is a bug: fail where it is raised
        self.message = message
        self.details = details
