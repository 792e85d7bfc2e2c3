"""Each group's state in Redis: the current assignment with its version (written by compare-and-set),
a capped history of past versions, the latest observed rates, and idempotency records.

Keys share the hash tag `{group}` so one group's keys live on one shard and one script can
touch them all. A version, its history entry and its idempotency record are written by one Lua
script: all or nothing.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

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
  redis.call('HSET', KEYS[3], 'fingerprint', ARGV[8], 'version', version, 'answer', ARGV[9])
  redis.call('EXPIRE', KEYS[3], tonumber(ARGV[10]))
end
return {'written', version}
"""
"""KEYS: state, history, idempotency record. ARGV: expected version, algorithm, capacity, assignment,
updated_at, history entry without its version, history limit, request fingerprint ('' without an
Idempotency-Key), answer, idempotency TTL, write id (random, one per call). An idempotency record is looked
at first, inside the script, so concurrent retries of one request (or a retry of a write whose reply was
lost) replay it instead of racing the compare-and-set. The write id makes the script itself safe to send
twice: when the client resends it after losing the reply (a cluster client does, after a node error), the
version it wrote is answered again instead of a conflict with itself."""


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
    def __init__(
        self,
        url: str,
        prefix: str,
        timeout_s: float,
        history_limit: int,
        idempotency_ttl_s: int,
        cluster: bool = False,
    ) -> None:
        self.client = connect(url, cluster, timeout_s)
        self.prefix = prefix
        self.history_limit = history_limit
        self.idempotency_ttl_s = idempotency_ttl_s
        self._write_version = self.client.register_script(_WRITE_VERSION)

    def _key(self, group: str, kind: str) -> str:
        return f"{self.prefix}:{{{group}}}:{kind}"

    async def open(self) -> None:
        """Read a cluster's slot map before the first request: redis-py's async cluster client can lose
        connections to commands that race its first initialisation. One server needs nothing; a store that
        does not answer yet is not an error here (requests without a group work without it)."""
        if isinstance(self.client, Cluster):
            with contextlib.suppress(RedisError, RedisClusterException, OSError):
                await self.client.initialize()

    async def close(self) -> None:
        await (self.client.shutdown() if isinstance(self.client, Cluster) else self.client.aclose())

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
        assignment: dict[str, list[tuple[str, int]]],
        updated_at: str,
        summary: dict[str, Any],
        replay: Replay | None = None,
    ) -> VersionWrite:
        """Compare-and-set of the group's next version with its history entry and idempotency record."""
        summary_tail = msgspec.json.encode(summary)[1:].decode()  # the script prepends "version"
        args = [
            expected_version,
            algorithm,
            repr(capacity),
            msgspec.json.encode(assignment),
            updated_at,
            summary_tail,
            self.history_limit,
            replay.fingerprint if replay else "",
            replay.answer if replay else b"",
            self.idempotency_ttl_s,
            secrets.token_hex(8),
        ]
        idempotency_key = self._key(group, f"idempotency:{replay.key if replay else ''}")
        keys = [self._key(group, "state"), self._key(group, "history"), idempotency_key]
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
            removed = await self.client.delete(
                self._key(group, "state"), self._key(group, "history"), self._key(group, "rates")
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
            fields = await self.client.hgetall(self._key(group, f"idempotency:{key}"))
        if not fields:
            return None
        return Replay(key, fields[b"fingerprint"].decode(), fields[b"answer"], int(fields[b"version"]))


@asynccontextmanager
async def unavailable_as_503() -> AsyncIterator[None]:
    try:
        yield
    except (RedisError, RedisClusterException, OSError) as exc:
        raise StoreUnavailable(type(exc).__name__) from None
