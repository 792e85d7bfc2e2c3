"""A controlled consumer's work and what it records, for measuring a group live (groupfit's experiment,
docs/experiment.md): the same files the Java experiment consumer writes.

- Work: each event takes `process_s` (slept, not spun), one after the other; a batch starts when it was read,
  or at the previous batch's end if that is later, so a busy consumer processes exactly 1 / process_s events
  per second and an oversleep is made up by the next event.
- `<id>.lat`: per event, 28 bytes big-endian: partition (int32), offset (int64), produced (int64, µs since the
  epoch: the event value's first 8 bytes) and processed (int64, µs since the epoch, when its work ended).
- `<id>.events.jsonl`: `start`, `assigned` / `revoked` (a `start` / `stop` command applied, with its
  partitions), `closed`; each with its time in µs since the epoch.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from groupfit_client.results import TopicPartition

RECORD = struct.Struct(">iqqq")
PRODUCED = struct.Struct(">q")


def now_us() -> int:
    return time.time_ns() // 1000


class LatencyRecorder:
    def __init__(self, directory: str | Path, consumer_id: str, process_s: float) -> None:
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        self.id, self.process_s = consumer_id, process_s
        self.latencies = open(folder / f"{consumer_id}.lat", "ab")
        self.events = open(folder / f"{consumer_id}.events.jsonl", "a", buffering=1)
        self.busy_until = 0.0  # monotonic s when the work of the last event ends
        self.emit("start")

    def emit(self, kind: str, partitions: Iterable[TopicPartition] | None = None) -> None:
        event: dict[str, Any] = {"event": kind, "t": now_us(), "id": self.id}
        if partitions is not None:
            event["partitions"] = sorted(p for _, p in partitions)
        self.events.write(json.dumps(event) + "\n")

    def changed(self, kind: str, partitions: Iterable[TopicPartition]) -> None:
        """A command applied: `start` → assigned, `stop` → revoked."""
        self.emit("assigned" if kind == "start" else "revoked", partitions)

    def batch(self, messages: list[Any]) -> None:
        """Work on a batch of confluent-kafka messages, recording each one's latency."""
        self.busy_until = max(self.busy_until, time.monotonic())
        records = []
        for message in messages:
            self.busy_until += self.process_s
            while (left := self.busy_until - time.monotonic()) > 0:
                time.sleep(left)
            value = message.value() or b""
            produced = PRODUCED.unpack_from(value)[0] if len(value) >= PRODUCED.size else -1
            records.append(RECORD.pack(message.partition(), message.offset(), produced, now_us()))
        self.latencies.write(b"".join(records))
        self.latencies.flush()

    def close(self) -> None:
        self.latencies.close()
        self.emit("closed")
        self.events.close()
