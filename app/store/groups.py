"""Each group's state in Redis: the current assignment with its version (written by compare-and-set),
a capped history of past versions, the latest observed rates, and idempotency records.

Keys share the hash tag `{group}` so one group's keys live on one shard (one Redis Cluster slot) and one
script can touch them all. What users choose cannot make two keys meet: the group is percent-encoded
inside the tag (no `{`, `}` or `:` left in it) and an Idempotency-Key is hashed, so
`prefix:{group}:state|history|rates|idempotency` and `prefix:{group}:idempotency:<sha-256>` are distinct
for distinct (group, kind, key). A version, its history entry and its idempotency record are written by
one Lua script: all or nothing; the group's idempotency records are indexed, so deleting the group
deletes them too.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

import msgspec
from redis.exceptions import RedisClusterException, RedisError

from app.store.connection import Cluster, connect

_WRITE_VERSION = """
if ARGV[8] ~= '' then
  local seen = redis.call('HMGET', KEYS[3], 'fingerprint', 'version', 'answer')
  if seen[1] then
    return {'replayed', tonumber(seen[2]), seen[1], seen[3]}
  end
end
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if redis.call('HGET', KEYS[1], 'write') == ARGV[11] then
  return {'written', current}
end
if current ~= tonumber(ARGV[1]) then
  return {'conflict', current}
end
local version = current + 1
redis.call('HSET', KEYS[1], 'version', version, 'algorithm', ARGV[2], 'capacity', ARGV[3],
           'assignment', ARGV[4], 'updated_at', ARGV[5], 'write', ARGV[11])
redis.call('LPUSH', KEYS[2], '{"version":' .. version .. ',' .. ARGV[6])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[7]) - 1)
if ARGV[8] ~= '' then
  local ttl = tonumber(ARGV[10])
  redis.call('HSET', KEYS[3], 'fingerprint', ARGV[8], 'version', version, 'answer', ARGV[9])
  redis.call('EXPIRE', KEYS[3], ttl)
  local now = tonumber(redis.call('TIME')[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  redis.call('ZADD', KEYS[4], now + ttl, KEYS[3])
  redis.call('EXPIRE', KEYS[4], ttl)
end
return {'written', version}
"""
"""KEYS: state, history, idempotency record, index of the group's idempotency records (scored by when they
expire). ARGV: expected version, algorithm, capacity, assignment,
updated_at, history entry without its version, history limit, request fingerprint ('' without an
Idempotency-Key), answer, idempotency TTL, write id (random, one per call). An idempotency record is looked
at first, inside the script, so concurrent retries of one request (or a retry of a write whose reply was
lost) replay it instead of racing the compare-and-set. The write id makes the script itself safe to send
twice: when the client resends it after losing the reply (a cluster client does, after a node error), the
version it wrote is answered again instead of a conflict with itself."""


_DELETE = """
local index = KEYS[#KEYS]
local records = redis.call('ZRANGE', index, 0, -1)
local removed = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('DEL', unpack(KEYS, 4))
for first = 1, #records, 1000 do
  redis.call('DEL', unpack(records, first, math.min(first + 999, #records)))
end
return removed
"""
"""KEYS: state, history, rates, then the group's other keys, last the index of its idempotency records.
Deletes them all and every indexed record (all in the group's slot); answers how many of the first three
existed."""

_TAG_ESCAPES = str.maketrans({"%": "%25", "{": "%7B", "}": "%7D", ":": "%3A"})


def group_tag(group: str) -> str:
    """The group as it sits in its keys' hash tag: percent-encoded, so it holds no `}` (which would end the
    tag early) and no `:` (which separates the kind), and distinct groups stay distinct. Names without
    these characters are unchanged."""
    return group.translate(_TAG_ESCAPES)


def redis_key(prefix: str, group: str, kind: str, idempotency_key: str | None = None) -> str:
    """The Redis key of one thing of a group: `kind` is state, history, rates or idempotency (the index of
    the records); with `idempotency_key`, the record of that key, named by its SHA-256."""
    key = f"{prefix}:{{{group_tag(group)}}}:{kind}"
    if idempotency_key is not None:
        key += ":" + hashlib.sha256(idempotency_key.encode()).hexdigest()
    return key


_PUT_RATES = """
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], 'window_end', ARGV[2], 'updated_at', ARGV[3], 'partition_count', ARGV[4])
if tonumber(ARGV[7]) > 0 then
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[6])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[8])
  local extra = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[7])
  if extra > 0 then
    redis.call('ZREMRANGEBYRANK', KEYS[3], 0, extra - 1)
  end
