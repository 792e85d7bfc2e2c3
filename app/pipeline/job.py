"""The rates job (Landau et al. §V-A's monitor, on Spark): bytes per partition over a sliding event-time
window → bytes/s, plus each partition's lag for a consumer group, written to the service every
micro-batch with PUT /v1/groups/{group}/rates.

Runs embedded on local[*] or unchanged under spark-submit. Sources (`--source`):
- `kafka` (default): Spark's own Kafka connector (spark-sql-kafka-0-10). Under spark-submit it comes from
  `--packages`; started from Python, its jars for the installed PySpark are resolved from Maven Central once
  (deploy/kafka/pom.xml, cached) and given as `spark.jars`.
- `python`: the Python Data Source in app.pipeline.source (confluent-kafka; no jars needed).
- `logdirs`: no records read at all: the partitions' log sizes from DescribeLogDirs, sampled every trigger,
  and the rate as the size delta over the window (Landau et al. §V-A's monitor; app.pipeline.logdirs).
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
    source: str = "kafka"  # Spark's connector; "python" (the Python Data Source) or "logdirs" (log-size deltas)
    starting_offsets: str = "latest"
    extra_spark_conf: dict[str, str] = field(default_factory=dict)


def windowed_bytes(records: Any, window_s: int, slide_s: int) -> Any:
    """Bytes per (topic, partition, sliding window) with a watermark of one window for late records."""
    from pyspark.sql import functions as F

    return (
        records.withWatermark("timestamp", f"{window_s} seconds")
        .groupBy(F.window("timestamp", f"{window_s} seconds", f"{slide_s} seconds"), "topic", "partition")
        .agg(F.sum("size").alias("bytes"), F.max("timestamp").alias("last_record"))
        .select(
            "topic",
            "partition",
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "bytes",
            "last_record",
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
        self, now: dt.datetime, partitions: Iterable[tuple[str, int]], after: dt.datetime | None = None
    ) -> tuple[dict[tuple[str, int], float], dt.datetime | None]:
        """Per partition, bytes/s of the latest window that ended by `now` (0 when none had records),
        and the end of the window reported; only windows ending after `after`, when given."""
        complete = [
            end for windows in self.windows.values() for end in windows if end <= now and (after is None or end > after)
        ]
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


def consumer_lags(
    bootstrap: str, group: str | None, ends: dict[str, int], topics: list[str]
) -> dict[tuple[str, int], int]:
    """End offset − committed offset of `group` per partition (from the log start when it never committed),
    both from the admin client: ListOffsets and OffsetFetch."""
    if group is None or not ends:
        return {}
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    from app.pipeline.source import admin_client, end_offsets

    wanted = [TopicPartition(t, int(p)) for key in ends for t, _, p in [key.rpartition("/")]]
    request = [ConsumerGroupTopicPartitions(group, wanted)]
    committed = admin_client(bootstrap).list_consumer_group_offsets(request, request_timeout=10)[group].result()
    never = [tp for tp in committed.topic_partitions if tp.offset < 0]
    starts = end_offsets(bootstrap, topics, "earliest") if never else {}
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
        # Only windows that end after this driver started are reported: a driver restarted from its checkpoint
        # is sent a window again only where new records update it, so an older window would miss the partitions
        # whose records were read before the restart (they would read as 0).
        self.started = dt.datetime.now(dt.UTC)

    def __call__(self, batch: Any, batch_id: int) -> None:
        from app.pipeline.source import end_offsets

        started = time.perf_counter()
        rows = [row.asDict() for row in batch.collect()]
        self.book.update(rows)
        ends = end_offsets(self.options.bootstrap_servers, self.options.topics, "latest")
        partitions = [(t, int(p)) for key in ends for t, _, p in [key.rpartition("/")]]
        # A window is complete once the job has read past its end: up to the newest record of this batch, or,
        # when the batch read none (nothing new in the topics), up to now. Wall-clock time alone would take a
        # window as complete while its last records still wait to be read (a busy job reported 2 % of the rate).
        horizon = max((_utc(row["last_record"]) for row in rows), default=dt.datetime.now(dt.UTC))
        rates, window_end = self.book.rates(horizon, partitions, after=self.started)
        if window_end is None:
            return  # no complete window yet
        self.publish(rates, window_end, ends)
        log.info(
            "batch %s: %d partitions, window ending %s, %.0f ms",
            batch_id,
            len(rates),
            window_end.isoformat(),
            (time.perf_counter() - started) * 1000,
        )

    def publish(self, rates: dict[tuple[str, int], float], window_end: dt.datetime, ends: dict[str, int]) -> bool:
        """PUT the rates with each partition's lag (`ends`: the end offsets, {"topic/partition": offset})."""
        try:
            lags = consumer_lags(self.options.bootstrap_servers, self.options.consumer_group, ends, self.options.topics)
        except Exception as exc:
            log.warning("could not read the lag of %s: %s", self.options.consumer_group, exc)
            lags = {}
        return self.put(
            [PartitionRate(t, p, rate, lags.get((t, p))) for (t, p), rate in sorted(rates.items())], window_end
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


SOURCES = ("kafka", "python", "logdirs")


def connector_jars() -> list[str]:
    """Spark's Kafka connector for the installed PySpark when this process starts Spark's JVM itself; none when
    spark-submit started it (its `--packages` or `--jars` brought the connector) or a session already runs."""
    import pyspark
    from pyspark import SparkContext

    if os.environ.get("PYSPARK_GATEWAY_PORT") or SparkContext._active_spark_context is not None:
        return []
    from pathlib import Path

    from app.local.kafka import spark_kafka_jars

    return [str(jar) for jar in spark_kafka_jars(pyspark.__version__, Path(pyspark.__file__).parent / "jars")]


def spark_session(options: JobOptions) -> Any:
    from pyspark.sql import SparkSession

    if options.source not in SOURCES:
        raise ValueError(f"unknown source {options.source!r}: choose one of {', '.join(SOURCES)}")
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
    # The Kafka source needs the connector; logdirs calls Kafka's Java Admin client, from the same jars.
    jars = connector_jars() if options.source != "python" else []
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
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
            # Records deleted by retention before the job read them are only missing bytes, not a reason to stop.
            .option("failOnDataLoss", "false")
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


def log_progress(query: Any, every_s: float) -> None:
    """Wait for the query to end, logging each micro-batch's sources as Spark names them (its Kafka connector is
    `KafkaV2[Subscribe[topics]]`) and the records each read; the logdirs loop reports none and is only waited for."""
    if not hasattr(query, "lastProgress"):
        query.awaitTermination()
        return
    logged = None
    while not query.awaitTermination(every_s):
        progress = query.lastProgress
        if progress is None or progress["batchId"] == logged:
            continue
        logged = progress["batchId"]
        for source in progress["sources"]:
            log.info("batch %s: %s records from %s", logged, source["numInputRows"], source["description"])


def start(spark: Any, options: JobOptions, sink: ServiceSink | None = None) -> Any:
    """Start the streaming query (for `logdirs`, the driver's sampling loop); returns it (call
    awaitTermination() or stop())."""
    sink = sink or ServiceSink(options)
    if options.source == "logdirs":
        from app.pipeline.logdirs import LogDirsMonitor

        monitor = LogDirsMonitor(spark, options, sink)
        monitor.start()
        return monitor
    windows = windowed_bytes(records(spark, options), options.window_s, options.slide_s)
    return (
        windows.writeStream.outputMode("update")
        .foreachBatch(sink)
        .trigger(processingTime=f"{options.trigger_s} seconds")
        .option("checkpointLocation", options.checkpoint_dir)
        .queryName("groupfit-rates")
        .start()
    )
