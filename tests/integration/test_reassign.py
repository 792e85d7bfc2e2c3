"""REASS on a real Apache Kafka broker with the live service: a classic group whose rates drift while its members
stay is rebalanced once by its leader (Java: GroupfitRebalance.enforceIfDue → enforceRebalance; Python:
enforce_if_due → the coordinator's rejoin), the new assignment keeps every member within its capacity, and no
second rebalance is triggered within the minimum interval (the next one comes after it)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import httpx
import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from groupfit_client import AsyncGroupfitClient, PartitionRate
from groupfit_client.assignor import enforce_if_due, groupfit_assignor

from tests.integration.test_java_clients import (  # noqa: F401 (consumers is a fixture)
    JavaConsumer,
    consumers,
    holds_the_services_assignment,
    stored,
    wait_until,
)

pytestmark = pytest.mark.integration

PARTITIONS = 12
CAPACITY = 100.0
MIN_INTERVAL_S = 10


def make_topic(bootstrap: str) -> str:
    topic = f"reass-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected client fails its futures
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    return topic


def put_rates(url: str, group: str, topic: str, rates: list[float]) -> None:
    partitions = [{"topic": topic, "partition": p, "rate": r} for p, r in enumerate(rates)]
    body = {"partitions": partitions, "window_end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    httpx.put(f"{url}/v1/groups/{group}/rates", json=body, timeout=10).raise_for_status()


def skew(assignment: dict[str, list[dict]]) -> list[float]:
    """The member holding the most partitions (k ≥ 4 of 12) gets 150 of rate on them, 150 / k each, over its
    capacity of 100; every other partition gets 10. At most 230 in all: the same three members hold it within
    their capacities, and the group's size does not change (no up, no down: only a reassignment helps)."""
    hot_member = max(sorted(assignment), key=lambda m: len(assignment[m]))
    hot = {p["partition"] for p in assignment[hot_member]}
    return [150.0 / len(hot) if p in hot else 10.0 for p in range(PARTITIONS)]


def loads(assignment: dict[str, list[dict]], rates: list[float]) -> dict[str, float]:
    return {m: sum(rates[p["partition"]] for p in held) for m, held in assignment.items()}


def decision(url: str, group: str) -> dict:
    return httpx.get(f"{url}/v1/groups/{group}/scale", params={"min_interval_s": MIN_INTERVAL_S}, timeout=10).json()


@pytest.mark.parametrize("mode", ["eager", "cooperative"])
def test_java_leader_rebalances_once_when_the_rates_drift(mode, java_build, kafka_broker, live_service, consumers):  # noqa: F811 (consumers)
    bootstrap, url = kafka_broker.bootstrap_servers, live_service.url
    topic, group = make_topic(bootstrap), f"reass-{mode}-{uuid.uuid4().hex[:6]}"
    put_rates(url, group, topic, [20.0] * PARTITIONS)
    properties = {
        "groupfit.reassign.interval.ms": "500",
        "groupfit.reassign.min.interval.ms": str(MIN_INTERVAL_S * 1000),
    }
    for identity in ("m1", "m2", "m3"):
        consumers.append(JavaConsumer(java_build, bootstrap, topic, group, identity, mode, url, CAPACITY, properties))

    def settled(after_version: int = 0) -> Callable[[], dict | None]:
        def holds() -> dict | None:
            state = holds_the_services_assignment(url, group, consumers, lambda m: m.identity, after_version)
            return state if state and set(state["assignment"]) == {"m1", "m2", "m3"} else None

        return holds

    def enforced() -> list[dict]:
        return [e for m in consumers for e in m.snapshot() if e["event"] == "enforced"]

    first = wait_until(settled(), 90, "the group did not settle on the service's assignment", consumers)
    rates = skew(first["assignment"])
    put_rates(url, group, topic, rates)  # no member joins or leaves
    after = wait_until(settled(first["version"]), 90, "no rebalance followed the drift", consumers)
    assert len(enforced()) == 1 and "reass" in enforced()[0]["reason"]
    assert after["version"] == first["version"] + 1
    assert max(loads(after["assignment"], rates).values()) <= CAPACITY
    # the rebalance it triggered paused each moved partition for this long (a figure, printed, not asserted)
    pauses = pause_s(consumers, enforced()[0]["t"])
    print(f"{mode}: {len(pauses)} partitions moved, paused {max(pauses, default=0):.3f} s at most")

    # a new drift right away: the service holds it back (the assignment is younger than the minimum interval)
    rates = skew(after["assignment"])
    put_rates(url, group, topic, rates)
    held = decision(url, group)
    assert held["action"] == "none" and f"min_interval_s {MIN_INTERVAL_S}" in held["reason"]
    time.sleep(3)
    assert len(enforced()) == 1 and stored(url, group)["version"] == after["version"]
    # once the interval has passed, the next rebalance comes
    wait_until(lambda: len(enforced()) == 2, 60, "no second rebalance after the minimum interval", consumers)
    second = enforced()[1]["t"] - enforced()[0]["t"]
    assert second >= MIN_INTERVAL_S * 1e9


