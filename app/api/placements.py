"""POST /v1/placements: broker replica placement (seed 003). Thin: decode → authorize (a token with write: the
answer is a plan to move data) → app.service.placement → encode. Stateless; large or exact plans run in a
thread so the event loop keeps serving."""

from __future__ import annotations

import asyncio

import msgspec
from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api import examples
from app.api.auth import Writer
from app.api.routes import _answers, _body, _json, _read_body
from app.codec.placement import PlacementRequest
from app.codec.wire import decode
from app.service.placement import PlacementLimits, plan

router = APIRouter()

_PLACEMENT = msgspec.json.Decoder(PlacementRequest)


@router.api_route(
    "/v1/placements",
    methods=["POST"],
    operation_id="place_replicas",
    tags=["placements"],
    summary="Place partition replicas on brokers: new replica lists, moves, utilisation, a reassignment plan",
    responses=_answers("PlacementResponse", 413, 422),
    openapi_extra={**_body("PlacementRequest", examples.PLACEMENT_REQUEST), "security": [{"bearer": ["write"]}]},
    response_class=Response,
)
async def place_replicas(request: Request, _: Writer) -> Response:
    placement_request = decode(_PLACEMENT, await _read_body(request))
    limits = PlacementLimits.of(request.app.state.settings)
    return _json(await asyncio.to_thread(plan, placement_request, limits))
