"""Request ids, one JSON log line per request, and the Prometheus metrics (a pure ASGI middleware:
Starlette's BaseHTTPMiddleware would cost more than a 1 000-partition assignment)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import msgspec
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from app.codec.wire import error_body
from app.core.errors import GroupfitError
from app.service.compute import compute_failed, is_panic

if TYPE_CHECKING:
    from app.codec.assign_input import Computed

log = logging.getLogger("groupfit")


class GroupSeries:
    """Every per-group series goes through here, so their number stays bounded: at most `cap` groups have
    series (the least recently updated group's are dropped when another comes; 0: none), whatever the
    number of groups the service has seen."""

    def __init__(self, registry: CollectorRegistry, cap: int) -> None:
        self.registry = registry
        self.cap = cap
        self.gauges: list[Gauge] = []
        self.recent: OrderedDict[str, None] = OrderedDict()

    def gauge(self, name: str, documentation: str) -> Gauge:
        gauge = Gauge(name, documentation, ["group"], registry=self.registry)
        self.gauges.append(gauge)
        return gauge

    def set(self, gauge: Gauge, group: str, value: float) -> None:
        if self.cap == 0:
            return
        self.recent[group] = None
        self.recent.move_to_end(group)
        while len(self.recent) > self.cap:
            self.forget(next(iter(self.recent)))
        gauge.labels(group).set(value)

    def forget(self, group: str) -> None:
        self.recent.pop(group, None)
        for gauge in self.gauges:
            with contextlib.suppress(KeyError):  # no series of this group in this gauge
                gauge.remove(group)


SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
"""Buckets of a duration: an assignment's computation; a request's from the second (a millisecond) on."""
MOVES = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 20000)
"""Buckets of the partitions one rebalance moves."""
LAG = (0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
"""Buckets of the event loop's lag (no request should keep it busy for more than 20 ms)."""
LOOP_PROBE_S = 0.005
"""How often the event loop's lag is measured."""


class Metrics:
    def __init__(self, max_groups: int = 1000) -> None:
        self.registry = CollectorRegistry()
        by_route = ("method", "route", "status")
        self.requests = self._counter("groupfit_http_requests", "HTTP requests by route and status", by_route)
        self.latency = self._histogram(
            "groupfit_http_request_duration_seconds", "HTTP request latency by route and status", by_route, SECONDS[1:]
        )
        self.compute = self._histogram(
            "groupfit_assignment_compute_seconds",
            "time to compute an assignment, by algorithm",
            ("algorithm",),
            SECONDS,
        )
        self.rebalances = self._counter(
            "groupfit_rebalances_answered",
            "assignments answered, by algorithm and mode (stored, dry_run, stateless)",
            ("algorithm", "mode"),
        )
        self.moves_per_rebalance = self._histogram(
            "groupfit_rebalance_moves", "partitions moved per stored rebalance, by algorithm", ("algorithm",), MOVES
        )
        self.store_errors = self._counter(
            "groupfit_store_errors", "requests Redis did not serve (timeout, refused), by error", ("reason",)
        )
        self.loop_lag = self._histogram(
            "groupfit_event_loop_lag_seconds",
            f"how late the event loop ran a timer due every {LOOP_PROBE_S * 1000:g} ms (its work, or waiting for a "
            "core on a busy machine)",
            (),
            LAG,
        )
        self.loop_busy = self._histogram(
            "groupfit_event_loop_busy_seconds",
            f"CPU time of the event loop's thread between two runs of a timer due every {LOOP_PROBE_S * 1000:g} ms: "
            "at least the longest a callback (a request's work on the loop) kept it busy, whatever the machine's load",
            (),
            LAG,
        )
        self.groups = GroupSeries(self.registry, max_groups)
        self._group_gauges()

    def _counter(self, name: str, documentation: str, labels: tuple[str, ...]) -> Counter:
        return Counter(name, documentation, labels, registry=self.registry)

    def _histogram(
        self, name: str, documentation: str, labels: tuple[str, ...], buckets: tuple[float, ...]
    ) -> Histogram:
        return Histogram(name, documentation, labels, buckets=buckets, registry=self.registry)

    def _group_gauges(self) -> None:
        gauge = self.groups.gauge
        self.rscore = gauge("groupfit_group_rscore", "Rscore of the group's last stored assignment")
        self.consumers = gauge("groupfit_group_consumers", "consumers of the group's last stored assignment")
        self.recommended = gauge(
            "groupfit_group_recommended_consumers",
            "consumers the group needs for its stored rates (its algorithm and capacity; GET /v1/groups/{g}/scale)",
        )
        self.actual = gauge(
            "groupfit_group_actual_consumers",
            "consumers holding partitions in the group's stored assignment, when its scale was last computed",
        )
        self.moves = gauge("groupfit_group_moves", "partitions moved by the group's last stored rebalance")
        self.moved_rate = gauge(
            "groupfit_group_moved_rate",
            "rate (the rates' unit, e.g. bytes/s) moved by the group's last stored rebalance",
        )
        self.overloaded = gauge(
            "groupfit_group_overloaded_consumers",
            "consumers above their capacity: in the last stored assignment, then under each newer stored rates",
        )
        self.rates_stored = gauge(
            "groupfit_group_rates_updated_timestamp_seconds",
            "when this process last stored the group's rates (Unix time)",
        )

    async def watch_loop(self) -> None:
        """Measures the event loop until cancelled: how late a timer due every LOOP_PROBE_S runs (what a request
        waits), and the CPU time its thread spent meanwhile (what the loop's own work took: a callback that held
        it for 30 ms shows as 30 ms, while waiting for a core does not count)."""
        loop = asyncio.get_running_loop()
        while True:
            due, cpu = loop.time() + LOOP_PROBE_S, time.thread_time()
            await asyncio.sleep(LOOP_PROBE_S)
            self.loop_lag.observe(max(0.0, loop.time() - due))
            self.loop_busy.observe(time.thread_time() - cpu)

    def computed(self, algorithm: str, seconds: float) -> None:
        self.compute.labels(algorithm).observe(seconds)

    def answered(self, algorithm: str, mode: str) -> None:
        self.rebalances.labels(algorithm, mode).inc()

    def stored(self, group: str, computed: Computed) -> None:
        self.answered(computed.algorithm, "stored")
        self.moves_per_rebalance.labels(computed.algorithm).observe(computed.moves_count)
        self.groups.set(self.rscore, group, computed.rscore)
        self.groups.set(self.consumers, group, computed.consumer_count)
        self.groups.set(self.moves, group, computed.moves_count)
        self.groups.set(self.moved_rate, group, computed.moved_rate)
        self.groups.set(self.overloaded, group, computed.overloaded_consumers)

    def rates_updated(self, group: str) -> None:
        self.groups.set(self.rates_stored, group, time.time())

    def scaled(self, group: str, needed: int, current: int, overloaded: int) -> None:
        self.groups.set(self.recommended, group, needed)
        self.groups.set(self.actual, group, current)
        self.groups.set(self.overloaded, group, overloaded)

    def store_failed(self, reason: str) -> None:
        self.store_errors.labels(reason).inc()

    def forget_group(self, group: str) -> None:
        """A deleted group's series go too."""
        self.groups.forget(group)


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
        error_code = None
        start = time.perf_counter()

        async def send_with_id(message: dict) -> None:
            nonlocal status, error_code
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", []).append((b"x-request-id", request_id.encode("latin-1")))
            elif status >= 400 and error_code is None and message["type"] == "http.response.body":
                error_code = _error_code(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except BaseException as exc:
            if not is_panic(exc) or status != 500:  # (500: no answer started yet)
                raise
            log.error("a panic of the compiled core", exc_info=exc, extra={"fields": {"request_id": request_id}})
            await _answer(send_with_id, compute_failed(f"a panic of the compiled core: {exc}"))
        finally:
            elapsed = time.perf_counter() - start
            route = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"] if scope["method"] in _METHODS else "other"  # a label of bounded values
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
                            **_request_fields(scope, error_code),
                        }
                    },
                )


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})


def _request_fields(scope: dict, error_code: str | None) -> dict[str, Any]:
    """What a log line tells beyond the route: the group (path, or the assign body as the route noted it),
    the algorithm, and the error code of a failed request."""
    state = scope.get("state", {})
    fields = {
        "group": scope.get("path_params", {}).get("group") or state.get("group"),
        "algorithm": state.get("algorithm"),
        "error_code": error_code,
    }
    return {key: value for key, value in fields.items() if value is not None}


async def _answer(send: Any, error: GroupfitError) -> None:
    """An error answered by the middleware itself (what escaped the app's handlers: a panic)."""
    from app.api.errors import STATUS

    await send(
        {
            "type": "http.response.start",
            "status": STATUS[error.code],
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": error_body(error)})


def _error_code(body: bytes) -> str | None:
    try:
        return msgspec.json.decode(body)["error"]["code"]
    except (msgspec.DecodeError, KeyError, TypeError):
        return None


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")[:128]
    return None
