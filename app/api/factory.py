"""The FastAPI app: settings → services → routers → error handlers → middleware, and the OpenAPI document built
from the msgspec bodies."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi

from app import codec
from app.api import algorithms, assign, evaluate, groups, operations, pages, placements, probes, rates
from app.api.dependencies import Services, services_of
from app.api.errors import STATUS, add_error_handlers
from app.api.observability import Metrics, ObservabilityMiddleware, configure_logging
from app.core.algorithm import algorithms as registry
from app.core.errors import ErrorCode
from app.service.access import Authorizer
from app.service.assign import AssignService
from app.service.compute import ComputePool
from app.service.evaluate import EvaluateService
from app.service.groups import GroupService
from app.service.operations import OperationsService
from app.service.placement import PlacementService
from app.settings import Settings, get_settings
from app.store.groups import GroupStore, RatesWindows

VERSION = "0.1.0"
DESCRIPTION = (
    "Partition assignment as a service for message-broker consumer groups.\n\n"
    'Every error is `{"error": {"code", "message", "details"}}` with a stable code:\n\n'
    + "\n".join(f"- `{code.value}` ({STATUS[code]})" for code in ErrorCode)
)
ROUTERS = (
    assign.router,
    algorithms.router,
    groups.router,
    rates.router,
    evaluate.router,
    operations.router,
    placements.router,
    probes.router,
    pages.router,
)
WORKER_MODULES = (
    "app.service.assign",
    "app.service.evaluate",
    "app.service.groups",
    "app.service.operations",
    "app.service.placement",
)
"""What a compute worker imports before it serves: the modules of its jobs (the exact algorithms' solver, OR-Tools,
is imported by the first job that needs it: about 280 MB of address space within the worker's allowance)."""


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    configure_logging(settings.log_level)
    services = build_services(settings)
    app = FastAPI(
        title="groupfit",
        version=VERSION,
        description=DESCRIPTION,
        lifespan=_lifespan,
        docs_url=None,  # these three are served by app/api/pages.py: assets from the package, and each counted
        redoc_url=None,  # under its own route in the metrics
        openapi_url=None,
        # groupfit's own observability is Prometheus and JSON logs; FastAPI's telemetry costs every request its
        # checks even with no provider configured
        telemetry=None if settings.opentelemetry else {"tracing": False, "metrics": False, "logs": False},
    )
    app.state.services = services
    for router in ROUTERS:
        app.include_router(router)
    pages.mount_assets(app)
    add_error_handlers(app)
    _add_middleware(app, settings, services.metrics)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def build_services(settings: Settings) -> Services:
    metrics = Metrics(settings.metrics_max_groups)
    store = GroupStore(
        settings.redis_url or "redis://127.0.0.1:6379/0",
        settings.key_prefix,
        settings.redis_timeout_s,
        settings.history_limit,
        settings.idempotency_ttl_s,
        RatesWindows(
            settings.rates_history_limit,
            settings.rates_history_max_age_s,
            settings.rates_history_max_cells,
            settings.rates_history_max_bytes,
        ),
        settings.redis_cluster,
    )
    compute = ComputePool(
        settings.compute_workers,
        settings.compute_queue,
        settings.compute_timeout_s,
        settings.compute_worker_memory_mb,
        preload=WORKER_MODULES,
        tenant_share=settings.compute_tenant_share,
    )
    assigner = AssignService(store, settings, compute, metrics)
    return Services(
        settings=settings,
        metrics=metrics,
        store=store,
        compute=compute,
        authorizer=Authorizer(settings.auth_tokens),
        assigner=assigner,
        evaluator=EvaluateService(settings, compute),
        groups=GroupService(store, settings.max_partitions, compute),
        operations=OperationsService(store, settings, assigner, compute, metrics),
        placements=PlacementService(settings, compute),
    )


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    services = services_of(app)
    await services.store.open()
    await services.compute.start()
    probe = asyncio.create_task(services.metrics.watch_loop())
    yield
    probe.cancel()
    await services.compute.close()
    await services.store.close()


def _add_middleware(app: FastAPI, settings: Settings, metrics: Metrics) -> None:
    app.add_middleware(assign.AssignFastPath)  # inside CORS and the observability (added later: outer)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "X-Request-ID"],
        )
    app.add_middleware(ObservabilityMiddleware, metrics=metrics)


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema of the routes, with the bodies' schemas generated from the msgspec Structs."""
    if app.openapi_schema is None:
        document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        _, components = msgspec.json.schema_components(codec.ALL_SCHEMAS, ref_template="#/components/schemas/{name}")
        document.setdefault("components", {}).setdefault("schemas", {}).update(components)
        document["components"]["securitySchemes"] = {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "needed when the service has tokens configured (GROUPFIT_AUTH_TOKENS); an operation's "
                "roles say which: `read` any token, `write` a token with write, `all-groups` a token without a "
                "`groups` list, `cluster` a token with write and without a `groups` list. POST /v1/assign needs "
                "`write` when it stores a version (a group, not a dry run).",
            }
        }
        # a string, not an enum: a client generated today keeps working with a server that has more algorithms
        components["AssignRequest"]["properties"]["algorithm"]["examples"] = sorted(registry())
        app.openapi_schema = document
    return app.openapi_schema


def openapi_json() -> str:
    """The contract as committed in openapi/openapi.json (a test fails when the two differ)."""
    return (
        json.dumps(create_app(Settings(redis_url="redis://127.0.0.1:1/0")).openapi(), indent=2, sort_keys=True) + "\n"
    )
