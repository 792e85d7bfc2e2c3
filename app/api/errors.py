"""One error body for every failure: {"error": {"code", "message", "details"}}, and the status of each code."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import Response

from app.core.errors import AssignmentError

STATUS = {
    "body_too_large": 413,
    "group_not_found": 404,
    "not_found": 404,
    "method_not_allowed": 405,
    "version_conflict": 409,
    "unauthorized": 401,
    "forbidden": 403,
    "store_unavailable": 503,
    "internal_error": 500,
}
"""Every other code (bad input) is 422."""


class ApiError(AssignmentError):
    """An error of the service itself (state, limits), beside the core's bad-input errors."""


def status_of(code: str) -> int:
    return STATUS.get(code, 422)


def error_response(code: str, message: str, details: Any = None, headers: dict[str, str] | None = None) -> Response:
    body = msgspec.json.encode({"error": {"code": code, "message": message, "details": details}})
    return Response(body, status_code=status_of(code), media_type="application/json", headers=headers)


def from_exception(exc: AssignmentError) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if exc.code == "unauthorized" else None
    return error_response(exc.code, exc.message, exc.details, headers)


def decode_error(exc: msgspec.MsgspecError) -> ApiError:
    """msgspec's sentence names the field (`at $.partitions[3].rate`): keep it."""
    return ApiError("invalid_request", f"the request body is not valid: {exc}.")
