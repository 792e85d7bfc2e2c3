"""`groupfit evaluate` and POST /v1/evaluate: replay a stream through algorithms (registered ones,
kd_N and repack@W) and report consumers, Rscore, CBS and, on request, the latency percentiles of §VI-C and each
algorithm's consumers against the exact optimum."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from app.codec.evaluate import EvaluateRequest, EvaluateResponse
from app.core.algorithm import get_algorithm
from app.core.assign import solve
from app.core.errors import AssignmentError
from app.core.model import build_problem
from app.sim.kafka import is_kafka_default, replay_kafka_default
from app.sim.latency import PERCENTILES, LatencyModel, Segments
from app.sim.replay import Prepared, Run, cbs, replay
from app.sim.stream import Measurement, flatten

REPACK_WEIGHTED = re.compile(r"repack@(\d+(?:\.\d+)?)")
"""repack@<W>: repack with consumer_weight W, to place it on the consumers/Rscore frontier."""


def run_named(stream: Sequence[Measurement] | Prepared, capacity: float, name: str, keep: bool = False) -> Run:
    if is_kafka_default(name):
        return replay_kafka_default(stream, capacity, name, keep)
    weighted = REPACK_WEIGHTED.fullmatch(name)
    if weighted:
        run = replay(stream, capacity, "repack", {"consumer_weight": float(weighted.group(1))}, keep=keep)
        run.algorithm = name
        return run
    return replay(stream, capacity, name, keep=keep)


def check_names(names: Sequence[str]) -> None:
    """Fail before any work on a name that is neither registered nor kd_<N> nor repack@<W> (W > 0)."""
    for name in names:
        if is_kafka_default(name):
            continue
        weighted = REPACK_WEIGHTED.fullmatch(name)
        if weighted and float(weighted.group(1)) > 0:
            continue
        try:
            get_algorithm(name)
        except AssignmentError as exc:
            raise AssignmentError(
                exc.code,
                f"{exc.message} Or kd_<N>: Kafka's equal-count assignment over N consumers, 1 ≤ N < 10^6; "
                "or repack@<W>: repack with consumer_weight W > 0.",
                exc.details,
            ) from None


def optimum(stream: Sequence[Measurement], capacity: float, time_limit_ms: int = 1000) -> dict[str, Any]:
    """The fewest consumers of each measurement by the `exact` algorithm (CP-SAT): the count it found,
    its proven lower bound, and how many measurements it proved optimal. The count does not depend on
    the previous assignment, so each measurement is solved on its own."""
    spec = get_algorithm("exact")
    params = spec.parse_params({"time_limit_ms": time_limit_ms})
    found: list[int] = []
    bounds: list[int] = []
    for measurement in stream:
        keys, rates = flatten(measurement)
        outcome = solve(build_problem(keys, rates, None, capacity, {}), spec, params)
        found.append(outcome.consumer_count)
        bounds.append(outcome.outputs.get("consumers_bound", outcome.problem.lower_bound))
    return {
        "avg_consumers": sum(found) / len(found) if found else 0.0,
        "proven": sum(1 for f, b in zip(found, bounds) if f == b),
        "consumers": found,
        "consumers_bound": bounds,
    }


Progress = Callable[[str], None]
"""Told each step's name when it is done (the CLI prints it on standard error)."""


def replay_named(
    stream: Sequence[Measurement] | Prepared,
    capacity: float,
    names: Sequence[str],
    keep: bool = False,
    progress: Progress | None = None,
) -> list[Run]:
    """One run per distinct name, in order; unknown names fail before any work."""
    check_names(names)
    prepared = stream if isinstance(stream, Prepared) else Prepared(stream)
    runs = []
    for name in dict.fromkeys(names):
        runs.append(run_named(prepared, capacity, name, keep))
        if progress is not None:
            progress(name)
    return runs


def results_of(
    runs: Sequence[Run], latency: Mapping[str, Segments] | None = None, best: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The per-algorithm figures of `groupfit evaluate --json`."""
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
            summary = latency[run.algorithm].summary()
            result["latency"] = {name: summary[name] for name in (*PERCENTILES, "max")}
        if best is not None:
            # CBS (Eq. 28) against the exact optimum instead of the best of the run
            excess = [(z - o) / o for z, o in zip(run.consumers, best["consumers"]) if o]
            result["optimum_excess"] = sum(excess) / len(run.consumers) if run.consumers else 0.0
        results[run.algorithm] = result
    return results


def evaluate(
    stream: Sequence[Measurement],
    capacity: float,
    algorithms: Sequence[str],
    latency: LatencyModel | None = None,
    optimum_time_limit_ms: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Every algorithm's figures; latency values are +inf where the model never reads some bytes."""
    runs = replay_named(stream, capacity, algorithms, keep=latency is not None, progress=progress)
    best = optimum(stream, capacity, optimum_time_limit_ms) if optimum_time_limit_ms is not None else None
    if best is not None and progress is not None:
        progress("exact optimum")
    segs = {run.algorithm: run.latency(latency) for run in runs} if latency is not None else None
    return {"results": results_of(runs, segs, best), **({"optimum": best} if best is not None else {})}


def evaluate_request(request: EvaluateRequest, progress: Progress | None = None) -> EvaluateResponse:
    """The one entry for the CLI and POST /v1/evaluate: the request → the figures of `groupfit evaluate --json`.
    An unbounded latency (a queue the model never reads) is null."""
    latency = request.latency
    model = (
        LatencyModel(latency.consumer_throughput, latency.iteration_s, latency.rebalance_s)
        if latency is not None
        else None
    )
    report = evaluate(
        request.stream,
        request.capacity,
        request.algorithms,
        model,
        request.optimum.time_limit_ms if request.optimum is not None else None,
        progress,
    )
    return msgspec.convert(finite_or_null(report), EvaluateResponse)


def finite_or_null(value: Any) -> Any:
    """JSON has no infinity: unbounded figures become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_or_null(v) for v in value]
    return value
