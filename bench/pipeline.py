"""The rates job (`groupfit rates-job`, its real command line) on local[2] against Apache Kafka and a live service,
once per source, side by side: records/s the job processed and whether it kept up with the producer, how
close the stored rates are to the produced ones, the delay from a rate change to the service seeing it, the
job's memory and CPU.

    .venv/bin/python bench/pipeline.py [--sources kafka,python,logdirs] [--offered 50000] [--seconds 60]

The producer offers `--offered` records/s of `--record-bytes` B over `--partitions` partitions; after
`--seconds` it stops writing to partition 0, and the delay is the time until the service's stored rate for
that partition has fallen below 90 % of its steady value (the change "reached" the service), and below 5 %
(the whole window has passed). Processed records/s come from the job's checkpoint (committed offsets over
time), so the job runs unchanged in its own process.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from live import ROOT, rss_mb, service_at

from app.local.kafka import ApacheKafka
from app.local.servers import EmbeddedRedis

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [pid] + [d for c in children for d in tree(int(c))]


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime
    return total


def committed_records(checkpoint: Path) -> tuple[float, int] | None:
    """(time, records) of the job's last committed micro-batch: its end offsets summed over partitions."""
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    if not commits:
        return None
    offsets = checkpoint / "offsets" / commits[-1].name
    try:
        source_offsets = offsets.read_text().splitlines()[-1]  # the last line: the source's end offsets
    except (OSError, IndexError):
        return None
    return commits[-1].stat().st_mtime, sum(int(n) for n in re.findall(r":\s*(\d+)", source_offsets))


