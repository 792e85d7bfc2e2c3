"""Reference points computed, not run: seed 001's optimal autoscaler and its overprovisioning count.

- The optimal autoscaler (seed 001 §5: "replicas are provisioned when the rate of event arrivals reaches the
  latency-violating number of events (μ × w_sla), and deprovisioned otherwise … provisioned instantaneously,
  and the rebalancing/synchronization time is set to zero"): every second, the fewest replicas such that no
  replica receives more than μ·w_sla events in that second, partitions packed whole (exactly: a small
  branch and bound), in place from the second's start. Its share within the SLA comes from simulating every
  event of the same schedule the producer sends: each replica a FIFO server of 1/μ per event.
- Overprovisioning (seed 001 §5): Algorithm 2's count (least-loaded, here groupfit's own) with every partition
  at the workload's peak total rate divided by the partitions, held for the whole run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.experiment.measure import scale_actions
from app.experiment.workload import Workload

NODE_LIMIT = 100_000


def pack_exact(items: Sequence[float], capacity: float) -> list[list[int]]:
    """The fewest bins of `capacity` holding the items (indices), each item above it alone; first-fit
    decreasing, then a branch and bound below it (at most NODE_LIMIT nodes: FFD's answer beyond)."""
    alone = [[i] for i, size in enumerate(items) if size > capacity]
    rest = sorted((i for i, size in enumerate(items) if size <= capacity), key=lambda i: (-items[i], i))
    best: list[list[int]] = []
    loads: list[float] = []
    for i in rest:  # first-fit decreasing
        b = next((b for b, load in enumerate(loads) if load + items[i] <= capacity + 1e-9), None)
        if b is None:
            best.append([i])
            loads.append(items[i])
        else:
            best[b].append(i)
            loads[b] += items[i]
    bound = max(1, math.ceil(sum(items[i] for i in rest) / capacity - 1e-9)) if rest else 0
    nodes = 0

    def search(k: int, bins: list[list[int]], load: list[float]) -> None:
        nonlocal best, nodes
        nodes += 1
        if len(bins) >= len(best) or nodes > NODE_LIMIT:
            return
        if k == len(rest):
            best = [list(b) for b in bins]
            return
        i = rest[k]
        tried: set[float] = set()
        for b in range(len(bins)):
            if load[b] + items[i] <= capacity + 1e-9 and load[b] not in tried:
                tried.add(load[b])
                bins[b].append(i)
                load[b] += items[i]
                search(k + 1, bins, load)
                load[b] -= items[i]
                bins[b].pop()
        if len(bins) + 1 < len(best):
            bins.append([i])
            load.append(items[i])
            search(k + 1, bins, load)
            bins.pop()
            load.pop()

    if len(best) > bound:
        search(0, [], [])
    return alone + best


def optimal_autoscaler(workload: Workload, mu: float, w_sla: float) -> dict[str, Any]:
    """Replicas per second, replica-minutes, scale actions and the simulated share within w_sla."""
    counts = workload.counts()
    seconds_per_tick = workload.tick_s
    capacity = mu * w_sla * seconds_per_tick  # events a replica may receive in one tick
    owner = np.zeros((workload.ticks, workload.partitions), dtype=np.int64)
    replicas = []
    for tick in range(workload.ticks):
        bins = pack_exact([float(c) for c in counts[tick]], capacity)
        replicas.append(len(bins))
        for b, held in enumerate(bins):
            owner[tick, held] = b
    times, partitions = workload.schedule()
    latencies = _simulate(times, partitions, owner, seconds_per_tick, 1.0 / mu)
    ups, downs = scale_actions(replicas)
    return {
        "replicas": replicas,
        "replica_minutes": sum(replicas) * seconds_per_tick / 60.0,
        "mean_replicas": float(np.mean(replicas)),
        "scale_ups": ups,
        "scale_downs": downs,
        "within_sla": float((latencies <= w_sla).mean()) if len(latencies) else None,
        "p99": float(np.percentile(latencies, 99)) if len(latencies) else None,
        "max": float(latencies.max()) if len(latencies) else None,
    }


def _simulate(
    times: np.ndarray, partitions: np.ndarray, owner: np.ndarray, tick_s: float, service_s: float
) -> np.ndarray:
    """Each event's latency when replica owner[tick, partition] serves its events first come, first served.
    A replica that takes a partition over starts its events once the partition's earlier ones are done."""
    latencies = np.empty(len(times))
    free: dict[int, float] = {}  # replica → when its server is next free (this tick)
    partition_done = np.zeros(owner.shape[1])
    tick = -1
    for i, (t, p) in enumerate(zip(times, partitions)):
        current = min(int(t // tick_s), owner.shape[0] - 1)
        if current != tick:
            tick, free = current, {}
        replica = int(owner[tick, p])
        begin = max(t, free.get(replica, 0.0), partition_done[p])
        done = begin + service_s
        free[replica] = done
        partition_done[p] = done
        latencies[i] = done - t
    return latencies


def overprovisioned_count(
    workload: Workload, mu: float, w_sla: float, f_up: float, f_down: float, rebalance_s: float
) -> int:
    """Algorithm 2's count with every partition at peak total rate / partitions (seed 001 §5)."""
    from app.core.algorithm import get_algorithm
    from app.core.assign import solve
    from app.core.model import build_problem

    rate = float(workload.total_rate().max()) / workload.partitions
    keys = [("workload", p) for p in range(workload.partitions)]
    problem = build_problem(keys, [rate] * workload.partitions, [0.0] * workload.partitions, mu, {})
    algorithm = get_algorithm("least-loaded")
    params = algorithm.parse_params(
        {"mu": mu, "w_sla": w_sla, "f_up": f_up, "f_down": f_down, "rebalance_s": rebalance_s}
    )
    return solve(problem, algorithm, params).consumer_count
