"""GET /v1/algorithms: the registry (app/core/algorithm.py), each algorithm with its parameters' schema and its
traits."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from app.api.auth import Authenticated
from app.api.dependencies import AssignServiceDep
from app.api.endpoints import answers, endpoint, json_response
from app.codec.groups import algorithm_list

router = APIRouter()


@endpoint(
    router,
    "GET",
    "/v1/algorithms",
    "list_algorithms",
    "algorithms",
    "The registered algorithms, their parameter schemas and traits",
    answers("AlgorithmList"),
)
async def list_algorithms(_: Authenticated, assigner: AssignServiceDep) -> Response:
    return json_response(algorithm_list(assigner.limits.native))
