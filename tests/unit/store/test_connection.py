"""How REDIS_URL and GROUPFIT_REDIS_CLUSTER choose the Redis client (no server needed: clients connect lazily)."""

from __future__ import annotations

import pytest
import redis.asyncio as redis

from app.store.connection import Cluster, connect, is_cluster_url, seed_nodes


def test_cluster_url_names_every_seed_and_keeps_credentials_and_tls():
    first, seeds = seed_nodes("rediss+cluster://user:secret@a.example:6380,b.example:6381,[::1]:6382")
    assert first == "rediss://user:secret@a.example:6380"
    assert seeds == [("a.example", 6380), ("b.example", 6381), ("::1", 6382)]
    assert is_cluster_url("redis+cluster://h:1") and not is_cluster_url("redis://h:1/0")


def test_a_seed_without_port_is_refused_with_the_culprit_named():
    with pytest.raises(ValueError, match=r"'b\.example' in REDIS_URL is not host:port"):
        seed_nodes("redis+cluster://a.example:6379,b.example")


async def test_the_url_or_the_setting_selects_the_cluster_client():
    clients = [
        connect("redis://127.0.0.1:1/0", False, 0.5),
        connect("redis://127.0.0.1:1", True, 0.5),
        connect("redis+cluster://127.0.0.1:1,127.0.0.1:2", False, 0.5),
    ]
    single, by_setting, by_url = clients
    assert type(single) is redis.Redis
    assert isinstance(by_setting, Cluster) and isinstance(by_url, Cluster)
    assert {(n.host, n.port) for n in by_url.startup_nodes} == {("127.0.0.1", 1), ("127.0.0.1", 2)}
    await single.aclose()
    for cluster in (by_setting, by_url):
        await cluster.close_all()


def test_settings_refuse_a_cluster_url_with_a_bad_seed():
    from pydantic import ValidationError

    from app.settings import Settings

    with pytest.raises(ValidationError, match="is not host:port"):
        Settings(REDIS_URL="redis+cluster://a:6379,b")
    assert Settings(REDIS_URL="redis+cluster://a:6379,b:6380").redis_url == "redis+cluster://a:6379,b:6380"
