"""Three aiokafka consumers with the groupfit assignor on a real Kafka-protocol broker and the live service."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from groupfit_client.assignor import groupfit_assignor, sticky_fallback

pytestmark = pytest.mark.integration

RATES = {0: 70.0, 1: 50.0, 2: 30.0, 3: 20.0, 4: 10.0, 5: 10.0}  # skewed, capacity 100


def make_topic(bootstrap: str) -> str:
    topic = f"assign-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, len(RATES), 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1})
    for partition in RATES:
        for i in range(5):
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    producer.flush(10)
    return topic


def consumer(bootstrap: str, topic: str, group: str, service_url: str, identity: str) -> AIOKafkaConsumer:
    assignor = groupfit_assignor(service_url, group, identity, capacity=100, algorithm="mwf", deadline_s=2)
    return AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                            partition_assignment_strategy=(assignor,), session_timeout_ms=6000,
                            heartbeat_interval_ms=500, enable_auto_commit=False)


async def settle(consumers: list[AIOKafkaConsumer], partitions: int, seconds: float = 60) -> dict[int, set[int]]:
    """Poll until the members' assignments cover every partition once; returns member index → partitions."""
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        await asyncio.gather(*(c.getmany(timeout_ms=300) for c in consumers))
        owned = {i: {tp.partition for tp in c.assignment()} for i, c in enumerate(consumers)}
        flat = [p for ps in owned.values() for p in ps]
        if sorted(flat) == list(range(partitions)):
            return owned
    raise AssertionError(f"the group did not settle: {[c.assignment() for c in consumers]}")


async def test_group_ends_up_with_the_services_assignment(kafka_broker, live_service):
    topic, group = make_topic(kafka_broker.bootstrap_servers), f"cg-{uuid.uuid4().hex[:6]}"
    httpx.put(f"{live_service.url}/v1/groups/{group}/rates", timeout=5, json={
        "partitions": [{"topic": topic, "partition": p, "rate": r} for p, r in RATES.items()],
        "window_end": "2026-11-22T10:00:00Z"}).raise_for_status()
    members = [consumer(kafka_broker.bootstrap_servers, topic, group, live_service.url, f"m{i}") for i in (1, 2, 3)]
    for c in members:
        await c.start()
    try:
        owned = await settle(members, len(RATES))
        stored = httpx.get(f"{live_service.url}/v1/groups/{group}", timeout=5).json()
        service_view = {m: {p["partition"] for p in held} for m, held in stored["assignment"].items()}
        assert {f"m{i + 1}": ps for i, ps in owned.items()} == service_view
        # Loads respect the capacity: 70+30 and 50+20+10+10 or similar, never 70+50.
        for held in service_view.values():
            assert sum(RATES[p] for p in held) <= 100
        version = stored["version"]
        # A member that holds partitions leaves: the leader asks the service again, which moves its partitions.
        leaving = max(owned, key=lambda i: len(owned[i]))
        await members[leaving].stop()
        remaining = [c for i, c in enumerate(members) if i != leaving]
        names = [f"m{i + 1}" for i in range(3) if i != leaving]
        deadline = asyncio.get_running_loop().time() + 60
        while stored["version"] == version and asyncio.get_running_loop().time() < deadline:
            await asyncio.gather(*(c.getmany(timeout_ms=300) for c in remaining))
            stored = httpx.get(f"{live_service.url}/v1/groups/{group}", timeout=5).json()
        assert stored["version"] > version and set(stored["assignment"]) == set(names)
        owned = await settle(remaining, len(RATES))
        assert {names[i]: ps for i, ps in owned.items()} == {
            m: {p["partition"] for p in held} for m, held in stored["assignment"].items()}
    finally:
        for c in members:
            await c.stop()


async def test_rebalance_falls_back_when_the_service_is_down(kafka_broker):
    topic, group = make_topic(kafka_broker.bootstrap_servers), f"cg-{uuid.uuid4().hex[:6]}"
    members = [consumer(kafka_broker.bootstrap_servers, topic, group, "http://127.0.0.1:1", f"m{i}") for i in (1, 2)]
    for c in members:
        await c.start()
    try:
        owned = await settle(members, len(RATES))
        assert sorted(len(ps) for ps in owned.values()) == [3, 3]
    finally:
        for c in members:
            await c.stop()


def test_sticky_fallback_keeps_last_owners_and_balances():
    partitions = [("t", p) for p in range(5)]
    last = {("t", 0): "a", ("t", 1): "a", ("t", 2): "a", ("t", 3): "b", ("t", 4): "gone"}
    owner = sticky_fallback(["a", "b"], partitions, last)
    assert sorted(list(owner.values()).count(m) for m in "ab") == [2, 3]
    assert owner["t", 0] == "a" and owner["t", 3] == "b"
