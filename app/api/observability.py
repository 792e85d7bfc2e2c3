"""Request ids, one JSON log line per request, and the Prometheus metrics (a pure ASGI middleware:
Starlette's BaseHTTPMiddleware would cost more than a 1 000-partition assignment)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from app.api.group_table import GroupTable
from app.codec.wire import error_body
from app.core.errors import GroupfitError
from app.service.compute import compute_failed, is_panic

if TYPE_CHECKING:
    from app.codec.assign_input import Computed

log = logging.getLogger("groupfit")


SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
"""Buckets of a duration: an assignment's computation; a request's from the second (a millisecond) on."""
MOVES = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 20000)
"""Buckets of the partitions one rebalance moves."""
LAG = (0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
"""Buckets of the event loop's lag (no request should keep it busy for more than 20 ms)."""
LOOP_PROBE_S = 0.005
"""How often the event loop's lag is measured."""
LOOP_LAG = (
    f"how late the event loop ran a timer due every {LOOP_PROBE_S * 1000:g} ms (its work, or waiting for a core on "
    "a busy machine)"
)
LOOP_BUSY = (
    f"CPU time of the event loop's thread between two runs of a timer due every {LOOP_PROBE_S * 1000:g} ms: at "
    "least the longest a callback (a request's work on the loop) kept it busy, whatever the machine's load"
)

GROUP_GAUGES = {
    "groupfit_group_rscore": "Rscore of the group's last stored assignment",
    "groupfit_group_consumers": "consumers of the group's last stored assignment",
    "groupfit_group_recommended_consumers": (
        "consumers the group needs for its stored rates (its algorithm and capacity; GET /v1/groups/{g}/scale)"
    ),
    "groupfit_group_actual_consumers": (
        "consumers holding partitions in the group's stored assignment, when its scale was last computed"
    ),
    "groupfit_group_moves": "partitions moved by the group's last stored rebalance",
    "groupfit_group_moved_rate": "rate (the rates' unit, e.g. bytes/s) moved by the group's last stored rebalance",
    "groupfit_group_cross_zone_rate": (
        "rate read across zones in the group's last stored assignment (zone-aware requests only)"
    ),
    "groupfit_group_overloaded_consumers": (
        "consumers above their capacity: in the last stored assignment, then under each newer stored rates"
    ),
    "groupfit_group_rates_updated_timestamp_seconds": "when this service last stored the group's rates (Unix time)",
}
"""The per-group gauges (label `group`): at most GROUPFIT_METRICS_MAX_GROUPS groups have series, the least
recently updated group's dropped when another comes, whatever the number of groups the service has seen."""

MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
"""Set (by `groupfit serve` with GROUPFIT_WORKERS > 1, or by the deployment) to the directory the worker
processes share their metrics in: prometheus_client's files of counters and histograms, summed by whichever
process answers /metrics, and the table of per-group gauges (app/api/group_table.py)."""
GROUP_TABLE_FILE = "groups.table"


class GroupGauges:
    """A collector of the per-group gauges, read from the table at each scrape."""

    def __init__(self, table: GroupTable) -> None:
        self.table = table

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for gauge, series in self.table.series().items():
            family = GaugeMetricFamily(gauge, GROUP_GAUGES[gauge], labels=["group"])
            for group, value in series:
                family.add_metric([group], value)
            yield family


class Metrics:
    def __init__(self, max_groups: int = 1000) -> None:
        shared = os.environ.get(MULTIPROCESS_DIR)
        self.registry = CollectorRegistry()
        # with several processes each writes its counters and histograms to its own files (registered nowhere:
        # the scrape sums the files); with one, they live in the registry
        own = None if shared else self.registry
        if shared:
            MultiProcessCollector(self.registry, shared)
        counter = functools.partial(Counter, registry=own)
        histogram = functools.partial(Histogram, registry=own)
        by_route = ("method", "route", "status")
        self.requests = counter("groupfit_http_requests", "HTTP requests by route and status", by_route)
        self.latency = histogram(
            "groupfit_http_request_duration_seconds", "HTTP request latency by route and status", by_route,
            buckets=SECONDS[1:],
        )  # fmt: skip
        self.compute = histogram(
            "groupfit_assignment_compute_seconds", "time to compute an assignment, by algorithm", ("algorithm",),
            buckets=SECONDS,
        )  # fmt: skip
        self.rebalances = counter(
            "groupfit_rebalances_answered",
            "assignments answered, by algorithm and mode (stored, dry_run, stateless)",
            ("algorithm", "mode"),
        )
        self.moves_per_rebalance = histogram(
            "groupfit_rebalance_moves", "partitions moved per stored rebalance, by algorithm", ("algorithm",),
            buckets=MOVES,
        )  # fmt: skip
        self.store_errors = counter(
            "groupfit_store_errors", "requests Redis did not serve (timeout, refused), by error", ("reason",)
        )
        self.loop_lag = histogram("groupfit_event_loop_lag_seconds", LOOP_LAG, buckets=LAG)
        self.loop_busy = histogram("groupfit_event_loop_busy_seconds", LOOP_BUSY, buckets=LAG)
        self.groups = GroupTable(list(GROUP_GAUGES), max_groups, Path(shared) / GROUP_TABLE_FILE if shared else None)
        self.registry.register(GroupGauges(self.groups))
        self._requests: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    def exposition(self) -> bytes:
        """The Prometheus text of every process's metrics."""
        return generate_latest(self.registry)

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        """An HTTP request answered (its series made once per route and status: labels() costs a lookup)."""
        key = (method, route, str(status))
        series = self._requests.get(key)
        if series is None:
            series = self._requests[key] = (self.requests.labels(*key), self.latency.labels(*key))
        series[0].inc()
        series[1].observe(seconds)

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
        self.groups.set(
            group,
            {
                "groupfit_group_rscore": computed.rscore,
                "groupfit_group_consumers": computed.consumer_count,
                "groupfit_group_moves": computed.moves_count,
                "groupfit_group_moved_rate": computed.moved_rate,
                "groupfit_group_overloaded_consumers": computed.overloaded_consumers,
                "groupfit_group_cross_zone_rate": computed.cross_zone_rate,
            },
        )

    def rates_updated(self, group: str) -> None:
        self.groups.set(group, {"groupfit_group_rates_updated_timestamp_seconds": time.time()})

    def scaled(self, group: str, needed: int, current: int, overloaded: int) -> None:
        self.groups.set(
            group,
            {
                "groupfit_group_recommended_consumers": needed,
                "groupfit_group_actual_consumers": current,
                "groupfit_group_overloaded_consumers": overloaded,
            },
        )

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
            self.metrics.request(method, route, status, elapsed)
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
