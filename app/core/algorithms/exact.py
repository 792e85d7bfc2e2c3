"""The exact constraint model, solved with OR-Tools CP-SAT: fewest consumers first, then the least
Rscore against the previous assignment with that many consumers.

The model is the bin packing of Landau et al. (Eq. 3-7) with the constraints of "Constraint Based Kafka
Partition Balancing" (its Basic Model): a consumer's summed rate within C, each partition placed
once, no two partitions of an anti-collocation set on one consumer. A partition above its consumer's
capacity sits alone, as everywhere in groupfit. Rates are scaled to integers of C/10^6, rounded down, so
the integer model is a relaxation of the real one: its bounds are bounds of the real problem, and an
answer it finds is kept only if it respects the real capacities (else the feasible start is the answer).

Consumers of different sizes (`Problem.capacity_of`) are not interchangeable, so phase 1 then packs the
named candidates themselves, bins of one size used in id order.

Phase 1 (how many consumers) packs anonymous bins, so it breaks their symmetry (as that paper does: "capacities
may be interchanged ... to allow for membership symmetry"): the p-th largest partition goes into one of
the first p+1 bins, and bins are used in order. Phase 2 (which consumer) gives the bins their ids: the
previous consumers (or the members) first, fresh ids (ConsumerPool) only when they are all in use, and
minimizes the migrated rate (Eq. 11), starting from phase 1's packing named by overlap.

Determinism: one search worker, a fixed seed, and `time_limit_ms` spent as CP-SAT's deterministic time
(a count of work, about seconds of one current core), so the same input gives the same answer. Phase 1
may use 60% of it; phase 2 gets what phase 1 left. A wall clock stops each phase at twice its share: only
on a machine slow or busy enough to reach it can two runs differ.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left, bisect_right
from itertools import accumulate, pairwise
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.core.algorithm import Algorithm, Packing, register
from app.core.algorithms.any_fit import any_fit
from app.core.algorithms.naming import candidates, name_by_overlap
from app.core.algorithms.params import PartitionRef
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import Problem, within

RESOLUTION = 10**6  # integer units per capacity
MAX_VARIABLES = 200_000
PHASE1_SHARE = 0.6


class ExactParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    time_limit_ms: int = Field(1000, ge=10, le=600_000, description="search budget for both phases together")
    anti_collocation: list[list[PartitionRef]] = Field(
        default_factory=list, description="sets of partitions no two of which may share a consumer"
    )


def pack(problem: Problem, params: ExactParams) -> Packing:
    if problem.size == 0:
        return Packing({}, _outputs("OPTIMAL", 0, 0, "OPTIMAL", 0.0, 0.0, [0.0, 0.0], 0))
    sets = _anti_collocation(problem, params)
    heuristic = any_fit(problem, "best", decreasing=True).assignment  # an upper bound and a first packing
    weight = [math.floor(rate / problem.capacity * RESOLUTION) for rate in problem.rates]
    budget = params.time_limit_ms / 1000

    started = time.perf_counter()
    share = budget * PHASE1_SHARE
    if problem.uniform:
        status1, packing, bound1, spent1 = _fewest_consumers(problem, weight, sets, heuristic, share)
        labels, sizes = candidates(problem, len(packing)), None
    else:
        labels = candidates(problem, sum(1 for held in heuristic.values() if held))
        status1, packing, bound1, spent1 = _fewest_named(problem, weight, sets, heuristic, labels, share)
        sizes = [problem.capacity_of(c) for c in labels]
    middle = time.perf_counter()
    status2, assignment, moved, bound2 = _least_migration(
        problem, weight, sets, packing, labels, sizes, budget - min(spent1, share)
    )
    ended = time.perf_counter()
    return Packing(
        {c: sorted(held, key=problem.keys.__getitem__) for c, held in assignment.items()},
        _outputs(
            status1,
            sum(1 for held in packing if held),
            bound1,
            status2,
            moved,
            bound2,
            [middle - started, ended - middle],
            sum(1 for held in heuristic.values() if held),
        ),
    )


def _outputs(
    status1: str,
    consumers: int,
    bound1: int,
    status2: str,
    moved: float,
    bound2: float,
    phase_times: list[float],
    heuristic_consumers: int,
) -> dict[str, Any]:
    """Whether both phases are proven, each phase's bound and relative gap, and wall-clock seconds."""
    return {
        "optimal": status1 == "OPTIMAL" and status2 == "OPTIMAL",
        "status": {"consumers": status1, "rscore": status2},
        "consumers_bound": bound1,
        "consumers_gap": (consumers - bound1) / consumers if consumers else 0.0,
        "rscore_bound": bound2,
        "rscore_gap": max(0.0, moved - bound2) / moved if moved > 0 else 0.0,
        "phase_times": {"consumers_s": round(phase_times[0], 4), "rscore_s": round(phase_times[1], 4)},
        "heuristic_consumers": heuristic_consumers,
    }


