"""The controller's command line:

    python -m groupfit_client.controller controller --service URL --bootstrap … --topic … --group … \\
        --control-topic … --capacity C
    python -m groupfit_client.controller consumer --id c0 --bootstrap … --topic … --group … --control-topic …
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
from typing import Any

from groupfit_client.client import GroupfitClient
from groupfit_client.controller.consumer import ControlledConsumer
from groupfit_client.controller.latency import LatencyRecorder
from groupfit_client.controller.loop import Controller
from groupfit_client.controller.processes import LocalProcesses


def _consumer_main(args: argparse.Namespace) -> None:
    # Deleted by SIGTERM (LocalProcesses, Kubernetes): close, so it leaves its groups at once.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with contextlib.ExitStack() as stack:
        log_file = stack.enter_context(open(args.record_log, "a", buffering=1)) if args.record_log else None

        def handle(message: Any) -> None:
            if log_file is not None:
                log_file.write(f"{message.topic()} {message.partition()} {message.offset()} {args.id}\n")

        recorder = LatencyRecorder(args.latency_dir, args.id, args.process_ms / 1000) if args.latency_dir else None
        consumer = ControlledConsumer(
            args.id,
            args.bootstrap,
            args.topic,
            args.group,
            args.control_topic,
            handle if log_file is not None else None,
            handle_batch=recorder.batch if recorder is not None else None,
            on_change=recorder.changed if recorder is not None else None,
        )
        if recorder is not None:
            stack.callback(recorder.close)
        stack.callback(consumer.close)
        consumer.run()


def _controller_main(args: argparse.Namespace) -> None:
    # Consumers outlive the controller on purpose: a restarted controller finds them by Synchronize.
    processes = LocalProcesses(args.bootstrap, args.topic, args.group, args.control_topic)
    with GroupfitClient(args.service) as service:
        Controller(
            service,
            args.bootstrap,
            args.topic,
            args.group,
            args.control_topic,
            processes,
            args.capacity,
            args.algorithm,
            args.period_s,
        ).run(args.interval_s)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m groupfit_client.controller")
    sub = parser.add_subparsers(dest="role", required=True)
    roles = {
        "controller": sub.add_parser("controller", help="the controller loop, with consumers as local processes"),
        "consumer": sub.add_parser("consumer", help="a consumer the controller commands"),
    }
    for role in roles.values():
        role.add_argument("--bootstrap", required=True)
        role.add_argument("--topic", required=True)
        role.add_argument("--group", required=True)
        role.add_argument("--control-topic", required=True)
    controller = roles["controller"]
    controller.add_argument("--service", default="http://127.0.0.1:8000")
    controller.add_argument("--capacity", type=float, required=True, help="what one consumer can read (rates' unit)")
    controller.add_argument("--algorithm", default="mwf")
    controller.add_argument("--period-s", type=float, default=60.0, help="reassign at least this often")
    controller.add_argument("--interval-s", type=float, default=5.0, help="time between sentinel checks")
    consumer = roles["consumer"]
    consumer.add_argument("--id", required=True)
    consumer.add_argument("--record-log", help="append 'topic partition offset consumer' per record read")
    consumer.add_argument(
        "--latency-dir", help="spend --process-ms per record and record every record's latency here (latency.py)"
    )
    consumer.add_argument("--process-ms", type=float, default=0.0, help="time spent on each record (slept)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    (_controller_main if args.role == "controller" else _consumer_main)(args)


if __name__ == "__main__":
    main()
