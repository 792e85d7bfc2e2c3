"""POST /v1/placements: broker replica placement ("Constraint Based Kafka Partition Balancing"). Thin: decode →
authorize (a token with write: the answer is a plan to move data) → app.service.placement → encode. Stateless;
plans run in a thread so the event loop keeps serving."""

from __future__ import annotations

import asyncio

import msgspec
from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api import examples
from app.api.auth import Writer
from app.api.dependencies import SettingsDep
from app.api.endpoints import answers, endpoint, json_response, read_body, request_body
from app.codec.placement import PlacementRequest
from app.codec.wire import decode
from app.service.placement import PlacementLimits, plan

router = APIRouter()

_PLACEMENT = msgspec.json.Decoder(PlacementRequest)


@endpoint(
    router,
    "POST",
    "/v1/placements",
    "place_replicas",
    "placements",
    "Place partition replicas on brokers: new replica lists, moves, utilisation, a reassignment plan",
    answers("PlacementResponse", 413, 422),
    body=request_body("PlacementRequest", examples.PLACEMENT_REQUEST),
    scope="write",
)
async def place_replicas(request: Request, _: Writer, settings: SettingsDep) -> Response:
    placement_request = decode(_PLACEMENT, await read_body(request))
    return json_response(await asyncio.to_thread(plan, placement_request, PlacementLimits.of(settings)))
