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
           'assignment', ARGV[4], 'updated_at', ARGV[5], 'write', ARGV[11], 'consumers', ARGV[12],
           'rscore', ARGV[13])
if ARGV[14] ~= '' then
  redis.call('HSET', KEYS[1], 'racks', ARGV[14])
end
if ARGV[15] ~= '' then
  redis.call('HSET', KEYS[1], 'loads', ARGV[15])
else
  redis.call('HDEL', KEYS[1], 'loads')
end
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
Idempotency-Key), answer, idempotency TTL, write id (random, one per call), the version's consumer count and
Rscore (kept beside it for the listing), the consumers' racks ('' for a version that names none: the racks
stored before stay, as the pods stay where they run), the consumers' loads ('' for none: those stored before
were another version's, so they go). An idempotency record is looked
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


_RATES_LOG = """
local function count(kind, delta)
  redis.call('HINCRBY', KEYS[2], kind, delta)
end
local function add(score, cells, window)
  local id = string.format('%.0f', score)
  redis.call('ZADD', KEYS[3], score, id .. ':' .. cells .. ':' .. #window)
  redis.call('HSET', KEYS[4], id, window)
  count('history_cells', cells)
  count('history_bytes', #window)
end
local function drop(entry)
  local id, cells, bytes = string.match(entry, '^(%d+):(%d+):(%d+)$')
  redis.call('ZREM', KEYS[3], entry)
  redis.call('HDEL', KEYS[4], id)
  count('history_cells', -tonumber(cells))
  count('history_bytes', -tonumber(bytes))
end
local function migrate()
  if redis.call('EXISTS', KEYS[5]) == 0 then
    return
  end
  local legacy = redis.call('ZRANGE', KEYS[5], 0, -1, 'WITHSCORES')
  local last = -1
  for i = 1, #legacy, 2 do
    local score = math.max(tonumber(legacy[i + 1]), last + 1)
    last = score
    add(score, #cjson.decode(legacy[i]).partitions, legacy[i])
  end
  redis.call('DEL', KEYS[5])
end
migrate()
"""
"""What the rates history scripts share. KEYS: latest rates, their summary, the windows' log (a sorted set scored by
when each was stored, made unique, each entry `id:cells:bytes`, its id the score), the windows by id (a hash),
the log of the previous layout (one window per member, converted at the first script that finds it). The
summary keeps the log's totals (`history_cells`, `history_bytes`), so trimming never reads a window."""

_PUT_RATES = (
    _RATES_LOG
    + """
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], 'window_end', ARGV[2], 'updated_at', ARGV[3], 'partition_count', ARGV[4])
if tonumber(ARGV[7]) > 0 then
  local score = tonumber(ARGV[5])
  local newest = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  if #newest > 0 and score <= tonumber(newest[2]) then
    score = tonumber(newest[2]) + 1
  end
  add(score, tonumber(ARGV[4]), ARGV[6])
  for _, entry in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[8])) do
    drop(entry)
  end
  while redis.call('ZCARD', KEYS[3]) > 1 do
    local totals = redis.call('HMGET', KEYS[2], 'history_cells', 'history_bytes')
    if redis.call('ZCARD', KEYS[3]) <= tonumber(ARGV[7]) and tonumber(totals[1]) <= tonumber(ARGV[9])
       and tonumber(totals[2]) <= tonumber(ARGV[10]) then
      break
    end
    drop(redis.call('ZRANGE', KEYS[3], 0, 0)[1])
  end
end
return 1
"""
)
"""ARGV: latest rates document, window end, stored at, partition count, score (ms), window, most windows kept
(0: none), oldest score kept, most cells (partitions summed over the windows) kept, most bytes kept. One
script, so the latest rates, their summary and the bounded history never disagree and the history is trimmed
(by age, then the oldest first while above the count, the cells or the bytes; the newest is always kept) in
the same step that adds to it."""

_RATES_INDEX = (
    _RATES_LOG
    + """
return redis.call('ZRANGE', KEYS[3], -tonumber(ARGV[1]), -1)
"""
)
"""ARGV: how many of the newest windows. Their log entries (`id:cells:bytes`), oldest first: what reading them
would cost, without reading them."""

