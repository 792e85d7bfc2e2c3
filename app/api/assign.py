"""POST /v1/assign: decode → authorize (a token with write when it stores a version) → app.service.assign."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Request
from starlette.responses import Response

from app.api import examples
from app.api.auth import Authenticated
from app.api.dependencies import AssignServiceDep
from app.api.endpoints import answers, client_gone, endpoint, json_response, read_body, request_body

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
    delta: Literal["sparse", "dense"] = Query("sparse", description="dense adds the full matrix"),
    idempotency_key: Annotated[
        str | None,
        Header(max_length=200, description="a retry with the same key and body gets the same answer"),
    ] = None,
) -> Response:
    body = await read_body(request)
    decoded = await assigner.decode(body, delta == "dense", bool(idempotency_key), grant.tenants())
    fields = decoded.request
    request.state.group, request.state.algorithm = fields.group, fields.algorithm  # for the log
    grant.check(fields.group, write=bool(fields.group) and not fields.dry_run)
    tenants = grant.tenants(fields.group)
    return json_response(await assigner.assign(decoded, idempotency_key, client_gone(request), tenants))
