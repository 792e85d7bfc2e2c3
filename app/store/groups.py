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

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import redis.asyncio as redis
from redis.exceptions import RedisError

_WRITE_VERSION = """
if ARGV[8] ~= '' then
  local seen = redis.call('HMGET', KEYS[3], 'fingerprint', 'version', 'answer')
  if seen[1] then
    return {'replayed', tonumber(seen[2]), seen[1], seen[3]}
  end
end
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current ~= tonumber(ARGV[1]) then
  return {'conflict', current}
end
local version = current + 1
redis.call('HSET', KEYS[1], 'version', version, 'algorithm', ARGV[2], 'capacity', ARGV[3],
           'assignment', ARGV[4], 'updated_at', ARGV[5])
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
Idempotency-Key), answer, idempotency TTL. An idempotency record is looked at first, inside the script,
so concurrent retries of one request (or a retry of a write whose reply was lost) replay it instead
of racing the compare-and-set."""


_DELETE = """
local records = redis.call('ZRANGE', KEYS[4], 0, -1)
local removed = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
for first = 1, #records, 1000 do
  redis.call('DEL', unpack(records, first, math.min(first + 999, #records)))
end
redis.call('DEL', KEYS[4])
return removed
"""
"""KEYS: state, history, rates, index of idempotency records. Deletes them and every indexed record (all
in the group's slot); answers how many of the first three existed."""

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


class StoreUnavailable(Exception):
    """Redis did not answer in time or refused the connection."""


@dataclass
class StoredGroup:
    version: int
    algorithm: str
    capacity: float
    assignment: dict[str, list[tuple[str, int]]]
    updated_at: str


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
    def __init__(self, url: str, prefix: str, timeout_s: float, history_limit: int, idempotency_ttl_s: int) -> None:
        self.client = redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, retry_on_timeout=False
        )
        self.prefix = prefix
        self.history_limit = history_limit
        self.idempotency_ttl_s = idempotency_ttl_s
        self._write_version = self.client.register_script(_WRITE_VERSION)
        self._delete = self.client.register_script(_DELETE)

    def _key(self, group: str, kind: str, idempotency_key: str | None = None) -> str:
        return redis_key(self.prefix, group, kind, idempotency_key)

    async def close(self) -> None:
        await self.client.aclose()

    async def ping(self) -> None:
        async with unavailable_as_503():
            await self.client.ping()

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
        ]
        record = self._key(group, "idempotency", replay.key if replay else "")
        keys = [self._key(group, "state"), self._key(group, "history"), record, self._key(group, "idempotency")]
        async with unavailable_as_503():
            outcome, version, *seen = await self._write_version(keys=keys, args=args)
        if outcome == b"replayed":
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
                keys=[self._key(group, kind) for kind in ("state", "history", "rates", "idempotency")]
            )
        return removed > 0

    async def put_rates(self, group: str, document: dict[str, Any]) -> None:
        async with unavailable_as_503():
            await self.client.set(self._key(group, "rates"), msgspec.json.encode(document))

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


@asynccontextmanager
async def unavailable_as_503() -> AsyncIterator[None]:
    try:
        yield
    except (RedisError, OSError) as exc:
        raise StoreUnavailable(type(exc).__name__) from None
