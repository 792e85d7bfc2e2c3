"""The exact replica placement model of "Constraint Based Kafka Partition Balancing" (seed 003), solved with
OR-Tools CP-SAT, lexicographically: feasibility, then the problem's objective in order (`Objective`: least bytes
moved then balance; balance then bytes; or fewest brokers, then bytes, then balance).

Basic Model, with one variable per (partition, broker) — the replicas of a partition are interchangeable, which
is the seed's "membership symmetry" removed at the root: y[p, b] = 1 when partition p has a replica on broker b.
  Σ_b y[p, b] = replication factor of p                      (each replica placed once)
  y[p, b] ∈ {0, 1}; Σ_{b in rack k} y[p, b] ≤ 1 with racks    (replica-set anti-collocation, brokers and racks)
  Σ_p D_p y[p, b] ≤ disk_b,  Σ_p (D_p / T_p) y[p, b] ≤ net_b   (capacity; the seed's common capacity limitation)
Objectives: bytes moved Σ_{b not a current broker of p} D_p y[p, b]; balance U ≥ each broker's utilisation on
both dimensions; brokers used Σ_b u_b with u_b ≥ y[p, b].

Sizes are integers of 1/RESOLUTION of the largest disk (throughputs of the largest network capacity), rounded
up, and capacities rounded down, so every answer of the integer model holds in real numbers; bounds are those
of the integer model (within one unit per replica of the real ones). The heuristic's placement is the complete
hint; its objective is never beaten by a worse answer (the better of the two is returned). Each phase minimises
one objective with the ones before it held at their best values; optimal means every phase was proven.

Determinism: one worker, a fixed seed, `time_limit_ms` spent as deterministic time shared by the phases (the
existing exact algorithm's solver settings).
"""

from __future__ import annotations

import math
from typing import Any

from app.core.algorithms.exact import _solver as deterministic_solver
from app.core.errors import AssignmentError, ErrorCode
from app.core.placement import heuristic
from app.core.placement.model import GONE, ORDER, Objective, PlacementProblem, objective_values
from app.core.placement.solver import Solution, Solver, register

RESOLUTION = 10**6  # integer units of the largest capacity
UTILIZATION_STEPS = 10**4  # balance in steps of 0.01 %
MAX_VARIABLES = 1_000_000  # partition × broker pairs


