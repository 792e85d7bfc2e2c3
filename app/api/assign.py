"""POST /v1/assign: decode → authorize (a token with write when it stores a version) → app.service.assign."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Request
from starlette.responses import Response

from app.api import examples
from app.api.auth import Authenticated
from app.api.dependencies import AssignServiceDep
from app.api.endpoints import answers, client_gone, endpoint, json_response, read_body, request_body
from app.codec.assign_input import AssignInput, Limits, decode_assign

router = APIRouter()

UNIQUE_KEYS_INLINE_BYTES = 64 * 1024
"""Bodies up to this size are checked for duplicate keys on the event loop; larger ones where they are computed."""

READ_INLINE_BYTES = 1024 * 1024
"""Bodies up to this size are read on the event loop (~2 ms at most by the compiled reader); larger ones on a
thread."""


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
    decoded = await _decode(await read_body(request), assigner.limits, delta == "dense", bool(idempotency_key))
    fields = decoded.request
    request.state.group, request.state.algorithm = fields.group, fields.algorithm  # for the log
    grant.check(fields.group, write=bool(fields.group) and not fields.dry_run)
    tenants = grant.tenants(fields.group)
    return json_response(await assigner.assign(decoded, idempotency_key, client_gone(request), tenants))


async def _decode(body: bytes, limits: Limits, dense: bool, keyed: bool) -> AssignInput:
    """A large body is read on a thread (the compiled reader releases the GIL, so the event loop goes on
    meanwhile), a small one here (a thread hop costs more than reading it); a large body's duplicate-key
    check (as costly as its decoding) is left to where it is computed."""
    unique_keys = len(body) <= UNIQUE_KEYS_INLINE_BYTES
    if len(body) > READ_INLINE_BYTES:
        return await asyncio.to_thread(decode_assign, body, limits, dense, keyed, unique_keys)
    return decode_assign(body, limits, dense, keyed, unique_keys)
