"""The assignment use case: a request (and, for a group, its stored state) → an answer, stored as the group's
next version by compare-and-set, with its history entry and idempotency record."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

from app.codec.assign import AssignRequest, AssignResponse, answer_of, capacity_of, previous_of, problem_of
from app.codec.wire import PartitionRate, convert, encode
from app.core import native
from app.core.algorithm import get_algorithm
from app.core.assign import Outcome, solve
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import PartitionKey
from app.service.clock import now
from app.settings import Settings
from app.store.groups import GroupStore, Replay, StoredGroup

INLINE_PARTITIONS = 5000
"""Smaller requests are computed on the event loop: a thread hop costs more than ~1 ms of work."""


class Observer(Protocol):
    """Where the use case reports what an operator watches (the API's Prometheus metrics)."""

    def computed(self, algorithm: str, seconds: float) -> None: ...

    def stored(self, group: str, outcome: Outcome) -> None: ...


@dataclass(frozen=True)
class Limits:
    max_partitions: int
    max_dense_cells: int
    native: bool = False
    """Whether the compiled core computes (GROUPFIT_CORE)."""

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(settings.max_partitions, settings.max_dense_cells, native.choose(settings.core))


def compute(
    request: AssignRequest,
    partitions: Sequence[PartitionRate],
    previous: dict[str, list[PartitionKey]],
    capacity: float,
    dense: bool,
    limits: Limits,
    observer: Observer | None = None,
) -> tuple[Outcome, AssignResponse]:
    """The pure part: validate, solve, build the answer. No store, no HTTP."""
    if len(partitions) > limits.max_partitions:
        raise AssignmentError(
            ErrorCode.TOO_MANY_PARTITIONS,
            f"{len(partitions)} partitions is more than this service takes ({limits.max_partitions}); split the group.",
        )
    algorithm = get_algorithm(request.algorithm)
    params = algorithm.parse_params(request.params)
    problem = problem_of(request, partitions, previous, capacity)
    started = time.perf_counter()
    outcome = solve(problem, algorithm, params, limits.native)
    if observer is not None:
        observer.computed(algorithm.name, time.perf_counter() - started)
    if dense and outcome.dense_delta_size() > limits.max_dense_cells:
        raise AssignmentError(
            ErrorCode.DELTA_TOO_LARGE,
            f"the dense delta would have {outcome.dense_delta_size()} cells (limit {limits.max_dense_cells}); "
            "use the sparse delta (the default).",
        )
    return outcome, answer_of(outcome, dense)


def answer_request(request: AssignRequest, dense: bool, limits: Limits) -> AssignResponse:
    """A request that describes everything (no stored state): what `groupfit assign` computes."""
    if request.partitions is None:
        raise AssignmentError(ErrorCode.INVALID_REQUEST, "give 'partitions': a list of {topic, partition, rate, lag}.")
    return compute(request, request.partitions, previous_of(request) or {}, capacity_of(request), dense, limits)[1]


class AssignService:
    def __init__(self, store: GroupStore, settings: Settings, observer: Observer | None = None) -> None:
        self.store = store
        self.limits = Limits.of(settings)
        self.observer = observer

    async def assign(self, request: AssignRequest, dense: bool, idempotency_key: str | None) -> bytes:
        """The answer as JSON: computed, and stored as the group's next version when a group is named (not on
        a dry run). A retry with the same Idempotency-Key and request gets the first answer again."""
        group, store = request.group, self.store
        fingerprint = ""  # of the request an Idempotency-Key stands for; only computed when it is stored
        if group and idempotency_key:
            fingerprint = hashlib.sha256(encode(request) + (b"dense" if dense else b"sparse")).hexdigest()
            replay = await store.get_replay(group, idempotency_key)
            if replay is not None:
                return _replayed(replay, fingerprint)
        stored = await store.get(group) if group else None
        partitions = request.partitions
        if partitions is None:
            partitions = await self._stored_rates(group)
        previous = previous_of(request)
        if previous is None:
            previous = stored.assignment if stored else {}
        capacity = capacity_of(request, stored.capacity if stored else None)

        def run() -> tuple[Outcome, AssignResponse]:
            return compute(request, partitions, previous, capacity, dense, self.limits, self.observer)

        # large requests in a thread so health checks and other requests are not held up meanwhile
        outcome, answer = run() if len(partitions) < INLINE_PARTITIONS else await asyncio.to_thread(run)
        answer.group = group
        if not group or request.dry_run:
            return encode(answer)
        return await self._store_version(request, group, stored, outcome, answer, idempotency_key, fingerprint)

    async def _stored_rates(self, group: str | None) -> list[PartitionRate]:
        if not group:
            raise AssignmentError(
                ErrorCode.INVALID_REQUEST,
                "give 'partitions', or a 'group' whose rates were stored with PUT /v1/groups/{group}/rates.",
            )
        rates = await self.store.get_rates(group)
        if rates is None:
            raise AssignmentError(
                ErrorCode.NO_RATES,
                f"group {group!r} has no stored rates; send 'partitions' or PUT /v1/groups/{group}/rates first.",
            )
        return convert(rates["partitions"], list[PartitionRate])

    async def _store_version(
        self,
        request: AssignRequest,
        group: str,
        stored: StoredGroup | None,
        outcome: Outcome,
        answer: AssignResponse,
        idempotency_key: str | None,
        fingerprint: str,
    ) -> bytes:
        expected = (
            request.expected_version if request.expected_version is not None else (stored.version if stored else 0)
        )
        keys, updated_at = outcome.problem.keys, now()
        write = await self.store.write_version(
            group,
            expected,
            outcome.algorithm,
            outcome.problem.capacity,
            {c: [keys[j] for j in held] for c, held in outcome.assignment.items()},
            updated_at,
            {
                "algorithm": outcome.algorithm,
                "rscore": outcome.rscore,
                "consumer_count": outcome.consumer_count,
                "moves_count": len(outcome.moved),
                "updated_at": updated_at,
            },
            Replay(idempotency_key, fingerprint, encode(answer)) if idempotency_key else None,
        )
        if write.replay is not None:  # a concurrent request with the same Idempotency-Key was stored first
            return _replayed(write.replay, fingerprint)
        if write.outcome == "conflict":
            raise AssignmentError(
                ErrorCode.VERSION_CONFLICT,
                f"group {group!r} is at version {write.version}, not {expected}; "
                f"read it again and retry with expected_version={write.version}.",
                {"current_version": write.version, "expected_version": expected},
            )
        answer.version = write.version
        if self.observer is not None:
            self.observer.stored(group, outcome)
        return encode(answer)


def _replayed(replay: Replay, fingerprint: str) -> bytes:
    """The stored answer of the request that first used this Idempotency-Key, if this is that request again."""
    if replay.fingerprint != fingerprint:
        raise AssignmentError(
            ErrorCode.IDEMPOTENCY_KEY_REUSED,
            "this Idempotency-Key was used with another request body; use a new key for a new request.",
        )
    answer = _ANSWER.decode(replay.answer)
    answer.version = replay.version
    return encode(answer)


_ANSWER = msgspec.json.Decoder(AssignResponse)
