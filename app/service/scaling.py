"""The scaling decision (GET /v1/groups/{group}/scale): a group's stored assignment and rates and the caller's
query → app.core.decision, computed on the event loop when the algorithm is cheap and the group small, else
in a compute worker (least-loaded, repack and exact may take long on a large group), admitted for the caller's
tenants. The stored assignment and rates travel as stored (JSON): a large group's are decoded where the
decision is computed, never on the event loop."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from app.codec.assign import AssignRequest
from app.codec.assign_input import Limits, algorithm_of, stored_assignment, stored_rates
from app.codec.operations import ScaleQuery, ScaleSignal
from app.codec.wire import INLINE_BYTES
from app.core.algorithm import get_algorithm
from app.core.decision import GroupState, decide
from app.service.compute import ComputePool, joined
from app.store.groups import StoredGroup


class ScaleJob(msgspec.Struct, array_like=True):
    """Everything one decision needs, the assignment and rates as stored (sent to a compute worker beside it)."""

    group: str
    algorithm: str
    query: ScaleQuery
    rates: bytes
    capacity: float
    assignment: bytes
    age_s: float
    limits: Limits


def run_scale(job: ScaleJob) -> ScaleSignal:
    query = job.query
    rates = stored_rates(job.rates)
    partitions = rates.partitions
    algorithm, _ = algorithm_of(
        AssignRequest(algorithm=job.algorithm, params=query.params), len(partitions), job.limits
    )
    state = GroupState(
        keys=[(p.topic, p.partition) for p in partitions],
        rates=[p.rate for p in partitions],
        lags=[p.lag for p in partitions],
        capacity=job.capacity,
        assignment=stored_assignment(job.assignment),
        member_capacities=query.member_capacities,
        assignment_age_s=job.age_s,
    )
    decision = decide(state, algorithm, query.params, query.guards, job.limits.max_consumers, job.limits.native)
    return ScaleSignal(group=job.group, capacity=job.capacity, rates_window_end=rates.window_end, **vars(decision))


_JOB = msgspec.msgpack.Decoder(ScaleJob)
_SIGNAL = msgspec.msgpack.Decoder(ScaleSignal)


def scale_job(payload: bytes, *blobs: bytes) -> bytes:
    """The compute worker's entry: a ScaleJob → the encoded ScaleSignal."""
    return msgspec.msgpack.encode(run_scale(joined(_JOB, payload, blobs)))


async def scale_signal(
    group: str,
    stored: StoredGroup,
    rates: bytes,
    query: ScaleQuery,
    limits: Limits,
    pool: ComputePool,
    tenants: tuple[str, ...] = (),
) -> ScaleSignal:
    """The decision for `group`, by the query's algorithm (default: the group's own) with its capacity; `rates`:
    the group's latest rates as stored."""
    age_s = max(0.0, (datetime.now(UTC) - datetime.fromisoformat(stored.updated_at)).total_seconds())
    algorithm = query.algorithm or stored.algorithm
    job = ScaleJob(group, algorithm, query, rates, stored.capacity, stored.assignment_json, age_s, limits)
    if get_algorithm(algorithm).cheap and len(rates) + len(stored.assignment_json) <= INLINE_BYTES:
        return run_scale(job)
    async with pool.admit(tenants) as ticket:
        return _SIGNAL.decode(await pool.run(scale_job, job, None, ticket))
