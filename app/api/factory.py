"""The FastAPI app: routes, error handlers, middleware, and the OpenAPI document built from the msgspec bodies."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any

import msgspec
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app import codec
from app.api.auth import Authenticated, Authorizer
from app.api.errors import STATUS, error, error_response
from app.api.observability import Metrics, ObservabilityMiddleware, configure_logging, log
from app.api.operations import install_pages
from app.api.placements import router as placements_router
from app.api.routes import router
from app.core.algorithm import algorithms
from app.core.errors import AssignmentError, ErrorCode
from app.service.assign import AssignService
from app.service.compute import ComputePool
from app.service.evaluate import EvaluateService
from app.service.groups import GroupService
from app.service.operations import OperationsService
from app.settings import Settings, get_settings
from app.store.groups import GroupStore, RatesWindows, StoreUnavailable

VERSION = "0.1.0"
DESCRIPTION = (
    "Partition assignment as a service for message-broker consumer groups.\n\n"
    'Every error is `{"error": {"code", "message", "details"}}` with a stable code:\n\n'
    + "\n".join(f"- `{code.value}` ({STATUS[code]})" for code in ErrorCode)
)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    configure_logging(settings.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await app.state.store.open()
        await app.state.compute.start()
        yield
        await app.state.compute.close()
        await app.state.store.close()

    app = FastAPI(
        title="groupfit",
        version=VERSION,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # these three are served by install_pages: assets from the package, and each counted
        redoc_url=None,  # under its own route in the metrics
        openapi_url=None,
    )
    app.state.settings = settings
    app.state.metrics = Metrics(settings.metrics_max_groups)
    app.state.store = GroupStore(
        settings.redis_url or "redis://127.0.0.1:6379/0",
        settings.key_prefix,
        settings.redis_timeout_s,
        settings.history_limit,
        settings.idempotency_ttl_s,
        RatesWindows(settings.rates_history_limit, settings.rates_history_max_age_s),
        settings.redis_cluster,
    )
    app.state.authorizer = Authorizer(settings.auth_tokens)
    app.state.compute = ComputePool(
        settings.compute_workers,
        settings.compute_queue,
        settings.compute_timeout_s,
        settings.compute_worker_memory_mb,
        preload=("app.service.answer", "app.service.evaluate", "app.service.operations"),
    )
    app.state.assigner = AssignService(app.state.store, settings, app.state.compute, app.state.metrics)
    app.state.evaluator = EvaluateService(settings, app.state.compute)
    app.state.groups = GroupService(app.state.store, settings.max_partitions)
    app.state.operations = OperationsService(
        app.state.store, settings, app.state.assigner, app.state.compute, app.state.metrics
    )
    app.include_router(router)
    app.include_router(placements_router)
    install_pages(app)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "X-Request-ID"],
        )
    app.add_middleware(ObservabilityMiddleware, metrics=app.state.metrics)

    @app.get(
        "/metrics",
        operation_id="metrics",
        tags=["operations"],
        summary="Prometheus metrics",
        response_class=Response,
        responses={200: {"description": "Prometheus text format", "content": {"text/plain": {}}}},
        openapi_extra={"security": [{"bearer": ["read"]}]},
    )
    async def metrics(_: Authenticated) -> Response:  # group names are not for anyone to read
        return Response(generate_latest(app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.exception_handler(AssignmentError)
    async def bad_input(_: Request, exc: AssignmentError) -> Response:
        return error_response(exc)

    @app.exception_handler(StoreUnavailable)
    async def store_down(_: Request, exc: StoreUnavailable) -> Response:
        app.state.metrics.store_failed(str(exc))
        return error(
            ErrorCode.STORE_UNAVAILABLE,
            "the state store (Redis) does not answer; retry shortly. Requests without 'group' keep working.",
            {"reason": str(exc)},
            headers={"Retry-After": "1"},
        )

    @app.exception_handler(RequestValidationError)
    async def bad_parameters(_: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid"}
        where = ".".join(str(part) for part in first["loc"])
        return error(
            ErrorCode.INVALID_REQUEST,
            f"{where}: {first['msg']}.",
            [{"loc": [str(p) for p in e["loc"]], "msg": e["msg"]} for e in exc.errors()],
        )

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        where = f"{request.method} {request.url.path}"
        if exc.status_code == 405:
            code, message = ErrorCode.METHOD_NOT_ALLOWED, f"{where} is not allowed"
        else:
            code, message = ErrorCode.NOT_FOUND, f"there is no endpoint {where}"
        return error(code, f"{message}; the API is described at /docs and /openapi.json.")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.error(
            "unhandled error",
            exc_info=exc,
            extra={"fields": {"request_id": request.scope.get("state", {}).get("request_id")}},
        )
        return error(ErrorCode.INTERNAL_ERROR, "the service failed on this request; it is logged, please report it.")

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


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
                "roles say which: `read` any token, `write` a token with write. POST /v1/assign needs `write` "
                "when it stores a version (a group, not a dry run).",
            }
        }
        # a string, not an enum: a client generated today keeps working with a server that has more algorithms
        components["AssignRequest"]["properties"]["algorithm"]["examples"] = sorted(algorithms())
        app.openapi_schema = document
    return app.openapi_schema


def openapi_json() -> str:
    """The contract as committed in openapi/openapi.json (a test fails when the two differ)."""
    return (
        json.dumps(create_app(Settings(redis_url="redis://127.0.0.1:1/0")).openapi(), indent=2, sort_keys=True) + "\n"
    )