def _anti_collocation(problem: Problem, params: ExactParams) -> list[list[int]]:
    index = problem.index
    sets = []
    for members in params.anti_collocation:
        missing = [f"{m.topic}/{m.partition}" for m in members if (m.topic, m.partition) not in index]
        if missing:
            raise AssignmentError(
                ErrorCode.INVALID_PARAMETER, f"anti_collocation names unknown partitions: {', '.join(missing)}."
            )
        sets.append(sorted({index[m.topic, m.partition] for m in members}))
    return [members for members in sets if len(members) > 1]


def _solver(seconds: float):
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = seconds
    solver.parameters.max_time_in_seconds = 2 * seconds + 0.05  # only on a slow or busy machine
    return solver


def _check_size(problem: Problem, bins: int) -> None:
    if problem.size * bins > MAX_VARIABLES:
        raise AssignmentError(
            ErrorCode.TOO_LARGE_FOR_EXACT,
            f"{problem.size} partitions × {bins} candidate consumers is beyond the exact model ({MAX_VARIABLES} "
            "variables); use a heuristic such as mwf or bfd.",
        )


def _fewest_consumers(
    problem: Problem, weight: list[int], sets: list[list[int]], heuristic: dict[str, list[int]], seconds: float
) -> tuple[str, list[list[int]], int, float]:
    """Phase 1, Eq. 3-7 on anonymous bins: (status, packing, lower bound, deterministic time used). When
    the solver finds nothing within its budget, the status is UNKNOWN and the packing the heuristic's."""
    from ortools.sat.python import cp_model

    capacity = RESOLUTION
    # Partitions above C each take a bin alone (no constraint can join them to another): only the
    # others are packed.
    oversized = [not within(rate, problem.capacity) for rate in problem.rates]
    alone = [[j] for j in problem.decreasing_order if oversized[j]]
    order = [j for j in problem.decreasing_order if not oversized[j]]
    packed = set(order)
    sets = [kept for kept in ([j for j in members if j in packed] for members in sets) if len(kept) > 1]
    position = {j: p for p, j in enumerate(order)}
    # A feasible packing to start from (and the upper bound), its bins ordered as the symmetry breaking wants.
    start = _split_apart(_heuristic_packing(heuristic, packed), sets)
    start.sort(key=lambda held: min(position[j] for j in held))
    upper = len(start)
    lower = max(
        martello_toth_l2([weight[j] for j in order], capacity), max(map(len, sets), default=0), min(1, len(order))
    )
    if upper <= lower:
        return "OPTIMAL", alone + start, len(alone) + lower, 0.0
    _check_size(problem, upper)
    model = cp_model.CpModel()
    # Symmetry breaking: the p-th largest partition in one of bins 0..p.
    x = {(j, b): model.new_bool_var(f"x{j}_{b}") for p, j in enumerate(order) for b in range(min(p + 1, upper))}
    used = [model.new_bool_var(f"y{b}") for b in range(upper)]
    for j in order:
        model.add_exactly_one(x[j, b] for b in range(min(position[j] + 1, upper)))
    for b in range(upper):
        inside = [j for j in order if position[j] >= b]
        model.add(sum(weight[j] * x[j, b] for j in inside) <= capacity * used[b])  # Eq. 4
        for j in inside:
            model.add_implication(x[j, b], used[b])  # also for partitions of rate 0
        for members in sets:
            model.add_at_most_one(x[j, b] for j in members if (j, b) in x)
    for b in range(1, upper):
        model.add_implication(used[b], used[b - 1])  # bins in use form a prefix
    model.add(sum(used) >= lower)
    _hint(model, x, used, {(j, b) for b, held in enumerate(start) for j in held})
    model.minimize(sum(used))  # Eq. 3
    solver = _solver(seconds)
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return "UNKNOWN", alone + start, len(alone) + lower, solver.deterministic_time
    packing: list[list[int]] = [[] for _ in range(upper)]
    for (j, b), var in x.items():
        if solver.value(var):
            packing[b].append(j)
    packing = alone + [held for held in packing if held]
    bound = len(alone) + max(lower, math.ceil(solver.best_objective_bound - 1e-9))
    if not _within_capacities(problem, packing, [problem.capacity] * len(packing)):
        packing = alone + start  # the rounded-down rates fit where the real ones do not
    proven = status == cp_model.OPTIMAL or len(packing) == bound
    return "OPTIMAL" if proven else "FEASIBLE", packing, bound, solver.deterministic_time


