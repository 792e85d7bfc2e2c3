"""Median time of one assignment per algorithm at (partitions, consumers) ≈ (200, 100), (10 000, 5 000),
(100 000, 50 000), next to a straightforward list-scanning Worst Fit Decreasing measured in the same run.

The previous assignment is BFD's answer to the measurement before (rates moved by up to ±5% of C,
as a δ = 5 stream does), so the Modified Any Fit algorithms see a realistic group.

    .venv/bin/python bench/algorithms.py [--sizes 200,10000,100000] [--repeat 5] [--algorithms mwf,bfd]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from app.cli import tune_gc
from app.core.algorithm import algorithms, get_algorithm
from app.core.assign import solve
from app.core.errors import AssignmentError
from app.core.model import Problem, build_problem, within

CAPACITY = 100.0


def instance(partitions: int, seed: int = 7) -> Problem:
    """Rates U[0, C] → about partitions/2 consumers; previous = BFD on the measurement before."""
    rng = random.Random(seed)
    keys = [(f"topic-{j % 8}", j // 8) for j in range(partitions)]
    before = [rng.uniform(0, CAPACITY) for _ in keys]
    now = [min(CAPACITY, max(0.0, r + rng.uniform(-5, 5))) for r in before]
    first = solve(build_problem(keys, before, None, CAPACITY), get_algorithm("bfd"), None)
    previous = {c: [keys[j] for j in held] for c, held in first.assignment.items()}
    return build_problem(keys, now, None, CAPACITY, previous)


def list_scanning_wfd(problem: Problem) -> dict[str, list[int]]:
    """The textbook WFD: scan every open bin for the least loaded one."""
    loads: list[float] = []
    held: list[list[int]] = []
    for j in problem.decreasing():
        best = -1
        for b, load in enumerate(loads):
            if (best < 0 or load < loads[best]) and within(load + problem.rates[j], problem.capacity):
                best = b
        if best < 0:
            loads.append(0.0)
            held.append([])
            best = len(loads) - 1
        loads[best] += problem.rates[j]
        held[best].append(j)
    return {f"c{b}": h for b, h in enumerate(held)}


def median_seconds(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fresh(problem: Problem) -> Problem:
    """The same problem without cached derived fields, so each run pays for them."""
    return Problem(problem.keys, problem.rates, problem.lags, problem.capacity, problem.previous, problem.members)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="200,10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--algorithms", default="", help="comma-separated (default: every registered one)")
    parser.add_argument("--naive-limit", type=int, default=20000, help="largest size for the list-scanning WFD")
    args = parser.parse_args()
    tune_gc()  # as `groupfit serve` and the CLI run
    sizes = [int(s) for s in args.sizes.split(",")]
    names = [n for n in args.algorithms.split(",") if n] or sorted(algorithms())
    problems = {n: instance(n) for n in sizes}
    header = "".join(f"{f'{n} / {len(p.previous)}':>20}" for n, p in problems.items())
    print(f"median of {args.repeat} runs, milliseconds; columns: partitions / previous consumers")
    print(f"{'algorithm':<22}{header}")
    for name in names:
        spec = get_algorithm(name)
        params = spec.parse_params(None)
        cells = []
        for n, problem in problems.items():
            repeat = args.repeat if n <= 20000 else max(1, args.repeat // 2)
            try:
                seconds = median_seconds(lambda: solve(fresh(problem), spec, params), repeat)  # noqa: B023
            except AssignmentError as exc:  # e.g. exact beyond its model size, kip441 without members
                cells.append(f"{'(' + exc.code + ')':>20}")
                continue
            cells.append(f"{seconds * 1000:>20.1f}")
        print(f"{name:<22}{''.join(cells)}", flush=True)
    cells = []
    for n, problem in problems.items():
        if n > args.naive_limit:
            cells.append(f"{'(quadratic: skipped)':>20}")
        else:
            seconds = median_seconds(
                lambda problem=problem: list_scanning_wfd(fresh(problem)), 1 if n > 1000 else args.repeat
            )
            cells.append(f"{seconds * 1000:>20.1f}")
    print(f"{'wfd list-scanning':<22}{''.join(cells)}")


if __name__ == "__main__":
    main()
