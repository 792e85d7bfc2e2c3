"""Replica placement at 1 000 and 100 000 replicas over 10 and 100 brokers: time, bytes moved and peak
utilisation of the heuristic and the exact solver, next to a greedy that ignores the current placement (every
replica placed afresh, largest first, on the least utilised broker: what a from-scratch balancer does).

The cluster: partitions of 3 replicas (racks of brokers 3 apart), sizes log-uniform over two decades, time-based
retention of 1 to 7 days (throughput = size / retention); the current placement is random with 30 % of the
replicas piled on the first tenth of the brokers, so some brokers are over capacity (disk at ~60 % on average).

    .venv/bin/python bench/placement.py [--sizes 1000,100000] [--brokers 10,100] [--objective moves]
        [--time-limit-ms 10000] [--max-utilization 0.8]
"""

from __future__ import annotations

import argparse
import random
import time

from app.cli import tune_gc
from app.core.errors import AssignmentError
from app.core.placement import place
from app.core.placement.heuristic import greedy
from app.core.placement.model import (
    Broker,
    Objective,
    Options,
    Partition,
    PlacementProblem,
    build,
    bytes_moved,
    loads_of,
    peak_utilization,
)

DISK = 4 * 10**12  # bytes per broker
NETWORK = 1.25e8  # bytes/s per broker


def instance(
    replicas: int, brokers: int, objective: Objective, time_limit_ms: int, max_utilization: float = 1.0, seed: int = 1
) -> PlacementProblem:
    rng = random.Random(seed)
    partitions = replicas // 3
    racks = 3
    cluster = [Broker(b, DISK, NETWORK, f"rack-{b % racks}") for b in range(brokers)]
    hot = max(3, brokers // 10)
    raw = []
    for j in range(partitions):
        pool = range(hot) if rng.random() < 0.3 else range(brokers)
        chosen: list[int] = []
        for b in rng.sample(list(pool), len(pool)) + rng.sample(range(brokers), brokers):
            if b not in chosen and all(cluster[b].rack != cluster[c].rack for c in chosen):
                chosen.append(b)
            if len(chosen) == 3:
                break
        size = 10 ** rng.uniform(0, 2)
        retention_s = rng.uniform(1, 7) * 86400
        raw.append((f"topic-{j % 50}", j // 50, tuple(chosen), size, retention_s))
    scale = 0.6 * DISK * brokers / sum(3 * r[3] for r in raw)  # average disk utilisation 60 %
    parts = [
        Partition(t, p, reps, round(size * scale), round(size * scale) / retention)
        for t, p, reps, size, retention in raw
    ]
    return build(cluster, parts, Options(objective, time_limit_ms=time_limit_ms, max_utilization=max_utilization))


def row(name: str, seconds: float, moved: float, peak: tuple[float, float], note: str = "") -> str:
    return (
        f"  {name:<22} {seconds:8.2f} s  moved {moved / 1e12:9.2f} TB  peak disk {peak[0]:6.1%}"
        f"  network {peak[1]:6.1%}  {note}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--brokers", default="10,100")
    parser.add_argument("--objective", default="moves", choices=[o.value for o in Objective])
    parser.add_argument("--time-limit-ms", type=int, default=10_000)
    parser.add_argument("--max-utilization", type=float, default=1.0, help="headroom: capacities count up to this")
    args = parser.parse_args()
    tune_gc()
    for replicas in map(int, args.sizes.split(",")):
        for brokers in map(int, args.brokers.split(",")):
            problem = instance(replicas, brokers, Objective(args.objective), args.time_limit_ms, args.max_utilization)
            before = peak_utilization(problem, loads_of(problem, problem.current))
            print(
                f"{replicas} replicas, {brokers} brokers, objective {args.objective}, "
                f"max_utilization {args.max_utilization:g}: "
                f"before peak disk {before[0]:.1%}, network {before[1]:.1%}"
            )
            started = time.perf_counter()
            fresh = greedy(problem, keep_current=False)
            seconds = time.perf_counter() - started
            if fresh is None:
                print("  fresh greedy: placed some replica nowhere")
            else:
                sets = fresh.sets
                print(
                    row(
                        "greedy, from scratch",
                        seconds,
                        bytes_moved(problem, sets),
                        peak_utilization(problem, loads_of(problem, sets)),
                    )
                )
            for solver in ("heuristic", "exact"):
                started = time.perf_counter()
                try:
                    plan = place(problem, solver)
                except AssignmentError as exc:
                    print(f"  {solver:<22} {exc.code}: {exc.message}")
                    continue
                seconds = time.perf_counter() - started
                note = (
                    f"bounds: moved ≥ {plan.bounds['bytes_moved'] / 1e12:.2f} TB, peak ≥ {plan.bounds['utilization']:.1%}"
                    + (f"  optimal={plan.optimal} {plan.outputs}" if solver == "exact" else "")
                )
                print(row(solver, seconds, plan.bytes_moved, plan.peak_after, note))


if __name__ == "__main__":
    main()
