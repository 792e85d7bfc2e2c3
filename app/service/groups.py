"""Reading and changing what is stored of a group: its assignment, history and observed rates."""

from __future__ import annotations

import time
from datetime import datetime

from app.codec.assign import assignment_refs
from app.codec.groups import GroupHistory, GroupState, HistoryEntry, RatesAck, RatesUpdate, StoredRates
from app.codec.wire import convert, keys_of
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import validate_partitions
from app.service.clock import now
from app.store.groups import GroupStore, StoredGroup


async def stored_group(store: GroupStore, group: str) -> StoredGroup:
    """The group's stored assignment and version, or group_not_found."""
    stored = await store.get(group)
    if stored is None:
        raise AssignmentError(
            ErrorCode.GROUP_NOT_FOUND, f"group {group!r} has no stored assignment; POST /v1/assign with 'group' first."
        )
    return stored


class GroupService:
    def __init__(self, store: GroupStore, max_partitions: int) -> None:
        self.store = store
        self.max_partitions = max_partitions

    async def state(self, group: str) -> GroupState:
        stored = await stored_group(self.store, group)
        return GroupState(
            group=group,
            version=stored.version,
            algorithm=stored.algorithm,
            capacity=stored.capacity,
            assignment=assignment_refs(stored.assignment),
            updated_at=stored.updated_at,
        )

    async def delete(self, group: str) -> None:
        if not await self.store.delete(group):
            raise AssignmentError(ErrorCode.GROUP_NOT_FOUND, f"group {group!r} has nothing stored.")

    async def history(self, group: str, limit: int) -> GroupHistory:
        versions = await self.store.history(group, limit)
        if not versions:
            raise AssignmentError(ErrorCode.GROUP_NOT_FOUND, f"group {group!r} has no history.")
        return GroupHistory(group, convert(versions, list[HistoryEntry]))

    async def put_rates(self, group: str, update: RatesUpdate) -> RatesAck:
        """Stored only when they would be accepted by an assignment: what is stored is as valid as what is sent."""
        partitions = update.partitions
        if len(partitions) > self.max_partitions:
            raise AssignmentError(
                ErrorCode.TOO_MANY_PARTITIONS, f"more than {self.max_partitions} partitions; split the group."
            )
        validate_partitions(keys_of(partitions), [p.rate for p in partitions], [p.lag for p in partitions])
        try:
            datetime.fromisoformat(update.window_end)
        except ValueError:
            raise AssignmentError(
                ErrorCode.INVALID_REQUEST, f"window_end {update.window_end!r} is not an RFC 3339 time."
            ) from None
        updated_at = now()
        await self.store.put_rates(
            group,
            {"partitions": partitions, "window_end": update.window_end, "updated_at": updated_at},
            time.time_ns() // 1_000_000,
        )
        return RatesAck(group, len(partitions), update.window_end, updated_at)

    async def rates(self, group: str) -> StoredRates:
        rates = await self.store.get_rates(group)
        if rates is None:
            raise AssignmentError(ErrorCode.GROUP_NOT_FOUND, f"group {group!r} has no stored rates.")
        return convert({"group": group, **rates}, StoredRates)
