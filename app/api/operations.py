"""Routes for operators: the groups listing, a group's rates history and its replay, the scaling signal
(registered on the v1 router, with its helpers), and the pages served beside the API — the console at /ui
and the API docs at /docs and /redoc, every asset shipped in the package (no CDN: they work offline)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Query, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import FileResponse, RedirectResponse, Response

from app.api.auth import Authenticated, ReadableGroup
from app.api.routes import _answers, _endpoint, _json
from app.codec.operations import scale_query
from app.core.decision import MIN_GAIN, Guards
from app.core.errors import AssignmentError, ErrorCode
from app.service.operations import OperationsService

UI = Path(__file__).resolve().parents[1] / "ui"

# Every page may load only from this service: a browser then never contacts another host, even where a
# vendored bundle names one (Redoc's sidebar logo), and the console runs no script but its own files.
_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
CONSOLE_CSP = _CSP + "script-src 'self'; frame-ancestors 'none'"
DOCS_CSP = _CSP + "script-src 'self' 'unsafe-inline'; worker-src 'self' blob:; frame-ancestors 'none'"


def _operations(request: Request) -> OperationsService:
    return request.app.state.operations


@_endpoint(
    "GET",
    "/v1/groups",
    "list_groups",
    "groups",
    "The stored groups (those the token may read), with their last version and the age of their rates",
    _answers("GroupList", 422, 503),
)
async def list_groups(
    request: Request,
    grant: Authenticated,
    contains: str = Query("", max_length=255, description="only groups whose name contains this"),
    limit: int = Query(1000, ge=1, le=100_000),
) -> Response:
    return _json(await _operations(request).groups(grant.groups, contains, limit))


@_endpoint(
    "GET",
    "/v1/groups/{group}/rates/history",
    "get_rates_history",
    "rates",
    "The group's stored rates windows, oldest first (bounded by GROUPFIT_RATES_HISTORY_LIMIT and _MAX_AGE_S)",
    _answers("RatesHistory", 404, 422, 503),
)
async def rates_history(request: Request, group: ReadableGroup, limit: int = Query(1000, ge=1, le=100_000)) -> Response:
    return _json(await _operations(request).rates_history(group, limit))


@_endpoint(
    "GET",
    "/v1/groups/{group}/replay",
    "replay_group",
    "evaluation",
    "The group's stored rates windows replayed through algorithms: consumers, Rscore, moved bytes, tail latency",
    _answers("ReplayResponse", 404, 422, 503),
)
async def replay_group(
    request: Request,
    group: ReadableGroup,
    algorithms: str = Query("mwf,bfd", max_length=1000, description="comma-separated, as in POST /v1/evaluate"),
    windows: int = Query(200, ge=1, le=100_000, description="the newest this many windows"),
    latency: bool = Query(True, description="add latency percentiles (Landau et al. §VI-C)"),
    consumer_throughput: float | None = Query(
        None, gt=0, description="C̄ of the latency model; default 1.33 × the group's capacity, as in the paper"
    ),
    rebalance_s: float = Query(5.0, ge=0, le=3600),
) -> Response:
    names = [name.strip() for name in algorithms.split(",") if name.strip()]
    if not names:
        raise AssignmentError(ErrorCode.INVALID_REQUEST, "give at least one algorithm, e.g. ?algorithms=mwf,bfd.")
    return _json(await _operations(request).replay(group, names, windows, latency, consumer_throughput, rebalance_s))


@_endpoint(
    "GET",
    "/v1/groups/{group}/scale",
    "get_scale",
    "groups",
    "What the group needs for its stored rates: up, down, reass (the same members, reassigned) or none, with why",
    _answers("ScaleSignal", 404, 422, 503),
)
async def scale(
    request: Request,
    group: ReadableGroup,
    algorithm: str | None = Query(None, max_length=100, description="default: the group's stored algorithm"),
    params: str | None = Query(
        None,
        max_length=10_000,
        description='the algorithm\'s parameters, a JSON object, e.g. {"mu": 200, "w_sla": 0.5}',
    ),
    member_capacities: str | None = Query(
        None, max_length=100_000, description='members of their own capacity, a JSON object, e.g. {"c1": 200}'
    ),
    f_up: float | None = Query(
        None, gt=0, le=1, description="up when the algorithm packing into f_up·C needs more consumers (default 1)"
    ),
    f_down: float | None = Query(
        None, gt=0, lt=1, description="down when packing into f_down·C still needs fewer (default 0.7)"
    ),
    min_gain: float = Query(
        MIN_GAIN, ge=0, allow_inf_nan=False, description="excess (in consumers) a reassignment must remove"
    ),
    max_rscore: float | None = Query(
        None, ge=0, allow_inf_nan=False, description="most Rscore a reassignment may spend"
    ),
    max_moves: int | None = Query(None, ge=0, description="most partitions a reassignment may move"),
    min_interval_s: float = Query(
        0, ge=0, le=86_400, description="no reassignment while the stored assignment is younger than this"
    ),
) -> Response:
    guards = Guards(f_up, f_down, min_gain, max_rscore, max_moves, min_interval_s)
    query = scale_query(params, member_capacities, algorithm, guards)
    return _json(await _operations(request).scale(group, query))


def install_pages(app: FastAPI) -> None:
    """/ui (the console), /docs and /redoc (assets from the fastapi-offline package), each an APIRoute kept
    out of the schema, so the metrics count them under their own route."""
    import fastapi_offline

    docs_assets = Path(fastapi_offline.__file__).parent / "static"
    # Redoc's sidebar shows its maker's logo from their CDN: the bundle is served with the local icon instead
    redoc_js = (docs_assets / "redoc.standalone.js").read_bytes().replace(REDOC_LOGO, b"/static/docs/favicon.png")

    @app.get("/static/docs/redoc.standalone.js", include_in_schema=False)
    async def redoc_bundle() -> Response:
        return Response(redoc_js, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    app.mount("/static/docs", StaticFiles(directory=docs_assets), name="docs-static")
    app.mount("/ui/static", StaticFiles(directory=UI / "static"), name="ui-static")

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi() -> Response:
        return _json(app.openapi())

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> Response:
        page = get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="groupfit API",
            swagger_js_url="/static/docs/swagger-ui-bundle.js",
            swagger_css_url="/static/docs/swagger-ui.css",
            swagger_favicon_url="/static/docs/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},  # else it asks an outside validator about the document
        )
        return _with_policy(page, DOCS_CSP)

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> Response:
        page = get_redoc_html(
            openapi_url="/openapi.json",
            title="groupfit API",
            redoc_js_url="/static/docs/redoc.standalone.js",
            redoc_favicon_url="/static/docs/favicon.png",
            with_google_fonts=False,
        )
        return _with_policy(page, DOCS_CSP)

    @app.get("/ui", include_in_schema=False)
    async def console() -> Response:
        return _with_policy(FileResponse(UI / "index.html", media_type="text/html"), CONSOLE_CSP)

    @app.get("/", include_in_schema=False)
    async def root() -> Response:
        return RedirectResponse("/ui")


def _with_policy(page: Response, policy: str) -> Response:
    page.headers["Content-Security-Policy"] = policy
    return page