class Producer:
    """`offered` records/s spread over the partitions by `processes` producer processes (one Python thread
    cannot offer 50 000/s beside the rest), in 10 ms ticks; partition 0 can be silenced."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        offered: float,
        record_bytes: int,
        processes: int = 2,
        total: int | None = None,
    ) -> None:
        self.silent, self.stopping, self.total = multiprocessing.Event(), multiprocessing.Event(), total
        self.counts = [multiprocessing.Value("q", 0) for _ in range(partitions)]
        self.workers = [
            multiprocessing.Process(
                target=_produce,
                args=(bootstrap, topic, range(i, partitions, processes), offered / processes, record_bytes)
                + (self.silent, self.stopping, self.counts, None if total is None else total // processes),
                daemon=True,
            )
            for i in range(processes)
        ]

    @property
    def produced(self) -> list[int]:
        return [count.value for count in self.counts]

    def start(self) -> None:
        for worker in self.workers:
            worker.start()

    def join(self) -> None:
        for worker in self.workers:
            worker.join(None if self.total else 60)


def _produce(bootstrap, topic, partitions, offered, record_bytes, silent, stopping, counts, total) -> None:
    from confluent_kafka import Producer as KafkaProducer

    producer = KafkaProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 2_000_000}
    )
    value, partitions = b"x" * record_bytes, list(partitions)
    produced = dict.fromkeys(partitions, 0)
    began, due = time.monotonic(), 0
    while not stopping.is_set() and (total is None or due < total):
        target = offered * (time.monotonic() - began) if total is None else total
        while due < target:
            partition = partitions[due % len(partitions)]
            due += 1
            if partition == 0 and silent.is_set():
                continue
            try:
                producer.produce(topic, value=value, partition=partition)
                produced[partition] += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        for partition, count in produced.items():
            counts[partition].value = count
        time.sleep(0.01)
    producer.flush(30)
    for partition, count in produced.items():
        counts[partition].value = count


def stored_rates(url: str, group: str) -> dict[int, float]:
    answer = httpx.get(f"{url}/v1/groups/{group}/rates", timeout=5)
    return {p["partition"]: p["rate"] for p in answer.json()["partitions"]} if answer.status_code == 200 else {}


def measure(source: str, args: argparse.Namespace, bootstrap: str, url: str, work: Path) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"bench-{source}", f"bench-{source}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
    checkpoint = work / f"checkpoint-{source}"
    command = [
        sys.executable,
        "-m",
        "app.cli",
        "rates-job",
        *("--source", source, "--bootstrap-servers", bootstrap, "--topics", topic, "--service-url", url),
        *("--service-group", group, "--master", "local[2]", "--checkpoint-dir", str(checkpoint)),
        *("--window-s", str(args.window_s), "--slide-s", str(args.slide_s), "--trigger-s", str(args.trigger_s)),
    ]
    reads_records = source != "logdirs"
    if reads_records and args.backlog:
        # Capacity: a backlog written before the job starts, read from the earliest offset in its first batch,
        # with nothing else running (the producer would take CPU from the job on a shared machine).
        filler = Producer(bootstrap, topic, args.partitions, 1e9, args.record_bytes, total=args.backlog)
        filler.start()
        filler.join()
        command += ["--starting-offsets", "earliest"]
    with open(work / f"job-{source}.log", "wb") as log:
        job = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    producer = Producer(bootstrap, topic, args.partitions, args.offered, args.record_bytes)
    result: dict = {"source": source}
    try:
        # Start producing once the job runs its micro-batches (Spark's start is not what is measured): its
        # first batch committed, or for logdirs (no checkpoint) its first rates stored.
        deadline = time.monotonic() + 300
        while job.poll() is None and time.monotonic() < deadline:
            if (checkpoint / "commits" / "0").exists() or (source == "logdirs" and stored_rates(url, group)):
                break
            time.sleep(0.5)
        else:
            raise SystemExit(f"the {source} job did not start in time: see {work / f'job-{source}.log'}")
        if reads_records and args.backlog:
            planned, done = checkpoint / "offsets" / "0", checkpoint / "commits" / "0"
            result["backlog_rps"] = args.backlog / (done.stat().st_mtime - planned.stat().st_mtime)
        producer.start()
        began = time.monotonic()
        cpu_began, memory, samples, first = cpu_seconds(tree(job.pid)), 0.0, [], None
        while time.monotonic() - began < args.seconds:
            time.sleep(1)
            sizes = [rss_mb(p) for p in tree(job.pid) if Path(f"/proc/{p}/status").exists()]
            memory = max(memory, sum(size for size in sizes if size == size))  # NaN: a zombie has no RSS
            if time.monotonic() - began > 2 * args.window_s:  # steady: the window holds only produced records
                samples.append(stored_rates(url, group))
                first = first or committed_records(checkpoint)
        elapsed = time.monotonic() - began
        last = committed_records(checkpoint)
        result["cpu_s_per_s"] = (cpu_seconds(tree(job.pid)) - cpu_began) / elapsed
        result["memory_mb"] = memory
        result["offered_rps"] = sum(producer.produced) / elapsed
        if first and last and last[0] > first[0]:
            result["processed_rps"] = (last[1] - first[1]) / (last[0] - first[0])
            result["behind"] = (args.backlog if reads_records else 0) + sum(producer.produced) - last[1]
        per_partition = result["offered_rps"] / args.partitions * args.record_bytes
        errors = [abs(s[p] - per_partition) / per_partition for s in samples for p in s]
        result["rate_error_median"] = statistics.median(errors) if errors else None
        result["rate_error_p90"] = statistics.quantiles(errors, n=10)[-1] if len(errors) >= 10 else None
        steady = statistics.median(s[0] for s in samples if 0 in s) if any(0 in s for s in samples) else None
        # The rate change: partition 0 stops.
        producer.silent.set()
        changed = time.monotonic()
        while time.monotonic() - changed < 3 * args.window_s + 30 and steady:
            now_rate = stored_rates(url, group).get(0, steady)
            if "seen_s" not in result and now_rate < 0.9 * steady:
                result["seen_s"] = time.monotonic() - changed
            if now_rate < 0.05 * steady:
                result["settled_s"] = time.monotonic() - changed
                break
            time.sleep(0.25)
    finally:
        producer.stopping.set()
        producer.join()
        job.send_signal(signal.SIGINT)  # as Ctrl-C: the job stops its query and Spark
        try:
            job.wait(timeout=60)
        except subprocess.TimeoutExpired:
            job.kill()
            job.wait()
    return result


def row(result: dict, key: str, fmt: str) -> str:
    value = result.get(key)
    return fmt.format(value) if value is not None else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", default="kafka,python,logdirs")
    parser.add_argument("--seconds", type=float, default=60, help="steady production before the rate change")
    parser.add_argument("--offered", type=float, default=50_000, help="records/s the producer offers")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument(
        "--backlog", type=int, default=1_000_000, help="records written before the job starts, to measure its capacity"
    )
    parser.add_argument("--record-bytes", type=int, default=500)
    parser.add_argument("--window-s", type=int, default=10)
    parser.add_argument("--slide-s", type=int, default=2)
    parser.add_argument("--trigger-s", type=float, default=1)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="groupfit-bench-pipeline-"))
    with EmbeddedRedis(data_dir=work / "redis") as redis, ApacheKafka(work / "kafka") as kafka:
        print(f"Apache Kafka started in {kafka.start_seconds:.1f} s", flush=True)
        with service_at(None, REDIS_URL=redis.url) as (url, _):
            results = []
            for source in args.sources.split(","):
                results.append(measure(source, args, kafka.bootstrap_servers, url, work))
                print(json.dumps(results[-1]), flush=True)
    print(
        f"\nlocal[2], {args.partitions} partitions, {args.record_bytes} B records, window {args.window_s} s, "
        f"slide {args.slide_s} s, trigger {args.trigger_s:g} s; two slides = {2 * args.slide_s} s"
    )
    print(
        f"{'source':<8} {'backlog/s':>10} {'offered/s':>10} {'processed/s':>12} {'behind':>9} {'rate err p50':>12} {'p90':>6} "
        f"{'change seen':>11} {'settled':>8} {'memory':>8} {'CPU':>6}"
    )
    for r in results:
        print(
            f"{r['source']:<8} {row(r, 'backlog_rps', '{:.0f}'):>10} {row(r, 'offered_rps', '{:.0f}'):>10} "
            f"{row(r, 'processed_rps', '{:.0f}'):>12} "
            f"{row(r, 'behind', '{:.0f}'):>9} {row(r, 'rate_error_median', '{:.1%}'):>12} "
            f"{row(r, 'rate_error_p90', '{:.1%}'):>6} {row(r, 'seen_s', '{:.1f} s'):>11} "
            f"{row(r, 'settled_s', '{:.1f} s'):>8} {row(r, 'memory_mb', '{:.0f} MB'):>8} "
            f"{row(r, 'cpu_s_per_s', '{:.2f}'):>6}"
        )
    print(f"logs: {work}")


if __name__ == "__main__":
    main()
