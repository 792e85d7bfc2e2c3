"""The v1 endpoints. Thin: decode (app.codec) → authorize (a dependency on every /v1 route) → a use case
(app.service) → encode."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

import msgspec
from fastapi import APIRouter, Header, Query, Request
from starlette.background import BackgroundTask
from starlette.responses import Response

from app.api import examples
from app.api.auth import Authenticated, ReadableGroup, WritableGroup
from app.codec.groups import AlgorithmInfo, AlgorithmList, Health, RatesUpdate
from app.codec.wire import decode, encode
from app.core.algorithm import algorithms
from app.core.errors import AssignmentError, ErrorCode
from app.service.assign import AssignService
from app.service.evaluate import EvaluateService
from app.service.groups import GroupService

router = APIRouter()

_RATES = msgspec.json.Decoder(RatesUpdate)


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json_content(name: str, example: Any = None) -> dict[str, Any]:
    media: dict[str, Any] = {"schema": _ref(name)}
    if example is not None:
        media["example"] = example
    return {"application/json": media}


def _body(name: str, example: Any = None) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": _json_content(name, example)}}


def _answers(
    ok: str | None, *errors: int, status: int = 200, examples: dict[int, Any] | None = None
) -> dict[int | str, dict[str, Any]]:
    """The documented answers; every /v1 route may also answer 401 and 403 when tokens are configured."""
    examples = examples or {}
    responses: dict[int | str, dict[str, Any]] = {}
    if ok:
        responses[status] = {"description": "OK", "content": _json_content(ok, examples.get(status))}
    for code in (*errors, 401, 403):
        responses[code] = {"description": "error", "content": _json_content("ErrorResponse", examples.get(code))}
    return responses


def _endpoint(
    method: str,
    path: str,
    operation_id: str,
    tag: str,
    summary: str,
    responses: dict[int | str, dict[str, Any]],
    body: dict[str, Any] | None = None,
    status_code: int = 200,
    scope: str | None = "read",
) -> Any:
    """A route with the parts every one declares: its operation id and tag (names in generated clients), its
    documented answers, the token scope it needs (OpenAPI 3.1 roles of the bearer scheme: `read` is any token,
    `write` a token with write; None for the open probes), and the raw Response class (bodies are encoded by
    the codec, not by FastAPI)."""
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


def _json(body: bytes | Any) -> Response:
    return Response(body if isinstance(body, bytes) else encode(body), media_type="application/json")


async def _read_body(request: Request) -> bytes:
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
    limit = request.app.state.settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> AssignmentError:
    return AssignmentError(
        ErrorCode.BODY_TOO_LARGE,
        f"the request body is larger than {limit} bytes; send fewer partitions per request.",
    )


def _gone(request: Request) -> Callable[[], Awaitable[None]]:
    """Returns when the client has gone away (called once the body is read: nothing else arrives before)."""

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    return disconnected


def _groups(request: Request) -> GroupService:
    return request.app.state.groups


@_endpoint(
    "POST",
    "/v1/assign",
    "assign",
    "assignments",
    "Compute a new assignment (and store it as the group's next version)",
    _answers(
        "AssignResponse",
        404,
        409,
        413,
        415,
        422,
        503,
        504,
        examples={
            200: examples.ASSIGN_ANSWER,
            409: examples.VERSION_CONFLICT_ERROR,
            422: examples.DUPLICATE_PARTITION_ERROR,
        },
    ),
    body=_body("AssignRequest", examples.ASSIGN_REQUEST),
)
async def assign(
    request: Request,
    grant: Authenticated,
    delta: Literal["sparse", "dense"] = Query("sparse", description="dense adds the full matrix"),
    idempotency_key: Annotated[
        str | None,
        Header(max_length=200, description="a retry with the same key and body gets the same answer"),
    ] = None,
) -> Response:
    body = await _read_body(request)
    service: AssignService = request.app.state.assigner
    assign_request, bulk = await service.decode(body, delta == "dense", idempotency_key)
    request.state.group, request.state.algorithm = assign_request.group, assign_request.algorithm  # for the log
    grant.check(assign_request.group, write=bool(assign_request.group) and not assign_request.dry_run)
    return _json(await service.assign(assign_request, delta == "dense", idempotency_key, _gone(request), body, bulk))


@_endpoint(
    "GET",
    "/v1/algorithms",
    "list_algorithms",
    "algorithms",
    "The registered algorithms and their parameter schemas",
    _answers("AlgorithmList"),
)
async def list_algorithms(_: Authenticated) -> Response:
    return _json(
        AlgorithmList(
            [AlgorithmInfo(a.name, a.description, a.source, a.params_schema()) for a in algorithms().values()]
        )
    )


@_endpoint(
    "GET",
    "/v1/groups/{group}",
    "get_group",
    "groups",
    "The group's current assignment and version",
    _answers("GroupState", 404, 422, 503),
)
async def get_group(request: Request, group: ReadableGroup) -> Response:
    return _json(await _groups(request).state(group))


@_endpoint(
    "DELETE",
    "/v1/groups/{group}",
    "delete_group",
    "groups",
    "Forget the group (assignment, history, rates)",
    {**_answers(None, 404, 422, 503), 204: {"description": "deleted"}},
    status_code=204,
    scope="write",
)
async def delete_group(request: Request, group: WritableGroup) -> Response:
    await _groups(request).delete(group)
    request.app.state.metrics.forget_group(group)
    return Response(status_code=204)


@_endpoint(
    "GET",
    "/v1/groups/{group}/history",
    "get_group_history",
    "groups",
    "Past versions, newest first",
    _answers("GroupHistory", 404, 422, 503),
)
async def group_history(request: Request, group: ReadableGroup, limit: int = Query(100, ge=1, le=100_000)) -> Response:
    return _json(await _groups(request).history(group, limit))


@_endpoint(
    "PUT",
    "/v1/groups/{group}/rates",
    "put_rates",
    "rates",
    "Store the group's observed rates and lags (the rates job writes here)",
    _answers("RatesAck", 413, 415, 422, 503),
    body=_body("RatesUpdate", examples.RATES_UPDATE),
    scope="write",
)
async def put_rates(request: Request, group: WritableGroup) -> Response:
    update = decode(_RATES, await _read_body(request))
    response = _json(await _groups(request).put_rates(group, update))
    # the scaling signal (and its gauge) follows the rates, after the answer is sent
    response.background = BackgroundTask(request.app.state.operations.rates_stored, group)
    return response


@_endpoint(
    "GET",
    "/v1/groups/{group}/rates",
    "get_rates",
    "rates",
    "The group's latest stored rates",
    _answers("StoredRates", 404, 422, 503),
)
async def get_rates(request: Request, group: ReadableGroup) -> Response:
    return _json(await _groups(request).rates(group))


@_endpoint(
    "POST",
    "/v1/evaluate",
    "evaluate",
    "evaluation",
    "Replay a rate stream through algorithms: consumers, Rscore, CBS",
    _answers("EvaluateResponse", 413, 415, 422, 503, 504),
    body=_body("EvaluateRequest"),
)
async def evaluate(request: Request, _: Authenticated) -> Response:
    evaluator: EvaluateService = request.app.state.evaluator
    return _json(await evaluator.evaluate(await _read_body(request), _gone(request)))


@_endpoint(
    "GET",
    "/healthz",
    "healthz",
    "operations",
    "The process is up",
    {200: {"description": "OK", "content": {"application/json": {"schema": _ref("Health")}}}},
    scope=None,
)
async def healthz() -> Response:
    return _json(Health("ok"))


@_endpoint(
    "GET",
    "/readyz",
    "readyz",
    "operations",
    "Redis answers",
    {
        200: {"description": "OK", "content": {"application/json": {"schema": _ref("Health")}}},
        503: {"description": "error", "content": {"application/json": {"schema": _ref("ErrorResponse")}}},
    },
    scope=None,
)
async def readyz(request: Request) -> Response:
    await request.app.state.store.ping()
    return _json(Health("ready"))
