"""One assignment computed, without store or HTTP: the request checked against the service's limits, solved by
the compiled core or the reference, and its answer built — what `groupfit assign` runs, and what the service
runs on the event loop or in a compute worker (app/service/assign.py adds the group's state and the store)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec
from pydantic import BaseModel

from app.codec.assign import (
    AssignRequest,
    AssignResponse,
    Move,
    answer_of,
    capacity_of,
    decode_assign,
    previous_of,
    problem_of,
)
from app.codec.groups import HISTORY_MOVES
from app.codec.wire import PartitionRate, check_unique_keys, encode, wired
from app.core import native
from app.core.algorithm import Algorithm, get_algorithm
from app.core.assign import Outcome, solve
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import MAX_CONSUMERS, PartitionKey, within
from app.settings import Settings

if TYPE_CHECKING:
    from groupfit_native import Bulk


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    max_partitions: int
    max_dense_cells: int
    max_consumers: int = MAX_CONSUMERS
    max_time_limit_ms: int | None = None
    native: bool = False
    """Whether the compiled core computes (GROUPFIT_CORE)."""

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            max_partitions=settings.max_partitions,
            max_dense_cells=settings.max_dense_cells,
            max_consumers=settings.max_consumers,
            max_time_limit_ms=settings.max_exact_time_limit_ms,
            native=native.choose(settings.core),
        )


def compute(
    request: AssignRequest,
    partitions: Sequence[PartitionRate],
    previous: dict[str, list[PartitionKey]],
    capacity: float,
    dense: bool,
    limits: Limits,
) -> tuple[Outcome, AssignResponse, float]:
    """The pure part: validate, solve, build the answer (and the seconds the algorithm took). No store, no HTTP."""
    algorithm, params = algorithm_of(request, len(partitions), limits)
    problem = problem_of(request, partitions, previous, capacity, limits.max_consumers)
    started = time.perf_counter()
    outcome = solve(problem, algorithm, params, limits.native)
    seconds = time.perf_counter() - started
    if dense and outcome.dense_delta_size() > limits.max_dense_cells:
        raise AssignmentError(
            ErrorCode.DELTA_TOO_LARGE,
            f"the dense delta would have {outcome.dense_delta_size()} cells (limit {limits.max_dense_cells}); "
            "use the sparse delta (the default).",
        )
    return outcome, answer_of(outcome, dense), seconds


def algorithm_of(request: AssignRequest, partitions: int, limits: Limits) -> tuple[Algorithm, BaseModel | None]:
    """The request's algorithm and parameters, within the service's limits."""
    if partitions > limits.max_partitions:
        raise AssignmentError(
            ErrorCode.TOO_MANY_PARTITIONS,
            f"{partitions} partitions is more than this service takes ({limits.max_partitions}); split the group.",
        )
    algorithm = get_algorithm(request.algorithm)
    params = algorithm.parse_params(request.params)
    budget = getattr(params, "time_limit_ms", None)
    if budget is not None and limits.max_time_limit_ms is not None and budget > limits.max_time_limit_ms:
        raise AssignmentError(
            ErrorCode.INVALID_PARAMETER,
            f"time_limit_ms {budget} is above this service's limit ({limits.max_time_limit_ms}); ask for less.",
            {"max_time_limit_ms": limits.max_time_limit_ms},
        )
    return algorithm, params


def compute_compiled(
    request: AssignRequest, bulk: Bulk, capacity: float, group: str | None, limits: Limits, stored: bool = False
) -> Computed:
    """`compute` and `run_job` for a request the compiled core read (`decode_assign`): the same checks in the
    same order, and the answer (sparse delta) written by the compiled core; with `stored`, also the assignment
    as the store keeps it and the moves of the history."""
    algorithm, params = algorithm_of(request, bulk.size, limits)
    started = time.perf_counter()
    solution, lower_bound = native.solve_bulk(bulk, algorithm.name, capacity, params, limits.max_consumers)
    seconds = time.perf_counter() - started
    used, moves, moved_rate, top, overloaded, rscore = solution.summary(HISTORY_MOVES if stored else 0)
    return Computed(
        solution.answer(algorithm.name, lower_bound, encode(wired(solution.outputs())), encode(group)),
        solution.stored() if stored else b"",
        algorithm.name,
        float(capacity),
        rscore,
        used,
        lower_bound,
        moves,
        moved_rate,
        [Move(*move) for move in top],
        overloaded,
        seconds,
    )


def answer_body(body: bytes, dense: bool, limits: Limits) -> bytes:
    """What `groupfit assign` prints: the answer to a request that describes everything (no stored state)."""
    request, bulk = decode_assign(body, limits.native and not dense)
    if bulk is not None:
        return compute_compiled(request, bulk, capacity_of(request), None, limits).answer
    return encode(answer_request(request, dense, limits))


class AssignJob(msgspec.Struct, array_like=True):
    """Everything one computation needs, sent to a compute worker as MessagePack."""

    request: AssignRequest
    partitions: list[PartitionRate]
    previous: dict[str, list[tuple[str, int]]]
    capacity: float
    dense: bool
    limits: Limits
    body: bytes = b""
    """The request as sent, when its duplicate-key check is left to the job (`check_unique_keys`)."""


class Computed(msgspec.Struct, array_like=True):
    """What the server needs of a computation: the answer's JSON (version null: the store numbers it) and
    what is stored and observed of it."""

    answer: bytes
    assignment: bytes
    algorithm: str
    capacity: float
    rscore: float
    consumer_count: int
    lower_bound: int
    moves_count: int
    moved_rate: float
    top_moves: list[Move]
    """the moves of the largest rate (at most HISTORY_MOVES), for the history"""
    overloaded_consumers: int
    seconds: float


def run_job(job: AssignJob) -> Computed:
    if job.body:
        check_unique_keys(job.body)
    outcome, answer, seconds = compute(job.request, job.partitions, job.previous, job.capacity, job.dense, job.limits)
    answer.group = job.request.group
    keys = outcome.problem.keys
    return Computed(
        encode(answer),
        encode({c: [keys[j] for j in held] for c, held in outcome.assignment.items()}),
        outcome.algorithm,
        outcome.problem.capacity,
        outcome.rscore,
        outcome.consumer_count,
        outcome.problem.lower_bound,
        len(outcome.moved),
        sum(move.rate for move in answer.moves),
        sorted(answer.moves, key=lambda move: -move.rate)[:HISTORY_MOVES],
        sum(1 for c, load in outcome.loads.items() if not within(load, outcome.problem.capacity_of(c))),
        seconds,
    )


_JOB = msgspec.msgpack.Decoder(AssignJob)
COMPUTED = msgspec.msgpack.Decoder(Computed)
"""What the server decodes of a compute worker's answer."""


def assign_job(payload: bytes) -> bytes:
    """The compute worker's entry: an encoded AssignJob → an encoded Computed."""
    return msgspec.msgpack.encode(run_job(_JOB.decode(payload)))


def answer_request(request: AssignRequest, dense: bool, limits: Limits) -> AssignResponse:
    """A request that describes everything (no stored state): what `groupfit assign` computes."""
    if request.partitions is None:
        raise AssignmentError(ErrorCode.INVALID_REQUEST, "give 'partitions': a list of {topic, partition, rate, lag}.")
    return compute(request, request.partitions, previous_of(request) or {}, capacity_of(request), dense, limits)[1]
