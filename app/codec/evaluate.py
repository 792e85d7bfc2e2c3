"""POST /v1/evaluate and `groupfit evaluate`: a rate stream replayed through algorithms."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from app.codec.wire import Topic
from app.core.algorithm import paper_algorithms

Measurement = dict[Topic, dict[Annotated[str, Meta(pattern=r"^[0-9]{1,10}$")], float]]
"""topic → {partition: rate}, partitions written as integers (JSON keys are strings)."""

Stream = Annotated[list[Measurement], Meta(min_length=1, description="measurements, each topic → {partition: rate}")]


class LatencyOptions(Struct, forbid_unknown_fields=True, kw_only=True):
    consumer_throughput: Annotated[float, Meta(gt=0, description="C̄, a consumer's real throughput")] = 133.0
    iteration_s: Annotated[float, Meta(gt=0)] = 30.0
    rebalance_s: Annotated[float, Meta(ge=0)] = 5.0

    def __post_init__(self) -> None:
        if not self.rebalance_s < self.iteration_s:  # as POST /v1/assign's capacity_from_throughput
            raise ValueError(f"rebalance_s must be below iteration_s ({self.iteration_s}), got {self.rebalance_s}")


class OptimumOptions(Struct, forbid_unknown_fields=True, kw_only=True):
    time_limit_ms: Annotated[int, Meta(ge=1, description="budget of the exact algorithm per measurement")] = 1000


class EvaluateRequest(Struct, forbid_unknown_fields=True, kw_only=True):
    stream: Stream
    capacity: Annotated[float, Meta(gt=0)]
    algorithms: Annotated[
        list[str],
        Meta(
            min_length=1,
            description="registered names, kd_<N> (Kafka's equal-count, N consumers) and repack@<W> (repack with consumer_weight W)",
        ),
    ] = msgspec.field(default_factory=paper_algorithms)
    latency: Annotated[LatencyOptions | None, Meta(description="add latency percentiles (§VI-C)")] = None
    optimum: Annotated[
        OptimumOptions | None, Meta(description="add each algorithm's consumers against the exact optimum")
    ] = None


class LatencyFigures(Struct):
    """Seconds; null when unbounded (the model never reads some bytes: a consumer keeps ≥ C̄ and starts more)."""

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None


class AlgorithmRun(Struct):
    avg_consumers: float
    avg_rscore: float
    cbs: float
    iterations: int
    consumers: list[int]
    rscore: list[float]
    latency: LatencyFigures | UnsetType = UNSET
    optimum_excess: float | UnsetType = UNSET


class OptimumFigures(Struct):
    avg_consumers: float
    proven: int
    consumers: list[int]
    consumers_bound: list[int]


class EvaluateResponse(Struct):
    results: dict[str, AlgorithmRun]
    optimum: OptimumFigures | UnsetType = UNSET
