"""The Redis client the store talks through: one server (`redis://`, `rediss://`) or a Redis Cluster.

A cluster is named the way redis-py users name one: `REDIS_URL=redis://seed:6379` with
`GROUPFIT_REDIS_CLUSTER=true` (redis-py's `RedisCluster.from_url`; one seed is enough, the client reads
the slot map from it), or several seeds in one URL, `redis+cluster://host1:6379,host2:6379`
(`rediss+cluster://` for TLS; user and password as in any Redis URL), so a restarted seed is not a
single point of failure at start-up.
"""

from __future__ import annotations

import traceback
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry

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
    """redis-py's async RedisCluster (8.1) with two fixes for a node that stops and comes back under load:

    - On CLUSTERDOWN from one node (a restarted node answers so until it has rejoined) redis-py closes the
      connections to every node, failing the commands in flight on the healthy ones. Here it only reads the
      slot map again; `close_all()` closes everything.
    - After a node error it disconnects idle connections while other commands may be taking them, and those
      fail with AttributeError or RuntimeError as they write. Such a command was never sent, so it is sent
      again; if it fails so every time it is a ConnectionError (503 store_unavailable), never a 500.
    """

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


def connect(url: str, cluster: bool, timeout_s: float) -> Any:
    """A `redis.asyncio.Redis` for one server, or a `RedisCluster` when asked for or named by the URL."""
    options: dict[str, Any] = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
    if not (cluster or is_cluster_url(url)):
        return redis.Redis.from_url(url, retry_on_timeout=False, **options)
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
