"""`groupfit generate-stream` and `groupfit evaluate`."""

from __future__ import annotations

import argparse
import json
import sys

from app.sim.evaluate import evaluate
from app.sim.latency import LatencyModel
from app.sim.stream import dump_stream, generate_stream, load_stream

PAPER_ALGORITHMS = "nf,ff,bf,wf,nfd,ffd,bfd,wfd,mwf,mbf,mwfp,mbfp"


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    if command == "generate-stream":
        parser.add_argument("--partitions", type=int, required=True)
        parser.add_argument("--measurements", type=int, required=True)
        parser.add_argument("--delta", type=int, required=True, help="largest step, in percent of C")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--capacity", type=float, default=100.0)
        parser.add_argument("--topics", type=int, default=1)
        parser.add_argument("--out", "-o", default="-", help="output file (default: standard output)")
    else:
        parser.add_argument("--stream", required=True, help="JSON list of measurements, topic → {partition: rate}")
        parser.add_argument("--capacity", type=float, required=True)
        parser.add_argument("--algorithms", default=PAPER_ALGORITHMS,
                            help="comma-separated registered names and kd_<N> (Kafka's equal-count assignment, N consumers)")
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        parser.add_argument("--latency", action="store_true", help="add latency percentiles (Landau et al. §VI-C)")
        parser.add_argument("--consumer-throughput", type=float, default=133.0, help="C̄, real consumer throughput")
        parser.add_argument("--iteration-s", type=float, default=30.0)
        parser.add_argument("--rebalance-s", type=float, default=5.0)


def run(args: argparse.Namespace) -> int:
    if args.command == "generate-stream":
        stream = generate_stream(args.partitions, args.measurements, args.delta, args.seed, args.capacity, args.topics)
        if args.out == "-":
            json.dump(stream, sys.stdout)
            print()
        else:
            dump_stream(stream, args.out)
        return 0
    names = [name.strip() for name in args.algorithms.split(",") if name.strip()]
    model = LatencyModel(args.consumer_throughput, args.iteration_s, args.rebalance_s) if args.latency else None
    report = evaluate(load_stream(args.stream), args.capacity, names, model)
    if args.json:
        print(json.dumps(report))
        return 0
    columns = f"{'algorithm':<14}{'avg consumers':>15}{'avg Rscore':>12}{'CBS':>9}{'iterations':>12}"
    print(columns + ("".join(f"{p:>10}" for p in ("p50 s", "p99 s", "max s")) if model else ""))
    for name, r in report["results"].items():
        line = f"{name:<14}{r['avg_consumers']:>15.2f}{r['avg_rscore']:>12.3f}{r['cbs']:>9.3f}{r['iterations']:>12}"
        if model:
            line += "".join(f"{r['latency'][p]:>10.2f}" for p in ("p50", "p99", "max"))
        print(line)
    return 0
