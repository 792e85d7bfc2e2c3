"""The scaling decision (GET /v1/groups/{group}/scale): a group's stored assignment and rates and the caller's
query → app.core.decision, computed on the event loop when the algorithm is cheap and the group small, else
in a compute worker (least-loaded, repack and exact may take long on a large group)."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from app.codec.assign import AssignRequest
from app.codec.assign_input import Limits, StoredRates, algorithm_of
from app.codec.operations import ScaleQuery, ScaleSignal
from app.codec.wire import PartitionRate, convert
from app.core.algorithm import get_algorithm
from app.core.decision import Decision, GroupState, decide
from app.service.compute import ComputePool
from app.store.groups import StoredGroup


class ScaleJob(msgspec.Struct, array_like=True):
    """Everything one decision needs, sent to a compute worker as MessagePack."""

    algorithm: str
    query: ScaleQuery
    partitions: list[PartitionRate]
    capacity: float
    assignment: dict[str, list[tuple[str, int]]]
    age_s: float
    limits: Limits


def run_scale(job: ScaleJob) -> Decision:
    query = job.query
    algorithm, _ = algorithm_of(
        AssignRequest(algorithm=job.algorithm, params=query.params), len(job.partitions), job.limits
    )
    state = GroupState(
        keys=[(p.topic, p.partition) for p in job.partitions],
        rates=[p.rate for p in job.partitions],
        lags=[p.lag for p in job.partitions],
        capacity=job.capacity,
        assignment=job.assignment,
        member_capacities=query.member_capacities,
        assignment_age_s=job.age_s,
    )
    return decide(state, algorithm, query.params, query.guards, job.limits.max_consumers, job.limits.native)


_JOB = msgspec.msgpack.Decoder(ScaleJob)
_DECISION = msgspec.msgpack.Decoder(dict)


def scale_job(payload: bytes) -> bytes:
    """The compute worker's entry: an encoded ScaleJob → the encoded Decision's fields."""
    return msgspec.msgpack.encode(vars(run_scale(_JOB.decode(payload))))


async def scale_signal(
    group: str,
    stored: StoredGroup,
    rates: StoredRates,
    query: ScaleQuery,
    limits: Limits,
    pool: ComputePool,
) -> ScaleSignal:
    """The decision for `group`, by the query's algorithm (default: the group's own) with its capacity."""
    partitions = convert(rates["partitions"], list[PartitionRate])
    age_s = max(0.0, (datetime.now(UTC) - datetime.fromisoformat(stored.updated_at)).total_seconds())
    algorithm = query.algorithm or stored.algorithm
    job = ScaleJob(algorithm, query, partitions, stored.capacity, stored.assignment, age_s, limits)
    size = len(partitions) + sum(map(len, stored.assignment.values()))
    if get_algorithm(algorithm).cheap and size <= limits.inline_partitions:
        fields = vars(run_scale(job))
    else:
        fields = _DECISION.decode(await pool.run(scale_job, msgspec.msgpack.encode(job)))
    return ScaleSignal(group=group, capacity=stored.capacity, rates_window_end=rates["window_end"], **fields)
