"""POST /v1/placements and `groupfit placement`: brokers, topics and partitions with their current replicas in;
the new replica lists, the moves, per-broker utilisation before and after and the kafka-reassign-partitions
plan out."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from app.codec.wire import PartitionNumber, Topic
from app.core.errors import AssignmentError, ErrorCode
from app.core.placement.model import (
    MAX_BYTES,
    MAX_RATE,
    MIN_RATE,
    Broker,
    Objective,
    Options,
    Partition,
    PlacementProblem,
    build,
    throughput_of,
)
from app.core.placement.plan import BrokerUtilization, Plan

BrokerId = Annotated[int, Meta(ge=0, le=2**31 - 1)]
Bytes = Annotated[int, Meta(ge=0, le=MAX_BYTES)]


class BrokerSpec(Struct, forbid_unknown_fields=True):
    id: BrokerId
    disk: Annotated[int, Meta(ge=1, le=MAX_BYTES, description="bytes the broker's log directories may hold")]
    network: Annotated[
        float,
        Meta(
            ge=MIN_RATE,
            le=MAX_RATE,
            description="bytes/s the broker may take in (replicas' throughput); counted in thousandths of a byte/s",
        ),
    ]
    rack: Annotated[str | None, Meta(description="broker.rack; give every broker one, or none")] = None


class TopicSpec(Struct, forbid_unknown_fields=True):
    name: Topic
    retention_ms: (
        Annotated[
            int,
            Meta(
                ge=-1,
                le=2**63 - 1,
                description="retention.ms (-1: forever); a partition without throughput writes size / retention",
            ),
        ]
        | None
    ) = None


class PartitionSpec(Struct, forbid_unknown_fields=True, gc=False):
    topic: Topic
    partition: PartitionNumber
    replicas: Annotated[list[BrokerId], Meta(min_length=1, description="current brokers, preferred leader first")]
    size: Annotated[Bytes, Meta(description="bytes of one replica")]
    throughput: (
        Annotated[
            float,
            Meta(
                ge=0,
                description="bytes/s written to each replica, counted in thousandths of a byte/s rounded up; default "
                "size / topic retention",
            ),
        ]
        | None
    ) = None


class PlacementOptions(Struct, forbid_unknown_fields=True, kw_only=True):
    objective: Annotated[
        Literal["moves", "balance", "brokers"],
        Meta(
            description="after feasibility: moves = least bytes moved, then balance; balance = lowest peak "
            "utilisation, then bytes; brokers = fewest brokers used, then bytes, then balance"
        ),
    ] = "moves"
    time_limit_ms: Annotated[
        int,
        Meta(
            ge=10,
            le=600_000,
            description="the exact solver's budget; the service takes at most GROUPFIT_MAX_EXACT_TIME_LIMIT_MS",
        ),
    ] = 1000
    max_bytes_moved: Annotated[int, Meta(ge=0, le=2**63 - 1, description="most bytes the plan may copy")] | None = None
    max_utilization: Annotated[
        float, Meta(gt=0, le=1, description="share of each capacity the plan may use (headroom)")
    ] = 1.0


class PlacementRequest(Struct, forbid_unknown_fields=True, kw_only=True):
    solver: Annotated[str, Meta(description="'heuristic' or 'exact'", examples=["heuristic", "exact"])] = "heuristic"
    brokers: Annotated[list[BrokerSpec], Meta(min_length=1)]
    topics: list[TopicSpec] = msgspec.field(default_factory=list)
    partitions: list[PartitionSpec]
    options: PlacementOptions = msgspec.field(default_factory=PlacementOptions)


class PartitionPlacement(Struct, gc=False):
    topic: str
    partition: int
    replicas: list[int]
    previous: list[int]


class ReplicaMove(Struct, gc=False):
    topic: str
    partition: int
    from_: int = msgspec.field(name="from")
    to: int
    bytes: int


class Peak(Struct):
    disk: float
    network: float


class ReassignmentPartition(Struct, gc=False):
    topic: str
    partition: int
    replicas: list[int]


class Reassignment(Struct):
    """What `kafka-reassign-partitions --execute --reassignment-json-file` reads: the partitions that change."""

    version: int
    partitions: list[ReassignmentPartition]


class PlacementResponse(Struct):
    solver: str
    objective: str
    partitions: list[PartitionPlacement]
    moves: list[ReplicaMove]
    bytes_moved: int
    brokers: list[BrokerUtilization]
    peak_before: Peak
    peak_after: Peak
    leaders_changed: Annotated[int, Meta(description="partitions whose preferred leader left and got a new one")]
    optimal: Annotated[bool, Meta(description="proven optimal on every objective (the exact solver only)")]
    bounds: Annotated[
        dict[str, float],
        Meta(description="lower bound per objective (bytes_moved, utilization, brokers) the solver proved"),
    ]
    outputs: dict[str, Any]
    reassignment: Reassignment


def problem_of(request: PlacementRequest) -> PlacementProblem:
    retention = {topic.name: topic.retention_ms for topic in request.topics}
    if len(retention) < len(request.topics):
        twice = sorted(name for name, count in Counter(t.name for t in request.topics).items() if count > 1)
        raise AssignmentError(
            ErrorCode.INVALID_PARAMETER,
            f"topics {twice} are listed more than once; list each topic once.",
            {"topics": twice},
        )
    partitions = []
    for spec in request.partitions:
        throughput = spec.throughput
        if throughput is None:
            throughput = throughput_of(spec.size, retention.get(spec.topic))
            if throughput is None:
                raise AssignmentError(
                    ErrorCode.INVALID_RATE,
                    f"partition {spec.topic}/{spec.partition} has no throughput and topic {spec.topic!r} no "
                    "time-based retention_ms; give one of them.",
                    {"partition": (spec.topic, spec.partition)},
                )
        partitions.append(Partition(spec.topic, spec.partition, tuple(spec.replicas), spec.size, throughput))
    options = request.options
    return build(
        [Broker(b.id, b.disk, b.network, b.rack) for b in request.brokers],
        partitions,
        Options(Objective(options.objective), options.time_limit_ms, options.max_bytes_moved, options.max_utilization),
    )


def answer_of(plan: Plan) -> PlacementResponse:
    problem = plan.problem
    parts = problem.partitions
    return PlacementResponse(
        solver=plan.solver,
        objective=problem.options.objective.value,
        partitions=[
            PartitionPlacement(part.topic, part.partition, replicas, list(part.replicas))
            for part, replicas in zip(parts, plan.replicas)
        ],
        moves=[
            ReplicaMove(parts[m.partition].topic, parts[m.partition].partition, m.source, m.target, m.bytes)
            for m in plan.moves
        ],
        bytes_moved=plan.bytes_moved,
        brokers=plan.brokers,
        peak_before=Peak(*plan.peak_before),
        peak_after=Peak(*plan.peak_after),
        leaders_changed=plan.leaders_changed,
        optimal=plan.optimal,
        bounds=plan.bounds,
        outputs=plan.outputs,
        reassignment=Reassignment(
            1, [ReassignmentPartition(parts[p].topic, parts[p].partition, plan.replicas[p]) for p in plan.changed]
        ),
    )
