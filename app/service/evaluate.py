"""POST /v1/evaluate as a use case: the request's size checked against the service's limits on the event
loop (cheap), the replay itself in a compute worker (app/service/compute.py), within its deadline."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import msgspec

from app.codec.evaluate import EvaluateRequest
from app.codec.wire import encode
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import consumers_implied
from app.service.compute import ComputePool
from app.settings import Settings
from app.sim.evaluate import check_names, evaluate_request
from app.sim.kafka import KD


class EvaluateService:
    def __init__(self, settings: Settings, pool: ComputePool) -> None:
        self.settings = settings
        self.pool = pool

    def check(self, request: EvaluateRequest) -> None:
        """Refuse, before any work, what the limits do not allow."""
        settings = self.settings
        stream, names = request.stream, request.algorithms
        if len(stream) > settings.max_evaluate_measurements:
            raise AssignmentError(
                ErrorCode.TOO_MANY_PARTITIONS,
                f"{len(stream)} measurements is more than this service replays ({settings.max_evaluate_measurements}); "
                "send a shorter stream or run `groupfit evaluate` locally.",
            )
        cells = sum(len(partitions) for measurement in stream for partitions in measurement.values())
        if cells * len(names) > settings.max_evaluate_cells:
            raise AssignmentError(
                ErrorCode.TOO_MANY_PARTITIONS,
                f"{cells} partition-measurements × {len(names)} algorithms exceeds {settings.max_evaluate_cells}; "
                "send a shorter stream or fewer algorithms, or run `groupfit evaluate` locally.",
            )
        if request.optimum is not None and request.optimum.time_limit_ms > settings.max_exact_time_limit_ms:
            raise AssignmentError(
                ErrorCode.INVALID_PARAMETER,
                f"optimum.time_limit_ms {request.optimum.time_limit_ms} is above this service's limit "
                f"({settings.max_exact_time_limit_ms}); ask for less.",
                {"max_time_limit_ms": settings.max_exact_time_limit_ms},
            )
        check_names(names)
        for name in names:
            kd = KD.match(name)
            if kd:
                consumers_implied(int(kd.group(1)), settings.max_consumers, f"{name}'s consumer count")
        for measurement in stream:
            total = sum(rate for partitions in measurement.values() for rate in partitions.values())
            if math.isfinite(total):  # an infinite or negative total is the replay's invalid_rate
                consumers_implied(total / request.capacity, settings.max_consumers, "Σ rate / capacity")

    async def evaluate(self, request: EvaluateRequest, gone: Callable[[], Awaitable[object]] | None = None) -> bytes:
        self.check(request)
        return await self.pool.run(evaluate_job, msgspec.msgpack.encode(request), gone)


_REQUEST = msgspec.msgpack.Decoder(EvaluateRequest)


def evaluate_job(payload: bytes) -> bytes:
    """The compute worker's entry: an encoded EvaluateRequest → the answer's JSON."""
    return encode(evaluate_request(_REQUEST.decode(payload)))
