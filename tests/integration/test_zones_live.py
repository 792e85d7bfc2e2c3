"""Zones live (issue #29): three Apache Kafka brokers in racks a, b and c, three consumers per group, one in each
rack (client.rack), and skewed rates. Each of the three kinds of group — classic Java (GroupfitAssignor), KIP-848
(GroupfitBrokerAssignor in the brokers) and Python (aiokafka with the groupfit assignor) — sends the members' racks
and the partitions' leaders' racks it finds in its own metadata, and ends up holding the service's zone-aware
answer: exactly the one a stateless request of the same group gets (BFD answers independently of the previous
assignment), each consumer within its capacity and reading in its own rack wherever that consumer has room. The
KIP-848 group's answer is computed in the brokers by the Java core's zone mode, with no call to the service on the
coordinator's thread.

The topic's twelve partitions are led (replication 1, so the leader is the only replica) by broker p % 3 + 1: rack
a's four come to 110 of rate, more than its consumer's 100, so at least 15 (its smallest that leaves it within)
crosses zones; racks b and c have room for theirs.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
import uuid

import httpx
import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from groupfit_client.assignor import groupfit_assignor

from app.local.java_clients import JavaBuild
from app.local.kafka import ApacheKafka
from tests.conftest import LiveService
from tests.integration.test_java_clients import JavaConsumer, put_rates, stored, wait_until

pytestmark = pytest.mark.integration

RACKS = ("a", "b", "c")
# partition p is led by broker p % 3 + 1, in rack RACKS[p % 3]: a holds 45+30+20+15, b 35+20+10+10, c 20+10+5+5
RATES = [45.0, 35.0, 20.0, 30.0, 20.0, 10.0, 20.0, 10.0, 5.0, 15.0, 10.0, 5.0]
CAPACITY = 100.0


def rack_of(partition: int) -> str:
    return RACKS[partition % 3]


def least_cross_zone() -> float:
    """The least rate read across zones with one consumer of CAPACITY per rack: each rack keeps local the largest
    subset of its partitions' rates that fits (the rest fits elsewhere here)."""
    kept = 0.0
    for rack in RACKS:
        local = [rate for p, rate in enumerate(RATES) if rack_of(p) == rack]
        kept += max(
            sum(subset)
            for size in range(len(local) + 1)
            for subset in itertools.combinations(local, size)
            if sum(subset) <= CAPACITY
        )
    return sum(RATES) - kept


@pytest.fixture(scope="module")
def topic(rack_cluster: ApacheKafka) -> str:
    name = f"zones-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": rack_cluster.bootstrap_servers})
    assignment = [[p % 3 + 1] for p in range(len(RATES))]
    admin.create_topics([NewTopic(name, len(RATES), replica_assignment=assignment)])[name].result(30)
    wanted = {p: p % 3 + 1 for p in range(len(RATES))}
    deadline = time.monotonic() + 30
    while True:  # the topic's metadata can lag its creation (no partitions yet, or leaders not elected)
        described = admin.list_topics(name, timeout=30).topics[name].partitions
        leaders = {p: described[p].leader for p in described}
        if leaders == wanted or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert leaders == wanted
    return name


@pytest.fixture(scope="module")
def expected(live_service: LiveService, topic: str) -> dict[str, set[int]]:
    """The service's zone-aware answer to a stateless request of the group (members a, b, c in their racks, the
    partitions with their leaders' racks): what every kind of group must end up holding."""
    body = {
        "algorithm": "bfd",
        "capacity": CAPACITY,
        "members": [{"id": rack, "rack": rack} for rack in RACKS],
        "partitions": [
            {"topic": topic, "partition": p, "rate": rate, "racks": [rack_of(p)]} for p, rate in enumerate(RATES)
        ],
    }
    answer = httpx.post(f"{live_service.url}/v1/assign", json=body, timeout=30)
    answer.raise_for_status()
    found = answer.json()
    assignment = {m: {ref["partition"] for ref in held} for m, held in found["assignment"].items()}
    loads = {m: sum(RATES[p] for p in held) for m, held in assignment.items()}
    assert all(load <= CAPACITY for load in loads.values()), loads
    # local wherever capacity allows: a partition read across zones does not fit its rack's consumer
    for member, held in assignment.items():
        for p in held:
            if rack_of(p) != member:
                assert loads[rack_of(p)] + RATES[p] > CAPACITY, (p, member, loads)
    assert found["cross_zone_rate"] == pytest.approx(least_cross_zone()) == 15.0
    assert {c["id"]: c["rack"] for c in found["consumers"]} == {rack: rack for rack in RACKS}
    return assignment


