"""POST /v1/evaluate: a rate stream replayed through algorithms, in a compute worker (app.service.evaluate)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api.auth import Authenticated
from app.api.dependencies import EvaluateServiceDep
from app.api.endpoints import answers, client_gone, endpoint, json_response, read_body, request_body

router = APIRouter()


@endpoint(
    router,
    "POST",
    "/v1/evaluate",
    "evaluate",
    "evaluation",
    "Replay a rate stream through algorithms: consumers, Rscore, CBS",
    answers("EvaluateResponse", 413, 415, 422, 503, 504),
    body=request_body("EvaluateRequest"),
)
async def evaluate(request: Request, grant: Authenticated, evaluator: EvaluateServiceDep) -> Response:
    return json_response(await evaluator.evaluate(lambda: read_body(request), grant.tenants(), client_gone(request)))
