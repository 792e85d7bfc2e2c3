"""How REDIS_URL and GROUPFIT_REDIS_CLUSTER choose the Redis client (no server needed: clients connect lazily)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
import redis.asyncio as redis
from redis._parsers import Encoder

from app.store.connection import SLICE, Cluster, SlicedParser, connect, is_cluster_url, seed_nodes


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
    # every connection, to any node found later too, reads large values a slice at a time
    assert single.connection_pool.connection_kwargs["parser_class"] is SlicedParser
    for cluster in (by_setting, by_url):
        assert cluster.nodes_manager.connection_kwargs["parser_class"] is SlicedParser
        assert all(n.connection_kwargs["parser_class"] is SlicedParser for n in cluster.startup_nodes)
    await single.aclose()
    for cluster in (by_setting, by_url):
        await cluster.close_all()


def test_settings_refuse_a_cluster_url_with_a_bad_seed():
    from pydantic import ValidationError

    from app.settings import Settings

    with pytest.raises(ValidationError, match="is not host:port"):
        Settings(REDIS_URL="redis+cluster://a:6379,b")
    assert Settings(REDIS_URL="redis+cluster://a:6379,b:6380").redis_url == "redis+cluster://a:6379,b:6380"


async def test_a_large_value_is_read_whole_even_when_its_read_was_cut_short():
    """The parser on a real StreamReader: a value of several slices, its read stopped midway (a timeout) and
    then read again from the start, as redis-py reads any interrupted reply; the next reply follows."""
    stream = asyncio.StreamReader()
    parser = SlicedParser(65536)
    parser.on_connect(SimpleNamespace(_reader=stream, encoder=Encoder("utf-8", "strict", False)))
    value = bytes(range(256)) * (3 * SLICE // 256 + 7)
    reply = b"$%d\r\n%b\r\n+OK\r\n" % (len(value), value)
    cut = 2 * SLICE + 100
    stream.feed_data(reply[:cut])
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(parser.read_response(), 0.2)
    stream.feed_data(reply[cut:])
    assert await parser.read_response() == value
    assert await parser.read_response() == b"OK"
    stream.feed_data(b"*2\r\n$%d\r\n%b\r\n$1\r\n1\r\n" % (SLICE + 1, value[: SLICE + 1]))
    assert await parser.read_response() == [value[: SLICE + 1], b"1"]
