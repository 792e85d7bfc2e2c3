"""The assignment use case: a request (and, for a group, its stored state) → an answer, stored as the group's
next version by compare-and-set, with its history entry and idempotency record."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import msgspec

from app.codec.assign import AssignRequest, AssignResponse, capacity_of, decode_assign, previous_of, with_version
from app.codec.wire import PartitionRate, convert, encode
from app.core.algorithm import get_algorithm
from app.core.errors import AssignmentError, ErrorCode
from app.service.answer import (
    COMPUTED,
    AssignJob,
    Computed,
    Limits,
    assign_job,
    compute_compiled,
    run_job,
)
from app.service.clock import now
from app.service.compute import ComputePool
from app.settings import Settings
from app.store.groups import GroupStore, Replay, StoredGroup

if TYPE_CHECKING:
    from groupfit_native import Bulk

UNIQUE_KEYS_INLINE_BYTES = 64 * 1024
"""Bodies up to this size are checked for duplicate keys on the event loop; larger ones where they are computed."""

COMPILED_READ_INLINE_BYTES = 1024 * 1024
"""Bodies up to this size are read by the compiled core on the event loop (~2 ms at most); larger ones on a
thread, the GIL released (a thread hop costs more than reading a small body)."""

CHEAP_ALGORITHMS = frozenset(
    {
        "nf",
        "ff",
        "bf",
        "wf",
        "nfd",
        "ffd",
        "bfd",
        "wfd",
        "mwf",
        "mbf",
        "mwfp",
        "mbfp",
        "range",
        "roundrobin",
        "sticky",
        "linear",
    }
)
"""Algorithms whose work grows as n log n with the request's size, with no search budget: up to
GROUPFIT_COMPUTE_INLINE_PARTITIONS they take about a millisecond and are computed on the event loop (a
worker round trip would cost more). Every other algorithm, and every larger request, goes to the pool."""


class Observer(Protocol):
    """Where the use case reports what an operator watches (the API's Prometheus metrics)."""

    def computed(self, algorithm: str, seconds: float) -> None: ...

    def stored(self, group: str, computed: Computed) -> None: ...

    def answered(self, algorithm: str, mode: str) -> None: ...


class AssignService:
    def __init__(
        self, store: GroupStore, settings: Settings, pool: ComputePool, observer: Observer | None = None
    ) -> None:
        self.store = store
        self.limits = Limits.of(settings)
        self.inline_partitions = settings.compute_inline_partitions
        self.inline_compiled = settings.compute_inline_compiled
        self.pool = pool
        self.observer = observer

    async def decode(self, body: bytes, dense: bool, idempotency_key: str | None) -> tuple[AssignRequest, Bulk | None]:
        """The request, its partitions, previous assignment and members read by the compiled core where it
        runs (not for a dense delta, nor with an Idempotency-Key, whose fingerprint is of the decoded request).
        A large body is read on a thread, the GIL released, so the event loop goes on meanwhile."""
        small = len(body) <= UNIQUE_KEYS_INLINE_BYTES
        compiled = self.limits.native and not dense and not idempotency_key
        if compiled and len(body) > COMPILED_READ_INLINE_BYTES:
            return await asyncio.to_thread(decode_assign, body, compiled, False)
        # a large body's duplicate-key check (as costly as its decoding) is left to the compute worker
        return decode_assign(body, compiled, unique_keys=small)

    async def assign(
        self,
        request: AssignRequest,
        dense: bool,
        idempotency_key: str | None,
        gone: Callable[[], Awaitable[object]] | None = None,
        body: bytes = b"",
        bulk: Bulk | None = None,
    ) -> bytes:
        """The answer as JSON: computed, and stored as the group's next version when a group is named (not on
        a dry run). A retry with the same Idempotency-Key and request gets the first answer again. `gone`
        returns when the client has gone away (its computation is then stopped); `body`, the request as sent
        (its duplicate keys are still to be checked when it is large and msgspec decoded it); `bulk`, its partitions, previous
        assignment and members when the compiled core read them (`decode`)."""
        group, store = request.group, self.store
        get_algorithm(request.algorithm)  # an unknown name fails here, before any wait for a worker
        fingerprint = ""  # of the request an Idempotency-Key stands for; only computed when it is stored
        if group and idempotency_key:
            fingerprint = hashlib.sha256(encode(request) + (b"dense" if dense else b"sparse")).hexdigest()
            replay = await store.get_replay(group, idempotency_key)
            if replay is not None:
                return _replayed(replay, fingerprint)
        stored = await store.get(group) if group else None
        if bulk is not None and not bulk.has_previous and stored and not bulk.set_previous(stored.assignment):
            # stored ids the compiled core cannot rank: the whole request goes the reference's way
            request, bulk = decode_assign(body, False, unique_keys=len(body) <= UNIQUE_KEYS_INLINE_BYTES)
        capacity = capacity_of(request, stored.capacity if stored else None)
        if bulk is not None:
            computed = await self._compiled(request, bulk, capacity)
        else:
            computed = await self.run(await self._job(request, stored, capacity, dense, body), gone)
        if self.observer is not None:
            self.observer.computed(computed.algorithm, computed.seconds)
        if not group or request.dry_run:
            if self.observer is not None:
                self.observer.answered(computed.algorithm, "dry_run" if request.dry_run else "stateless")
            return computed.answer
        return await self._store_version(request, group, stored, computed, idempotency_key, fingerprint)

    async def _job(
        self, request: AssignRequest, stored: StoredGroup | None, capacity: float, dense: bool, body: bytes
    ) -> AssignJob:
        partitions = request.partitions
        if partitions is None:
            partitions = await self._stored_rates(request.group)
        previous = previous_of(request)
        if previous is None:
            previous = stored.assignment if stored else {}
        # the partitions and previous assignment travel once, beside the request
        lean = msgspec.structs.replace(request, partitions=None, previous=None)
        unchecked = body if len(body) > UNIQUE_KEYS_INLINE_BYTES else b""  # its duplicate keys: checked there
        return AssignJob(lean, list(partitions), previous, capacity, dense, self.limits, unchecked)

    async def _compiled(self, request: AssignRequest, bulk: Bulk, capacity: float) -> Computed:
        """A request the compiled core read: on the event loop when small (well under a millisecond), else on
        one of the pool's threads, the GIL released."""
        stored = bool(request.group) and not request.dry_run
        job = (request, bulk, capacity, request.group, self.limits, stored)
        if bulk.work <= self.inline_compiled:
            return compute_compiled(*job)
        return await self.pool.run_in_thread(compute_compiled, *job)

    async def run(self, job: AssignJob, gone: Callable[[], Awaitable[object]] | None = None) -> Computed:
        """The computation: on the event loop when it is cheap and small, else in a compute worker."""
        size = len(job.partitions) + len(job.request.members or ()) + sum(map(len, job.previous.values()))
        if job.request.algorithm in CHEAP_ALGORITHMS and size <= self.inline_partitions:
            return run_job(job)
        return COMPUTED.decode(await self.pool.run(assign_job, msgspec.msgpack.encode(job), gone))

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
        computed: Computed,
        idempotency_key: str | None,
        fingerprint: str,
    ) -> bytes:
        expected = (
            request.expected_version if request.expected_version is not None else (stored.version if stored else 0)
        )
        updated_at = now()
        write = await self.store.write_version(
            group,
            expected,
            computed.algorithm,
            computed.capacity,
            computed.assignment,
            updated_at,
            {
                "algorithm": computed.algorithm,
                "rscore": computed.rscore,
                "consumer_count": computed.consumer_count,
                "moves_count": computed.moves_count,
                "updated_at": updated_at,
                "moved_rate": computed.moved_rate,
                "moves": computed.top_moves,
            },
            Replay(idempotency_key, fingerprint, computed.answer) if idempotency_key else None,
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
        if self.observer is not None:
            self.observer.stored(group, computed)
        return with_version(computed.answer, write.version)


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
