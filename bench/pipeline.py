"""The rates job on local[2] against the embedded broker and a live service: records/s and bytes/s it
sustains, micro-batch duration, the delay from a rate change to the service seeing it, and its memory.

    .venv/bin/python bench/pipeline.py [--seconds 60] [--window-s 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx
from live import rss_mb, service_at

from app.local.servers import EmbeddedKafka, EmbeddedRedis
from app.pipeline.job import JobOptions, ServiceSink, spark_session, start


def descendants(pid: int) -> list[int]:
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(c) for c in children] + [d for c in children for d in descendants(int(c))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--window-s", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--record-bytes", type=int, default=500)
    parser.add_argument(
        "--offered", type=float, default=2000, help="records/s the producer offers (0: as fast as it can)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="groupfit-bench-pipeline-"))
    with EmbeddedRedis(data_dir=work / "redis") as redis, EmbeddedKafka(log_path=work / "broker.log") as kafka:
        with service_at(None, REDIS_URL=redis.url) as (url, service_pid):
            measure(args, kafka.bootstrap_servers, url, service_pid, work)


def measure(args: argparse.Namespace, bootstrap: str, url: str, service_pid: int, work: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "bench-rates"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
        future.result(30)
    options = JobOptions(
        bootstrap,
        [topic],
        url,
        "bench",
        window_s=args.window_s,
        slide_s=2,
        trigger_s=2,
        checkpoint_dir=str(work / "checkpoint"),
        master="local[2]",
    )
    spark = spark_session(options)
    query = start(spark, options, ServiceSink(options))
    stop, silent = threading.Event(), threading.Event()
    produced = [0]

    def produce() -> None:
        # One record per request: the embedded broker miscounts the end offset of multi-record batches.
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "batch.num.messages": 1,
                "linger.ms": 0,
                "queue.buffering.max.messages": 1_000_000,
            }
        )
        value = b"x" * args.record_bytes
        sent_at = time.monotonic()
        while not stop.is_set():
            if args.offered:
                sent_at += args.partitions / args.offered
                time.sleep(max(0.0, sent_at - time.monotonic()))
            for partition in range(args.partitions):
                if partition == 0 and silent.is_set():
                    continue
                try:
                    producer.produce(topic, value=value, partition=partition)
                    produced[0] += 1
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        producer.flush(30)

    thread = threading.Thread(target=produce)
    began = time.monotonic()
    thread.start()
    durations, rows, delay = [], [], None
    try:
        while time.monotonic() - began < args.seconds:
            time.sleep(2)
            progress = query.lastProgress
            if progress and progress["numInputRows"]:
                durations.append(progress["durationMs"]["triggerExecution"] / 1000)
                rows.append(progress["processedRowsPerSecond"])
        memory = rss_mb(os.getpid()) + sum(rss_mb(p) for p in descendants(os.getpid()) if p != service_pid)
        # Silence partition 0 and time how long until the service's stored rate for it reaches 0.
        silent.set()
        changed = time.monotonic()
        while time.monotonic() - changed < 4 * args.window_s + 30:
            stored = httpx.get(f"{url}/v1/groups/bench/rates", timeout=5)
            rates = (
                {p["partition"]: p["rate"] for p in stored.json()["partitions"]} if stored.status_code == 200 else {}
            )
            if rates.get(0, 1.0) == 0:
                delay = time.monotonic() - changed
                break
            time.sleep(0.5)
    finally:
        stop.set()
        thread.join()
        query.stop()
        spark.stop()
    elapsed = time.monotonic() - began
    if not rows:
        raise SystemExit("the job processed no batch in time: is the machine busy?")
    print(
        f"produced {produced[0]} records of {args.record_bytes} B in {elapsed:.0f} s "
        f"({produced[0] / elapsed:.0f} records/s offered)"
    )
    print(
        f"job: {statistics.median(rows):.0f} records/s processed (median of {len(rows)} batches), "
        f"{statistics.median(rows) * args.record_bytes / 1e6:.2f} MB/s"
    )
    print(f"micro-batch duration: median {statistics.median(durations):.2f} s, max {max(durations):.2f} s")
    print(
        f"rate change seen by the service after {delay:.1f} s (window {args.window_s} s, slide 2 s, trigger 2 s)"
        if delay is not None
        else "rate change not seen in time"
    )
    print(f"memory of the job (driver + JVM + Python workers): {memory:.0f} MB")


if __name__ == "__main__":
    main()
