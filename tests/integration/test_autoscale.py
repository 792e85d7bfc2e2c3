"""`groupfit autoscale` on a real Apache Kafka broker with the live service and real consumer processes: it
scales the group up while events arrive faster than one consumer's μ, back down once they stop, writes one
event per interval, and stops every consumer it started when it is told to stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import LiveService

pytestmark = pytest.mark.integration

CONSUMER = Path(__file__).with_name("autoscaled_consumer.py")
PARTITIONS = 4
MU = 20.0  # events/s one consumer processes: 50 ms each (light, so a loaded machine keeps up)
RATE = 60.0  # events/s produced: three consumers' worth; at f_up = 0.9 each partition (15/s) needs its own


def produce(bootstrap: str, topic: str, stop: threading.Event, produced: list[float]) -> None:
    """RATE events/s spread over the partitions until `stop`; appends the rate it achieved to `produced`."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent, began = 0, time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - began) * RATE)
        for i in range(sent, due):
            producer.produce(topic, value=b"x", partition=i % PARTITIONS)
        sent = max(sent, due)
        producer.poll(0)
        stop.wait(0.05)
    assert producer.flush(30) == 0
    produced.append(sent / (time.monotonic() - began))


def events_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(condition, seconds: float, what: str, path: Path):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = condition(events_of(path))
        if result:
            return result
        time.sleep(0.5)
    tail = "\n".join(json.dumps(e) for e in events_of(path)[-8:])
    raise AssertionError(f"{what} within {seconds} s; the last events:\n{tail}")


def test_the_autoscaler_follows_the_load_up_and_down(kafka_broker, live_service: LiveService, tmp_path: Path):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = f"scale-{uuid.uuid4().hex[:6]}", f"scale-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected client fails its futures
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    events, consumers_log = tmp_path / "events.jsonl", tmp_path / "consumers.log"
    params = json.dumps({"mu": MU, "w_sla": 2.0, "rebalance_s": 0.5})
    consumer = (
        f"{sys.executable} {CONSUMER} --id {{id}} --bootstrap {bootstrap} --topic {topic} --group {group} "
        f"--service {live_service.url} --capacity {MU} --algorithm least-loaded --params '{params}' "
        f"--ms-per-event {1000 / MU:g} --log {consumers_log}"
    )
    # the contract the experiment harness relies on, with the seed's (f_up, f_down)
    autoscaler = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "autoscale", "--bootstrap-servers", bootstrap, "--topic", topic]
        + ["--group", group, "--strategy", "least-loaded", "--service-url", live_service.url, "--mu", str(MU)]
        + ["--w-sla", "2", "--f-up", "0.9", "--f-down", "0.4", "--rebalance-s", "0.5", "--interval-s", "1"]
        + ["--min-consumers", "1", "--max-consumers", str(PARTITIONS), "--consumer-command", consumer]
        + ["--events-log", str(events), "--duration-s", "240"],
        stderr=(tmp_path / "autoscaler.log").open("w"),
    )
    stop_producing = threading.Event()
    produced: list[float] = []
    producer = threading.Thread(target=produce, args=(bootstrap, topic, stop_producing, produced), daemon=True)
    try:
        producer.start()
        up = wait_for(
            lambda es: next((e for e in es if e["consumers_after"] >= 3), None),
            90,
            "no scale-up to 3 consumers",
            events,
        )
        assert up["action"] == "up"
        stop_producing.set()
        producer.join(60)
        assert produced[0] > 2 * MU  # what the scale-up answered: more than two consumers' worth
        down = wait_for(
            lambda es: next(
                (e for e in es if e["t"] > up["t"] and e["action"] == "down" and e["consumers_after"] == 1), None
            ),
            90,
            "no scale-down to 1 consumer",
            events,
        )
        assert down["stopped"] and down["total_rate"] < MU
    finally:
        stop_producing.set()
        autoscaler.send_signal(signal.SIGTERM)
        code = autoscaler.wait(60)
    log = (tmp_path / "autoscaler.log").read_text()
    assert code == 0, log[-3000:]
    every = events_of(events)
    assert all({"t", "rates", "lags", "action", "consumers_before", "consumers_after"} <= set(e) for e in every)
    assert [e["consumers_after"] for e in every if e["started"] or e["stopped"]][:2] == [1, up["consumers_after"]]
    started = [c for e in every for c in e["started"]]
    assert started[0] == "c0" and len(set(started)) >= 3
    # every consumer process it started has left its group and exited
    lines = [line.split() for line in consumers_log.read_text().splitlines()]
    pids = {int(pid) for _, pid, what in lines if what == "up"}
    assert len(pids) == len(started) and {int(pid) for _, pid, what in lines if what == "left"} == pids
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
