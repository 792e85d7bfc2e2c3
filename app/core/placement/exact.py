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
down, and capacities too, so the integer model is a relaxation of the real one: every real placement is one of
its answers (the heuristic's is always a valid hint), its bounds and its infeasibility hold for the real problem,
and an answer of it is kept only if it holds in real numbers (within one unit per replica it may not). The
heuristic's placement is the complete
hint; its objective is never beaten by a worse answer (the better of the two is returned). Each phase minimises
one objective with the ones before it held at their best values; optimal means every criterion was proven, by
CP-SAT or by reaching a bound any placement obeys (`model.lower_bounds`).

Beyond MAX_VARIABLES (partition, broker) pairs the model frees a large neighbourhood of the heuristic's placement
(the partitions it moved, then those on its most utilised brokers) and fixes the rest; its bounds are then only
those of `model.lower_bounds`.

Determinism: one worker, a fixed seed, `time_limit_ms` spent as deterministic time shared by the phases (the
existing exact algorithm's solver settings).
"""

from __future__ import annotations

import math
from typing import Any

from app.core.algorithms.exact import _solver as deterministic_solver
from app.core.errors import AssignmentError, ErrorCode
from app.core.placement import heuristic
from app.core.placement.model import (
    GONE,
    ORDER,
    Objective,
    PlacementProblem,
    lower_bounds,
    objective_values,
    violations,
)
from app.core.placement.solver import Solution, Solver, register

RESOLUTION = 10**6  # integer units of the largest capacity
UTILIZATION_STEPS = 10**4  # balance in steps of 0.01 %
MAX_VARIABLES = 200_000  # free (partition, broker) pairs in one model


def solve(problem: PlacementProblem) -> Solution:
    from ortools.sat.python import cp_model

    brokers, parts = problem.brokers, problem.partitions
    start = heuristic.greedy(problem)
    if start is not None and not start.affordable(0.0):
        start = None  # its repair alone spends more than max_bytes_moved: no hint
    free = _neighbourhood(problem, start)
    whole = len(free) == len(parts)
    disk_unit = max(b.disk for b in brokers) / RESOLUTION
    network_unit = max(b.network for b in brokers) / RESOLUTION
    size = [math.floor(p.size / disk_unit) for p in parts]
    flow = [math.floor(p.throughput / network_unit) for p in parts]
    current = [set(held) - {GONE} for held in problem.current]
    # the partitions outside the neighbourhood stay where the heuristic put them: constants of the model
    fixed_disk, fixed_network, fixed_moved = [0] * len(brokers), [0] * len(brokers), 0
    fixed_hosts: set[int] = set()
    free_set = set(free)
    if not whole:
        assert start is not None
        for p in set(range(len(parts))) - free_set:
            fixed_hosts.update(start.sets[p])
            for b in start.sets[p]:
                fixed_disk[b] += size[p]
                fixed_network[b] += flow[p]
                fixed_moved += size[p] if b not in current[p] else 0
    disk_cap = [math.floor(limit / disk_unit) - fixed for limit, fixed in zip(problem.disk_limit, fixed_disk)]
    network_cap = [
        math.floor(limit / network_unit) - fixed for limit, fixed in zip(problem.network_limit, fixed_network)
    ]
    disk_full = [math.ceil(b.disk / disk_unit) for b in brokers]
    network_full = [math.ceil(b.network / network_unit) for b in brokers]

    model = cp_model.CpModel()
    y: dict[tuple[int, int], Any] = {}
    by_broker: list[list[int]] = [[] for _ in brokers]
    for p in free:
        mine = []
        racks: dict[int, list[Any]] = {}
        for b in range(len(brokers)):
            if size[p] <= disk_cap[b] and flow[p] <= network_cap[b]:
                var = y[p, b] = model.new_bool_var(f"y{p}_{b}")
                mine.append(var)
                by_broker[b].append(p)
                racks.setdefault(problem.rack_of[b], []).append(var)
        model.add(cp_model.LinearExpr.sum(mine) == len(parts[p].replicas))
        if problem.rack_aware:
            for members in racks.values():
                if len(members) > 1:
                    model.add_at_most_one(members)
    peak = model.new_int_var(0, UTILIZATION_STEPS, "peak")
    for b in range(len(brokers)):
        held = [y[p, b] for p in by_broker[b]]
        disk_load = cp_model.LinearExpr.weighted_sum(held, [size[p] for p in by_broker[b]])
        network_load = cp_model.LinearExpr.weighted_sum(held, [flow[p] for p in by_broker[b]])
        model.add(disk_load <= disk_cap[b])
        model.add(network_load <= network_cap[b])
        model.add(UTILIZATION_STEPS * (disk_load + fixed_disk[b]) <= peak * disk_full[b])
        model.add(UTILIZATION_STEPS * (network_load + fixed_network[b]) <= peak * network_full[b])
    copies = [(var, size[p]) for (p, b), var in y.items() if b not in current[p]]
    moved = cp_model.LinearExpr.weighted_sum([v for v, _ in copies], [w for _, w in copies]) + fixed_moved
    if problem.options.max_bytes_moved is not None:
        model.add(moved <= math.floor(problem.options.max_bytes_moved / disk_unit))
    criteria: dict[str, tuple[Any, float]] = {
        "bytes_moved": (moved, disk_unit),
        "utilization": (peak, 1 / UTILIZATION_STEPS),
    }
    used: list[Any] = []
    if problem.options.objective is Objective.BROKERS:
        used = [model.new_bool_var(f"u{b}") for b in range(len(brokers))]
        for (_, b), var in y.items():
            model.add_implication(var, used[b])
        for b in fixed_hosts:
            model.add(used[b] == 1)
        criteria["brokers"] = (cp_model.LinearExpr.sum(used), 1.0)
    phases = [(name, *criteria[name]) for name in ORDER[problem.options.objective]]

    def add_hint(sets: list[list[int]]) -> None:
        """A complete hint (every variable, the peak and the brokers used too): CP-SAT takes it as its first
        solution at once; an incomplete one it has to repair."""
        chosen = {(p, b) for p in free for b in sets[p]}
        for key, var in y.items():
            model.add_hint(var, key in chosen)
        disk_load, network_load = list(fixed_disk), list(fixed_network)
        for p, b in chosen:
            disk_load[b] += size[p]
            network_load[b] += flow[p]
        steps = max(
            max(-(-UTILIZATION_STEPS * load // full) for load, full in zip(disk_load, disk_full)),
            max(-(-UTILIZATION_STEPS * load // full) for load, full in zip(network_load, network_full)),
        )
        model.add_hint(peak, min(steps, UTILIZATION_STEPS))
        hosts = {b for held in sets for b in held}
        for b, var in enumerate(used):
            model.add_hint(var, b in hosts)

    hint = start.sets if start is not None else None
    budget = problem.options.time_limit_ms / 1000
    statuses, bounds = [], {}
    best: list[list[int]] | None = None
    for i, (name, expression, unit) in enumerate(phases):
        model.clear_hints()
        if hint is not None:
            add_hint(hint)
        model.minimize(expression)
        solver = deterministic_solver(budget / (len(phases) - i))
        status = solver.solve(model)
        budget = max(0.0, budget - solver.deterministic_time)
        if status == cp_model.INFEASIBLE and best is None and whole:
            raise AssignmentError(
                ErrorCode.PLACEMENT_INFEASIBLE,
                "no placement satisfies the capacities, the anti-collocation rules"
                + (" and max_bytes_moved" if problem.options.max_bytes_moved is not None else "")
                + " (proven by the exact model); add brokers or capacity"
                + (", or raise max_bytes_moved." if problem.options.max_bytes_moved is not None else "."),
            )
        statuses.append(solver.status_name(status))
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            break  # the phases before found the answer (or none did: the heuristic's stands)
        value = round(solver.objective_value)
        if whole:  # a neighbourhood's bound is no bound of the whole problem
            bounds[name] = max(0, math.ceil(solver.best_objective_bound - 1e-9)) * unit
        best = [
            [b for b in range(len(brokers)) if (p, b) in y and solver.value(y[p, b])]
            if p in free_set
            else list(start.sets[p])  # type: ignore[union-attr]  # outside a neighbourhood: there is a start
            for p in range(len(parts))
        ]
        hint = best
        model.add(expression <= value)  # hold it for the phases after
    outputs: dict[str, Any] = {"status": dict(zip([name for name, _, _ in phases], statuses))}
    if best is not None and violations(problem, best):
        # the relaxation's answer is above a real capacity by its rounding: the heuristic's repair mends it
        mended = heuristic.Greedy(problem, start=best)
        best = (
            [sorted(held) for held in mended.sets] if mended.repair() and not violations(problem, mended.sets) else None
        )
        outputs["mended"] = best is not None
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
    for name, bound in lower_bounds(problem).items():  # the bounds any placement obeys, also at scale
        if name in values:
            bounds[name] = max(bounds.get(name, 0.0), min(bound, values[name]))
    if not whole:
        outputs["neighbourhood"] = len(free)
    # a criterion is proven when CP-SAT proved it on the whole problem, or when its bound is reached
    solved = dict(zip([name for name, _, _ in phases], statuses))
    optimal = all(
        (whole and chosen is best and "mended" not in outputs and solved.get(name) == "OPTIMAL")
        or values[name] <= bounds.get(name, -1.0)
        for name in ORDER[problem.options.objective]
    )
    return Solution([sorted(held) for held in chosen], optimal=optimal, bounds=bounds, outputs=outputs)


def _neighbourhood(problem: PlacementProblem, start: heuristic.Greedy | None) -> list[int]:
    """The partitions the model places: all when (partitions × brokers) ≤ MAX_VARIABLES; beyond, a large
    neighbourhood of the heuristic's placement — the partitions it moved, then those on its most utilised
    brokers — as many as fit, the rest staying where the heuristic put them."""
    parts, brokers = problem.partitions, problem.brokers
    room = MAX_VARIABLES // len(brokers)
    if len(parts) <= room:
        return list(range(len(parts)))
    if start is None:
        raise AssignmentError(
            ErrorCode.TOO_LARGE_FOR_EXACT,
            f"{len(parts)} partitions × {len(brokers)} brokers is beyond the exact model ({MAX_VARIABLES} "
            "variables) and the heuristic found no placement to search around; use solver 'heuristic', or add "
            "capacity.",
        )
    chosen = [p for p in range(len(parts)) if set(start.sets[p]) != set(problem.current[p])]
    taken = set(chosen)
    for b in sorted(range(len(brokers)), key=lambda b: (-start.utilization(b), b)):
        for _, _, p in reversed(start.hosted[b]):  # largest first: they change the peak most
            if p not in taken:
                taken.add(p)
                chosen.append(p)
        if len(chosen) >= room:
            break
    return sorted(chosen[:room])


register(
    Solver(
        name="exact",
        description="CP-SAT: feasibility, then bytes moved and balance (or fewest brokers) lexicographically; "
        "proves optimality and reports bounds.",
        solve=solve,
        source="Constraint Based Kafka Partition Balancing (Basic Model, Objectives)",
    )
)