def _within_capacities(problem: Problem, packing: list[list[int]], capacities: list[float]) -> bool:
    """Whether every bin holding more than one partition is within its real capacity."""
    rates = problem.rates
    return all(
        len(held) < 2 or within(math.fsum(rates[j] for j in held), capacity)
        for held, capacity in zip(packing, capacities)
    )


def _units(problem: Problem, labels: list[str]) -> list[int]:
    """Each candidate's capacity in the integer units of the weights (C is RESOLUTION)."""
    return [math.floor(problem.capacity_of(c) / problem.capacity * RESOLUTION + 1e-6) for c in labels]


def _named_model(problem: Problem, weight: list[int], sets: list[list[int]], labels: list[str]):
    """Eq. 4-7 over named candidates of their own capacities: (model, x[j, b], used[b]). A partition above
    a candidate's capacity may sit on it only alone."""
    from ortools.sat.python import cp_model

    _check_size(problem, len(labels))
    n, units = problem.size, _units(problem, labels)
    model = cp_model.CpModel()
    x = {(j, b): model.new_bool_var(f"x{j}_{b}") for j in range(n) for b in range(len(labels))}
    used = [model.new_bool_var(f"y{b}") for b in range(len(labels))]
    for j in range(n):
        model.add_exactly_one(x[j, b] for b in range(len(labels)))
    for b, capacity in enumerate(units):
        small = [j for j in range(n) if weight[j] <= capacity]
        model.add(sum(weight[j] * x[j, b] for j in small) <= capacity * used[b])
        for j in range(n):
            model.add_implication(x[j, b], used[b])
            if weight[j] > capacity:
                model.add(sum(x[i, b] for i in range(n) if i != j) == 0).OnlyEnforceIf(x[j, b])
        for members in sets:
            model.add_at_most_one(x[j, b] for j in members)
    return model, x, used


def _in_order(model, used: list[Any], groups: list[list[int]]) -> None:
    """Interchangeable candidates (each group) are used in order: breaks their symmetry."""
    for group in groups:
        for a, b in pairwise(group):
            model.add_implication(used[b], used[a])


def _same_size(problem: Problem, labels: list[str], among: list[int]) -> list[list[int]]:
    """The candidates of `among` grouped by capacity, each group in id order."""
    groups: dict[float, list[int]] = {}
    for b in among:
        groups.setdefault(problem.capacity_of(labels[b]), []).append(b)
    return list(groups.values())


