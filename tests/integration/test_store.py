"""The group store on a real server and on a real Redis Cluster (three Valkey primaries): the same behaviour,
and every key one group's operations write in one hash slot, so the compare-and-set script can touch them all."""

from __future__ import annotations

import uuid

import msgspec
import pytest
import redis
from redis.crc import key_slot

from app.store.connection import SLICE, seed_nodes
from app.store.groups import GroupStore, Replay

pytestmark = pytest.mark.integration

ASSIGNMENT = {"c-1": [("t", 0), ("t", 1)], "c-2": [("t", 2)]}
RATES = {"partitions": [], "window_end": "2026-11-25T09:00:00Z", "updated_at": "2026-11-25T09:00:01Z"}
# Names that a careless key encoding would split across slots or let collide: braces, separators, unicode.
AWKWARD_GROUPS = ["orders", "a{b}c", "{x}", "a:b", "a}b{", "grüße", "x" * 200, "g:{state}"]


def store(backend, prefix: str) -> GroupStore:
    return GroupStore(backend.url, prefix, 2.0, history_limit=5, idempotency_ttl_s=60)


def keys_written(backend, prefix: str) -> list[bytes]:
    """Every key under `prefix` on every node of the backend."""
    url = backend.url
    nodes = seed_nodes(url)[1] if url.startswith("redis+cluster://") else [("127.0.0.1", backend.port)]
    found = []
    for host, port in nodes:
        with redis.Redis(host=host, port=port) as node:
            found += node.scan_iter(match=f"{prefix}:*", count=1000)
    return found


async def write(store: GroupStore, group: str, expected: int, replay: Replay | None = None, loads: bytes = b""):
    return await store.write_version(
        group,
        expected,
        "mwf",
        100.0,
        msgspec.json.encode(ASSIGNMENT),
        "2026-11-25T09:00:00Z",
        {"algorithm": "mwf"},
        replay,
        loads=loads,
    )


async def test_compare_and_set_history_idempotency_and_rates(redis_backend):
    groups = store(redis_backend, f"t-{uuid.uuid4().hex[:6]}")
    try:
        group = "orders"
        assert (await write(groups, group, 0)).outcome == "written"
        conflict = await write(groups, group, 0)
        assert (conflict.outcome, conflict.version) == ("conflict", 1)
        first = await write(groups, group, 1, Replay("key-1", "fp", b'{"answer":1}'))
        assert (first.outcome, first.version) == ("written", 2)
        again = await write(groups, group, 2, Replay("key-1", "fp", b'{"answer":2}'))
        assert again.outcome == "replayed" and again.replay is not None
        assert (again.replay.answer, again.replay.version) == (b'{"answer":1}', 2)
        stored = await groups.get(group)
        assert stored is not None and stored.version == 2 and stored.assignment == ASSIGNMENT
        assert stored.loads_json is None
        loads = b'{"c-1":70.5,"c-2":20.0}'
        await write(groups, group, 2, loads=loads)
        stored = await groups.get(group)
        assert stored is not None and (stored.version, stored.loads_json) == (3, loads)
        for expected in range(3, 8):  # written without loads: the ones stored were another version's
            await write(groups, group, expected)
        stored = await groups.get(group)
        assert stored is not None and stored.loads_json is None
        assert [entry["version"] for entry in await groups.history(group, 100)] == [8, 7, 6, 5, 4]
        await groups.put_rates(group, RATES, 1_764_000_000_000)
        assert await groups.get_rates(group) == RATES
        replay = await groups.get_replay(group, "key-1")
        assert replay is not None and replay.version == 2
        assert await groups.delete(group) and await groups.get(group) is None and not await groups.delete(group)
        await groups.ping()
    finally:
        await groups.close()


async def test_values_larger_than_a_slice_are_stored_and_read_back_whole(redis_backend):
    """A group's assignment and an answer kept for replay of several MiB (read a slice at a time) come back
    byte for byte, views included, beside the small fields of the same replies."""
    groups = store(redis_backend, f"big-{uuid.uuid4().hex[:6]}")
    assignment = {f"c-{c}": [(f"topic-{c}", p) for p in range(60_000)] for c in range(4)}
    encoded = msgspec.json.encode(assignment)
    answer = b'{"answer":"' + b"x" * (3 * SLICE + 5) + b'"}'
    assert len(encoded) > 2 * SLICE
    try:
        written = await groups.write_version(
            "big", 0, "mwf", 100.0, memoryview(encoded), "2026-11-25T09:00:00Z", {"algorithm": "mwf"},
            Replay("key", "fp", memoryview(answer)),
        )  # fmt: skip
        assert written.outcome == "written"
        stored = await groups.get("big")
        assert stored is not None and stored.version == 1 and stored.algorithm == "mwf"
        assert stored.assignment_json == encoded and stored.assignment == assignment
        replay = await groups.get_replay("big", "key")
        assert replay is not None and replay.answer == answer and replay.version == 1
    finally:
        await groups.close()


@pytest.mark.parametrize("group", AWKWARD_GROUPS)
async def test_every_key_of_a_group_is_in_one_hash_slot(redis_backend, group):
    """Whatever the key encoding, each write operation of the store is done for one group, then every key
    found under the store's prefix (on every node) must hash to the slot of the group's state key."""
    prefix = f"slot-{uuid.uuid4().hex[:6]}"
    groups = store(redis_backend, prefix)
    try:
        await write(groups, group, 0, Replay("idem", "fp", b"{}"))
        await write(groups, group, 1)
        await groups.put_rates(group, RATES, 1_764_000_000_000)
        found = keys_written(redis_backend, prefix)
        assert len(found) >= 7, (
            f"state, history, idempotency (record, index), rates (latest, summary, windows): {found}"
        )
        slots = {key_slot(key) for key in found}
        assert slots == {key_slot(groups._key(group, "state").encode())}, found
    finally:
        await groups.close()
