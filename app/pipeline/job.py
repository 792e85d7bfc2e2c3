"""The rates job (Landau et al. §V-A's monitor, on Spark): bytes per partition over a sliding event-time
window → bytes/s, plus each partition's lag for a consumer group, written to the service every
micro-batch with PUT /v1/groups/{group}/rates.

Runs embedded on local[*] or unchanged under spark-submit; the source is the Python Data Source in
app.pipeline.source, or Spark's built-in `kafka` format where its connector is installed.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from groupfit_client import GroupfitClient, GroupfitError, PartitionRate

log = logging.getLogger("groupfit.rates")


@dataclass
class JobOptions:
    bootstrap_servers: str
    topics: list[str]
    service_url: str
    service_group: str
    consumer_group: str | None = None  # whose committed offsets give the lag
    window_s: int = 30
    slide_s: int = 5
    trigger_s: float = 5.0
    checkpoint_dir: str = "checkpoints/rates"
    master: str = "local[*]"
    source: str = "python"  # or "kafka": Spark's built-in connector
    starting_offsets: str = "latest"
    extra_spark_conf: dict[str, str] = field(default_factory=dict)


def windowed_bytes(records: Any, window_s: int, slide_s: int) -> Any:
    """Bytes per (topic, partition, sliding window) with a watermark of one window for late records."""
    from pyspark.sql import functions as F

    return (
        records.withWatermark("timestamp", f"{window_s} seconds")
        .groupBy(F.window("timestamp", f"{window_s} seconds", f"{slide_s} seconds"), "topic", "partition")
        .agg(F.sum("size").alias("bytes"))
        .select(
            "topic",
            "partition",
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "bytes",
        )
    )


class RateBook:
    """Driver-side view of the windows the query has emitted; the rate of a partition is its latest
    complete window's bytes over the window length."""

    def __init__(self, window_s: int) -> None:
        self.window_s = window_s
        self.windows: dict[tuple[str, int], dict[dt.datetime, float]] = {}

    def update(self, rows: Iterable[Any]) -> None:
        for row in rows:
            self.windows.setdefault((row["topic"], row["partition"]), {})[_utc(row["window_end"])] = row["bytes"]

    def rates(
        self, now: dt.datetime, partitions: Iterable[tuple[str, int]]
    ) -> tuple[dict[tuple[str, int], float], dt.datetime | None]:
        """Per partition, bytes/s of the latest window that ended by `now` (0 when none had records),
        and the end of the window reported."""
        complete = [end for windows in self.windows.values() for end in windows if end <= now]
        if not complete:
            return {}, None
        window_end = max(complete)
        rates = {key: self.windows.get(key, {}).get(window_end, 0.0) / self.window_s for key in partitions}
        # Forget windows older than the one reported: the book stays small.
        for windows in self.windows.values():
            for end in [e for e in windows if e < window_end]:
                del windows[end]
        return rates, window_end


