"""`groupfit demo`: the whole stack on loopback without Docker, and its parts for docker-compose.

    groupfit demo                  # embedded Redis, Apache Kafka (app/local/kafka.py), the API, the rates
                                   # job on local[2], a producer with skewed changing rates, 3 consumers with
                                   # the groupfit assignor; a refreshing view; Ctrl-C stops everything
    groupfit demo --check 180      # the same for at most 180 s; exit 0 once the service has rebalanced
                                   # the group with rates measured by the job, 1 otherwise (130 if stopped)
    python -m app.local.demo produce …   # the demo producer alone (docker-compose)
    python -m app.local.demo consume …   # the demo consumer group alone (docker-compose)

A consumer group only rebalances when its membership changes, so the demo's last member leaves and joins
again every --rejoin-s seconds: each time the leader asks groupfit with the latest measured rates.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

TOPIC, GROUP, PARTITIONS, RECORD = "demo-events", "demo", 8, 200
REJOIN_S = 30.0
# What one consumer can read, bytes/s: the rates below total 1 160-1 860 B/s over a ~4 minute cycle, so the
# group needs two or three consumers, and no partition alone exceeds it (at most 720 B/s).
CAPACITY = 750.0


def target_rates(elapsed: float) -> dict[int, float]:
    """Skewed bytes/s per partition, each drifting on its own phase so the best assignment keeps changing."""
    return {p: 300.0 * (0.75**p) * (1.4 + math.sin(elapsed / 40 + p)) for p in range(PARTITIONS)}


def produce(bootstrap: str, topic: str, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    due = dict.fromkeys(range(PARTITIONS), 0.0)
    began = last = time.monotonic()
    while not stop.is_set():
        time.sleep(0.05)
        now = time.monotonic()
        for partition, rate in target_rates(now - began).items():
            due[partition] += rate * (now - last)
            while due[partition] >= RECORD:
                producer.produce(topic, value=b"x" * RECORD, partition=partition)
                due[partition] -= RECORD
        last = now
        producer.poll(0)
    producer.flush(5)


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        with contextlib.suppress(Exception):  # already there
            future.result(30)


async def consume(
    bootstrap: str,
    topic: str,
    group: str,
    service_url: str,
    members: int,
    stop: asyncio.Event,
    rejoin_s: float = REJOIN_S,
) -> None:
    """`members` consumers with the groupfit assignor; every `rejoin_s` the last one leaves and joins again,
    which makes the leader ask the service for a new assignment."""
    from aiokafka import AIOKafkaConsumer
    from groupfit_client.assignor import groupfit_assignor

    logging.getLogger("aiokafka").setLevel(logging.ERROR)  # its rebalance chatter would scroll the view away

    def member(i: int) -> AIOKafkaConsumer:
        assignor = groupfit_assignor(service_url, group, f"consumer-{i}", capacity=CAPACITY)
        return AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="latest",
            partition_assignment_strategy=(assignor,),
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
        )

    consumers = [member(i) for i in range(1, members + 1)]
    for consumer in consumers:
        await consumer.start()
    last_join = time.monotonic()
    try:
        while not stop.is_set():
            await asyncio.gather(*(c.getmany(timeout_ms=500) for c in consumers))
            if time.monotonic() - last_join >= rejoin_s:
                await _leave(consumers[-1])
                consumers[-1] = member(members)
                await consumers[-1].start()
                last_join = time.monotonic()
    finally:
        for consumer in consumers:
            await _leave(consumer)


async def _leave(consumer: Any, timeout: float = 15.0) -> None:
    """Stop a member, bounded: a member stuck in a rebalance must not hold up the demo's end."""
    try:
        await asyncio.wait_for(consumer.stop(), timeout)
    except (TimeoutError, Exception) as exc:
        logging.getLogger("groupfit.demo").warning("a member did not leave cleanly: %r", exc)


