"""Request ids, one JSON log line per request, and the Prometheus metrics (a pure ASGI middleware:
Starlette's BaseHTTPMiddleware would cost more than a 1 000-partition assignment)."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
import uuid
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from app.core.assign import Outcome

log = logging.getLogger("groupfit")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "groupfit_http_requests",
            "HTTP requests by route and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "groupfit_http_request_duration_seconds",
            "HTTP request latency by route and status",
            ["method", "route", "status"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.compute = Histogram(
            "groupfit_assignment_compute_seconds",
            "time to compute an assignment, by algorithm",
            ["algorithm"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.rscore = Gauge(
            "groupfit_group_rscore", "Rscore of the group's last stored assignment", ["group"], registry=self.registry
        )
        self.consumers = Gauge(
            "groupfit_group_consumers",
            "consumers of the group's last stored assignment",
            ["group"],
            registry=self.registry,
        )

        self.recommended = Gauge(
            "groupfit_group_recommended_consumers",
            "consumers the group needs for its stored rates (its algorithm and capacity; GET /v1/groups/{g}/scale)",
            ["group"],
            registry=self.registry,
        )
        self.actual = Gauge(
            "groupfit_group_actual_consumers",
            "consumers holding partitions in the group's stored assignment, when its scale was last computed",
            ["group"],
            registry=self.registry,
        )
        self.per_group = (self.rscore, self.consumers, self.recommended, self.actual)

    def _group(self, metric: Any, group: str) -> Any:
        """The one way to a per-group series (every metric labelled by group is in `per_group`)."""
        return metric.labels(group)

    def computed(self, algorithm: str, seconds: float) -> None:
        self.compute.labels(algorithm).observe(seconds)

    def stored(self, group: str, outcome: Outcome) -> None:
        self._group(self.rscore, group).set(outcome.rscore)
        self._group(self.consumers, group).set(outcome.consumer_count)

    def scaled(self, group: str, needed: int, current: int) -> None:
        self._group(self.recommended, group).set(needed)
        self._group(self.actual, group).set(current)

    def forget_group(self, group: str) -> None:
        """A deleted group's series go too (else every group ever seen stays exported)."""
        for metric in self.per_group:
            with contextlib.suppress(KeyError):  # this process never exported it
                metric.remove(group)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "message": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    log.handlers[:] = [handler]
    log.setLevel(level.upper())
    log.propagate = False


class ObservabilityMiddleware:
    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _header(scope, b"x-request-id") or uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500
        start = time.perf_counter()

        async def send_with_id(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", []).append((b"x-request-id", request_id.encode("latin-1")))
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - start
            route = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"]
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route, str(status)).observe(elapsed)
            if log.isEnabledFor(logging.INFO):
                log.info(
                    "request",
                    extra={
                        "fields": {
                            "request_id": request_id,
                            "method": method,
                            "route": route,
                            "status": status,
                            "duration_ms": round(elapsed * 1000, 3),
                        }
                    },
                )


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")[:128]
    return None
