"""The exact replica placement model of "Constraint Based Kafka Partition Balancing" (seed 003), solved with
OR-Tools CP-SAT, lexicographically: feasibility, then the problem's objective in order (`Objective`: least bytes
moved then balance; balance then bytes; or fewest brokers, then bytes, then balance).

Basic Model, with one variable per (partition, broker) — the replicas of a partition are interchangeable, which
is the seed's "membership symmetry" removed at the root: y[p, b] = 1 when partition p has a replica on broker b.
  Σ_b y[p, b] = replication factor of p                      (each replica placed once)
  y[p, b] ∈ {0, 1}; Σ_{b in rack k} y[p, b] ≤ 1 with racks    (replica-set anti-collocation, brokers and racks)
  Σ_p D_p y[p, b] ≤ disk_b,  Σ_p (D_p / T_p) y[p, b] ≤ net_b   (capacity; the seed's common capacity limitation)
Objectives: bytes moved = Σ_p r_p D_p − Σ_{b a current broker of p} D_p y[p, b] (what is not kept is copied);
balance: the peak P in steps of 1/UTILIZATION_STEPS with UTILIZATION_STEPS × load_b ≤ P × capacity_b on both
dimensions (`model.utilization_steps`); brokers used Σ_b u_b with u_b ≥ y[p, b].

The numbers are the problem's own whole numbers (bytes; network units of 1/RATE_STEPS byte/s), so every answer
of the model is a placement of the problem and CP-SAT's optimum is the problem's (balance counted in steps).
CP-SAT refuses a model where a linear expression's Σ |coefficient × bound| could reach 2^62; every expression
here is bounded by the dimension's total demand (Σ r_p D_p) plus one broker's capacity — the peak's constraint is
written as load_b ≤ P × ⌊capacity_b / S⌋ + w_b, S × w_b ≤ P × (capacity_b mod S), which is the same constraint
on whole numbers without multiplying a load by S. When that bound passes MAGNITUDE (about 10^18 bytes of
replicas, far beyond any cluster) the dimension is counted in units of 2^k, sizes and capacities rounded down: a
relaxation, so its infeasibility and its bounds still hold; its answer is checked in whole numbers, mended by the
heuristic's repair when above a capacity, and called optimal only where a bound any placement obeys is reached.

The heuristic's placement is the complete hint; the better of the two (compared on the whole-number criteria,
`model.criteria`) is returned. Each phase minimises one criterion with the ones before it held at their best
values; optimal means every criterion was proven, by CP-SAT or by reaching a bound any placement obeys
(`model.lower_bounds`).

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
    UTILIZATION_STEPS,
    Objective,
    PlacementProblem,
    criteria,
    lower_bounds,
    objective_values,
    violations,
)
from app.core.placement.solver import Solution, Solver, register

MAX_VARIABLES = 200_000  # free (partition, broker) pairs in one model
MAGNITUDE = 2**60  # the most Σ |coefficient × bound| of one expression (CP-SAT refuses from 2^62)


def unit_of(demand: int, capacity: int) -> int:
    """1, or the least power of two that brings the dimension's largest expression within MAGNITUDE."""
    unit = 1
    while demand + capacity > MAGNITUDE * unit:
        unit *= 2
    return unit


