"""Three aiokafka consumers with the groupfit assignor on a real Kafka-protocol broker and the live service."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from groupfit_client import AsyncGroupfitClient, PartitionRate
from groupfit_client.assignor import groupfit_assignor

from tests.conftest import LiveService

pytestmark = pytest.mark.integration

RATES = {0: 70.0, 1: 50.0, 2: 30.0, 3: 20.0, 4: 10.0, 5: 10.0}  # skewed, capacity 100


RECORDS_PER_PARTITION = 5


def make_topic(bootstrap: str) -> str:
    topic = f"assign-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, len(RATES), 1)]).values():
        future.result(30)
    return topic


def produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in RATES:
        for i in range(RECORDS_PER_PARTITION):
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    producer.flush(10)


async def consume(consumers: list[AIOKafkaConsumer], seconds: float = 30) -> Counter:
    """Reads until every produced record arrived; counts reads per (member index, partition)."""
    reads: Counter = Counter()
    deadline = asyncio.get_running_loop().time() + seconds
    while sum(reads.values()) < len(RATES) * RECORDS_PER_PARTITION and asyncio.get_running_loop().time() < deadline:
        batches = await asyncio.gather(*(c.getmany(timeout_ms=300) for c in consumers))
        for i, batch in enumerate(batches):
            for tp, records in batch.items():
                reads[i, tp.partition] += len(records)
    return reads


def consumer(bootstrap: str, topic: str, group: str, assignor: type) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        partition_assignment_strategy=(assignor,),
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        enable_auto_commit=False,
    )


async def put_rates(service: AsyncGroupfitClient, group: str, topic: str) -> None:
    await service.put_rates(group, [PartitionRate(topic, p, r) for p, r in RATES.items()], "2026-11-22T10:00:00Z")


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
    service = AsyncGroupfitClient(live_service.url)
    await put_rates(service, group, topic)
    members = [
        consumer(kafka_broker.bootstrap_servers, topic, group, groupfit_assignor(live_service.url, group, f"m{i}", 100))
        for i in (1, 2, 3)
    ]
    for c in members:
        await c.start()
    try:
        owned = await settle(members, len(RATES))
        stored = await service.group(group)
        service_view = {m: {p.partition for p in held} for m, held in stored.assignment.items()}
        assert {f"m{i + 1}": ps for i, ps in owned.items()} == service_view
        # Loads respect the capacity: 70+30 and 50+20+10+10 or similar, never 70+50.
        for held in service_view.values():
            assert sum(RATES[p] for p in held) <= 100
        # Every partition is read once, whole, by the member the service gave it to.
        produce(kafka_broker.bootstrap_servers, topic)
        assert await consume(members) == Counter({(i, p): RECORDS_PER_PARTITION for i, ps in owned.items() for p in ps})
        version = stored.version
        # A member that holds partitions leaves: the leader asks the service again, which moves its partitions.
        leaving = max(owned, key=lambda i: len(owned[i]))
        await members[leaving].stop()
        remaining = [c for i, c in enumerate(members) if i != leaving]
        names = [f"m{i + 1}" for i in range(3) if i != leaving]
        deadline = asyncio.get_running_loop().time() + 60
        while stored.version == version and asyncio.get_running_loop().time() < deadline:
            await asyncio.gather(*(c.getmany(timeout_ms=300) for c in remaining))
            stored = await service.group(group)
        assert stored.version > version and set(stored.assignment) == set(names)
        owned = await settle(remaining, len(RATES))
        assert {names[i]: ps for i, ps in owned.items()} == {
            m: {p.partition for p in held} for m, held in stored.assignment.items()
        }
    finally:
        for c in members:
            await c.stop()
        await service.aclose()


async def test_rebalance_falls_back_when_the_service_stops(kafka_broker, redis_server, tmp_path):
    service = LiveService(redis_server.url, tmp_path / "service.log").start()  # this test stops it
    try:
        topic, group = make_topic(kafka_broker.bootstrap_servers), f"cg-{uuid.uuid4().hex[:6]}"
        async with AsyncGroupfitClient(service.url) as client:
            await put_rates(client, group, topic)
        assignors = [groupfit_assignor(service.url, group, f"m{i}", 100) for i in (1, 2, 3)]
        members = [consumer(kafka_broker.bootstrap_servers, topic, group, a) for a in assignors]
        for c in members[:2]:
            await c.start()
        try:
            before = await settle(members[:2], len(RATES))
            assert any(a.last_source == "service" for a in assignors[:2])
            service.stop()
            await members[2].start()  # the join makes the leader assign while the service is down
            after = await settle(members, len(RATES))
            assert any(a.last_source == "fallback" for a in assignors)
            assert sorted(map(len, after.values())) == [2, 2, 2]
            # Members report what they read, so the fallback moves only what the newcomer needs.
            assert sum(len(after[i] - before[i]) for i in (0, 1)) == 0
        finally:
            for c in members:
                await c.stop()
    finally:
        service.stop()
