"""One error body for every failure ({"error": {"code", "message", "details"}}), the HTTP status of every code,
keyed by the closed set `ErrorCode`, and the handlers that answer every failure so."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.api.dependencies import services_of
from app.api.observability import log
from app.codec.wire import error_body
from app.core.errors import ErrorCode, GroupfitError
from app.store.groups import StoreUnavailable

STATUS: dict[ErrorCode, int] = {
    **dict.fromkeys(
        (
            ErrorCode.INVALID_JSON,
            ErrorCode.INVALID_REQUEST,
            ErrorCode.INVALID_RATE,
            ErrorCode.INVALID_CAPACITY,
            ErrorCode.DUPLICATE_PARTITION,
            ErrorCode.INVALID_PREVIOUS,
            ErrorCode.INVALID_ASSIGNMENT,
            ErrorCode.INVALID_MEMBERS,
            ErrorCode.INVALID_RACKS,
            ErrorCode.INVALID_PARAMETER,
            ErrorCode.UNKNOWN_ALGORITHM,
            ErrorCode.NO_RATES,
            ErrorCode.IDEMPOTENCY_KEY_REUSED,
            ErrorCode.DELTA_TOO_LARGE,
            ErrorCode.TOO_MANY_PARTITIONS,
            ErrorCode.TOO_LARGE_FOR_EXACT,
            ErrorCode.TOO_MANY_CONSUMERS,
            ErrorCode.COMPUTE_FAILED,
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


def error_response(exc: GroupfitError, headers: dict[str, str] | None = None) -> Response:
    if exc.code is ErrorCode.UNAUTHORIZED:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    if exc.code in RETRY_AFTER_S:
        headers = {**(headers or {}), "Retry-After": str(RETRY_AFTER_S[exc.code])}
    return Response(error_body(exc), status_code=STATUS[exc.code], media_type="application/json", headers=headers)


def error(code: ErrorCode, message: str, details: Any = None, headers: dict[str, str] | None = None) -> Response:
    return error_response(GroupfitError(code, message, details), headers)


def add_error_handlers(app: FastAPI) -> None:
    """Every failure answered as one error body with its code's status."""
    app.exception_handler(GroupfitError)(refused)
    app.exception_handler(StoreUnavailable)(store_down)
    app.exception_handler(RequestValidationError)(bad_parameters)
    app.exception_handler(HTTPException)(no_route)
    app.exception_handler(Exception)(unexpected)


async def refused(_: Request, exc: GroupfitError) -> Response:
    return error_response(exc)


async def store_down(request: Request, exc: StoreUnavailable) -> Response:
    services_of(request.app).metrics.store_failed(str(exc))
    return error(
        ErrorCode.STORE_UNAVAILABLE,
        "the state store (Redis) does not answer; retry shortly. Requests without 'group' keep working.",
        {"reason": str(exc)},
    )


async def bad_parameters(_: Request, exc: RequestValidationError) -> Response:
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid"}
    where = ".".join(str(part) for part in first["loc"])
    return error(
        ErrorCode.INVALID_REQUEST,
        f"{where}: {first['msg']}.",
        [{"loc": [str(p) for p in e["loc"]], "msg": e["msg"]} for e in errors],
    )


async def no_route(request: Request, exc: HTTPException) -> Response:
    where = f"{request.method} {request.url.path}"
    if exc.status_code == 405:
        code, message = ErrorCode.METHOD_NOT_ALLOWED, f"{where} is not allowed"
    else:
        code, message = ErrorCode.NOT_FOUND, f"there is no endpoint {where}"
    return error(code, f"{message}; the API is described at /docs and /openapi.json.")


async def unexpected(request: Request, exc: Exception) -> Response:
    """A bug: logged with its trace, which the answer does not show."""
    log.error(
        "unhandled error",
        exc_info=exc,
        extra={"fields": {"request_id": request.scope.get("state", {}).get("request_id")}},
    )
    return error(ErrorCode.INTERNAL_ERROR, "the service failed on this request; it is logged, please report it.")
