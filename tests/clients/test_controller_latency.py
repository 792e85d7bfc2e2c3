"""The controlled consumer's recorder (groupfit_client.controller.latency): the time spent per event, and the files
it writes, read back as the experiment reads them (app/experiment/measure.py)."""

from __future__ import annotations

import struct
import time

from groupfit_client.controller.latency import LatencyRecorder
from groupfit_client.results import TopicPartition

from app.experiment import measure


class Message:
    """What the recorder reads of a confluent-kafka message."""

    def __init__(self, partition: int, offset: int, produced_us: int) -> None:
        self._partition, self._offset = partition, offset
        self._value = struct.pack(">q", produced_us) + b"\0" * 8

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value


def test_the_recorder_spends_the_time_per_event_and_writes_what_the_experiment_reads(tmp_path):
    recorder = LatencyRecorder(tmp_path, "c3", process_s=0.01)
    recorder.changed("start", {TopicPartition("t", 1), TopicPartition("t", 0)})
    produced = time.time_ns() // 1000
    began = time.monotonic()
    recorder.batch([Message(0, offset, produced) for offset in range(10)] + [Message(1, 0, produced)])
    spent = time.monotonic() - began
    recorder.changed("stop", {TopicPartition("t", 1)})
    recorder.close()

    assert spent >= 11 * 0.01  # one after the other, never less than the processing time
    latencies = measure.read_latencies([tmp_path / "c3.lat"])
    assert len(latencies) == 11 and latencies.duplicates == 0
    assert measure.completeness(latencies, {0: 10, 1: 1})["complete"]
    seconds = sorted(latencies.seconds)
    assert seconds[0] >= 0.01 and seconds[-1] >= 0.11  # the last waited for the ten before it
    events = measure.read_events([tmp_path / "c3.events.jsonl"])
    assert [(e["event"], e.get("partitions")) for e in events] == [
        ("start", None), ("assigned", [0, 1]), ("revoked", [1]), ("closed", None),
    ]  # fmt: skip
    assert measure.owners(events) == {}  # closed: it holds nothing
