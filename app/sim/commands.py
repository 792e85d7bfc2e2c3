"""`groupfit generate-stream`, `groupfit evaluate` and `groupfit report`. Only light modules at the top:
every command module is imported to build the parser; numpy and matplotlib load when a command runs."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from app.core.algorithm import paper_algorithms
from app.sim.stream import DELTAS, dump_stream, generate_stream, load_stream

DEFAULT_CAPACITY = 100.0
DEFAULT_ITERATION_S = 30.0  # the paper's iteration (§VI-C)
DEFAULT_THROUGHPUT = 133.0  # the paper's C̄ (§VI-C)


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    if command == "generate-stream":
        parser.add_argument("--partitions", type=int, required=True)
        parser.add_argument("--measurements", type=int, required=True)
        parser.add_argument("--delta", type=int, required=True, help="largest step, in percent of C")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--capacity", type=float, default=100.0)
        parser.add_argument("--topics", type=int, default=1)
        parser.add_argument(
            "--ordered",
            action="store_true",
            help="list partitions in (topic, partition) order in every measurement "
            "(default: a random order after the first, as in the published stream)",
        )
        parser.add_argument("--out", "-o", default="-", help="output file (default: standard output)")
        return
    if command == "evaluate":
        parser.add_argument("--stream", required=True, help="JSON list of measurements, topic → {partition: rate}")
        parser.add_argument("--capacity", type=float, required=True)
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        parser.add_argument("--latency", action="store_true", help="add latency percentiles (Landau et al. §VI-C)")
    else:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--stream", help="JSON list of measurements, topic → {partition: rate}")
        source.add_argument("--generate", action="store_true", help="the paper's δ sweep on generated streams")
        source.add_argument("--group", help="a group's rates history, read from the service at --url")
        parser.add_argument("--out", required=True, help="directory for index.html, the PNGs and results.json")
        parser.add_argument("--capacity", type=float, help="default 100; with --group, the group's stored capacity")
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="--group: the groupfit service")
        parser.add_argument("--token", default=os.environ.get("GROUPFIT_TOKEN"), help="--group: bearer token")
        parser.add_argument("--windows", type=int, default=1000, help="--group: the newest this many windows")
        parser.add_argument(
            "--kafka",
            default="",
            help="N of kd_N to show beside the algorithms (always shown: kd_N at the reference "
            "algorithm's average consumers, and the smallest N with p99 < 0.5 s)",
        )
        parser.add_argument("--partitions", type=int, default=200, help="--generate: partitions per stream")
        parser.add_argument("--measurements", type=int, default=500, help="--generate: measurements per stream")
        parser.add_argument("--deltas", default=",".join(map(str, DELTAS)), help="--generate: the δ values")
        parser.add_argument("--seed", type=int, default=1, help="--generate: the stream of δ uses seed + δ")
    parser.add_argument(
        "--algorithms",
        default=None,
        help="comma-separated registered names, kd_<N> (Kafka's equal-count assignment, N consumers) and "
        "repack@<W> (default: the paper's twelve; a stream report adds repack and its consumer-weight sweep)",
    )
    parser.add_argument(
        "--consumer-throughput",
        type=float,
        help="C̄, real consumer throughput (default 133; report --group: 1.33 × the group's capacity, the paper's ratio)",
    )
    parser.add_argument(
        "--iteration-s", type=float, help="default 30; report --group: the median time between the stored windows"
    )
    parser.add_argument("--rebalance-s", type=float, default=5.0)
    parser.add_argument(
        "--optimum",
        action="store_true",
        help="compare consumers with the exact algorithm's optimum per measurement (small streams: "
        "up to --optimum-time-limit-ms per measurement)",
    )
    parser.add_argument("--optimum-time-limit-ms", type=int, default=1000)


def run(args: argparse.Namespace) -> int:
    if args.command == "generate-stream":
        stream = generate_stream(
            args.partitions, args.measurements, args.delta, args.seed, args.capacity, args.topics, args.ordered
        )
        if args.out == "-":
            json.dump(stream, sys.stdout)
            print()
        else:
            dump_stream(stream, args.out)
            print(
                f"wrote {args.measurements} measurements of {args.partitions} partitions to {args.out}", file=sys.stderr
            )
        return 0
    if args.algorithms is not None:
        algorithms = [name.strip() for name in args.algorithms.split(",") if name.strip()]
    elif args.command == "report" and not args.generate:  # the sweep over δ would take half an hour more
        algorithms = [*paper_algorithms(), "repack"]
    else:
        algorithms = paper_algorithms()
    if args.command == "report":
        return report(args, algorithms)
    import msgspec

    from app.codec.evaluate import EvaluateRequest, LatencyOptions, OptimumOptions
    from app.codec.wire import convert
    from app.sim.evaluate import evaluate_request

    options = {
        "stream": load_stream(args.stream),
        "capacity": args.capacity,
        "algorithms": algorithms,
        "latency": LatencyOptions(
            consumer_throughput=args.consumer_throughput or DEFAULT_THROUGHPUT,
            iteration_s=args.iteration_s or DEFAULT_ITERATION_S,
            rebalance_s=args.rebalance_s,
        )
        if args.latency
        else None,
        "optimum": OptimumOptions(time_limit_ms=args.optimum_time_limit_ms) if args.optimum else None,
    }
    # through the codec, so flags get the checks (and error codes) a POST /v1/evaluate body gets
    request = convert(msgspec.to_builtins(options), EvaluateRequest)
    started, steps = time.perf_counter(), len(dict.fromkeys(algorithms)) + bool(args.optimum)
    done: list[str] = []

    def progress(step: str) -> None:
        done.append(step)
        print(
            f"groupfit evaluate: {step} ({len(done)}/{steps}, {time.perf_counter() - started:.1f} s)", file=sys.stderr
        )

    figures = msgspec.to_builtins(evaluate_request(request, progress))
    if args.json:
        print(json.dumps(figures))
    else:
        print_table(figures)
    return 0


def report(args: argparse.Namespace, algorithms: list[str]) -> int:
    from app.sim.evaluate import check_names
    from app.sim.latency import LatencyModel
    from app.sim.report import stream_report, sweep, sweep_report

    check_names(algorithms)
    started = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)  # fail on an unusable folder before the work, not after
    best = args.optimum_time_limit_ms if args.optimum else None
    capacity, iteration_s = args.capacity or DEFAULT_CAPACITY, args.iteration_s or DEFAULT_ITERATION_S
    if args.group:
        from app.sim.history import fetch_history
        from app.sim.latency import THROUGHPUT_PER_CAPACITY

        history = fetch_history(args.url, args.group, args.token, args.windows)
        capacity, iteration_s = args.capacity or history.capacity, args.iteration_s or history.iteration_s
        throughput = args.consumer_throughput or capacity * THROUGHPUT_PER_CAPACITY
        model = LatencyModel(throughput, iteration_s, args.rebalance_s)
        kafka = [int(n) for n in args.kafka.split(",") if n.strip()]
        path = stream_report(history.stream, capacity, algorithms, kafka, model, out, best)
        print(f"{path} ({len(history.stream)} windows of {args.group}, {time.perf_counter() - started:.1f} s)")
        return 0
    model = LatencyModel(args.consumer_throughput or DEFAULT_THROUGHPUT, iteration_s, args.rebalance_s)
    if args.generate:
        deltas = [int(d) for d in args.deltas.split(",") if d.strip()]
        results = sweep(args.partitions, args.measurements, capacity, args.seed, algorithms, deltas, best)
        path = sweep_report(
            results,
            out,
            f"groupfit δ sweep: {args.partitions} partitions × {args.measurements} "
            f"measurements, C = {capacity:g}, seeds {args.seed} + δ",
        )
    else:
        kafka = [int(n) for n in args.kafka.split(",") if n.strip()]
        path = stream_report(load_stream(args.stream), capacity, algorithms, kafka, model, out, best)
    print(f"{path} ({time.perf_counter() - started:.1f} s)")
    return 0


PERCENTILE_COLUMNS = ("p50", "p90", "p95", "p99", "max")


def print_table(figures: dict) -> None:
    def seconds(value: float | None) -> str:
        return f"{value:>10.2f}" if value is not None else f"{'∞':>10}"

    results = figures["results"]
    latency = any("latency" in r for r in results.values())
    optimum = figures.get("optimum")
    header = f"{'algorithm':<14}{'avg consumers':>15}{'avg Rscore':>12}{'CBS':>9}{'iterations':>12}"
    header += "".join(f"{p + ' s':>10}" for p in PERCENTILE_COLUMNS) if latency else ""
    header += f"{'vs optimum':>12}" if optimum else ""
    print(header)
    for name, r in results.items():
        line = f"{name:<14}{r['avg_consumers']:>15.2f}{r['avg_rscore']:>12.3f}{r['cbs']:>9.3f}{r['iterations']:>12}"
        line += "".join(seconds(r["latency"][p]) for p in PERCENTILE_COLUMNS) if latency else ""
        line += f"{r['optimum_excess']:>+12.3f}" if optimum else ""
        print(line)
    if optimum:
        print(
            f"{'exact':<14}{optimum['avg_consumers']:>15.2f}   optimal proven in {optimum['proven']} of "
            f"{len(optimum['consumers'])} measurements"
        )
