"""The Redis client the store talks through: one server (`redis://`, `rediss://`) or a Redis Cluster.

A cluster is named the way redis-py users name one: `REDIS_URL=redis://seed:6379` with
`GROUPFIT_REDIS_CLUSTER=true` (redis-py's `RedisCluster.from_url`; one seed is enough, the client reads
the slot map from it), or several seeds in one URL, `redis+cluster://host1:6379,host2:6379`
(`rediss+cluster://` for TLS; user and password as in any Redis URL), so a restarted seed is not a
single point of failure at start-up.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.backoff import ExponentialWithJitterBackoff
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


def connect(url: str, cluster: bool, timeout_s: float) -> Any:
    """A `redis.asyncio.Redis` for one server, or a `RedisCluster` when asked for or named by the URL."""
    options: dict[str, Any] = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
    if not (cluster or is_cluster_url(url)):
        return redis.Redis.from_url(url, retry_on_timeout=False, **options)
    first, seeds = seed_nodes(url) if is_cluster_url(url) else (url, [])
    return RedisCluster.from_url(
        first,
        startup_nodes=[ClusterNode(host, port) for host, port in seeds[1:]],
        # A node that is down must cost its own groups one quick 503, not seconds of retries for every
        # request: one retry (after the slot map is read again, so a moved slot is followed), then fail.
        retry=Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.1), retries=1),
        # Slots of a stopped primary without a replica stay unserved; the others are still served.
        require_full_coverage=False,
        **options,
    )