def _fewest_named(
    problem: Problem,
    weight: list[int],
    sets: list[list[int]],
    heuristic: dict[str, list[int]],
    labels: list[str],
    seconds: float,
) -> tuple[str, list[list[int]], int, float]:
    """Phase 1 for consumers of different sizes, on the candidates themselves: (status, packing indexed
    like `labels`, lower bound, deterministic time used). The lower bound: the fewest candidates whose
    capacities, largest first, hold the total rate."""
    from ortools.sat.python import cp_model

    slot = {c: b for b, c in enumerate(labels)}
    start: list[list[int]] = [[] for _ in labels]
    for consumer, held in heuristic.items():
        start[slot[consumer]].extend(held)
    upper = sum(1 for held in start if held)
    total, covered, lower = sum(weight), 0, 0
    for capacity in sorted(_units(problem, labels), reverse=True):
        if covered >= total:
            break
        covered, lower = covered + capacity, lower + 1
    lower = max(lower, max(map(len, sets), default=0))
    if upper <= lower:
        return "OPTIMAL", start, upper, 0.0
    model, x, used = _named_model(problem, weight, sets, labels)
    _in_order(model, used, _same_size(problem, labels, list(range(len(labels)))))
    model.add(sum(used) >= lower)
    model.add(sum(used) <= upper)
    _hint(model, x, used, {(j, b) for b, held in enumerate(start) for j in held})
    model.minimize(sum(used))
    solver = _solver(seconds)
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return "UNKNOWN", start, lower, solver.deterministic_time
    packing: list[list[int]] = [[] for _ in labels]
    for (j, b), var in x.items():
        if solver.value(var):
            packing[b].append(j)
    bound = max(lower, math.ceil(solver.best_objective_bound - 1e-9))
    if not _within_capacities(problem, packing, [problem.capacity_of(c) for c in labels]):
        packing = start
    count = sum(1 for held in packing if held)
    proven = (status == cp_model.OPTIMAL and packing is not start) or count == bound
    return "OPTIMAL" if proven else "FEASIBLE", packing, bound, solver.deterministic_time


def _hint(model, x: dict[tuple[int, int], Any], used: list[Any], chosen: set[tuple[int, int]]) -> None:
    """A complete hint (every variable), which CP-SAT takes as its first solution at once."""
    for key, var in x.items():
        model.add_hint(var, key in chosen)
    busy = {b for _, b in chosen}
    for b, var in enumerate(used):
        model.add_hint(var, b in busy)


def martello_toth_l2(weights: list[int], capacity: int) -> int:
    """The L2 lower bound of bin packing (Martello and Toth 1990), at least ⌈Σw/C⌉, for weights ≤ C: for
    each threshold k ≤ C/2, the items above C−k need a bin each, so do those in (C/2, C−k], and the
    items in [k, C/2] fill what the latter leave free before they need bins of their own."""
    if not weights:
        return 0
    ascending = sorted(weights)
    prefix = [0, *accumulate(ascending)]
    n, half = len(ascending), capacity / 2
    above_half = bisect_right(ascending, half)  # index of the first item above C/2
    best = math.ceil(prefix[n] / capacity)
    for k in [0, *sorted(set(ascending[:above_half]))]:
        big = n - bisect_right(ascending, capacity - k)  # J1: no item of [k, C/2] fits beside them
        first_mid = above_half
        last_mid = n - big  # J2 = ascending[first_mid:last_mid]
        middle, middle_sum = last_mid - first_mid, prefix[last_mid] - prefix[first_mid]
        first_small = bisect_left(ascending, k)  # J3 = ascending[first_small:above_half]
        small_sum = prefix[above_half] - prefix[first_small]
        best = max(best, big + middle + max(0, math.ceil((small_sum - (middle * capacity - middle_sum)) / capacity)))
    return best


