"""POST /v1/placements: broker replica placement ("Constraint Based Kafka Partition Balancing"). Thin: authorize (a
token for the cluster: write, on every group; the answer is a plan to move data) → app.service.placement, which
admits it before its body is read and computes it in a compute worker unless it is small. Stateless."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api import examples
from app.api.auth import Cluster
from app.api.dependencies import PlacementServiceDep
from app.api.endpoints import answers, client_gone, endpoint, json_response, read_body, request_body

router = APIRouter()


@endpoint(
    router,
    "POST",
    "/v1/placements",
    "place_replicas",
    "placements",
    "Place partition replicas on brokers: new replica lists, moves, utilisation, a reassignment plan",
    answers("PlacementResponse", 413, 415, 422, 503, 504),
    body=request_body("PlacementRequest", examples.PLACEMENT_REQUEST),
    scope="cluster",
)
async def place_replicas(request: Request, grant: Cluster, placements: PlacementServiceDep) -> Response:
    answer = await placements.place(lambda: read_body(request), grant.tenants(), client_gone(request))
    return json_response(answer)
