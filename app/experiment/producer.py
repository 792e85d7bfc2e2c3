"""The experiment's producer: replays a workload onto a topic, each event carrying its production time.

    python -m app.experiment.producer --bootstrap-servers B --topic T --workload FILE --summary OUT.json \\
        [--start-at EPOCH_S] [--payload-bytes 64]

An event's value is its production time (µs since the epoch, 8 bytes big-endian, taken when it is handed to
the client) followed by padding to `--payload-bytes`; it goes to the partition the workload gives it. The
schedule is kept by sending every event that is due, then sleeping until the next one: on a loaded machine a
late wake-up sends what is due at once (librdkafka batches it, `linger.ms` 5), and each event's time is when it
was really sent. How late the events went against the schedule is in the summary, with the events delivered
per partition (idempotent, so a retry never writes one twice: partition p holds offsets 0 … delivered[p] − 1 of
a new topic). SIGTERM stops it early; the summary then says `interrupted`.
"""

from __future__ import annotations

import argparse
import json
import signal
import struct
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from app.experiment.workload import Workload, WorkloadError, load

HEADER = struct.Struct(">q")
LATE_MS = 100.0


@dataclass
class ProducerSummary:
    topic: str
    workload: str
    scheduled: int
    sent: int = 0
    delivered: dict[int, int] = field(default_factory=dict)  # partition → events acknowledged
    last_offset: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    started_at_us: int = 0
    ended_at_us: int = 0
    lateness_ms: dict[str, float] = field(default_factory=dict)  # p50, p99, max of (sent − scheduled)
    late_events: int = 0  # sent more than LATE_MS after their time
    interrupted: bool = False

    @property
    def delivered_total(self) -> int:
        return sum(self.delivered.values())

    @classmethod
    def read(cls, path: str | Path) -> ProducerSummary:
        raw = json.loads(Path(path).read_text())
        raw["delivered"] = {int(p): n for p, n in raw["delivered"].items()}
        raw["last_offset"] = {int(p): n for p, n in raw["last_offset"].items()}
        return cls(**raw)


def now_us() -> int:
    return time.time_ns() // 1000


def replay(
    bootstrap: str,
    topic: str,
    workload: Workload,
    start_at: float | None = None,
    payload_bytes: int = 64,
    stop: threading.Event | None = None,
) -> ProducerSummary:
    from confluent_kafka import Producer

    stop = stop or threading.Event()
    times, partitions = workload.schedule()
    summary = ProducerSummary(topic, workload.name, len(times))
    padding = b"\0" * max(0, payload_bytes - HEADER.size)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "enable.idempotence": True,
            "acks": "all",
            "queue.buffering.max.messages": 1_000_000,
        }
    )

    def delivered(error, message) -> None:
        if error is not None:
            summary.errors.append(str(error))
            return
        p = message.partition()
        summary.delivered[p] = summary.delivered.get(p, 0) + 1
        summary.last_offset[p] = max(summary.last_offset.get(p, -1), message.offset())

    lateness = np.zeros(len(times))
    begin = start_at if start_at is not None else time.time()
    while (wait := begin - time.time()) > 0 and not stop.is_set():
        stop.wait(min(wait, 0.5))
    summary.started_at_us = int(begin * 1e6)
    sent = 0
    while sent < len(times) and not stop.is_set():
        elapsed = time.time() - begin
        due = int(np.searchsorted(times, elapsed, side="right"))
        for i in range(sent, due):
            at = now_us()
            producer.produce(topic, HEADER.pack(at) + padding, partition=int(partitions[i]), on_delivery=delivered)
            lateness[i] = at / 1e6 - begin - times[i]
        sent = due
        producer.poll(0)
        if sent < len(times):
            stop.wait(max(0.0, min(times[sent] - (time.time() - begin), 0.05)))
    summary.sent = sent
    summary.interrupted = sent < len(times)
    remaining = producer.flush(30)
    if remaining:
        summary.errors.append(f"{remaining} events not acknowledged within 30 s of the end")
    summary.ended_at_us = now_us()
    late = lateness[:sent] * 1000
    if sent:
        summary.lateness_ms = {
            "p50": float(np.percentile(late, 50)),
            "p99": float(np.percentile(late, 99)),
            "max": float(late.max()),
        }
    summary.late_events = int((late > LATE_MS).sum())
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.experiment.producer", description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--workload", required=True, help="a workload file (app/experiment/workload.py)")
    parser.add_argument("--summary", required=True, help="where to write the summary (JSON)")
    parser.add_argument("--start-at", type=float, help="epoch seconds of the workload's time 0 (default: now)")
    parser.add_argument("--payload-bytes", type=int, default=64)
    args = parser.parse_args(argv)
    try:
        workload = load(args.workload)
    except WorkloadError as exc:
        print(f"producer: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    summary = replay(args.bootstrap_servers, args.topic, workload, args.start_at, args.payload_bytes, stop)
    Path(args.summary).write_text(json.dumps(asdict(summary)))
    return 0 if not summary.errors and not summary.interrupted else 1


if __name__ == "__main__":
    sys.exit(main())
