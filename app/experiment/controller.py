"""Landau et al.'s controller mode in the experiment: the controller (groupfit_client.controller: sentinel →
reassign → stop, acknowledge, start) sizes and assigns the group itself, its consumers being the Python
controlled consumers that spend a fixed time per event and record every latency.

    python -m app.experiment.controller --bootstrap B --topic T --group G --control-topic C --service U \\
        --capacity C --interval-s I --events-log FILE --consumer-command "… {id} …"

Every interval it measures the partitions' rates and lags from the broker's offsets (as the autoscaler does,
groupfit_client.autoscaler), stores them in groupfit, runs one controller round and logs one JSON line
(t, consumers_after, changed, assignment). SIGTERM stops it and every consumer it started.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.experiment.run import AutoscaledGroup, Environment, Settings, start_process
from app.experiment.workload import Workload

LANDAU_CAPACITY_SHARE = 100.0 / 133.0
"""C / C̄ of Landau et al. §VI-C (C = 100 against a real throughput C̄ = 133): the bin's capacity leaves a
consumer the time to catch up after a rebalance."""


class ControllerGroup(AutoscaledGroup):
    """The controller process; its events log has the autoscaler's `t` and `consumers_after`."""

    def __init__(
        self,
        env: Environment,
        topic: str,
        group: str,
        workload: Workload,
        settings: Settings,
        consumers_dir: Path,
        logs: Path,
    ) -> None:
        if env.service_url is None:
            raise ValueError("the controller mode needs the service")
        consumer = [
            sys.executable,
            "-m",
            "groupfit_client.controller",
            "consumer",
            *("--id", "{id}", "--bootstrap", env.bootstrap, "--topic", topic, "--group", group),
            *("--control-topic", f"{topic}.control", "--latency-dir", str(consumers_dir)),
            *("--process-ms", f"{settings.process_ms:g}"),
        ]
        events_log = consumers_dir.parent / "autoscaler.jsonl"
        command = [
            sys.executable,
            "-m",
            "app.experiment.controller",
            *("--bootstrap", env.bootstrap, "--topic", topic, "--group", group, "--control-topic", f"{topic}.control"),
            *("--service", env.service_url, "--capacity", f"{settings.mu * LANDAU_CAPACITY_SHARE:g}"),
            *("--interval-s", f"{workload.tick_s:g}", "--events-log", str(events_log)),
            *("--consumer-command", shlex.join(consumer)),
        ]
        super().__init__(command, events_log, logs)

    def start(self) -> None:
        self.processes.append(start_process(self.command, self.logs / "controller.log"))

    def rebalances(self, start_s: float, end_s: float) -> int:
        return sum(1 for d in self.decisions() if d["changed"] and start_s <= d["t"] <= end_s)


def main(argv: list[str] | None = None) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic
    from groupfit_client import GroupfitClient, PartitionRate
    from groupfit_client.autoscaler import BrokerOffsets, lags_of, rates_between
    from groupfit_client.controller import Controller
    from groupfit_client.controller.processes import CommandProcesses

    parser = argparse.ArgumentParser(prog="python -m app.experiment.controller")
    for option in ("--bootstrap", "--topic", "--group", "--control-topic", "--service", "--events-log"):
        parser.add_argument(option, required=True)
    parser.add_argument("--capacity", type=float, required=True, help="C: what one consumer is given (events/s)")
    parser.add_argument("--algorithm", default="mwf")
    parser.add_argument("--interval-s", type=float, default=6.0, help="a measurement and a controller round")
    parser.add_argument("--period-s", type=float, default=60.0, help="reassign at least this often")
    parser.add_argument("--consumer-command", required=True)
    args = parser.parse_args(argv)
    admin = AdminClient({"bootstrap.servers": args.bootstrap, "log_level": 3})
    with contextlib.suppress(Exception):  # already there
        admin.create_topics([NewTopic(args.control_topic, 1, 1)])[args.control_topic].result(30)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    offsets = BrokerOffsets(args.bootstrap, args.topic, args.group)
    start_offsets = _retried(offsets.start_offsets, stop)
    processes = CommandProcesses(shlex.split(args.consumer_command))
    with GroupfitClient(args.service, timeout=10.0) as service, open(args.events_log, "w", buffering=1) as log:
        controller = Controller(
            service, args.bootstrap, args.topic, args.group, args.control_topic, processes, args.capacity,
            args.algorithm, args.period_s, ack_timeout_s=120.0,
        )  # fmt: skip
        try:
            controller.synchronize(grace_s=0)
            last = _retried(offsets.sample, stop)
            began = time.monotonic()
            k = 1
            while not stop.wait(max(0.0, began + k * args.interval_s - time.monotonic())):
                k += 1
                sample = _retried(offsets.sample, stop)
                rates, lags = rates_between(last, sample), lags_of(sample, start_offsets)
                last = sample
                service.put_rates(
                    args.group,
                    [PartitionRate(args.topic, p, rate, float(lags.get(p, 0))) for p, rate in rates.items()],
                    dt.datetime.now(dt.UTC),
                )
                event: dict[str, Any] = {"t": time.time(), "rates": {str(p): r for p, r in rates.items()}}
                try:
                    event["changed"] = controller.step()
                except Exception as exc:  # a round that failed is logged; the next one tries again
                    event["changed"], event["error"] = False, f"{type(exc).__name__}: {exc}"
                event["consumers_after"] = len(processes.running())
                event["assignment"] = {c: sorted(p for _, p in held) for c, held in controller.state.items()}
                log.write(json.dumps(event) + "\n")
        finally:
            processes.close()
    return 0


def _retried(read: Callable[[], Any], stop: threading.Event, attempts: int = 30) -> Any:
    """`read()`, tried again each second while the broker answers with an error (a new topic's partitions
    answer "not leader" for a moment after their leaders are listed)."""
    for attempt in range(attempts):
        try:
            return read()
        except Exception:
            if attempt == attempts - 1 or stop.wait(1.0):
                raise
    raise AssertionError("unreachable")


if __name__ == "__main__":
    sys.exit(main())