end
return 1
"""
"""KEYS: latest rates, their summary, the rates windows (a sorted set scored by the time each was stored).
ARGV: latest rates document, window end, stored at, partition count, score (ms), window, most windows kept
(0: none), oldest score kept. One script, so the latest rates, their summary and the bounded history never
disagree and the history is trimmed (by count and by age) in the same step that adds to it."""


class StoreUnavailable(Exception):
    """Redis did not answer in time or refused the connection."""


@dataclass
class StoredGroup:
    version: int
    algorithm: str
    capacity: float
    assignment: dict[str, list[tuple[str, int]]]
    updated_at: str


@dataclass(frozen=True)
class RatesWindows:
    """How much of a group's rates history is kept: at most `limit` windows, none older than `max_age_s`."""

    limit: int = 1000
    max_age_s: float = 7 * 86400


@dataclass
class GroupSummaryFields:
    group: str
    version: int | None
    algorithm: str | None
    capacity: float | None
    updated_at: str | None
    last: dict[str, Any] | None  # the newest history entry
    rates_window_end: str | None
    rates_updated_at: str | None
    partition_count: int | None


@dataclass
class Replay:
    """What a request with an Idempotency-Key got: kept so a retry gets the same answer."""

    key: str
    fingerprint: str
    answer: bytes
    version: int = 0


@dataclass
class VersionWrite:
    """What a compare-and-set did: `written` (version is the new one), `conflict` (version is the current
    one; nothing written) or `replayed` (the Idempotency-Key was seen: `replay` is that request's record)."""

    outcome: Literal["written", "conflict", "replayed"]
    version: int
    replay: Replay | None = None


