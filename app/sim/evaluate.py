"""`groupfit evaluate` and POST /v1/evaluate: replay a stream through algorithms (registered ones and
kd_N) and report consumers, Rscore, CBS and, on request, the latency percentiles of §VI-C."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.algorithm import get_algorithm
from app.sim.kafka import is_kafka_default, replay_kafka_default
from app.sim.latency import LatencyModel, segments
from app.sim.replay import Run, cbs, replay
from app.sim.stream import Measurement


def run_named(stream: Sequence[Measurement], capacity: float, name: str, keep: bool = False) -> Run:
    if is_kafka_default(name):
        return replay_kafka_default(stream, capacity, name, keep)
    return replay(stream, capacity, name, keep=keep)


def check_names(names: Sequence[str]) -> None:
    """Fail before any work on a name that is neither registered nor kd_<N>."""
    for name in names:
        if not is_kafka_default(name):
            get_algorithm(name)


def evaluate(
    stream: Sequence[Measurement], capacity: float, algorithms: Sequence[str], latency: LatencyModel | None = None
) -> dict[str, Any]:
    check_names(algorithms)
    runs = [run_named(stream, capacity, name, keep=latency is not None) for name in algorithms]
    scores = cbs(runs)
    results: dict[str, Any] = {}
    for run in runs:
        result: dict[str, Any] = {
            "avg_consumers": run.avg_consumers,
            "avg_rscore": run.avg_rscore,
            "cbs": scores[run.algorithm],
            "iterations": len(run.consumers),
            "consumers": run.consumers,
            "rscore": run.rscore,
        }
        if latency is not None:
            result["latency"] = {k: v for k, v in segments(run.outcomes, latency).summary().items() if k != "above_zero"}
        results[run.algorithm] = result
    return {"results": results}