def solve(problem: PlacementProblem) -> Solution:
    from ortools.sat.python import cp_model

    brokers, parts = problem.brokers, problem.partitions
    start = heuristic.greedy(problem)
    if start is not None and not start.affordable(0):
        start = None  # its repair alone spends more than max_bytes_moved: no hint
    free = _neighbourhood(problem, start)
    whole = len(free) == len(parts)
    factor = [len(p.replicas) for p in parts]
    disk_unit = unit_of(sum(r * p.size for r, p in zip(factor, parts)), max(b.disk for b in brokers))
    network_unit = unit_of(sum(r * f for r, f in zip(factor, problem.flow)), max(problem.network_full))
    exact_units = disk_unit == network_unit == 1
    size = [p.size // disk_unit for p in parts]
    flow = [f // network_unit for f in problem.flow]
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
    disk_cap = [limit // disk_unit - fixed for limit, fixed in zip(problem.disk_limit, fixed_disk)]
    network_cap = [limit // network_unit - fixed for limit, fixed in zip(problem.network_limit, fixed_network)]
    disk_full = [-(-b.disk // disk_unit) for b in brokers]
    network_full = [-(-full // network_unit) for full in problem.network_full]

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
        model.add(cp_model.LinearExpr.sum(mine) == factor[p])
        if problem.rack_aware:
            for members in racks.values():
                if len(members) > 1:
                    model.add_at_most_one(members)
    peak = model.new_int_var(0, UTILIZATION_STEPS, "peak")
    rests: list[tuple[Any, int]] = []  # (w, capacity mod S) of each peak constraint, for the hint
    for b in range(len(brokers)):
        held = [y[p, b] for p in by_broker[b]]
        for weights, cap, full, fixed in (
            ([size[p] for p in by_broker[b]], disk_cap[b], disk_full[b], fixed_disk[b]),
            ([flow[p] for p in by_broker[b]], network_cap[b], network_full[b], fixed_network[b]),
        ):
            load = cp_model.LinearExpr.weighted_sum(held, weights)
            model.add(load <= cap)
            # S × (load + fixed) ≤ peak × full, as load + fixed ≤ peak × ⌊full / S⌋ + ⌊peak × (full mod S) / S⌋
            quotient, rest = divmod(full, UTILIZATION_STEPS)
            w = model.new_int_var(0, rest, f"w{b}_{len(rests)}")
            model.add(UTILIZATION_STEPS * w <= rest * peak)
            model.add(load + fixed <= quotient * peak + w)
            rests.append((w, rest))
    # bytes moved: all that is placed, less what stays on a broker that holds it now
    kept = [(var, size[p]) for (p, b), var in y.items() if b in current[p]]
    placed = sum(factor[p] * size[p] for p in free) + fixed_moved
    moved = placed - cp_model.LinearExpr.weighted_sum([v for v, _ in kept], [w for _, w in kept])
    if problem.options.max_bytes_moved is not None and problem.options.max_bytes_moved // disk_unit < placed:
        model.add(moved <= problem.options.max_bytes_moved // disk_unit)
    phase_of: dict[str, tuple[Any, int]] = {"bytes_moved": (moved, disk_unit), "utilization": (peak, 1)}
    used: list[Any] = []
    if problem.options.objective is Objective.BROKERS:
        used = [model.new_bool_var(f"u{b}") for b in range(len(brokers))]
        for (_, b), var in y.items():
            model.add_implication(var, used[b])
        for b in fixed_hosts:
            model.add(used[b] == 1)
        phase_of["brokers"] = (cp_model.LinearExpr.sum(used), 1)
    phases = [(name, *phase_of[name]) for name in ORDER[problem.options.objective]]

    def add_hint(sets: list[list[int]]) -> None:
        """A complete hint (every variable, the peak, its remainders and the brokers used too): CP-SAT takes it
        as its first solution at once; an incomplete one it has to repair."""
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
        steps = min(steps, UTILIZATION_STEPS)
        model.add_hint(peak, steps)
        for w, rest in rests:
            model.add_hint(w, steps * rest // UTILIZATION_STEPS)
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
            proven = max(0, math.ceil(solver.best_objective_bound - 1e-9))
            # a peak of k steps (rounded up) is above k - 1 steps; bytes in units of 2^k are rounded down
            bounds[name] = max(0, proven - 1) / UTILIZATION_STEPS if name == "utilization" else proven * unit
        best = [
            [b for b in range(len(brokers)) if (p, b) in y and solver.value(y[p, b])]
            if p in free_set
            else list(start.sets[p])  # type: ignore[union-attr]  # outside a neighbourhood: there is a start
            for p in range(len(parts))
        ]
        hint = best
        model.add(expression <= value)  # hold it for the phases after
    outputs: dict[str, Any] = {"status": dict(zip([name for name, _, _ in phases], statuses))}
    if not exact_units:
        outputs["units"] = {"disk": disk_unit, "network": network_unit}
    if best is not None and violations(problem, best):
        # only in units above 1: the relaxation's answer is above a real capacity; the heuristic's repair mends it
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
    order = ORDER[problem.options.objective]
    chosen = min(candidates, key=lambda sets: [criteria(problem, sets)[name] for name in order])  # ties: exact's
    outputs["kept_heuristic"] = chosen is not best
    values = objective_values(problem, chosen)
    # the model's bounds; a later phase's holds given the phases before it, so never above what is reached
    bounds = {name: min(bound, values[name]) for name, bound in bounds.items()}
    for name, bound in lower_bounds(problem).items():  # the bounds any placement obeys, also at scale
        if name in values:
            bounds[name] = max(bounds.get(name, 0.0), min(bound, values[name]))
    if not whole:
        outputs["neighbourhood"] = len(free)
    # a criterion is proven when CP-SAT proved it on the whole problem in its own numbers, or its bound is reached
    solved = dict(zip([name for name, _, _ in phases], statuses))
    proven_by_model = whole and exact_units and chosen is best
    optimal = all(
        (proven_by_model and solved.get(name) == "OPTIMAL") or values[name] <= bounds.get(name, -1.0) for name in order
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
        description="CP-SAT over seed 003's Basic Model: feasibility, then the objective's criteria "
        "lexicographically; proves optimality and reports bounds",
        solve=solve,
    )
)