class GroupStore:
    def __init__(
        self,
        url: str,
        prefix: str,
        timeout_s: float,
        history_limit: int,
        idempotency_ttl_s: int,
        rates_windows: RatesWindows | None = None,
        cluster: bool = False,
    ) -> None:
        self.client = connect(url, cluster, timeout_s)
        self.prefix = prefix
        self.history_limit = history_limit
        self.idempotency_ttl_s = idempotency_ttl_s
        self._write_version = self.client.register_script(_WRITE_VERSION)
        self._delete = self.client.register_script(_DELETE)
        self.rates_windows = rates_windows or RatesWindows()
        self._put_rates = self.client.register_script(_PUT_RATES)

    def _key(self, group: str, kind: str, idempotency_key: str | None = None) -> str:
        return redis_key(self.prefix, group, kind, idempotency_key)

    async def open(self) -> None:
        """Read a cluster's slot map before the first request: redis-py's async cluster client can lose
        connections to commands that race its first initialisation. One server needs nothing; a store that
        does not answer yet is not an error here (requests without a group work without it)."""
        if isinstance(self.client, Cluster):
            with contextlib.suppress(RedisError, RedisClusterException, OSError):
                await self.client.initialize()

    async def close(self) -> None:
        await (self.client.close_all() if isinstance(self.client, Cluster) else self.client.aclose())

    async def ping(self) -> None:
        """Redis answers: for a cluster, any primary does (a stopped node costs only its own groups)."""
        async with unavailable_as_503():
            if not isinstance(self.client, Cluster):
                await self.client.ping()
                return
            await self.client.initialize()
            for node in self.client.get_primaries():
                try:
                    await self.client.ping(target_nodes=node)
                    return
                except (RedisError, OSError):
                    continue
            raise RedisClusterException("no primary of the cluster answers")

    async def get(self, group: str) -> StoredGroup | None:
        async with unavailable_as_503():
            fields = await self.client.hgetall(self._key(group, "state"))
        if not fields:
            return None
        assignment = msgspec.json.decode(fields[b"assignment"])
        return StoredGroup(
            version=int(fields[b"version"]),
            algorithm=fields[b"algorithm"].decode(),
            capacity=float(fields[b"capacity"]),
            assignment={c: [(t, p) for t, p in held] for c, held in assignment.items()},
            updated_at=fields[b"updated_at"].decode(),
        )

    async def write_version(
        self,
        group: str,
        expected_version: int,
        algorithm: str,
        capacity: float,
        assignment: bytes,
        updated_at: str,
        summary: dict[str, Any],
        replay: Replay | None = None,
    ) -> VersionWrite:
        """Compare-and-set of the group's next version with its history entry and idempotency record.
        `assignment` is the JSON of consumer → [[topic, partition], ...]."""
        summary_tail = msgspec.json.encode(summary)[1:].decode()  # the script prepends "version"
        args = [
            expected_version,
            algorithm,
            repr(capacity),
            assignment,
            updated_at,
            summary_tail,
            self.history_limit,
            replay.fingerprint if replay else "",
            replay.answer if replay else b"",
            self.idempotency_ttl_s,
            secrets.token_hex(8),
        ]
        record = self._key(group, "idempotency", replay.key if replay else "")
        keys = [self._key(group, "state"), self._key(group, "history"), record, self._key(group, "idempotency")]
        async with unavailable_as_503():
            outcome, version, *seen = await self._write_version(keys=keys, args=args)
        if outcome == b"replayed" and replay is not None:  # (only a request with a key is replayed)
            fingerprint, answer = seen
            return VersionWrite(
                "replayed", int(version), Replay(replay.key, fingerprint.decode(), answer, int(version))
            )
        return VersionWrite(outcome.decode(), int(version))

    async def history(self, group: str, limit: int) -> list[dict[str, Any]]:
        async with unavailable_as_503():
            entries = await self.client.lrange(self._key(group, "history"), 0, limit - 1)
        return [msgspec.json.decode(entry) for entry in entries]

    async def delete(self, group: str) -> bool:
        async with unavailable_as_503():
            removed = await self._delete(
                keys=[
                    self._key(group, kind)
                    for kind in ("state", "history", "rates", "rates_summary", "rates_windows", "idempotency")
                ]
            )
        return removed > 0

    async def put_rates(self, group: str, document: dict[str, Any], stored_at_ms: int) -> None:
        """The latest rates, and the same rates as the newest window of the group's bounded history."""
        partitions = document["partitions"]
        window = {
            "window_end": document["window_end"],
            "updated_at": document["updated_at"],
            "partitions": [[p.topic, p.partition, p.rate, p.lag] for p in partitions],
        }
        keep = self.rates_windows
        args = [
            msgspec.json.encode(document),
            document["window_end"],
            document["updated_at"],
            len(partitions),
            stored_at_ms,
            msgspec.json.encode(window),
            keep.limit,
            stored_at_ms - int(keep.max_age_s * 1000),
        ]
        keys = [self._key(group, "rates"), self._key(group, "rates_summary"), self._key(group, "rates_windows")]
        async with unavailable_as_503():
            await self._put_rates(keys=keys, args=args)

    async def rates_history(self, group: str, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` stored windows, oldest first; partitions as [topic, partition, rate, lag]."""
        async with unavailable_as_503():
            windows = await self.client.zrange(self._key(group, "rates_windows"), -limit, -1)
        return [msgspec.json.decode(window) for window in windows]

    async def rates_history_size(self, group: str) -> tuple[int, int]:
        """(windows stored, partitions of the latest rates): what reading the history would cost."""
        async with unavailable_as_503():
            pipe = self.client.pipeline(transaction=False)
            pipe.zcard(self._key(group, "rates_windows"))
            pipe.hget(self._key(group, "rates_summary"), "partition_count")
            windows, partitions = await pipe.execute()
        return int(windows), int(partitions or 0)

    async def group_names(self) -> list[str]:
        """Groups with a stored assignment or stored rates, in name order (a SCAN: it does not block Redis;
        each group's keys are found by their kind after the hash tag)."""
        names: set[str] = set()
        async with unavailable_as_503():
            for kind in ("state", "rates_summary"):
                head, tail = self._key("\0", kind).split("\0")  # the key's shape, from the one naming helper
                match = _glob_escape(head) + "*" + _glob_escape(tail)
                async for key in self.client.scan_iter(match=match, count=1000):
                    names.add(unquote(key.decode()[len(head) : -len(tail)]))  # group_tag reversed
        return sorted(names)

    async def summaries(self, groups: list[str]) -> list[GroupSummaryFields]:
        """What a listing shows of each group, without its assignment or rates (one round trip)."""
        async with unavailable_as_503():
            pipe = self.client.pipeline(transaction=False)
            for group in groups:
                pipe.hmget(self._key(group, "state"), "version", "algorithm", "capacity", "updated_at")
                pipe.lindex(self._key(group, "history"), 0)
                pipe.hmget(self._key(group, "rates_summary"), "window_end", "updated_at", "partition_count")
            replies = await pipe.execute()
        summaries = []
        for i, group in enumerate(groups):
            state, last, rates = replies[3 * i : 3 * i + 3]
            summaries.append(
                GroupSummaryFields(
                    group=group,
                    version=int(state[0]) if state[0] else None,
                    algorithm=state[1].decode() if state[1] else None,
                    capacity=float(state[2]) if state[2] else None,
                    updated_at=state[3].decode() if state[3] else None,
                    last=msgspec.json.decode(last) if last else None,
                    rates_window_end=rates[0].decode() if rates[0] else None,
                    rates_updated_at=rates[1].decode() if rates[1] else None,
                    partition_count=int(rates[2]) if rates[2] else None,
                )
            )
        return summaries

    async def get_rates(self, group: str) -> dict[str, Any] | None:
        async with unavailable_as_503():
            raw = await self.client.get(self._key(group, "rates"))
        return None if raw is None else msgspec.json.decode(raw)

    async def get_replay(self, group: str, key: str) -> Replay | None:
        async with unavailable_as_503():
            fields = await self.client.hgetall(self._key(group, "idempotency", key))
        if not fields:
            return None
        return Replay(key, fields[b"fingerprint"].decode(), fields[b"answer"], int(fields[b"version"]))


def _glob_escape(text: str) -> str:
    """A literal in a SCAN MATCH pattern."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


@asynccontextmanager
async def unavailable_as_503() -> AsyncIterator[None]:
    try:
        yield
    except (RedisError, RedisClusterException, OSError) as exc:
        raise StoreUnavailable(type(exc).__name__) from None
