"""The Redis client the store talks through: one server (`redis://`, `rediss://`) or a Redis Cluster.

A cluster is named the way redis-py users name one: `REDIS_URL=redis://seed:6379` with
`GROUPFIT_REDIS_CLUSTER=true` (redis-py's `RedisCluster.from_url`; one seed is enough, the client reads
the slot map from it), or several seeds in one URL, `redis+cluster://host1:6379,host2:6379`
(`rediss+cluster://` for TLS; user and password as in any Redis URL), so a restarted seed is not a
single point of failure at start-up.
"""

from __future__ import annotations

import asyncio
import traceback
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as redis
from redis._parsers import _AsyncRESP3Parser
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry

SLICE = 1 << 20
"""A value larger than this is read from Redis a slice at a time (see SlicedParser)."""

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss", "valkey+cluster": "redis"}


def is_cluster_url(url: str) -> bool:
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def seed_nodes(url: str) -> tuple[str, list[tuple[str, int]]]:
    """A cluster URL as (the URL of its first seed, every seed's host and port)."""
    parts = urlsplit(url)
    credentials, _, hosts = parts.netloc.rpartition("@")
    seeds = []
    for address in hosts.split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"cluster seed {address!r} in REDIS_URL is not host:port")
        seeds.append((host.strip("[]"), int(port)))
    first = f"{credentials}@{hosts.split(',')[0]}" if credentials else hosts.split(",")[0]
    scheme = CLUSTER_SCHEMES.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, first, parts.path, parts.query, "")), seeds


def _unsent(exc: BaseException) -> bool:
    """The command failed while being written to a connection that was closed under it: it never reached Redis."""
    return any(frame.name == "_send_packed_command" for frame in traceback.extract_tb(exc.__traceback__))


class Cluster(RedisCluster):
    """redis-py's async RedisCluster (8.1) reading through SlicedParser (it takes no `parser_class`: its nodes'
    connections are given it), with two fixes for a node that stops and comes back under load:

    - On CLUSTERDOWN from one node (a restarted node answers so until it has rejoined) redis-py closes the
      connections to every node, failing the commands in flight on the healthy ones. Here it only reads the
      slot map again; `close_all()` closes everything.
    - After a node error it disconnects idle connections while other commands may be taking them, and those
      fail with AttributeError or RuntimeError as they write. Such a command was never sent, so it is sent
      again; if it fails so every time it is a ConnectionError (503 store_unavailable), never a 500.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nodes_manager.connection_kwargs["parser_class"] = SlicedParser
        for node in self.nodes_manager.startup_nodes.values():
            node.connection_kwargs["parser_class"] = SlicedParser

    async def aclose(self) -> None:
        self._initialize = True

    async def close_all(self) -> None:
        """Close every connection (not Redis's SHUTDOWN, which `shutdown` would shadow)."""
        await super().aclose()

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        for _ in range(3):
            try:
                return await super().execute_command(*args, **dict(kwargs))
            except (AttributeError, RuntimeError) as exc:
                if not _unsent(exc):
                    raise
                failure = exc
        raise RedisConnectionError(f"connection closed while sending {args[0]}") from failure


class SlicedParser(_AsyncRESP3Parser):
    """redis-py's async RESP3 parser (8.1; RESP3 is its default protocol), reading a value over SLICE a slice at a
    time and joining the slices on a thread (bytes.join copies without the GIL from 1 MiB on). redis-py reads a
    value in one piece, its buffer growing by copies, then copies it twice more (the buffered head prepended, the
    CRLF cut off), all on the event loop: ~70 ms for the 40 MB assignment of a 1 M-partition group, while every
    other request waits (~5 ms this way). What is read goes to the parser's chunks as redis-py's own read does,
    so a read interrupted (a timeout) is parsed again whole."""

    async def _read(self, length: int) -> bytes:
        if length <= SLICE or len(self._buffer) - self._pos >= length:
            return await super()._read(length)
        head = self._buffer[self._pos :]
        stream = self._stream
        if stream is None:
            raise RedisConnectionError("Connection closed by server.")
        slices = [head]
        left = length - len(head)
        try:
            while left > 0:
                slices.append(await stream.readexactly(min(SLICE, left)))
                self._chunks.append(slices[-1])
                left -= len(slices[-1])
            end = await stream.readexactly(2)
            self._chunks.append(end)
        except asyncio.IncompleteReadError as error:
            raise RedisConnectionError("Connection closed by server.") from error
        if end != b"\r\n":
            raise RedisConnectionError(f"a value of {length} bytes did not end with CRLF")
        self._pos += length + 2
        return await asyncio.to_thread(b"".join, slices)


def connect(url: str, cluster: bool, timeout_s: float) -> Any:
    """A `redis.asyncio.Redis` for one server, or a `RedisCluster` when asked for or named by the URL."""
    options: dict[str, Any] = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s, "protocol": 3}
    if not (cluster or is_cluster_url(url)):
        return redis.Redis.from_url(url, retry_on_timeout=False, parser_class=SlicedParser, **options)
    first, seeds = seed_nodes(url) if is_cluster_url(url) else (url, [])
    return Cluster.from_url(
        first,
        startup_nodes=[ClusterNode(host, port) for host, port in seeds[1:]],
        # A node that is down must cost its own groups a quick 503, not seconds of retries: a few retries
        # (each after the slot map is read again, so a moved slot is followed), then fail. Resending the
        # compare-and-set script is safe: it recognises its own write (see app/store/groups.py).
        retry=Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.1), retries=3),
        # Slots of a stopped primary without a replica stay unserved; the others are still served.
        require_full_coverage=False,
        **options,
    )