RATES_KINDS = ("rates", "rates_summary", "rates_log", "rates_log_windows", "rates_windows")
"""The keys of a group's rates, in the order the scripts name them (KEYS[1..5])."""


class RatesJson(msgspec.Struct, array_like=True):
    """A group's rates as the store keeps them: `document` (JSON of partitions, window_end, updated_at: the latest
    rates) and `window` (JSON of window_end, updated_at and the partitions as [topic, partition, rate, lag]: a
    window of the history). Built where the rates are decoded (a compute worker for a large body), so the
    server only moves their bytes."""

    document: bytes
    window: bytes
    window_end: str
    updated_at: str
    partition_count: int

    @classmethod
    def of(cls, document: dict[str, Any]) -> RatesJson:
        partitions = document["partitions"]
        window = {
            "window_end": document["window_end"],
            "updated_at": document["updated_at"],
            "partitions": [[p.topic, p.partition, p.rate, p.lag] for p in partitions],
        }
        return cls(
            msgspec.json.encode(document),
            msgspec.json.encode(window),
            document["window_end"],
            document["updated_at"],
            len(partitions),
        )


@dataclass(frozen=True)
class WindowEntry:
    """A stored rates window as its log names it: its id, its partitions and its bytes."""

    id: bytes
    cells: int
    bytes: int


SUMMARIES_AT_ONCE = 50
"""Groups whose summaries one round trip reads: redis-py parses a round trip's replies at once, on the event loop."""


class StoreUnavailable(Exception):
    """Redis did not answer in time or refused the connection."""


@dataclass
class StoredGroup:
    version: int
    algorithm: str
    capacity: float
    assignment_json: bytes
    """The assignment as stored: JSON of consumer → [[topic, partition], ...] (decoded where it is used: a large
    one in a compute worker)."""
    updated_at: str
    racks: dict[str, str] | None = None
    """The rack each consumer runs in, as the last zone-aware version named them (None: never named)."""
    loads_json: bytes | None = None
    """Each consumer's load as the version's answer gave it: JSON of consumer → load (None: a version written
    without them, as before they were kept)."""

    @property
    def assignment(self) -> dict[str, list[tuple[str, int]]]:
        return msgspec.json.decode(self.assignment_json, type=dict[str, list[tuple[str, int]]])


@dataclass(frozen=True)
class RatesWindows:
    """How much of a group's rates history is kept: at most `limit` windows, none older than `max_age_s`, at
    most `max_cells` partitions summed over them and `max_bytes` of them as stored (the newest always)."""

    limit: int = 1000
    max_age_s: float = 7 * 86400
    max_cells: int = 1_000_000
    max_bytes: int = 32 * 1024 * 1024


@dataclass
class GroupSummaryFields:
    group: str
    version: int | None
    algorithm: str | None
    capacity: float | None
    updated_at: str | None
    consumers: int | None  # of the last stored version
    rscore: float | None
    rates_window_end: str | None
    rates_updated_at: str | None
    partition_count: int | None


