"""One error body for every failure ({"error": {"code", "message", "details"}}) and the HTTP status of
every code, keyed by the closed set `ErrorCode`."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from app.codec.wire import error_body
from app.core.errors import AssignmentError, ErrorCode

STATUS: dict[ErrorCode, int] = {
    **dict.fromkeys(
        (
            ErrorCode.INVALID_JSON,
            ErrorCode.INVALID_REQUEST,
            ErrorCode.INVALID_RATE,
            ErrorCode.INVALID_CAPACITY,
            ErrorCode.DUPLICATE_PARTITION,
            ErrorCode.INVALID_PREVIOUS,
            ErrorCode.INVALID_MEMBERS,
            ErrorCode.INVALID_PARAMETER,
            ErrorCode.UNKNOWN_ALGORITHM,
            ErrorCode.NO_RATES,
            ErrorCode.IDEMPOTENCY_KEY_REUSED,
            ErrorCode.DELTA_TOO_LARGE,
            ErrorCode.TOO_MANY_PARTITIONS,
            ErrorCode.TOO_LARGE_FOR_EXACT,
            ErrorCode.TOO_MANY_CONSUMERS,
            ErrorCode.INVALID_BROKER,
            ErrorCode.INVALID_REPLICAS,
            ErrorCode.REPLICA_TOO_LARGE,
            ErrorCode.TOO_MANY_REPLICAS,
            ErrorCode.PLACEMENT_INFEASIBLE,
        ),
        422,
    ),
    ErrorCode.BODY_TOO_LARGE: 413,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.GROUP_NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.VERSION_CONFLICT: 409,
    ErrorCode.STORE_UNAVAILABLE: 503,
    ErrorCode.COMPUTE_BUSY: 503,
    ErrorCode.COMPUTE_TIMEOUT: 504,
    ErrorCode.INTERNAL_ERROR: 500,
}
assert set(STATUS) == set(ErrorCode), "every error code has its HTTP status"


RETRY_AFTER_S = {ErrorCode.STORE_UNAVAILABLE: 1, ErrorCode.COMPUTE_BUSY: 1}
"""Codes a client should retry, and after how many seconds (the Retry-After header)."""


def error_response(exc: AssignmentError, headers: dict[str, str] | None = None) -> Response:
    if exc.code is ErrorCode.UNAUTHORIZED:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    if exc.code in RETRY_AFTER_S:
        headers = {**(headers or {}), "Retry-After": str(RETRY_AFTER_S[exc.code])}
    return Response(error_body(exc), status_code=STATUS[exc.code], media_type="application/json", headers=headers)


def error(code: ErrorCode, message: str, details: Any = None, headers: dict[str, str] | None = None) -> Response:
    return error_response(AssignmentError(code, message, details), headers)
