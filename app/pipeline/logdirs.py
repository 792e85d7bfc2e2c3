"""Rates from log sizes, as Landau et al.'s monitor measures them (§V-A): every trigger the job asks the
brokers for the bytes each partition holds (Kafka's Admin `describeLogDirs()`), keeps the samples of the
last window per partition in a queue, and the rate is (newest size − oldest size) / (newest time − oldest
time). No record is read, so the cost does not grow with the traffic.

It measures bytes on disk: record batches with their headers (≈ 60-70 B per batch, a few bytes per record),
compressed if the producer compresses, where `--source kafka|python` count key + value bytes. A size that
shrinks (retention deleted a segment) starts the partition's queue over: a deletion is not a negative rate
(the paper does not say; a queue spanning a deletion would report one).

Kafka's Java Admin client is called in Spark's driver JVM (kafka-clients comes with the connector's jars),
since neither Python client sends DescribeLogDirs.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("groupfit.rates")

Key = tuple[str, int]


class LogSizeBook:
    """Per partition, the (time, size) samples of the last `window_s` seconds."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.samples: dict[Key, deque[tuple[float, int]]] = {}

    def add(self, at: float, sizes: Mapping[Key, int]) -> None:
        for key, size in sizes.items():
            queue = self.samples.setdefault(key, deque())
            if queue and size < queue[-1][1]:
                queue.clear()
            queue.append((at, size))
            while queue[0][0] < at - self.window_s:
                queue.popleft()

    def rates(self) -> dict[Key, float]:
        """Bytes/s over each partition's queue; partitions with a single sample yet are left out."""
        rates = {}
        for key, queue in self.samples.items():
            (first_at, first), (last_at, last) = queue[0], queue[-1]
            if last_at > first_at:
                rates[key] = (last - first) / (last_at - first_at)
        return rates


class JavaAdmin:
    """Kafka's Java Admin client in the driver's JVM, for DescribeLogDirs."""

    def __init__(self, spark: Any, bootstrap: str) -> None:
        jvm = spark.sparkContext._jvm
        properties = jvm.java.util.Properties()
        properties.setProperty("bootstrap.servers", bootstrap)
        properties.setProperty("client.id", "groupfit-rates-logdirs")
        self.jvm = jvm
        self.admin = jvm.org.apache.kafka.clients.admin.Admin.create(properties)

    def log_sizes(self, topics: list[str]) -> dict[Key, int]:
        """Bytes of each partition of `topics`: the largest of its replicas (a follower may trail the leader)."""
        seconds = self.jvm.java.util.concurrent.TimeUnit.SECONDS
        nodes = self.admin.describeCluster().nodes().get(10, seconds)
        brokers = self.jvm.java.util.ArrayList()
        for node in nodes.toArray():
            brokers.add(node.id())
        wanted = set(topics)
        sizes: dict[Key, int] = {}
        for directories in self.admin.describeLogDirs(brokers).allDescriptions().get(10, seconds).values():
            for directory in directories.values():
                for entry in directory.replicaInfos().entrySet().toArray():
                    partition, replica = entry.getKey(), entry.getValue()
                    if partition.topic() in wanted and not replica.isFuture():
                        key = (partition.topic(), partition.partition())
                        sizes[key] = max(sizes.get(key, 0), replica.size())
        return sizes

    def close(self) -> None:
        self.admin.close()


class LogDirsMonitor(threading.Thread):
    """The `logdirs` source's loop in the driver, with a streaming query's `stop()` and `awaitTermination()`."""

    def __init__(self, spark: Any, options: Any, sink: Any) -> None:
        super().__init__(name="groupfit-rates-logdirs", daemon=True)
        self.options, self.sink = options, sink
        self.book = LogSizeBook(options.window_s)
        self.admin = JavaAdmin(spark, options.bootstrap_servers)
        self.stopping = threading.Event()
        self.rounds = 0

    def run(self) -> None:
        from app.pipeline.source import end_offsets

        try:
            while not self.stopping.is_set():
                started = time.monotonic()
                try:
                    self.round(end_offsets)
                except Exception as exc:  # a broker that does not answer this time: the next round asks again
                    log.warning("measuring log sizes failed: %s", exc)
                self.stopping.wait(max(0.0, self.options.trigger_s - (time.monotonic() - started)))
        finally:
            self.admin.close()

    def round(self, end_offsets: Any) -> None:
        self.book.add(time.monotonic(), self.admin.log_sizes(self.options.topics))
        self.rounds += 1
        rates = self.book.rates()
        if rates:
            ends = end_offsets(self.options.bootstrap_servers, self.options.topics, "latest")
            self.sink.publish(rates, dt.datetime.now(dt.UTC), ends)

    def stop(self) -> None:
        self.stopping.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=30)

    def awaitTermination(self) -> None:  # StreamingQuery's name
        while self.is_alive():
            self.join(timeout=1)
