"""Reading and changing what is stored of a group: its assignment, history and observed rates."""

from __future__ import annotations

import time
from datetime import datetime

import msgspec
from msgspec import UNSET

from app.codec.assign import assignment_refs
from app.codec.groups import GroupHistory, GroupState, HistoryEntry, RatesAck, RatesUpdate
from app.codec.wire import INLINE_BYTES, convert, decode, encode, keys_of
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import checked_racks, validate_partitions
from app.service.clock import now
from app.service.compute import ComputePool, joined
from app.store.groups import GroupStore, RatesJson, StoredGroup


async def stored_group(store: GroupStore, group: str) -> StoredGroup:
    """The group's stored assignment and version, or group_not_found."""
    stored = await store.get(group)
    if stored is None:
        raise AssignmentError(
            ErrorCode.GROUP_NOT_FOUND, f"group {group!r} has no stored assignment; POST /v1/assign with 'group' first."
        )
    return stored


class RatesJob(msgspec.Struct, array_like=True):
    """A PUT …/rates body to check and to encode as the store keeps it (in a compute worker when it is large)."""

    body: bytes
    max_partitions: int
    updated_at: str


_RATES = msgspec.json.Decoder(RatesUpdate)
_JOB = msgspec.msgpack.Decoder(RatesJob)
_RATES_JSON = msgspec.msgpack.Decoder(RatesJson)
_LOADS = msgspec.json.Decoder(dict[str, float])


def rates_json(job: RatesJob) -> RatesJson:
    """The rates of a PUT body, checked as an assignment would check them: what is stored is as valid as what
    is sent."""
    update = decode(_RATES, job.body)
    partitions = update.partitions
    if len(partitions) > job.max_partitions:
        raise AssignmentError(
            ErrorCode.TOO_MANY_PARTITIONS, f"more than {job.max_partitions} partitions; split the group."
        )
    keys = keys_of(partitions)
    validate_partitions(keys, [p.rate for p in partitions], [p.lag for p in partitions])
    checked_racks(keys, [p.racks or None for p in partitions])
    try:
        datetime.fromisoformat(update.window_end)
    except ValueError:
        raise AssignmentError(
            ErrorCode.INVALID_REQUEST, f"window_end {update.window_end!r} is not an RFC 3339 time."
        ) from None
    return RatesJson.of({"partitions": partitions, "window_end": update.window_end, "updated_at": job.updated_at})


def rates_job(payload: bytes, *blobs: bytes) -> bytes:
    """The compute worker's entry: a RatesJob → the encoded RatesJson."""
    return msgspec.msgpack.encode(rates_json(joined(_JOB, payload, blobs)))


class GroupService:
    def __init__(self, store: GroupStore, max_partitions: int, pool: ComputePool) -> None:
        self.store = store
        self.max_partitions = max_partitions
        self.pool = pool

    async def state(self, group: str) -> GroupState:
        stored = await stored_group(self.store, group)
        return GroupState(
            group=group,
            version=stored.version,
            algorithm=stored.algorithm,
            capacity=stored.capacity,
            assignment=assignment_refs(stored.assignment),
            updated_at=stored.updated_at,
            racks=UNSET if stored.racks is None else stored.racks,
            loads=UNSET if stored.loads_json is None else _LOADS.decode(stored.loads_json),
        )

    async def delete(self, group: str) -> None:
        if not await self.store.delete(group):
            raise AssignmentError(ErrorCode.GROUP_NOT_FOUND, f"group {group!r} has nothing stored.")

    async def history(self, group: str, limit: int) -> GroupHistory:
        versions = await self.store.history(group, limit)
        if not versions:
            raise AssignmentError(ErrorCode.GROUP_NOT_FOUND, f"group {group!r} has no history.")
        return GroupHistory(group, convert(versions, list[HistoryEntry]))

    async def put_rates(self, group: str, body: bytes, tenants: tuple[str, ...] = ()) -> RatesAck:
        """The rates of a PUT body stored as the latest and as a window of the history: a large body is decoded
        and checked by a compute worker (admitted), so the server only moves its bytes."""
        job = RatesJob(body, self.max_partitions, now())
        if len(body) <= INLINE_BYTES:
            rates = rates_json(job)
        else:
            async with self.pool.admit(tenants) as ticket:
                rates = _RATES_JSON.decode(await self.pool.run(rates_job, job, None, ticket))
        await self.store.put_rates_json(group, rates, time.time_ns() // 1_000_000)
        return RatesAck(group, rates.partition_count, rates.window_end, rates.updated_at)

    async def rates(self, group: str) -> bytes:
        """The JSON of GET …/rates: the stored document with its group, its bytes as stored (not decoded)."""
        rates = await self.store.get_rates_json(group)
        if rates is None:
            raise AssignmentError(ErrorCode.GROUP_NOT_FOUND, f"group {group!r} has no stored rates.")
        return b'{"group":' + encode(group) + b"," + rates[1:]
