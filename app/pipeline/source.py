"""A streaming Kafka source for Spark on the Python Data Source API and confluent-kafka (Spark's own
connector needs jars that cannot be fetched everywhere).

The stream's offsets are the next offset to read of each partition ({"topic/partition": offset}; JSON,
so keys are strings). A micro-batch reads, per Kafka partition, the offsets between two such maps with a
consumer created inside `read()` on the executor (Kafka clients do not pickle). Rows: topic, partition,
offset, timestamp, size (key + value bytes).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

SCHEMA = "topic string, partition int, offset long, timestamp timestamp, size long"


class KafkaPartitionRange(InputPartition):
    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


class KafkaSource(DataSource):
    """Options: bootstrap.servers, topics (comma-separated), startingOffsets (earliest | latest),
    poll.timeout.s (how long a read waits for more of the records the offsets promised, default 10)."""

    @classmethod
    def name(cls) -> str:
        return "groupfit_kafka"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema) -> KafkaStreamReader:
        return KafkaStreamReader(dict(self.options))


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.bootstrap = options["bootstrap.servers"]
        self.topics = [t.strip() for t in options["topics"].split(",") if t.strip()]
        self.starting = options.get("startingOffsets", "latest")
        self.poll_timeout_s = float(options.get("poll.timeout.s", "10"))

    def _offsets(self, which: str) -> dict[str, int]:
        return end_offsets(self.bootstrap, self.topics, which)

    def initialOffset(self) -> dict:
        return self._offsets("earliest" if self.starting == "earliest" else "latest")

    def latestOffset(self, start: dict, limit) -> dict:
        latest = self._offsets("latest")
        # A partition that appeared since `start` is read from its beginning.
        return {key: max(offset, start.get(key, 0)) for key, offset in latest.items()}

    def partitions(self, start: dict, end: dict) -> list[KafkaPartitionRange]:
        ranges = []
        for key, stop in sorted(end.items()):
            begin = start.get(key, 0)
            if stop > begin:
                topic, _, partition = key.rpartition("/")
                ranges.append(KafkaPartitionRange(topic, int(partition), begin, stop))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The records of one offset range, as Arrow record batches (far cheaper to hand to the JVM
        than one Python tuple per record)."""
        if not isinstance(partition, KafkaPartitionRange):  # Spark hands back the ranges `partitions` made
            raise TypeError(f"not a Kafka offset range: {partition!r}")
        import pyarrow as pa
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "groupfit-rates-reader",  # never commits: offsets live in Spark's checkpoint
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        offsets: list[int] = []
        times: list[int] = []
        sizes: list[int] = []

        def batch() -> Any:
            n = len(offsets)
            columns = [
                pa.array([partition.topic] * n, pa.string()),
                pa.array([partition.partition] * n, pa.int32()),
                pa.array(offsets, pa.int64()),
                pa.array(times, pa.timestamp("us", tz="UTC")),
                pa.array(sizes, pa.int64()),
            ]
            for column in (offsets, times, sizes):
                column.clear()
            return pa.RecordBatch.from_arrays(columns, names=["topic", "partition", "offset", "timestamp", "size"])

        try:
            consumer.assign([TopicPartition(partition.topic, partition.partition, partition.start)])
            deadline = time.monotonic() + self.poll_timeout_s
            done = False
            while not done and time.monotonic() < deadline:
                messages = consumer.consume(num_messages=5000, timeout=0.5)
                if messages:  # the timeout is for waiting on records that do not come, not for reading many
                    deadline = time.monotonic() + self.poll_timeout_s
                for message in messages:
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            done = True  # the broker has nothing more: read to the end that exists
                            break
                        raise RuntimeError(f"reading {partition.topic}/{partition.partition}: {error}")
                    offset = message.offset()
                    if offset is None:  # only an error event has none, and those are handled above
                        raise RuntimeError(f"reading {partition.topic}/{partition.partition}: a record without offset")
                    if offset >= partition.end:
                        done = True
                        break
                    offsets.append(offset)
                    times.append(message.timestamp()[1] * 1000)  # ms → µs, Spark's timestamp unit
                    sizes.append(len(message.key() or b"") + len(message.value() or b""))
                    if offset >= partition.end - 1:
                        done = True
                        break
                if len(offsets) >= 50_000 or (done and offsets):
                    yield batch()
            if offsets:
                yield batch()
        finally:
            consumer.close()


@functools.cache
def admin_client(bootstrap: str) -> Any:
    """One admin client per cluster and process (thread-safe; the driver asks every micro-batch)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def end_offsets(bootstrap: str, topics: list[str], which: str) -> dict[str, int]:
    """{"topic/partition": offset} of the earliest or latest offset of every partition of the topics."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    admin = admin_client(bootstrap)
    metadata = admin.list_topics(timeout=10)
    spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
    wanted = {
        TopicPartition(topic, p): spec
        for topic in topics
        if topic in metadata.topics
        for p in metadata.topics[topic].partitions
    }
    if not wanted:
        return {}
    futures = admin.list_offsets(wanted, request_timeout=10)
    return {f"{tp.topic}/{tp.partition}": future.result().offset for tp, future in futures.items()}
