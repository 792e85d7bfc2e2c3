"""`groupfit placement --bootstrap-servers … --execute` on a real three-broker Apache Kafka cluster (KRaft, one
rack per broker, a controller: app/local/kafka.py): topics skewed onto one broker are spread by the plan computed
from the live cluster, the cluster is described afterwards, and no record is lost."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from app.cli import main
from app.local.kafka import ApacheKafka

pytestmark = pytest.mark.integration

RECORDS = 600


@pytest.fixture
def cluster(rack_cluster: ApacheKafka) -> ApacheKafka:
    """The session's three-rack cluster (tests/integration/conftest.py), shared with the zone tests."""
    return rack_cluster


def describe(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int]]]:
    description = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    return {p.id: (p.leader.id, [node.id for node in p.replicas]) for p in description.partitions}


def produce(bootstrap: str, topic: str, partitions: int) -> set[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    values = {f"{topic}-{i}".encode() + b"." * 1000 for i in range(RECORDS)}
    for i, value in enumerate(sorted(values)):
        producer.produce(topic, value=value, partition=i % partitions)
    assert producer.flush(30) == 0
    return values


def consume(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
    finally:
        consumer.close()
    return seen


def test_a_skewed_cluster_is_planned_executed_and_verified(cluster, tmp_path, capsys):
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    skewed, paired = f"skewed-{uuid.uuid4().hex[:6]}", f"paired-{uuid.uuid4().hex[:6]}"
    created = admin.create_topics(
        [
            NewTopic(skewed, 6, replica_assignment=[[1]] * 6),  # every replica on broker 1
            NewTopic(paired, 3, replica_assignment=[[1, 2]] * 3),  # brokers 1 and 2, never 3
        ]
    )
    for future in created.values():
        future.result(30)
    deadline = time.monotonic() + 30
    while not all(len(admin.list_topics(topic, timeout=10).topics[topic].partitions) for topic in created):
        assert time.monotonic() < deadline, "the new topics never showed in the metadata"
        time.sleep(0.2)
    produced = {topic: produce(bootstrap, topic, count) for topic, count in ((skewed, 6), (paired, 3))}
    # the sizes DescribeLogDirs reports are what the brokers wrote: wait until every replica holds its bytes
    time.sleep(2)

    plan_path = tmp_path / "plan.json"
    status = main(
        [
            "placement",
            "--bootstrap-servers",
            bootstrap,
            "--topics",
            f"{skewed},{paired}",
            "--solver",
            "exact",
            "--objective",
            "balance",
            "--time-limit-ms",
            "2000",
            "--disk-capacity",
            "2000000",
            "--execute",
            "--throttle",
            "50000000",
            "--timeout-s",
            "120",
            "--reassignment-out",
            str(plan_path),
        ]
    )
    captured = capsys.readouterr()
    assert status == 0, captured.err
    answer = json.loads(captured.out)
    assert "reassignments complete" in captured.err
    # the live state went in: current lists, sizes from the log directories, racks, retention → throughput
    by_key = {(p["topic"], p["partition"]): p for p in answer["partitions"]}
    assert all(by_key[skewed, j]["previous"] == [1] for j in range(6))
    assert {b["id"]: b["rack"] for b in answer["brokers"]} == {1: "a", 2: "b", 3: "c"}
    assert answer["peak_after"]["disk"] < answer["peak_before"]["disk"]
    # within 5 % of the lower bound (an even spread), whether or not CP-SAT proved it in time on a busy machine
    assert answer["bounds"]["utilization"] <= answer["peak_after"]["disk"] <= 1.05 * answer["bounds"]["utilization"]
    assert json.loads(plan_path.read_text()) == answer["reassignment"]
    assert answer["reassignment"]["partitions"]  # something moved

    # the cluster now holds what the plan says, the preferred leaders lead, racks are kept apart
    for topic in (skewed, paired):
        described = describe(admin, topic)
        for partition, (leader, replicas) in described.items():
            assert replicas == by_key[topic, partition]["replicas"]
            assert leader == replicas[0]
            assert len(set(replicas)) == len(replicas)
    # balanced: the 1.8 MB of replicas (6 × 100 kB skewed, 3 × 2 × 200 kB paired) lie 600 kB on each broker
    disk_after = [b["disk_after"] for b in answer["brokers"]]
    assert max(disk_after) <= 1.05 * min(disk_after)
    # the throttles are gone once the reassignment completed
    configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, skewed)])
    values = next(iter(configs.values())).result(30)
    assert values["leader.replication.throttled.replicas"].value in ("", None)
    # no record lost
    for topic, values in produced.items():
        assert sorted(consume(bootstrap, topic, len(values))) == sorted(values)


def test_an_unknown_topic_is_named_and_nothing_is_planned(cluster, capsys):
    status = main(["placement", "--bootstrap-servers", cluster.bootstrap_servers, "--topics", "no-such-topic"])
    captured = capsys.readouterr()
    assert status == 1 and captured.out == ""
    assert "reading the cluster" in captured.err and "UNKNOWN_TOPIC" in captured.err.upper()