def view(service_url: str, group: str) -> tuple[str, dict]:
    """The terminal view: each consumer's partitions and load, the last Rscore, the rebalances."""
    with httpx.Client(base_url=service_url, timeout=3) as http:
        state = http.get(f"/v1/groups/{group}")
        rates = http.get(f"/v1/groups/{group}/rates")
        history = http.get(f"/v1/groups/{group}/history", params={"limit": 1})
        scale = http.get(f"/v1/groups/{group}/scale")
    facts = {"version": 0, "rates_at": None, "assigned_at": None}
    lines = [f"groupfit demo — group {group!r}  ({time.strftime('%H:%M:%S')})", ""]
    rate = {}
    if rates.status_code == 200:
        body = rates.json()
        rate = {(p["topic"], p["partition"]): p["rate"] for p in body["partitions"]}
        facts["rates_at"] = body["updated_at"]
        lines.append(f"rates measured by the Spark job, window ending {body['window_end']}")
    else:
        lines.append("waiting for the rates job's first complete window…")
    if state.status_code == 200:
        body = state.json()
        facts["version"], facts["assigned_at"] = body["version"], body["updated_at"]
        last = history.json()["versions"][0] if history.status_code == 200 else {}
        lines.append(
            f"rebalances by the service: {body['version']}   last Rscore: {last.get('rscore', 0):.3f}   "
            f"capacity: {body['capacity']:g} B/s"
        )
        if scale.status_code == 200:
            signal_ = scale.json()
            lines.append(f"scaling signal (GET /scale, KEDA): {signal_['action']}: {signal_['reason']}")
        lines.append(f"console: {service_url}/ui")
        lines.append("")
        for consumer, held in sorted(body["assignment"].items()):
            load = sum(rate.get((p["topic"], p["partition"]), 0.0) for p in held)
            parts = ", ".join(str(p) for p in sorted(p["partition"] for p in held)) or "-"
            lines.append(f"  {consumer:<12} load {load:8.1f} B/s  ({load / body['capacity']:5.0%})  partitions {parts}")
    else:
        lines.append("waiting for the group's first assignment…")
    return "\n".join(lines), facts


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_demo(check_seconds: float | None, rejoin_s: float = REJOIN_S) -> int:
    from app.local.kafka import ApacheKafka
    from app.local.servers import EmbeddedRedis, command_of, free_port, wait_for_port

    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops everything too, like Ctrl-C (while starting)
    work = Path(tempfile.mkdtemp(prefix="groupfit-demo-"))
    processes: list[subprocess.Popen] = []
    stop = threading.Event()
    status = 1
    with (
        EmbeddedRedis(data_dir=work / "redis") as redis,
        ApacheKafka(work / "kafka") as kafka,
        open(work / "processes.log", "ab") as log,
    ):
        port = free_port()
        service_url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "REDIS_URL": redis.url, "GROUPFIT_PORT": str(port), "GROUPFIT_LOG_LEVEL": "WARNING"}
        try:
            processes.append(
                subprocess.Popen([sys.executable, "-m", "app.cli", "serve"], env=env, stdout=log, stderr=log)
            )
            wait_for_port("127.0.0.1", port, 30)
            create_topic(kafka.bootstrap_servers, TOPIC)
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "app.cli",
                        "rates-job",
                        "--bootstrap-servers",
                        kafka.bootstrap_servers,
                        "--topics",
                        TOPIC,
                        "--consumer-group",
                        GROUP,
                        "--service-url",
                        service_url,
                        "--window-s",
                        "10",
                        "--slide-s",
                        "2",
                        "--trigger-s",
                        "2",
                        "--master",
                        "local[2]",
                        "--checkpoint-dir",
                        str(work / "checkpoint"),
                    ],
                    env=env,
                    stdout=log,
                    stderr=log,
                )
            )
            threading.Thread(target=produce, args=(kafka.bootstrap_servers, TOPIC, stop), daemon=True).start()
            status = asyncio.run(_watch(kafka.bootstrap_servers, service_url, check_seconds, rejoin_s))
        except (KeyboardInterrupt, asyncio.CancelledError):
            # Stopping the demo is its normal end; stopping a check before it passed is not a pass.
            status = 0 if check_seconds is None else 130
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stopping what was started runs to its end
            stop.set()
            for process in processes:
                process.send_signal(signal.SIGINT if command_of(process)[3:4] == ["rates-job"] else signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    if status == 0:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"logs of the servers and the job: {work}", flush=True)
    return status