def pause_s(members: list[JavaConsumer], since_ns: float) -> list[float]:
    """For each partition revoked after `since_ns`: seconds until a member was assigned it again."""
    revoked: dict[int, int] = {}
    assigned: dict[int, int] = {}
    for member in members:
        for event in member.snapshot():
            if event.get("t", 0) < since_ns:
                continue
            for p in event.get("partitions", ()):
                if event["event"] == "revoked":
                    revoked[p] = min(revoked.get(p, event["t"]), event["t"])
                elif event["event"] == "assigned" and p in revoked and event["t"] >= revoked[p]:
                    assigned.setdefault(p, event["t"])
    return [(assigned[p] - revoked[p]) / 1e9 for p in assigned]


async def test_python_leader_rebalances_once_when_the_rates_drift(kafka_broker, live_service):
    bootstrap, url = kafka_broker.bootstrap_servers, live_service.url
    topic, group = make_topic(bootstrap), f"reass-py-{uuid.uuid4().hex[:6]}"
    service = AsyncGroupfitClient(url)
    await service.put_rates(group, [PartitionRate(topic, p, 20.0) for p in range(PARTITIONS)], "2026-11-22T10:00:00Z")
    members = {}
    for identity in ("m1", "m2", "m3"):
        assignor = groupfit_assignor(
            url, group, identity, CAPACITY, reassign_interval_s=0.5, reassign_min_interval_s=MIN_INTERVAL_S
        )
        members[identity] = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=identity,
            partition_assignment_strategy=(assignor,),
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
    triggered: list[tuple[float, str, str]] = []  # (time, member, reason)
    for consumer in members.values():
        await consumer.start()

    async def poll_until(condition: Callable[[], object], seconds: float, what: str) -> object:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for identity, consumer in members.items():
                await consumer.getmany(timeout_ms=50)
                reason = enforce_if_due(consumer)
                if reason is not None:
                    triggered.append((time.monotonic(), identity, reason))
            result = condition()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return result
        raise AssertionError(f"{what} within {seconds} s; held: {held_now()}")

    def held_now() -> dict[str, set[int]]:
        return {i: {tp.partition for tp in c.assignment()} for i, c in members.items()}

    async def holds(after_version: int = 0) -> dict | None:
        state = (await service.group(group)).raw
        view = {m: {p["partition"] for p in ps} for m, ps in state["assignment"].items() if ps}
        mine = {m: ps for m, ps in held_now().items() if ps}
        return (
            state
            if state["version"] > after_version and set(state["assignment"]) == set(members) and view == mine
            else None
        )

    try:
        first = await poll_until(holds, 90, "the group did not settle on the service's assignment")
        rates = skew(first["assignment"])
        await service.put_rates(
            group, [PartitionRate(topic, p, r) for p, r in enumerate(rates)], "2026-11-22T10:01:00Z"
        )
        after = await poll_until(lambda: holds(first["version"]), 90, "no rebalance followed the drift")
        assert len(triggered) == 1 and "reass" in triggered[0][2]
        assert after["version"] == first["version"] + 1
        assert max(loads(after["assignment"], rates).values()) <= CAPACITY
        rates = skew(after["assignment"])
        await service.put_rates(
            group, [PartitionRate(topic, p, r) for p, r in enumerate(rates)], "2026-11-22T10:02:00Z"
        )
        calm = time.monotonic() + 3
        await poll_until(lambda: time.monotonic() > calm, 10, "")
        assert len(triggered) == 1
        await poll_until(lambda: len(triggered) == 2, 60, "no second rebalance after the minimum interval")
        assert triggered[1][0] - triggered[0][0] >= MIN_INTERVAL_S
    finally:
        for consumer in members.values():
            await consumer.stop()
        await service.aclose()
