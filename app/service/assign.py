"""The assignment use case: a request (and, for a group, its stored state) → an answer, stored as the group's
next version by compare-and-set, with its history entry and idempotency record."""

from __future__ import annotations

import asyncio
from typing import Protocol

import msgspec

from app.codec.assign import DeltaForm, with_version
from app.codec.assign_input import (
    AssignInput,
    AssignJob,
    Computation,
    Computed,
    EncodedInput,
    Limits,
    compiled_input,
    decode_assign,
    encoded_input,
)
from app.codec.wire import INLINE_BYTES, READ_INLINE_BYTES
from app.core.algorithm import get_algorithm
from app.core.errors import AssignmentError, ErrorCode
from app.service.clock import now
from app.service.compute import ComputePool, Gone, joined
from app.settings import Settings
from app.store.groups import GroupStore, Replay, StoredGroup


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
        self.pool = pool
        self.observer = observer

    async def assign(
        self,
        decoded: AssignInput,
        idempotency_key: str | None = None,
        gone: Gone | None = None,
        tenants: tuple[str, ...] = (),
    ) -> list[bytes | memoryview]:
        """The answer as the parts of its JSON: computed, and stored as the group's next version when a group is
        named (not on a dry run). A retry with the same Idempotency-Key and request gets the first answer again. The
        group's stored assignment and rates are read as stored (bytes) and decoded where the request is computed."""
        request, store = decoded.request, self.store
        group = request.group
        get_algorithm(request.algorithm)  # an unknown name fails here, before any wait for a worker
        if group and idempotency_key:
            replay = await store.get_replay(group, idempotency_key)
            if replay is not None:
                return _replayed(replay, decoded.fingerprint)
        stored, rates = None, None
        if group and decoded.needs_rates:
            stored, rates = await store.get_with_rates(group)
        elif group:
            stored = await store.get(group)
        computation = decoded.completed(
            stored.assignment_json if stored else None,
            stored.capacity if stored else None,
            rates,
            stored.racks if stored else None,
        )
        computed = await self.compute(computation, gone, tenants)
        if self.observer is not None:
            self.observer.computed(computed.algorithm, computed.seconds)
        if not group or request.dry_run:
            if self.observer is not None:
                self.observer.answered(computed.algorithm, "dry_run" if request.dry_run else "stateless")
            return [computed.answer]
        return await self._store_version(decoded, group, stored, computed, idempotency_key)

    async def decode(self, body: bytes, delta: DeltaForm, keyed: bool, tenants: tuple[str, ...] = ()) -> AssignInput:
        """A small body is read here (a thread hop costs more than reading it); a larger one by the compiled reader
        on a thread (it releases the GIL, so the event loop goes on meanwhile) where it takes it, else by a
        compute worker (admitted: msgspec holds the GIL as long as it decodes), so the server holds none of it."""
        if len(body) <= INLINE_BYTES:
            return decode_assign(body, self.limits, delta, keyed)
        compiled = (
            compiled_input(body, self.limits, delta, keyed)
            if len(body) <= READ_INLINE_BYTES
            else await asyncio.to_thread(compiled_input, body, self.limits, delta, keyed)
        )
        if compiled is not None:
            return compiled
        async with self.pool.admit(tenants) as ticket:
            return _ENCODED.decode(await self.pool.run(decode_job, DecodeJob(body, delta, keyed), None, ticket))

    async def compute(
        self, computation: Computation, gone: Gone | None = None, tenants: tuple[str, ...] = ()
    ) -> Computed:
        """On the event loop when it is small and cheap, else off it, admitted for `tenants`: in a compute worker,
        or on one of the pool's threads when it runs in this process (the compiled core, the GIL released)."""
        if computation.inline(self.limits):
            return computation.compute(self.limits)
        async with self.pool.admit(tenants) as ticket:
            offloaded = computation.offload()
            if offloaded is None:
                return await self.pool.run_in_thread(computation.compute, self.limits, ticket=ticket)
            job = AssignJob(offloaded, self.limits)
            return _COMPUTED.decode(await self.pool.run(assign_job, job, gone, ticket))

    async def _store_version(
        self,
        decoded: AssignInput,
        group: str,
        stored: StoredGroup | None,
        computed: Computed,
        idempotency_key: str | None,
    ) -> list[bytes | memoryview]:
        request, fingerprint = decoded.request, decoded.fingerprint
        expected = (
            request.expected_version if request.expected_version is not None else (stored.version if stored else 0)
        )
        updated_at = now()
        entry = {
            "algorithm": computed.algorithm,
            "rscore": computed.rscore,
            "consumer_count": computed.consumer_count,
            "moves_count": computed.moves_count,
            "updated_at": updated_at,
            "moved_rate": computed.moved_rate,
            "moves": computed.top_moves,
        }
        if computed.cross_zone_rate is not None:
            entry["cross_zone_rate"] = computed.cross_zone_rate
        write = await self.store.write_version(
            group,
            expected,
            computed.algorithm,
            computed.capacity,
            computed.assignment,
            updated_at,
            entry,
            Replay(idempotency_key, fingerprint, computed.answer) if idempotency_key else None,
            computed.racks,
            new=stored is None,
            loads=computed.loads,
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


def _replayed(replay: Replay, fingerprint: str) -> list[bytes | memoryview]:
    """The stored answer of the request that first used this Idempotency-Key, if this is that request again."""
    if replay.fingerprint != fingerprint:
        raise AssignmentError(
            ErrorCode.IDEMPOTENCY_KEY_REUSED,
            "this Idempotency-Key was used with another request body; use a new key for a new request.",
        )
    return with_version(replay.answer, replay.version)


class DecodeJob(msgspec.Struct, array_like=True):
    """A large body for a compute worker to decode the reference's way."""

    body: bytes
    delta: DeltaForm
    keyed: bool


_DECODE_JOB = msgspec.msgpack.Decoder(DecodeJob)
_ENCODED = msgspec.msgpack.Decoder(EncodedInput)


def decode_job(payload: bytes, *blobs: bytes) -> bytes:
    """The compute worker's entry: a DecodeJob → the encoded EncodedInput."""
    job = joined(_DECODE_JOB, payload, blobs)
    return msgspec.msgpack.encode(encoded_input(job.body, job.delta, job.keyed))


_JOB = msgspec.msgpack.Decoder(AssignJob)
_COMPUTED = msgspec.msgpack.Decoder(Computed)


def assign_job(payload: bytes, *blobs: bytes) -> bytes:
    """The compute worker's entry: an AssignJob → an encoded Computed."""
    return msgspec.msgpack.encode(joined(_JOB, payload, blobs).run())
