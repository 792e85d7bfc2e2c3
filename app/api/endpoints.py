"""What every route shares: its declaration (`endpoint`: operation id, tag, documented answers, token scope), the
JSON body it reads (`read_body`) and the JSON it answers (`json_response`), and a wait for the client's going
away (`client_gone`). Routes are thin: decode (app.codec) → authorize (app/api/auth.py) → a use case
(app.service, a typed dependency: app/api/dependencies.py) → encode."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from app.api.dependencies import services_of
from app.codec.wire import encode
from app.core.errors import AssignmentError, ErrorCode
from app.service.compute import CHUNK, concatenated

Responses = dict[int | str, dict[str, Any]]


def schema_ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_content(name: str, example: Any = None) -> dict[str, Any]:
    media: dict[str, Any] = {"schema": schema_ref(name)}
    if example is not None:
        media["example"] = example
    return {"application/json": media}


def request_body(name: str, example: Any = None) -> dict[str, Any]:
    """The documented JSON body of schema `name` (the route reads it itself: `read_body`)."""
    return {"requestBody": {"required": True, "content": json_content(name, example)}}


def answers(
    ok: str | None,
    *errors: int,
    status: int = 200,
    examples: dict[int, Any] | None = None,
    tokens: bool = True,
) -> Responses:
    """The documented answers; with `tokens` (every /v1 route) also 401 and 403, answered when tokens are
    configured."""
    examples = examples or {}
    responses: Responses = {}
    if ok:
        responses[status] = {"description": "OK", "content": json_content(ok, examples.get(status))}
    for code in (*errors, *((401, 403) if tokens else ())):
        responses[code] = {"description": "error", "content": json_content("ErrorResponse", examples.get(code))}
    return responses


def endpoint(
    router: APIRouter,
    method: str,
    path: str,
    operation_id: str,
    tag: str,
    summary: str,
    responses: Responses,
    body: dict[str, Any] | None = None,
    status_code: int = 200,
    scope: str | None = "read",
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A route on `router` with the parts every one declares: its operation id and tag (names in generated
        clients), its documented answers, the token scope it needs (OpenAPI 3.1 roles of the bearer scheme; None for
        the open probes), and the raw Response class (bodies are
        encoded by the codec, not by FastAPI). The roles: `read` any token, `write` a token with write, `all-groups` a
    token without a `groups` list, `cluster` one with write and without a `groups` list."""
    extra = dict(body or {})
    if scope is not None:
        extra["security"] = [{"bearer": [scope]}]
    return router.api_route(
        path,
        methods=[method],
        operation_id=operation_id,
        tags=[tag],
        summary=summary,
        responses=responses,
        openapi_extra=extra,
        status_code=status_code,
        response_class=Response,
    )


def json_response(body: bytes | list[bytes] | list[bytes | memoryview] | Any) -> Response:
    """JSON bytes as they are (or in parts: the slices a compute worker's answer was read in, the views of an
    answer and its version), or a codec value encoded. A large answer is sent a slice at a time, the socket
    drained in between, so the event loop never copies much of it at once."""
    chunks = body if isinstance(body, list) else [body if isinstance(body, bytes) else encode(body)]
    size = sum(map(len, chunks))
    if size <= CHUNK:
        return Response(b"".join(chunks), media_type="application/json")

    async def slices() -> AsyncIterator[memoryview]:
        for chunk in chunks:
            view = memoryview(chunk)
            for start in range(0, len(view), CHUNK):
                yield view[start : start + CHUNK]

    return StreamingResponse(slices(), media_type="application/json", headers={"content-length": str(size)})


async def read_body(request: Request) -> bytes:
    """The body, once the route's dependencies (the token) have passed: JSON (or no content type), at most
    GROUPFIT_MAX_BODY_BYTES."""
    media_type = request.headers.get("content-type", "application/json").partition(";")[0].strip().lower()
    if media_type != "application/json" and not (
        media_type.startswith("application/") and media_type.endswith("+json")
    ):
        raise AssignmentError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            f"the body is {media_type!r}; send JSON with 'Content-Type: application/json'.",
        )
    limit = services_of(request.app).settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return await concatenated(chunks)


def _too_large(limit: int) -> AssignmentError:
    return AssignmentError(
        ErrorCode.BODY_TOO_LARGE,
        f"the request body is larger than {limit} bytes; send fewer partitions per request.",
    )


def client_gone(request: Request) -> Callable[[], Awaitable[None]]:
    """Returns when the client has gone away (called once the body is read: nothing else arrives before)."""

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    return disconnected
