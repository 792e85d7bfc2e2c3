"""repack on the consumers / Rscore frontier against BFD (fewest consumers) and MWF (least Rscore of the
paper's algorithms), each replayed from its own previous assignment, as `groupfit evaluate` does.

Per stream: average consumers and the ratio to BFD's, average Rscore and the ratio to MWF's, and the
time per assignment (mean over the stream, the whole `solve`: wall and CPU time). The goal of issue #14:
consumers ≤ 1.01 × BFD's and Rscore ≤ 0.8 × MWF's, within 1 s per assignment. Streams: the published one
(32 partitions), generated 200-partition streams at δ = 5, 15, 25 (seed 1 + δ), and 2 000 / 20 000
partitions at δ = 15 (fewer measurements). BFD and MWF are measured in the same run (the machine's load
moves every figure). "repack wide" is the widest search measured (WIDE): on the published stream always,
on the 200-partition streams with --wide (minutes each).

    .venv/bin/python bench/frontier.py [--measurements 100] [--weights 0.5,1.5,3] [--large 2000,20000] [--wide]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from app.cli import tune_gc
from app.sim.evaluate import run_named
from app.sim.replay import replay
from app.sim.stream import generate_stream, load_stream

CAPACITY = 100.0
REFERENCE = Path(__file__).resolve().parent.parent / "data" / "reference" / "paper_stream_delta5.json"
WIDE = {"neighbourhood": 8, "neighbourhood_nodes": 10_000, "consumer_weight": 1.4}
"""repack's closest point to the goal on the published stream: neighbourhoods of 8 consumers, 10 000 nodes each."""


def timed(stream: list, name: str) -> tuple[float, float, float, float]:
    """(average consumers, average Rscore, wall seconds and CPU seconds per assignment). The CPU time is
    the figure to hold against the 1 s goal on a shared machine: wall time grows with other jobs' load."""
    started, cpu = time.perf_counter(), time.process_time()
    run = replay(stream, CAPACITY, "repack", WIDE) if name == "repack wide" else run_named(stream, CAPACITY, name)
    n = len(stream)
    return run.avg_consumers, run.avg_rscore, (time.perf_counter() - started) / n, (time.process_time() - cpu) / n


def report(label: str, stream: list, names: list[str]) -> None:
    bfd, mwf = timed(stream, "bfd"), timed(stream, "mwf")
    print(f"\n{label}: {len(stream)} measurements")
    print(
        f"{'algorithm':<14}{'consumers':>11}{'× BFD':>8}{'Rscore':>10}{'× MWF':>8}{'wall ms':>10}{'CPU ms':>9}"
        "  goal (consumers ≤ 1.01 × BFD, Rscore ≤ 0.8 × MWF, CPU ≤ 1 s)"
    )
    for name, (consumers, rscore, wall, cpu) in [("bfd", bfd), ("mwf", mwf), *((n, timed(stream, n)) for n in names)]:
        c_ratio, r_ratio = consumers / bfd[0], (rscore / mwf[1] if mwf[1] else float("nan"))
        goal = "yes" if c_ratio <= 1.01 and r_ratio <= 0.8 and cpu <= 1 else "no"
        print(
            f"{name:<14}{consumers:>11.2f}{c_ratio:>8.3f}{rscore:>10.3f}{r_ratio:>8.3f}{wall * 1000:>10.1f}"
            f"{cpu * 1000:>9.1f}  {goal if name.startswith('repack') else ''}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measurements", type=int, default=100, help="per generated 200-partition stream")
    parser.add_argument("--weights", default="0.5,1.5,3", help="repack@W besides repack (W = its default)")
    parser.add_argument("--deltas", default="5,15,25")
    parser.add_argument("--large", default="2000,20000", help="partition counts at δ = 15")
    parser.add_argument("--large-measurements", type=int, default=4)
    parser.add_argument("--wide", action="store_true", help="repack wide on the 200-partition streams too")
    args = parser.parse_args()
    tune_gc()
    names = ["repack", *(f"repack@{w}" for w in args.weights.split(",") if w)]
    report("published stream (δ = 5, 32 partitions)", load_stream(REFERENCE), [*names, "repack wide"])
    for delta in (int(d) for d in args.deltas.split(",") if d):
        stream = generate_stream(200, args.measurements, delta, seed=1 + delta)
        report(f"200 partitions, δ = {delta}", stream, [*names, *(["repack wide"] if args.wide else [])])
    for partitions in (int(n) for n in args.large.split(",") if n):
        stream = generate_stream(partitions, args.large_measurements, 15, seed=16)
        report(f"{partitions} partitions, δ = 15", stream, ["repack"])


if __name__ == "__main__":
    main()