async def _watch(bootstrap: str, service_url: str, check_seconds: float | None, rejoin_s: float) -> int:
    # SIGTERM cancels this task, so the consumers leave the group as on Ctrl-C (asyncio.run's own SIGINT way).
    watching = asyncio.current_task()
    if watching is not None:  # (always: asyncio.run runs this as a task)
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, watching.cancel)
    stop = asyncio.Event()
    group_task = asyncio.create_task(consume(bootstrap, TOPIC, GROUP, service_url, 3, stop, rejoin_s))
    began = time.monotonic()
    tty = sys.stdout.isatty()
    try:
        while check_seconds is None or time.monotonic() - began < check_seconds:
            await asyncio.sleep(2)
            if group_task.done():  # the group cannot stop by itself: whatever ended it is a failure
                ended = "cancelled" if group_task.cancelled() else repr(group_task.exception())
                print(f"\ndemo failed: the consumer group stopped ({ended})", flush=True)
                return 1
            try:
                text, facts = await asyncio.to_thread(view, service_url, GROUP)
            except httpx.HTTPError as exc:
                text, facts = f"the service does not answer yet ({exc})", {}
            print(
                ("\033[2J\033[H" if tty else "\n") + text + f"\n\n(the last member rejoins every {rejoin_s:g} s; "
                "Ctrl-C stops everything)",
                flush=True,
            )
            # The leader stores a version only when it got an answer from the service, which it asks only
            # once rates are stored; in the demo only the job stores rates.
            if check_seconds is not None and facts.get("rates_at") and facts.get("version", 0) >= 1:
                print(
                    f"\ndemo check passed: the service rebalanced the group (version {facts['version']}) "
                    "with rates measured by the Spark job",
                    flush=True,
                )
                return 0
        print("\ndemo check failed: no rebalance by the service with measured rates in time", flush=True)
        return 1
    finally:
        stop.set()
        # The verdict above stands whatever the group's end raises (it once turned a failed check into exit 0),
        # and a group that does not stop in time is cancelled rather than waited for.
        try:
            await asyncio.wait_for(group_task, 60)
        except (Exception, asyncio.CancelledError) as exc:
            print(f"the consumer group ended with {exc!r}", file=sys.stderr, flush=True)


# -- commands ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument(
        "--check",
        type=float,
        metavar="SECONDS",
        help="run at most this long and exit 0 only if the service rebalanced with measured rates",
    )
    parser.add_argument(
        "--rejoin-s",
        type=float,
        default=REJOIN_S,
        help="seconds between a member leaving and rejoining, which makes the group rebalance",
    )


def run(args: argparse.Namespace) -> int:
    return run_demo(args.check, args.rejoin_s)


def parts_parser() -> argparse.ArgumentParser:
    """`python -m app.local.demo produce|consume …`: the demo's producer and consumer group alone."""
    parser = argparse.ArgumentParser(prog="python -m app.local.demo")
    sub = parser.add_subparsers(dest="part", required=True)
    producer = sub.add_parser("produce")
    producer.add_argument("--bootstrap-servers", required=True)
    producer.add_argument("--topic", default=TOPIC)
    consumer = sub.add_parser("consume")
    consumer.add_argument("--bootstrap-servers", required=True)
    consumer.add_argument("--topic", default=TOPIC)
    consumer.add_argument("--group", default=GROUP)
    consumer.add_argument("--service-url", required=True)
    consumer.add_argument("--members", type=int, default=3)
    consumer.add_argument("--rejoin-s", type=float, default=REJOIN_S)
    return parser


def main() -> int:
    args = parts_parser().parse_args()
    create_topic(args.bootstrap_servers, args.topic)
    if args.part == "produce":
        produce(args.bootstrap_servers, args.topic, threading.Event())
    else:
        asyncio.run(
            consume(
                args.bootstrap_servers,
                args.topic,
                args.group,
                args.service_url,
                args.members,
                asyncio.Event(),
                args.rejoin_s,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
