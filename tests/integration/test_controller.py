"""Controller mode on a real Kafka-protocol broker with the live service: partitions move between running
consumer processes with stop → acknowledge → start; no record is lost or read twice."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from groupfit_client import GroupfitClient
from groupfit_client.controller import Controller, LocalProcesses

pytestmark = pytest.mark.integration


def test_controller_moves_partitions_without_loss_or_double_reads(kafka_broker, live_service, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    topic, control, group = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("ctl-data", "ctl-control", "ctl"))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 4, 1), NewTopic(control, 1, 1)]).values():
        future.result(30)
    produced = Counter()
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0})
        while not stop.is_set():
            for partition in range(4):
                producer.produce(topic, value=b"r" * 50, partition=partition)
                produced[partition] += 1
            producer.poll(0)
            time.sleep(0.05)
        producer.flush(10)

    service = GroupfitClient(live_service.url)
    service.put_rates(group, [{"topic": topic, "partition": p, "rate": r} for p, r in enumerate([60, 30, 30, 20])],
                      "2026-11-22T10:00:00Z")
    record_log = tmp_path / "records.log"
    processes = LocalProcesses(bootstrap, topic, group, control, str(record_log))
    controller = Controller(service, bootstrap, topic, group, control, processes, capacity=100, ack_timeout_s=40)
    writer = threading.Thread(target=produce)
    writer.start()
    try:
        check_moves(controller, processes, service, bootstrap, topic, control, group, stop, writer, produced, record_log)
    finally:
        stop.set()
        processes.close()


def check_moves(controller, processes, service, bootstrap, topic, control, group, stop, writer, produced, record_log):
    try:
        controller.synchronize()
        assert controller.step()  # partitions unowned: the first assignment starts consumers
        first = {c: set(held) for c, held in controller.state.items()}
        assert sorted(tp for held in first.values() for tp in held) == [(topic, p) for p in range(4)]
        time.sleep(3)
        # t/0 grows past one consumer's capacity beside its neighbours: the sentinel sees an overload.
        service.put_rates(group, [{"topic": topic, "partition": p, "rate": r} for p, r in enumerate([90, 30, 30, 20])],
                          "2026-11-22T10:01:00Z")
        assert controller.step()
        second = {c: set(held) for c, held in controller.state.items()}
        assert second != first
        assert all(sum([90, 30, 30, 20][p] for _, p in held) <= 100 for held in second.values())
        # A restarted controller rebuilds the real state by asking the consumers.
        restarted = Controller(service, bootstrap, topic, group, control, processes, capacity=100, ack_timeout_s=40)
        restarted.synchronize()
        assert {c: held for c, held in restarted.state.items() if held} == {c: h for c, h in second.items() if h}
        time.sleep(3)
    finally:
        stop.set()
        writer.join()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            lines = record_log.read_text().split("\n") if record_log.exists() else []
            reads = [line.split() for line in lines if line]
            if Counter(int(p) for _, p, _, _ in reads) == produced:
                break
            time.sleep(0.5)
        offsets = Counter((int(p), int(o)) for _, p, o, _ in reads)
        assert all(count == 1 for count in offsets.values()), "a record was read twice"
        for partition in range(4):
            assert sorted(o for p, o in offsets if p == partition) == list(range(produced[partition])), partition
        readers = {(int(p), c) for _, p, _, c in reads}
        assert any(len({c for p2, c in readers if p2 == p}) > 1 for p in range(4)), "no partition moved"
    finally:
        processes.close()
