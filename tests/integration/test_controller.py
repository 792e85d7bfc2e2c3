"""Controller mode on a real Kafka-protocol broker with the live service: partitions move between running
consumer processes with stop → acknowledge → start, also after a controller restart; no record is lost or
read twice."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from groupfit_client import GroupfitClient, PartitionRate
from groupfit_client.controller import Controller, LocalProcesses
from groupfit_client.controller.protocol import members

pytestmark = pytest.mark.integration

PARTITIONS = 4


class Writer(threading.Thread):
    """Produces to every partition until stopped, counting what it wrote."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__()
        self.bootstrap, self.topic = bootstrap, topic
        self.produced: Counter = Counter()
        self.stopping = threading.Event()

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        while not self.stopping.is_set():
            for partition in range(PARTITIONS):
                producer.produce(self.topic, value=b"r" * 50, partition=partition)
                self.produced[partition] += 1
            producer.poll(0)
            time.sleep(0.05)
        producer.flush(10)

    def finish(self) -> None:
        self.stopping.set()
        self.join()


def test_controller_moves_partitions_without_loss_or_double_reads(kafka_broker, live_service, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    topic, control, group = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("ctl-data", "ctl-control", "ctl"))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1), NewTopic(control, 1, 1)]).values():
        future.result(30)
    service = GroupfitClient(live_service.url)

    def put_rates(rates: list[float], minute: int) -> None:
        service.put_rates(
            group, [PartitionRate(topic, p, r) for p, r in enumerate(rates)], f"2026-11-22T10:0{minute}:00Z"
        )

    record_log = tmp_path / "records.log"
    processes = LocalProcesses(bootstrap, topic, group, control, str(record_log))
    successor = LocalProcesses(bootstrap, topic, group, control, str(record_log))  # the restarted controller's
    writer = Writer(bootstrap, topic)
    writer.start()
    try:
        put_rates([60, 30, 30, 20], 0)
        controller = Controller(service, bootstrap, topic, group, control, processes, capacity=100, ack_timeout_s=40)
        controller.synchronize()
        assert controller.step()  # partitions unowned: the first assignment starts consumers
        first = {c: set(held) for c, held in controller.state.items()}
        assert sorted(tp for held in first.values() for tp in held) == [(topic, p) for p in range(PARTITIONS)]
        time.sleep(3)
        # t/0 grows past one consumer's capacity beside its neighbours: the sentinel sees an overload.
        put_rates([90, 30, 30, 20], 1)
        assert controller.step()
        second = {c: set(held) for c, held in controller.state.items() if held}
        assert second != first
        assert all(sum([90, 30, 30, 20][p] for _, p in held) <= 100 for held in second.values())
        # A restarted controller knows no processes: the broker lists the consumers (DescribeGroups on their
        # membership group), and it rebuilds the real state by asking each of them, with no grace period...
        assert set(second) <= members(bootstrap, group)
        restarted = Controller(service, bootstrap, topic, group, control, successor, capacity=100, ack_timeout_s=40)
        restarted.synchronize(grace_s=0)
        assert {c: held for c, held in restarted.state.items() if held} == second
        # ...and moves the partitions of the consumers it found with the same protocol: at 50 each, two
        # consumers of two partitions, so one of the three beside t/0 joins it.
        put_rates([50] * PARTITIONS, 2)
        assert restarted.step()
        assert sorted(len(held) for held in restarted.state.values() if held) == [2, 2]
        time.sleep(3)
        writer.finish()
        check_every_record_read_once(record_log, writer.produced)
    finally:
        writer.finish()
        processes.close()
        successor.close()


def check_every_record_read_once(record_log: Path, produced: Counter) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lines = record_log.read_text().split("\n") if record_log.exists() else []
        reads = [line.split() for line in lines if line]
        if Counter(int(p) for _, p, _, _ in reads) == produced:
            break
        time.sleep(0.5)
    offsets = Counter((int(p), int(o)) for _, p, o, _ in reads)
    twice = sorted(record for record, count in offsets.items() if count > 1)
    assert not twice, f"records read twice (partition, offset): {twice[:10]}"
    for partition in range(PARTITIONS):
        assert sorted(o for p, o in offsets if p == partition) == list(range(produced[partition])), partition
    readers = {(int(p), c) for _, p, _, c in reads}
    assert sum(len({c for p2, c in readers if p2 == p}) > 1 for p in range(PARTITIONS)) >= 2, "partitions did not move"
