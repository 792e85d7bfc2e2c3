"""What a platform watches: /healthz (the process is up), /readyz (Redis answers) and /metrics (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import Response

from app.api.auth import AllGroups
from app.api.dependencies import MetricsDep, StoreDep
from app.api.endpoints import answers, endpoint, json_response
from app.codec.groups import Health

router = APIRouter()


@endpoint(
    router, "GET", "/healthz", "healthz", "operations", "The process is up", answers("Health", tokens=False), scope=None
)
async def healthz() -> Response:
    return json_response(Health("ok"))


@endpoint(
    router, "GET", "/readyz", "readyz", "operations", "Redis answers", answers("Health", 503, tokens=False), scope=None
)
async def readyz(store: StoreDep) -> Response:
    await store.ping()
    return json_response(Health("ready"))


@endpoint(
    router,
    "GET",
    "/metrics",
    "metrics",
    "operations",
    "Prometheus metrics",
    {200: {"description": "Prometheus text format", "content": {"text/plain": {}}}, **answers(None)},
    scope="all-groups",
)
async def metrics(_: AllGroups, registry: MetricsDep) -> Response:  # every group's series: a token for them all
    return Response(registry.exposition(), media_type=CONTENT_TYPE_LATEST)
