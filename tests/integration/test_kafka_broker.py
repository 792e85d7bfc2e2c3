"""The broker the tests use is Apache Kafka started by app/local/kafka.py, not some other Kafka-protocol server.

Each check below fails on Tansu (the broker the project used before): its cluster id is not the one we
formatted, its high watermark is wrong with multi-record batches, and it has no DescribeGroups nor KIP-848.
"""

from __future__ import annotations

import socket
import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from app.local.kafka import KAFKA_VERSION, ApacheKafka, KafkaSetupError

pytestmark = pytest.mark.integration


def new_topic(admin: AdminClient, partitions: int, replicas: int = 1) -> str:
    topic = f"probe-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, partitions, replicas)])[topic].result(30)
    return topic


def test_the_broker_is_the_apache_kafka_we_formatted(kafka_broker: ApacheKafka):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    cluster = admin.describe_cluster().result(30)
    assert cluster.cluster_id == kafka_broker.cluster_id  # the id our StorageTool run wrote, not another server's
    assert [node.id for node in cluster.nodes] == [1]
    assert f"Kafka version: {KAFKA_VERSION}" in kafka_broker.nodes[0].log_path.read_text()


def test_high_watermark_counts_every_record_of_multi_record_batches(kafka_broker: ApacheKafka):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    topic = new_topic(admin, 1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "linger.ms": 50})
    for i in range(500):
        producer.produce(topic, value=b"x" * 100, key=str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    offsets = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()}).items()
    assert [future.result(30).offset for _, future in offsets] == [500]


def test_a_kip_848_consumer_group_shares_the_partitions_and_describes_itself(kafka_broker: ApacheKafka):
    """group.protocol=consumer: the broker assigns (KIP-848); DescribeConsumerGroups reports the group's type."""
    bootstrap = kafka_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic, group = new_topic(admin, 4), f"kip848-{uuid.uuid4().hex[:6]}"
    members = [
        Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer"}) for _ in range(2)
    ]
    try:
        for member in members:
            member.subscribe([topic])
        deadline = time.monotonic() + 60
        owned: list[set[int]] = [set(), set()]
        while time.monotonic() < deadline:
            for member in members:
                member.poll(0.2)
            owned = [{tp.partition for tp in member.assignment()} for member in members]
            if all(owned) and sorted(p for ps in owned for p in ps) == [0, 1, 2, 3]:
                break
        assert all(owned) and sorted(p for ps in owned for p in ps) == [0, 1, 2, 3], owned
        description = admin.describe_consumer_groups([group])[group].result(30)
        assert description.type == ConsumerGroupType.CONSUMER
        assert len(description.members) == 2
    finally:
        for member in members:
            member.close()


def test_three_brokers_with_racks_form_one_cluster(tmp_path):
    with ApacheKafka(tmp_path, brokers=3, racks=("r1", "r2", "r3"), heap="256m") as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        description = admin.describe_cluster().result(30)
        assert description.cluster_id == cluster.cluster_id
        assert sorted((node.id, node.rack) for node in description.nodes) == [(1, "r1"), (2, "r2"), (3, "r3")]
        topic = new_topic(admin, 3, replicas=3)
        partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions.values()
        assert all(sorted(partition.replicas) == [1, 2, 3] for partition in partitions)
    assert all(node.process is None for node in cluster.nodes)


def test_a_node_starts_on_a_small_heap(tmp_path):
    # Kafka's default log cleaner buffer (128 MB, allocated at start) does not fit a 160 MB heap: the node would
    # stop with an OutOfMemoryError, as one of a 256 MB three-broker cluster once did in CI.
    with ApacheKafka(tmp_path, heap="160m") as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        assert admin.describe_cluster().result(30).cluster_id == cluster.cluster_id


def test_a_node_that_cannot_start_fails_with_its_log(tmp_path):
    broken = ApacheKafka(tmp_path, properties={"num.network.threads": "not-a-number"})
    with pytest.raises(KafkaSetupError, match="not-a-number"):
        broken.start(timeout=120)
    assert all(node.process is None for node in broken.nodes)


def test_racks_must_name_one_rack_per_broker(tmp_path):
    with pytest.raises(ValueError, match="one per broker"):
        ApacheKafka(tmp_path, brokers=3, racks=("a", "b"))


def test_a_port_taken_before_the_broker_binds_it_is_retried_on_new_ports(tmp_path):
    """On a shared machine another process may take the free port chosen for the broker before it binds it."""
    kafka = ApacheKafka(tmp_path)
    taken = kafka.nodes[0].port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        with kafka:
            assert kafka.nodes[0].port != taken
            admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
            assert admin.describe_cluster().result(30).cluster_id == kafka.cluster_id
    assert "Address already in use" in kafka.nodes[0].log_path.read_text()