def _heuristic_packing(heuristic: dict[str, list[int]], inside: set[int]) -> list[list[int]]:
    """The heuristic's bins restricted to the partitions in `inside`."""
    return [kept for kept in ([j for j in held if j in inside] for held in heuristic.values()) if kept]


def _split_apart(packing: list[list[int]], sets: list[list[int]]) -> list[list[int]]:
    """The packing with every anti-collocation conflict undone: in each bin a partition stays unless it
    shares a set with one that stayed, else it gets a bin alone (loads only fall, capacity still holds)."""
    sets_of: dict[int, set[int]] = {}
    for s, members in enumerate(sets):
        for j in members:
            sets_of.setdefault(j, set()).add(s)
    result: list[list[int]] = []
    for held in packing:
        kept: list[int] = []
        seen: set[int] = set()  # the sets a kept partition belongs to
        for j in held:
            mine = sets_of.get(j, set())
            if mine & seen:
                result.append([j])
            else:
                kept.append(j)
                seen |= mine
        result.append(kept)
    return result


def _least_migration(
    problem: Problem,
    weight: list[int],
    sets: list[list[int]],
    packing: list[list[int]],
    labels: list[str],
    sizes: list[float] | None,
    seconds: float,
) -> tuple[str, dict[str, list[int]], float, float]:
    """Phase 2: as many consumers as phase 1's packing uses, named from the candidates `labels`, the
    least migrated rate (Rscore · C in units of C): (status, assignment, migrated rate over C, its lower
    bound). `sizes`: the capacity each bin of the packing was packed for (None: all C)."""
    from ortools.sat.python import cp_model

    count = sum(1 for held in packing if held)
    owner = problem.previous_owner
    slot = {consumer: b for b, consumer in enumerate(labels)}
    start = name_by_overlap(problem, packing, labels, sizes)
    movable = sum(weight[j] for j in range(problem.size) if owner[j] is not None)

    def moved_by(assignment: dict[str, list[int]]) -> float:
        return (movable - sum(weight[j] for c, held in assignment.items() for j in held if owner[j] == c)) / RESOLUTION

    if not any(consumer in slot for consumer in owner):  # nothing can stay: every naming is as good
        return "OPTIMAL", start, movable / RESOLUTION, movable / RESOLUTION
    model, x, used = _named_model(problem, weight, sets, labels)
    model.add(sum(used) == count)
    clean = [b for b, consumer in enumerate(labels) if not problem.previous_indices.get(consumer)]
    _in_order(model, used, _same_size(problem, labels, clean))  # ids that held nothing are interchangeable
    _hint(model, x, used, {(j, slot[consumer]) for consumer, held in start.items() for j in held})
    kept = [(weight[j], x[j, slot[c]]) for j, c in enumerate(owner) if c is not None and c in slot]
    model.minimize(movable - sum(w * var for w, var in kept))  # Eq. 11 times C
    solver = _solver(seconds)
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):  # the named phase 1 packing is an answer too
        return solver.status_name(status), start, moved_by(start), 0.0
    assignment: dict[str, list[int]] = {}
    for (j, b), var in x.items():
        if solver.value(var):
            assignment.setdefault(labels[b], []).append(j)
    bound = max(0, math.ceil(solver.best_objective_bound - 1e-9))
    if not _within_capacities(problem, list(assignment.values()), [problem.capacity_of(c) for c in assignment]):
        return "FEASIBLE", start, moved_by(start), bound / RESOLUTION
    moved = round(solver.objective_value)
    proven = status == cp_model.OPTIMAL or moved <= bound
    return "OPTIMAL" if proven else "FEASIBLE", assignment, moved / RESOLUTION, min(bound, moved) / RESOLUTION


register(
    Algorithm(
        name="exact",
        description="Exact constraint model (CP-SAT): fewest consumers, then least Rscore; reports bound and gap.",
        pack=pack,
        params=ExactParams,
        source="Constraint Based Kafka Partition Balancing (Basic Model); Landau et al. Eq. 3-7 and 11",
    )
)