def solve(problem: PlacementProblem) -> Solution:
    from ortools.sat.python import cp_model

    brokers, parts = problem.brokers, problem.partitions
    pairs = len(parts) * len(brokers)
    if pairs > MAX_VARIABLES:
        raise AssignmentError(
            ErrorCode.TOO_LARGE_FOR_EXACT,
            f"{len(parts)} partitions × {len(brokers)} brokers is beyond the exact model ({MAX_VARIABLES} "
            "variables); use solver 'heuristic'.",
        )
    start = heuristic.greedy(problem)
    if start is not None and not start.affordable(0.0):
        start = None  # its repair alone spends more than max_bytes_moved: no hint
    disk_unit = max(b.disk for b in brokers) / RESOLUTION
    network_unit = max(b.network for b in brokers) / RESOLUTION
    size = [math.ceil(p.size / disk_unit) for p in parts]
    flow = [math.ceil(p.throughput / network_unit) for p in parts]
    disk_cap = [math.floor(limit / disk_unit) for limit in problem.disk_limit]
    network_cap = [math.floor(limit / network_unit) for limit in problem.network_limit]
    disk_full = [math.floor(b.disk / disk_unit) for b in brokers]
    network_full = [math.floor(b.network / network_unit) for b in brokers]

    model = cp_model.CpModel()
    y: dict[tuple[int, int], Any] = {}
    for p in range(len(parts)):
        for b in range(len(brokers)):
            if size[p] <= disk_cap[b] and flow[p] <= network_cap[b]:
                y[p, b] = model.new_bool_var(f"y{p}_{b}")
    by_broker: list[list[int]] = [[] for _ in brokers]
    for p, b in y:
        by_broker[b].append(p)
    for p, part in enumerate(parts):
        mine = [y[p, b] for b in range(len(brokers)) if (p, b) in y]
        model.add(sum(mine) == len(part.replicas))
        if problem.rack_aware:
            racks: dict[int, list[Any]] = {}
            for b in range(len(brokers)):
                if (p, b) in y:
                    racks.setdefault(problem.rack_of[b], []).append(y[p, b])
            for members in racks.values():
                if len(members) > 1:
                    model.add_at_most_one(members)
    peak = model.new_int_var(0, UTILIZATION_STEPS, "peak")
    for b in range(len(brokers)):
        if not by_broker[b]:
            continue
        disk_load = sum(size[p] * y[p, b] for p in by_broker[b])
        network_load = sum(flow[p] * y[p, b] for p in by_broker[b])
        model.add(disk_load <= disk_cap[b])
        model.add(network_load <= network_cap[b])
        model.add(UTILIZATION_STEPS * disk_load <= peak * disk_full[b])
        model.add(UTILIZATION_STEPS * network_load <= peak * network_full[b])
    current = [set(held) - {GONE} for held in problem.current]
    moved = sum(size[p] * var for (p, b), var in y.items() if b not in current[p])
    if problem.options.max_bytes_moved is not None:
        model.add(moved <= math.floor(problem.options.max_bytes_moved / disk_unit))
    criteria: dict[str, tuple[Any, float]] = {
        "bytes_moved": (moved, disk_unit),
        "utilization": (peak, 1 / UTILIZATION_STEPS),
    }
    if problem.options.objective is Objective.BROKERS:
        used = [model.new_bool_var(f"u{b}") for b in range(len(brokers))]
        for (_, b), var in y.items():
            model.add_implication(var, used[b])
        criteria["brokers"] = (sum(used), 1.0)
    phases = [(name, *criteria[name]) for name in ORDER[problem.options.objective]]

    hint = {(p, b) for p, held in enumerate(start.sets) for b in held} if start is not None else None
    budget = problem.options.time_limit_ms / 1000
    statuses, bounds = [], {}
    best: list[list[int]] | None = None
    for i, (name, expression, unit) in enumerate(phases):
        model.clear_hints()
        if hint is not None:
            for key, var in y.items():
                model.add_hint(var, key in hint)
        model.minimize(expression)
        solver = deterministic_solver(budget / (len(phases) - i))
        status = solver.solve(model)
        budget = max(0.0, budget - solver.deterministic_time)
        if status == cp_model.INFEASIBLE and best is None:
            raise AssignmentError(
                ErrorCode.PLACEMENT_INFEASIBLE,
                "no placement satisfies the capacities, the anti-collocation rules"
                + (" and max_bytes_moved" if problem.options.max_bytes_moved is not None else "")
                + " (proven by the exact model); add brokers or capacity"
                + (", or raise max_bytes_moved." if problem.options.max_bytes_moved is not None else "."),
            )
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            statuses.append(solver.status_name(status))
            break  # the phases before found the answer (or none did: the heuristic's stands)
        statuses.append(solver.status_name(status))
        value = round(solver.objective_value)
        bounds[name] = max(0, math.ceil(solver.best_objective_bound - 1e-9)) * unit
        best = [[b for b in range(len(brokers)) if (p, b) in y and solver.value(y[p, b])] for p in range(len(parts))]
        hint = {(p, b) for p, held in enumerate(best) for b in held}
        model.add(expression <= value)  # hold it for the phases after
    outputs: dict[str, Any] = {"status": dict(zip([name for name, _, _ in phases], statuses))}
    candidates = [sets for sets in (best, start.sets if start is not None else None) if sets is not None]
    if not candidates:
        raise AssignmentError(
            ErrorCode.PLACEMENT_INFEASIBLE,
            "neither the exact model within its time limit nor the heuristic found a placement; raise "
            "time_limit_ms, or add brokers or capacity.",
        )
    chosen = candidates[0]
    if best is not None and start is not None:
        # the model sees sizes and utilisation only to its resolution: the heuristic wins only beyond it
        resolution = {
            "bytes_moved": disk_unit * sum(len(p.replicas) for p in parts),
            "utilization": 1 / UTILIZATION_STEPS,
            "brokers": 0.5,
        }
        exact_values, heuristic_values = objective_values(problem, best), objective_values(problem, start.sets)
        for name in ORDER[problem.options.objective]:
            if abs(exact_values[name] - heuristic_values[name]) > resolution[name]:
                chosen = best if exact_values[name] < heuristic_values[name] else start.sets
                break
    outputs["kept_heuristic"] = chosen is not best
    values = objective_values(problem, chosen)
    # the integer model's bounds, never above what is reached (sizes were rounded up)
    bounds = {name: min(bound, values[name]) for name, bound in bounds.items()}
    optimal = len(statuses) == len(phases) and all(s == "OPTIMAL" for s in statuses) and chosen is best
    return Solution([sorted(held) for held in chosen], optimal=optimal, bounds=bounds, outputs=outputs)


register(
    Solver(
        name="exact",
        description="CP-SAT: feasibility, then bytes moved and balance (or fewest brokers) lexicographically; "
        "proves optimality and reports bounds.",
        solve=solve,
        source="Constraint Based Kafka Partition Balancing (Basic Model, Objectives)",
    )
)