@dataclass
class Replay:
    """What a request with an Idempotency-Key got: kept so a retry gets the same answer."""

    key: str
    fingerprint: str
    answer: bytes | memoryview
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
        self._rates_index = self.client.register_script(_RATES_INDEX)
        self.catalog = f"{prefix}.groups"
        """Every group's name (a sorted set, all of score 0: read in name order by range), for the listing. Not a
        key of any group (none has its hash tag): a group's own keys all share its slot; this one is the
        service's, on its own slot. A group is added before its first write and removed after its deletion, so
        a failure between leaves a name without data (skipped), never data without its name; the member ""
        (no group is named so) says the catalog holds every group stored before it existed."""

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
        return _stored_group(fields)

    async def get_with_rates(self, group: str) -> tuple[StoredGroup | None, bytes | None]:
        """`get` and `get_rates_json` in one round trip (an assignment that takes the group's stored rates)."""
        async with unavailable_as_503():
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(self._key(group, "state"))
            pipe.get(self._key(group, "rates"))
            fields, rates = await pipe.execute()
        return _stored_group(fields), rates

    async def capacity(self, group: str) -> float | None:
        """The capacity of the group's stored assignment (without reading the assignment)."""
        async with unavailable_as_503():
            capacity = await self.client.hget(self._key(group, "state"), "capacity")
        return None if capacity is None else float(capacity)

    async def write_version(
        self,
        group: str,
        expected_version: int,
        algorithm: str,
        capacity: float,
        assignment: bytes | memoryview,
        updated_at: str,
        summary: dict[str, Any],
        replay: Replay | None = None,
        racks: bytes | memoryview = b"",
        new: bool = False,
        loads: bytes | memoryview = b"",
    ) -> VersionWrite:
        """Compare-and-set of the group's next version with its history entry and idempotency record.
        `assignment` is the JSON of consumer → [[topic, partition], ...]; `racks` of consumer → rack (b"": the
        stored racks stay); `loads` of consumer → load (b"": none); `new`: the group has nothing stored yet (its
        name goes to the catalog first)."""
        if new:
            await self.name(group)
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
            summary.get("consumer_count", ""),
            repr(float(summary.get("rscore", 0.0))),
            racks,
            loads,
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
                    for kind in ("state", "history", *RATES_KINDS[:2], *RATES_KINDS[2:], "idempotency")
                ]
            )
            await self.client.zrem(self.catalog, group)
        return removed > 0

    async def name(self, group: str) -> None:
        """The group in the catalog (before its first write)."""
        async with unavailable_as_503():
            await self.client.zadd(self.catalog, {group: 0}, nx=True)

    async def put_rates(self, group: str, document: dict[str, Any], stored_at_ms: int) -> None:
        """The latest rates (partitions, window_end, updated_at), and the same rates as the newest window of the
        group's bounded history."""
        await self.put_rates_json(group, RatesJson.of(document), stored_at_ms)

    async def put_rates_json(self, group: str, rates: RatesJson, stored_at_ms: int) -> None:
        keep = self.rates_windows
        args = [
            rates.document,
            rates.window_end,
            rates.updated_at,
            rates.partition_count,
            stored_at_ms,
            rates.window,
            keep.limit,
            stored_at_ms - int(keep.max_age_s * 1000),
            keep.max_cells,
            keep.max_bytes,
        ]
        await self.name(group)
        async with unavailable_as_503():
            await self._put_rates(keys=self._rates_keys(group), args=args)

    def _rates_keys(self, group: str) -> list[str]:
        return [self._key(group, kind) for kind in RATES_KINDS]

    async def rates_index(self, group: str, limit: int) -> list[WindowEntry]:
        """The newest `limit` stored windows, oldest first, as their log names them (none is read)."""
        async with unavailable_as_503():
            entries = await self._rates_index(keys=self._rates_keys(group), args=[limit])
        return [WindowEntry(id, int(cells), int(size)) for id, cells, size in (e.split(b":") for e in entries)]

    async def rates_windows_json(self, group: str, entries: list[WindowEntry]) -> list[bytes]:
        """The windows of `entries` as stored (JSON: window_end, updated_at, partitions as [topic, partition,
        rate, lag]), oldest first; one dropped meanwhile (by a newer window) is left out."""
        windows = []
        async with unavailable_as_503():
            for entry in entries:  # one at a time: a reply of one window, not of them all
                window = await self.client.hget(self._key(group, "rates_log_windows"), entry.id)
                if window is not None:
                    windows.append(window)
        return windows

    async def group_names(self, after: str, count: int) -> list[str]:
        """At most `count` names of the catalog after `after`, in name order (code points: UTF-8 bytes sort
        alike). The first listing after an upgrade fills the catalog from a SCAN of the stored groups."""
        async with unavailable_as_503():
            if await self.client.zscore(self.catalog, "") is None:
                await self._fill_catalog()
            names = await self.client.zrangebylex(self.catalog, b"(" + after.encode(), b"+", 0, count)
        return [name.decode() for name in names]

    async def _fill_catalog(self) -> None:
        """Groups with a stored assignment or stored rates (a SCAN: it does not block Redis; each group's keys
        are found by their kind after the hash tag), then the mark that the catalog is complete."""
        for kind in ("state", "rates_summary"):
            head, tail = self._key("\0", kind).split("\0")  # the key's shape, from the one naming helper
            match = _glob_escape(head) + "*" + _glob_escape(tail)
            names: dict[str, float] = {}
            async for key in self.client.scan_iter(match=match, count=1000):
                names[unquote(key.decode()[len(head) : -len(tail)])] = 0  # group_tag reversed
                if len(names) >= 1000:
                    await self.client.zadd(self.catalog, names)
                    names.clear()
            if names:
                await self.client.zadd(self.catalog, names)
        await self.client.zadd(self.catalog, {"": 0})

    async def summaries(self, groups: list[str]) -> list[GroupSummaryFields]:
        """What a listing shows of each group, without its assignment or rates (one round trip, and one more for
        the groups stored before the state kept its last consumer count and Rscore)."""
        replies = []
        async with unavailable_as_503():
            for first in range(0, len(groups), SUMMARIES_AT_ONCE):  # the replies of many at once take long to read
                pipe = self.client.pipeline(transaction=False)
                for group in groups[first : first + SUMMARIES_AT_ONCE]:
                    pipe.hmget(
                        self._key(group, "state"),
                        "version",
                        "algorithm",
                        "capacity",
                        "updated_at",
                        "consumers",
                        "rscore",
                    )
                    pipe.hmget(self._key(group, "rates_summary"), "window_end", "updated_at", "partition_count")
                replies += await pipe.execute()
            states = replies[0::2]
            older = [i for i, state in enumerate(states) if state[0] and not state[4]]
            if older:
                pipe = self.client.pipeline(transaction=False)
                for i in older:
                    pipe.lindex(self._key(groups[i], "history"), 0)
                for i, last in zip(older, await pipe.execute(), strict=True):
                    entry = msgspec.json.decode(last) if last else {}
                    states[i][4:] = [entry.get("consumer_count"), entry.get("rscore")]
        summaries = []
        for group, state, rates in zip(groups, states, replies[1::2], strict=True):
            if not state[0] and not rates[0]:
                continue  # named in the catalog, but nothing stored (deleted, or never written)
            summaries.append(
                GroupSummaryFields(
                    group=group,
                    version=int(state[0]) if state[0] else None,
                    algorithm=state[1].decode() if state[1] else None,
                    capacity=float(state[2]) if state[2] else None,
                    updated_at=state[3].decode() if state[3] else None,
                    consumers=int(state[4]) if state[4] is not None else None,
                    rscore=float(state[5]) if state[5] is not None else None,
                    rates_window_end=rates[0].decode() if rates[0] else None,
                    rates_updated_at=rates[1].decode() if rates[1] else None,
                    partition_count=int(rates[2]) if rates[2] else None,
                )
            )
        return summaries

    async def get_rates(self, group: str) -> dict[str, Any] | None:
        raw = await self.get_rates_json(group)
        return None if raw is None else msgspec.json.decode(raw)

    async def get_rates_json(self, group: str) -> bytes | None:
        """The latest rates as stored: JSON of partitions, window_end, updated_at."""
        async with unavailable_as_503():
            raw: bytes | None = await self.client.get(self._key(group, "rates"))
        return raw

    async def get_replay(self, group: str, key: str) -> Replay | None:
        async with unavailable_as_503():
            fields = await self.client.hgetall(self._key(group, "idempotency", key))
        if not fields:
            return None
        return Replay(key, fields[b"fingerprint"].decode(), fields[b"answer"], int(fields[b"version"]))


def _stored_group(fields: dict[bytes, bytes]) -> StoredGroup | None:
    """A group's state hash as read (empty: no version stored)."""
    if not fields:
        return None
    return StoredGroup(
        version=int(fields[b"version"]),
        algorithm=fields[b"algorithm"].decode(),
        capacity=float(fields[b"capacity"]),
        assignment_json=fields[b"assignment"],
        updated_at=fields[b"updated_at"].decode(),
        racks=msgspec.json.decode(fields[b"racks"]) if b"racks" in fields else None,
        loads_json=fields.get(b"loads"),
    )


def _glob_escape(text: str) -> str:
    """A literal in a SCAN MATCH pattern."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


@asynccontextmanager
async def unavailable_as_503() -> AsyncIterator[None]:
    try:
        yield
    except (RedisError, RedisClusterException, OSError) as exc:
        raise StoreUnavailable(type(exc).__name__) from None
