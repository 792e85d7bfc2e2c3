"""The replica placement use case: a request → the plan of the chosen solver. Stateless: nothing is stored; the
API and `groupfit placement` (from a file or from a live cluster) both call `plan`, within the same limits.

Through the API a placement is admitted as every computation is (app/service/compute.py: a place in the pool,
a deadline, stopped when its client goes away): a small heuristic plan is computed on the event loop, any
other in a compute worker, which also decodes a large body."""

from __future__ import annotations

import msgspec

from app.codec.placement import PlacementRequest, PlacementResponse, answer_of, problem_of
from app.codec.wire import INLINE_BYTES, decode, encode
from app.core.errors import AssignmentError, ErrorCode
from app.core.placement import place
from app.service.compute import ComputePool, Gone, ReadBody, joined
from app.settings import Settings


class PlacementLimits(msgspec.Struct, frozen=True, kw_only=True):
    max_brokers: int
    max_replicas: int
    max_cells: int  # replicas × brokers
    max_time_limit_ms: int
    inline_cells: int = 0  # a heuristic plan of up to this many replicas × brokers is computed on the event loop

    @classmethod
    def of(cls, settings: Settings) -> PlacementLimits:
        return cls(
            max_brokers=settings.max_placement_brokers,
            max_replicas=settings.max_placement_replicas,
            max_cells=settings.max_placement_cells,
            max_time_limit_ms=settings.max_exact_time_limit_ms,
            inline_cells=settings.compute_inline_partitions,
        )


def plan(request: PlacementRequest, limits: PlacementLimits) -> PlacementResponse:
    check_size(request, limits)
    return answer_of(place(problem_of(request), request.solver))


def check_size(request: PlacementRequest, limits: PlacementLimits) -> int:
    """The request within the service's limits, checked before any work (counts only); its replicas × brokers."""
    brokers = len(request.brokers)
    if brokers > limits.max_brokers:
        raise AssignmentError(
            ErrorCode.INVALID_BROKER,
            f"{brokers} brokers is more than this service places on ({limits.max_brokers}); plan the cluster in "
            "parts (e.g. per rack or per topic set).",
            {"brokers": brokers, "max_brokers": limits.max_brokers},
        )
    replicas = sum(len(spec.replicas) for spec in request.partitions)
    if replicas > limits.max_replicas:
        raise AssignmentError(
            ErrorCode.TOO_MANY_PARTITIONS,
            f"{replicas} replicas ({len(request.partitions)} partitions) is more than this service places "
            f"({limits.max_replicas}); plan the topics in parts.",
            {"replicas": replicas, "max_replicas": limits.max_replicas},
        )
    if replicas * brokers > limits.max_cells:
        raise AssignmentError(
            ErrorCode.TOO_MANY_PARTITIONS,
            f"{replicas} replicas × {brokers} brokers is more than this service places ({limits.max_cells}); plan "
            "the topics in parts, or fewer brokers at a time.",
            {"replicas": replicas, "brokers": brokers, "max_cells": limits.max_cells},
        )
    budget = request.options.time_limit_ms
    if budget > limits.max_time_limit_ms:
        raise AssignmentError(
            ErrorCode.INVALID_PARAMETER,
            f"time_limit_ms {budget} is above this service's limit ({limits.max_time_limit_ms}); ask for less.",
            {"max_time_limit_ms": limits.max_time_limit_ms},
        )
    return replicas * brokers


_REQUEST = msgspec.json.Decoder(PlacementRequest)


class PlacementJob(msgspec.Struct, array_like=True):
    body: bytes
    limits: PlacementLimits


_JOB = msgspec.msgpack.Decoder(PlacementJob)


def placement_job(payload: bytes, *blobs: bytes) -> bytes:
    """The compute worker's entry: a PlacementJob (the body as sent) → the answer's JSON."""
    job = joined(_JOB, payload, blobs)
    return encode(plan(decode(_REQUEST, job.body), job.limits))


class PlacementService:
    def __init__(self, settings: Settings, pool: ComputePool) -> None:
        self.limits = PlacementLimits.of(settings)
        self.pool = pool

    async def place(self, read: ReadBody, tenants: tuple[str, ...], gone: Gone | None = None) -> bytes:
        """The JSON answer to a POST /v1/placements body: admitted before the body is read."""
        async with self.pool.admit(tenants) as ticket:
            body = await read()
            if len(body) <= INLINE_BYTES:
                request = decode(_REQUEST, body)
                if request.solver == "heuristic" and check_size(request, self.limits) <= self.limits.inline_cells:
                    return encode(plan(request, self.limits))
            return await self.pool.run(placement_job, PlacementJob(body, self.limits), gone, ticket)
