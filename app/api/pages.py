"""The pages served beside the API — the console at /ui and the API docs at /docs and /redoc — every asset
shipped in the package (no CDN: they work offline). Each page is an APIRoute kept out of the schema, so the
metrics count it under its own route."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import FileResponse, RedirectResponse, Response

from app.api.endpoints import json_response

UI = Path(__file__).resolve().parents[1] / "ui"
DOCS_ASSETS = Path(fastapi_offline.__file__).parent / "static"

# Every page may load only from this service: a browser then never contacts another host, even where a
# vendored bundle names one (Redoc's sidebar logo), and the console runs no script but its own files.
_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
CONSOLE_CSP = _CSP + "script-src 'self'; frame-ancestors 'none'"
DOCS_CSP = _CSP + "script-src 'self' 'unsafe-inline'; worker-src 'self' blob:; frame-ancestors 'none'"

router = APIRouter(include_in_schema=False)


def mount_assets(app: FastAPI) -> None:
    """The pages' static files (mounted on the app: a router's mounts are not included before FastAPI 0.16x)."""
    app.mount("/static/docs", StaticFiles(directory=DOCS_ASSETS), name="docs-static")
    app.mount("/ui/static", StaticFiles(directory=UI / "static"), name="ui-static")


@cache
def _redoc_bundle() -> bytes:
    """Redoc's bundle with the local icon in place of its maker's logo, which it would load from their CDN."""
    return (DOCS_ASSETS / "redoc.standalone.js").read_bytes().replace(REDOC_LOGO, b"/static/docs/favicon.png")


@router.get("/static/docs/redoc.standalone.js")
async def redoc_bundle() -> Response:
    return Response(_redoc_bundle(), media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})


@router.get("/openapi.json")
async def openapi(request: Request) -> Response:
    return json_response(request.app.openapi())


@router.get("/docs")
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


@router.get("/redoc")
async def redoc() -> Response:
    page = get_redoc_html(
        openapi_url="/openapi.json",
        title="groupfit API",
        redoc_js_url="/static/docs/redoc.standalone.js",
        redoc_favicon_url="/static/docs/favicon.png",
        with_google_fonts=False,
    )
    return _with_policy(page, DOCS_CSP)


@router.get("/ui")
async def console() -> Response:
    return _with_policy(FileResponse(UI / "index.html", media_type="text/html"), CONSOLE_CSP)


@router.get("/")
async def root() -> Response:
    return RedirectResponse("/ui")


def _with_policy(page: Response, policy: str) -> Response:
    page.headers["Content-Security-Policy"] = policy
    return page
