"""`groupfit experiment`: seed 001's autoscaling experiment on a live Apache Kafka group (docs/experiment.md).

    groupfit experiment suite  [--out DIR] [--quick]                  # every run, the report, a summary table
    groupfit experiment run    --strategy S --workload W [--heartbeat-ms 500] [--protocol consumer] [--out DIR]
    groupfit experiment report --out DIR                              # the report again from DIR's results
    groupfit experiment workload --workload W --write FILE            # a workload file, and its figures

Without --bootstrap-servers and --service-url it starts its own Apache Kafka, Redis and service on loopback.
Exit status: 0 done; 1 a run failed; 2 bad input (unknown strategy, malformed workload, no broker); 130
interrupted (every process it started is stopped, and it says what it left).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from app.experiment.run import ExperimentError, RunSpec, Settings, parse_strategy
from app.experiment.workload import BUILT, WorkloadError, describe, resolve

STREAM = Path(__file__).resolve().parents[2] / "data" / "reference" / "paper_stream_delta5.json"


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    suite = actions.add_parser("suite", help="every run, then the report and a summary table")
    single = actions.add_parser("run", help="one strategy on one workload")
    report = actions.add_parser("report", help="the report from the results already in --out")
    workload = actions.add_parser("workload", help="write a workload file and print its figures")
    for action in (suite, single):
        _servers_and_settings(action)
    single.add_argument("--strategy", required=True, help="least-loaded, mwf, repack, linear, overprovisioning, "
                        "kd_<N> (N fixed consumers, Kafka's assignor), controller")  # fmt: skip
    single.add_argument("--workload", required=True, help=f"{', '.join(BUILT)} or a workload file")
    suite.add_argument("--quick", action="store_true", help="workloads 5× faster (2 min each), one heartbeat (3 s)")
    suite.add_argument("--strategies", help="only these strategies on the standard workload (comma-separated)")
    suite.add_argument("--skewed-strategies", help="only these on the skewed workload (comma-separated; '' for none)")
    suite.add_argument("--heartbeats", help="heartbeat intervals in ms (default 3000,500)")
    suite.add_argument("--no-kip848", action="store_true", help="leave out the KIP-848 run")
    suite.add_argument("--no-controller", action="store_true", help="leave out Landau's controller mode")
    suite.add_argument("--keep", action="store_true", help="keep runs whose result.json is already in --out")
    suite.add_argument("--list", action="store_true", help="print the runs the suite would make, and stop")
    for action in (suite, single, report):
        action.add_argument("--out", default="reports/experiment", help="runs' files, results and the report")
    workload.add_argument("--workload", required=True, help=f"{', '.join(BUILT)} or a workload file to check")
    workload.add_argument("--write", help="write it to this file")
    for action in (suite, single, workload):
        action.add_argument("--time-scale", type=float, default=1.0, help="replay this many times faster")
        action.add_argument("--stream", default=str(STREAM), help="Landau's stream (the landau workload)")


def _servers_and_settings(parser: argparse.ArgumentParser) -> None:
    defaults = Settings()
    parser.add_argument("--bootstrap-servers", help="an existing broker (default: start Apache Kafka here)")
    parser.add_argument("--service-url", help="an existing groupfit service (default: start one here)")
    parser.add_argument("--heartbeat-ms", type=int, default=defaults.heartbeat_ms)
    parser.add_argument("--session-ms", type=int, default=defaults.session_ms)
    parser.add_argument("--protocol", choices=("classic", "consumer"), default=defaults.protocol)
    parser.add_argument("--kafka-assignor", choices=("cooperative-sticky", "range", "uniform"),
                        default=defaults.kafka_assignor, help="Kafka's assignor for linear, kd_N, overprovisioning")  # fmt: skip
    parser.add_argument("--process-ms", type=float, default=defaults.process_ms, help="time spent per event")
    parser.add_argument("--w-sla", type=float, default=defaults.w_sla)
    parser.add_argument("--drain-timeout-s", type=float, default=defaults.drain_timeout_s)
    parser.add_argument("--min-consumers", type=int, default=defaults.min_consumers, help="the autoscaler's least")
    parser.add_argument("--max-consumers", type=int, default=defaults.max_consumers, help="the autoscaler's most")
    parser.add_argument("--reassign-min-interval-ms", type=int, default=defaults.reassign_min_interval_ms,
                        help="the least time between two rebalances the REASS check triggers")  # fmt: skip


def _settings(args: argparse.Namespace) -> Settings:
    return Settings(
        mu=1000.0 / args.process_ms,
        w_sla=args.w_sla,
        process_ms=args.process_ms,
        heartbeat_ms=args.heartbeat_ms,
        session_ms=args.session_ms,
        protocol=args.protocol,
        kafka_assignor=args.kafka_assignor,
        drain_timeout_s=args.drain_timeout_s,
        min_consumers=args.min_consumers,
        max_consumers=args.max_consumers,
        reassign_min_interval_ms=args.reassign_min_interval_ms,
    )


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except (ExperimentError, WorkloadError) as exc:
        print(f"groupfit experiment: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("groupfit experiment: interrupted", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    from app.experiment import report, suite
    from app.experiment.stack import local_stack

    out = Path(args.out) if args.action != "workload" else None
    if args.action == "workload":
        workload = resolve(args.workload, args.stream, args.time_scale)
        if args.write:
            workload.dump(args.write)
        print(json.dumps(describe(workload), indent=2))
        return 0
    assert out is not None
    if args.action == "report":
        path = report.write(out, suite.load_results(out))
        print(suite.summary_table(suite.load_results(out)))
        print(f"report: {path}")
        return 0
    settings = _settings(args)
    if args.action == "run":
        parse_strategy(args.strategy)  # an unknown strategy is refused before anything starts
        specs = [RunSpec(args.strategy, resolve(args.workload, args.stream, args.time_scale), settings)]
    else:
        time_scale = 5.0 if args.quick and args.time_scale == 1.0 else args.time_scale
        workloads = {name: resolve(name, args.stream, time_scale) for name in ("standard", "skewed", "landau")}
        if args.no_controller:
            del workloads["landau"]
        heartbeats = [int(h) for h in args.heartbeats.split(",")] if args.heartbeats else None
        specs = suite.plan(
            workloads,
            settings,
            heartbeats or ((3000,) if args.quick else suite.HEARTBEATS_MS),
            _names(args.strategies) if args.strategies is not None else suite.STANDARD_STRATEGIES,
            _names(args.skewed_strategies) if args.skewed_strategies is not None else suite.SKEWED_STRATEGIES,
            kip848=not args.no_kip848,
        )
        for spec in specs:
            parse_strategy(spec.strategy)
        if args.list:
            for spec in specs:
                print(f"{spec.name}: {spec.workload.total_events} events over {spec.workload.duration_s:g} s")
            return 0
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops a run as Ctrl-C does: everything started is stopped
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="servers-", dir=out))
    with local_stack(work, settings, args.bootstrap_servers, args.service_url) as env:
        env = replace(env, out=out)
        results = suite.run_all(
            specs, env, lambda line: print(line, flush=True), skip_done=getattr(args, "keep", False)
        )
    every = suite.load_results(out)
    path = report.write(out, every)
    print(suite.summary_table([r for r in every if r["name"] in {s.name for s in specs}]))
    print(f"report: {path}")
    return 0 if len(results) == len(specs) else 1


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]
