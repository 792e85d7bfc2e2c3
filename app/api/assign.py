"""POST /v1/assign: decode → authorize (a token with write when it stores a version) → app.service.assign.

The route's steps are `answer`; FastAPI reaches them through its routing and dependency resolution, and
`AssignFastPath` straight from the ASGI scope for a request with nothing else to validate (a plain or `delta=`
query, no Idempotency-Key): measured in one process, that resolution is a quarter of the CPU a 1 000-partition
request costs (bench/service_http.py)."""

from __future__ import annotations

import typing
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api import examples
from app.api.auth import Authenticated
from app.api.dependencies import AssignServiceDep, services_of
from app.api.endpoints import answers, client_gone, endpoint, json_response, read_body, request_body
from app.api.errors import error_response, store_down
from app.codec.assign import DeltaForm
from app.core.errors import GroupfitError
from app.service.access import Grant
from app.service.assign import AssignService
from app.store.groups import StoreUnavailable

router = APIRouter()


@endpoint(
    router,
    "POST",
    "/v1/assign",
    "assign",
    "assignments",
    "Compute a new assignment (and store it as the group's next version)",
    answers(
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
    body=request_body("AssignRequest", examples.ASSIGN_REQUEST),
)
async def assign(
    request: Request,
    grant: Authenticated,
    assigner: AssignServiceDep,
    delta: DeltaForm = Query(
        "sparse", description="dense adds the full matrix; none leaves the delta out (the moves tell the rebalance)"
    ),
    idempotency_key: Annotated[
        str | None,
        Header(max_length=200, description="a retry with the same key and body gets the same answer"),
    ] = None,
) -> Response:
    return json_response(await answer(request, grant, assigner, delta, idempotency_key))


async def answer(
    request: Request, grant: Grant, assigner: AssignService, delta: DeltaForm, idempotency_key: str | None
) -> list[bytes | memoryview]:
    """The answer's JSON, in parts: the body read and decoded, the token checked against its group, the use case
    run (admitted for the token's tenants)."""
    decoded = await assigner.decode(await read_body(request), delta, bool(idempotency_key), grant.tenants())
    fields = decoded.request
    request.state.group, request.state.algorithm = fields.group, fields.algorithm  # for the log
    grant.check(fields.group, write=bool(fields.group) and not fields.dry_run)
    return await assigner.assign(decoded, idempotency_key, client_gone(request), grant.tenants(fields.group))


DELTA_QUERIES: dict[bytes, DeltaForm] = {
    b"": "sparse",
    **{f"delta={form}".encode(): form for form in typing.get_args(DeltaForm)},
}
"""The query strings the fast path takes, and the delta form each asks for; any other goes to the route."""


class AssignFastPath:
    """POST /v1/assign without FastAPI's routing and dependency resolution, for a request whose query is one of
    DELTA_QUERIES and that sends no Idempotency-Key (whose length the route validates): the token is
    authenticated as the `Authenticated` dependency does, then `answer` runs, and its refusals are answered by
    the app's own handlers. The request is counted under the route's path, as the route would be."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.route: BaseRoute = next(r for r in router.routes if getattr(r, "path", None) == "/v1/assign")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        delta = DELTA_QUERIES.get(scope.get("query_string", b"")) if scope["type"] == "http" else None
        if (
            delta is None
            or scope["method"] != "POST"
            or scope["path"] != "/v1/assign"
            or any(name == b"idempotency-key" for name, _ in scope["headers"])
        ):
            await self.app(scope, receive, send)
            return
        scope["route"] = self.route
        request = Request(scope, receive)
        services = services_of(request.app)
        try:
            grant = services.authorizer.authenticate(request.headers.get("authorization", ""))
            response = json_response(await answer(request, grant, services.assigner, delta, None))
        except GroupfitError as exc:
            response = error_response(exc)
        except StoreUnavailable as exc:
            response = await store_down(request, exc)
        await response(scope, receive, send)
