"""GET /v1/algorithms: the registry (app/core/algorithm.py), each algorithm with its parameters' schema."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from app.api.auth import Authenticated
from app.api.endpoints import answers, endpoint, json_response
from app.codec.groups import AlgorithmInfo, AlgorithmList
from app.core.algorithm import algorithms

router = APIRouter()


@endpoint(
    router,
    "GET",
    "/v1/algorithms",
    "list_algorithms",
    "algorithms",
    "The registered algorithms and their parameter schemas",
    answers("AlgorithmList"),
)
async def list_algorithms(_: Authenticated) -> Response:
    return json_response(
        AlgorithmList(
            [AlgorithmInfo(a.name, a.description, a.source, a.params_schema()) for a in algorithms().values()]
        )
    )
