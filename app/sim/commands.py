"""`groupfit generate-stream` and `groupfit evaluate`."""

from __future__ import annotations

import argparse
import json
import sys

from app.core.algorithm import get_algorithm
from app.sim.replay import evaluate
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
        parser.add_argument("--algorithms", default=PAPER_ALGORITHMS, help="comma-separated names")
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


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
    for name in names:
        get_algorithm(name)  # an unknown name fails before any work, with the list of known ones
    report = evaluate(load_stream(args.stream), args.capacity, names)
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{'algorithm':<12}{'avg consumers':>15}{'avg Rscore':>12}{'CBS':>9}{'iterations':>12}")
    for name, r in report["results"].items():
        print(f"{name:<12}{r['avg_consumers']:>15.2f}{r['avg_rscore']:>12.3f}{r['cbs']:>9.3f}{r['iterations']:>12}")
    return 0
