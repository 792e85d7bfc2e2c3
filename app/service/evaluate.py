"""POST /v1/evaluate as a use case: the body goes as it came to a compute worker (app/service/compute.py),
which decodes it, checks it against the service's limits and replays it, within the pool's deadline: an
evaluation costs the event loop nothing but the bytes. It is admitted (a place in the pool, its tenant's share)
before its body is read."""

from __future__ import annotations

import math

import msgspec

from app.codec.evaluate import EvaluateRequest
from app.codec.wire import decode, encode
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import consumers_implied
from app.service.compute import ComputePool, Gone, ReadBody, joined
from app.settings import Settings
from app.sim.evaluate import check_names, evaluate_request
from app.sim.kafka import KD


class EvaluateLimits(msgspec.Struct, frozen=True):
    max_measurements: int
    max_cells: int
    max_time_limit_ms: int
    max_consumers: int

    @classmethod
    def of(cls, settings: Settings) -> EvaluateLimits:
        return cls(
            settings.max_evaluate_measurements,
            settings.max_evaluate_cells,
            settings.max_exact_time_limit_ms,
            settings.max_consumers,
        )


def check(request: EvaluateRequest, limits: EvaluateLimits) -> None:
    """Refuse, before any work, what the limits do not allow."""
    stream, names = request.stream, request.algorithms
    if len(stream) > limits.max_measurements:
        raise AssignmentError(
            ErrorCode.TOO_MANY_PARTITIONS,
            f"{len(stream)} measurements is more than this service replays ({limits.max_measurements}); "
            "send a shorter stream or run `groupfit evaluate` locally.",
        )
    cells = sum(len(partitions) for measurement in stream for partitions in measurement.values())
    if cells * len(names) > limits.max_cells:
        raise AssignmentError(
            ErrorCode.TOO_MANY_PARTITIONS,
            f"{cells} partition-measurements × {len(names)} algorithms exceeds {limits.max_cells}; "
            "send a shorter stream or fewer algorithms, or run `groupfit evaluate` locally.",
        )
    if request.optimum is not None and request.optimum.time_limit_ms > limits.max_time_limit_ms:
        raise AssignmentError(
            ErrorCode.INVALID_PARAMETER,
            f"optimum.time_limit_ms {request.optimum.time_limit_ms} is above this service's limit "
            f"({limits.max_time_limit_ms}); ask for less.",
            {"max_time_limit_ms": limits.max_time_limit_ms},
        )
    check_names(names)
    for name in names:
        kd = KD.match(name)
        if kd:
            consumers_implied(int(kd.group(1)), limits.max_consumers, f"{name}'s consumer count")
    for measurement in stream:
        total = sum(rate for partitions in measurement.values() for rate in partitions.values())
        if math.isfinite(total):  # an infinite or negative total is the replay's invalid_rate
            consumers_implied(total / request.capacity, limits.max_consumers, "Σ rate / capacity")


class EvaluateJob(msgspec.Struct, array_like=True):
    body: bytes
    limits: EvaluateLimits


class EvaluateService:
    def __init__(self, settings: Settings, pool: ComputePool) -> None:
        self.limits = EvaluateLimits.of(settings)
        self.pool = pool

    async def evaluate(self, read: ReadBody, tenants: tuple[str, ...], gone: Gone | None = None) -> bytes:
        """The JSON answer to a POST /v1/evaluate body: admitted before the body is read."""
        async with self.pool.admit(tenants) as ticket:
            return await self.pool.run(evaluate_job, EvaluateJob(await read(), self.limits), gone, ticket)


_JOB = msgspec.msgpack.Decoder(EvaluateJob)
_REQUEST = msgspec.json.Decoder(EvaluateRequest)


def evaluate_job(payload: bytes, *blobs: bytes) -> bytes:
    """The compute worker's entry: an EvaluateJob → the answer's JSON."""
    job = joined(_JOB, payload, blobs)
    request = decode(_REQUEST, job.body)
    check(request, job.limits)
    return encode(evaluate_request(request))