def assert_holds(url: str, group: str, owned: dict[str, set[int]], expected: dict[str, set[int]]) -> None:
    """The group's stored version is the expected zone-aware answer, with its racks, and the members hold it."""
    state = stored(url, group)
    assert {m: {ref["partition"] for ref in held} for m, held in state["assignment"].items()} == expected
    assert state["racks"] == {rack: rack for rack in RACKS}
    assert owned == expected
    history = httpx.get(f"{url}/v1/groups/{group}/history", timeout=10).json()
    (entry,) = (v for v in history["versions"] if v["version"] == state["version"])
    assert entry["cross_zone_rate"] == pytest.approx(15.0), entry


def holding(url: str, group: str, owned: dict[str, set[int]], expected: dict[str, set[int]]) -> bool:
    state = stored(url, group)
    return owned == expected and {m: {r["partition"] for r in held} for m, held in state["assignment"].items()} == (
        expected
    )


def test_a_classic_java_group_reads_in_its_zones(java_build: JavaBuild, rack_cluster, live_service, topic, expected):
    group = f"zones-classic-{uuid.uuid4().hex[:6]}"
    put_rates(live_service.url, group, topic, RATES)
    members = [
        JavaConsumer(
            java_build,
            rack_cluster.bootstrap_servers,
            topic,
            group,
            rack,
            "eager",
            live_service.url,
            CAPACITY,
            {"client.rack": rack, "groupfit.algorithm": "bfd"},
        )
        for rack in RACKS
    ]
    try:

        def owned() -> dict[str, set[int]]:
            return {m.identity: m.owned for m in members}

        wait_until(
            lambda: holding(live_service.url, group, owned(), expected), 90, "not the zone-aware answer", members
        )
        assert_holds(live_service.url, group, owned(), expected)
    finally:
        for member in members:
            member.close()


def via(cluster: ApacheKafka, group: str) -> list[str]:
    """Where each of the brokers' assign() for `group` took its answer from (service, core, fallback), in order of
    the coordinator's log."""
    pattern = re.compile(rf"groupfit assignor: group {re.escape(group)}, .* via (\w+)")
    return [
        m[1]
        for path in cluster.log_paths
        if path.exists()
        for m in pattern.finditer(path.read_text("utf-8", "replace"))
    ]


def test_a_kip848_group_reads_in_its_zones(java_build: JavaBuild, rack_cluster, live_service, topic, expected):
    group = f"zones-848-{uuid.uuid4().hex[:6]}"
    put_rates(live_service.url, group, topic, RATES)

    def start(rack: str) -> JavaConsumer:
        # its instance id names it to the broker's assignor (and so to the service), as the other groups' identities
        properties = {"client.rack": rack, "group.instance.id": rack}
        return JavaConsumer(
            java_build,
            rack_cluster.bootstrap_servers,
            topic,
            group,
            rack,
            "consumer",
            live_service.url,
            CAPACITY,
            properties,
        )

    members = [start("a")]
    try:
        wait_until(lambda: len(members[0].owned) == len(RATES), 60, "the first member did not get everything", members)
        learnt = f"groupfit assignor: group {group} learnt"
        wait_until(
            lambda: any(learnt in p.read_text("utf-8", "replace") for p in rack_cluster.log_paths if p.exists()),
            60,
            "no broker learnt the group",
            members,
        )
        members += [start("b"), start("c")]

        def owned() -> dict[str, set[int]]:
            return {m.identity: m.owned for m in members}

        wait_until(
            lambda: holding(live_service.url, group, owned(), expected), 90, "not the zone-aware answer", members
        )
        assert_holds(live_service.url, group, owned(), expected)
        # the brokers computed the zone-aware answer in their Java core, never asking the service on the coordinator's
        # thread: every assign() with the group's rates known went through the core
        assert via(rack_cluster, group)[-1] == "core"
        assert "service" not in via(rack_cluster, group)
    finally:
        for member in members:
            member.close()


async def test_a_python_group_reads_in_its_zones(rack_cluster, live_service, topic, expected):
    group = f"zones-python-{uuid.uuid4().hex[:6]}"
    put_rates(live_service.url, group, topic, RATES)
    members = {
        rack: AIOKafkaConsumer(
            topic,
            bootstrap_servers=rack_cluster.bootstrap_servers,
            group_id=group,
            client_rack=rack,
            auto_offset_reset="earliest",
            partition_assignment_strategy=(
                groupfit_assignor(live_service.url, group, rack, CAPACITY, algorithm="bfd", rack=rack),
            ),
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            enable_auto_commit=False,
        )
        for rack in RACKS
    }
    for consumer in members.values():
        await consumer.start()
    try:
        deadline = asyncio.get_running_loop().time() + 90
        owned: dict[str, set[int]] = {}
        while asyncio.get_running_loop().time() < deadline:
            await asyncio.gather(*(c.getmany(timeout_ms=300) for c in members.values()))
            owned = {rack: {tp.partition for tp in c.assignment()} for rack, c in members.items()}
            if holding(live_service.url, group, owned, expected):
                break
        assert_holds(live_service.url, group, owned, expected)
    finally:
        for consumer in members.values():
            await consumer.stop()