def _utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def consumer_lags(bootstrap: str, topics: list[str], group: str | None) -> dict[tuple[str, int], int]:
    """End offset − committed offset of `group` per partition (from the beginning when it never committed)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    from app.pipeline.source import end_offsets

    ends = end_offsets(bootstrap, topics, "latest")
    if group is None:
        return {}
    starts = end_offsets(bootstrap, topics, "earliest")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [TopicPartition(t, int(p)) for key in ends for t, _, p in [key.rpartition("/")]]
    request = [ConsumerGroupTopicPartitions(group, wanted)]
    committed = admin.list_consumer_group_offsets(request, request_timeout=10)[group].result()
    lags = {}
    for tp in committed.topic_partitions:
        key = f"{tp.topic}/{tp.partition}"
        position = tp.offset if tp.offset >= 0 else starts.get(key, 0)
        lags[tp.topic, tp.partition] = max(0, ends.get(key, 0) - position)
    return lags


class ServiceSink:
    """foreachBatch: fold the batch into the rate book, measure lags, PUT the rates (the client retries
    connection errors and 503). A failed write is logged and the next batch sends the then-current state:
    it never stops the query."""

    def __init__(self, options: JobOptions, client: GroupfitClient | None = None) -> None:
        self.options = options
        self.book = RateBook(options.window_s)
        self.client = client or GroupfitClient(options.service_url, timeout=5.0, retries=2, backoff_s=0.2)
        self.failures = 0
        self.writes = 0

    def __call__(self, batch: Any, batch_id: int) -> None:
        from app.pipeline.source import end_offsets

        started = time.perf_counter()
        rows = [row.asDict() for row in batch.collect()]
        self.book.update(rows)
        # A window is complete once the records read have passed its end, and the newest record read is at or
        # after the latest window start in this batch. By the wall clock alone, a lagging batch (a loaded
        # cluster) would report a window whose last seconds are still unread, and under-count it.
        latest_start = max((_utc(row["window_start"]) for row in rows), default=None)
        now = dt.datetime.now(dt.UTC) if latest_start is None else min(dt.datetime.now(dt.UTC), latest_start)
        partitions = [
            (t, int(p))
            for key in end_offsets(self.options.bootstrap_servers, self.options.topics, "latest")
            for t, _, p in [key.rpartition("/")]
        ]
        rates, window_end = self.book.rates(now, partitions)
        if window_end is None:
            return  # no complete window yet
        try:
            lags = consumer_lags(self.options.bootstrap_servers, self.options.topics, self.options.consumer_group)
        except Exception as exc:
            log.warning("could not read the lag of %s: %s", self.options.consumer_group, exc)
            lags = {}
        self.put([PartitionRate(t, p, rate, lags.get((t, p))) for (t, p), rate in sorted(rates.items())], window_end)
        log.info(
            "batch %s: %d partitions, window ending %s, %.0f ms",
            batch_id,
            len(rates),
            window_end.isoformat(),
            (time.perf_counter() - started) * 1000,
        )

    def put(self, partitions: list[PartitionRate], window_end: dt.datetime) -> bool:
        try:
            self.client.put_rates(self.options.service_group, partitions, window_end)
        except GroupfitError as error:
            log.error("the service refused the rates: %s", error)
        except httpx.TransportError as error:
            log.warning("writing rates failed after retries: %s", error)
        else:
            self.writes += 1
            return True
        self.failures += 1
        return False


def spark_session(options: JobOptions) -> Any:
    from pyspark.sql import SparkSession

    # Python workers must import app.pipeline.source: run them with this interpreter (its venv).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(options.master)
        .appName("groupfit-rates")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
    )
    for key, value in options.extra_spark_conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def records(spark: Any, options: JobOptions) -> Any:
    """The Kafka records as (topic, partition, offset, timestamp, size), from either source."""
    from pyspark.sql import functions as F

    if options.source == "kafka":
        raw = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", options.bootstrap_servers)
            .option("subscribe", ",".join(options.topics))
            .option("startingOffsets", options.starting_offsets)
            .load()
        )
        return raw.select(
            "topic",
            "partition",
            "offset",
            "timestamp",
            (F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0)))
            .cast("long")
            .alias("size"),
        )
    from app.pipeline.source import KafkaSource

    spark.dataSource.register(KafkaSource)
    return (
        spark.readStream.format(KafkaSource.name())
        .option("bootstrap.servers", options.bootstrap_servers)
        .option("topics", ",".join(options.topics))
        .option("startingOffsets", options.starting_offsets)
        .load()
    )


def start(spark: Any, options: JobOptions, sink: ServiceSink | None = None) -> Any:
    """Start the streaming query; returns it (call awaitTermination() or stop())."""
    sink = sink or ServiceSink(options)
    windows = windowed_bytes(records(spark, options), options.window_s, options.slide_s)
    return (
        windows.writeStream.outputMode("update")
        .foreachBatch(sink)
        .trigger(processingTime=f"{options.trigger_s} seconds")
        .option("checkpointLocation", options.checkpoint_dir)
        .queryName("groupfit-rates")
        .start()
    )
