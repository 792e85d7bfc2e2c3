"""What Landau et al.'s §VI-C latency model (app/sim/latency.py) predicts for a live run, beside what it measured.

The model takes a sequence of assignments with the partitions' rates, one per iteration of T seconds, and a
rebalance time t_r; it gives every event's latency (fluid: fixed queues drain at C̄, a started partition
waits t_r first). For a live run: the iterations are the workload's ticks (1 s), the rates the workload's,
the assignment of each tick the one the members really held at its middle (from their rebalance callbacks; a
partition paused at that instant counts for the member that held it last), C̄ = μ, and t_r the run's own
median pause of a partition that changed member (or the settings' rebalance_s when none moved).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app.experiment.workload import Workload


def observed_assignments(events: Sequence[dict[str, Any]], t0: float, workload: Workload) -> list[dict[int, str]]:
    """partition → member at the middle of each tick (µs event times against `t0` in epoch seconds)."""
    samples = [int((t0 + (k + 0.5) * workload.tick_s) * 1e6) for k in range(workload.ticks)]
    held: dict[int, str] = {}
    last: dict[int, str] = {}
    assignments: list[dict[int, str]] = []
    i = 0
    for at in samples:
        while i < len(events) and events[i]["t"] <= at:
            event = events[i]
            if event["event"] == "assigned":
                for p in event["partitions"]:
                    held[p] = last[p] = event["id"]
            elif event["event"] in ("revoked", "lost"):
                for p in event["partitions"]:
                    if held.get(p) == event["id"]:
                        del held[p]
            i += 1
        assignments.append({p: held.get(p, last.get(p, "")) for p in range(workload.partitions)})
    if not any(member for assignment in assignments for member in assignment.values()):
        raise ValueError("no member held a partition during the workload")
    return assignments


def predict(
    workload: Workload, events: Sequence[dict[str, Any]], t0: float, stopped: float, settings: Any
) -> dict[str, Any]:
    """The model's share within w_sla and percentiles for this run (see the module docstring)."""
    from app.core.assign import Outcome
    from app.core.model import build_problem
    from app.experiment.measure import rebalances
    from app.sim.latency import LatencyModel, segments

    moved = [p.seconds for p in rebalances(events, t0 * 1e6, stopped * 1e6).pauses if p.moved]
    t_r = float(np.median(moved)) if moved else settings.rebalance_s
    keys = [("workload", p) for p in range(workload.partitions)]
    outcomes = []
    previous: dict[str, list[tuple[str, int]]] = {}
    for tick, assignment in enumerate(observed_assignments(events, t0, workload)):
        rates = [float(r) for r in workload.rates[tick]]
        problem = build_problem(keys, rates, None, settings.mu, previous)
        held: dict[str, list[int]] = {}
        for p, member in sorted(assignment.items()):
            held.setdefault(member or "unowned", []).append(p)
        owner = [member or "unowned" for _, member in sorted(assignment.items())]
        loads = {c: sum(rates[j] for j in js) for c, js in held.items()}
        outcomes.append(Outcome("observed", problem, held, sorted(held), owner, loads, [], [], 0.0, [], {}, len(held)))
        previous = {c: [keys[j] for j in js] for c, js in held.items()}
    model = LatencyModel(consumer_throughput=settings.mu, iteration_s=workload.tick_s, rebalance_s=t_r)
    latency = segments(outcomes, model)
    figures = latency.summary()
    total = latency.bytes
    return {
        "rebalance_s": t_r,
        "within_sla": latency.count_at_most(settings.w_sla) / total if total else None,
        "p50": figures["p50"],
        "p90": figures["p90"],
        "p99": figures["p99"],
        "max": figures["max"],
    }
