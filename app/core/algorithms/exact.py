"""The exact constraint model ("Constraint Based Kafka Partition Balancing"; Landau et al. Eq. 3-7),
solved with OR-Tools CP-SAT, lexicographically: fewest consumers first, then least Rscore against the
previous assignment with that many consumers.

Constraints: each partition on exactly one consumer; a consumer's summed rate within C (a partition
above C may only sit alone); optional anti-collocation sets (partitions that must not share a
consumer). Rates are scaled to integers of C/10^6, rounded up, and C down, so every answer of the
integer model respects the real capacity. The search is single-threaded with a deterministic time
budget, so the same input gives the same answer.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from app.core.algorithm import Algorithm, Placement, get_algorithm, register
from app.core.assign import solve
from app.core.bins import ConsumerPool
from app.core.errors import AssignmentError
from app.core.model import Problem, sorted_consumers

RESOLUTION = 10**6  # integer units per capacity
MAX_VARIABLES = 200_000


class PartitionRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topic: str
    partition: int


class ExactParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    time_limit_ms: int = Field(1000, ge=10, le=600_000, description="search budget for both phases together")
    anti_collocation: list[list[PartitionRef]] = Field(
        default_factory=list, description="sets of partitions no two of which may share a consumer"
    )


def place(problem: Problem, params: ExactParams) -> Placement:
    from ortools.sat.python import cp_model

    n = problem.size
    if n == 0:
        return Placement({}, {"optimal": True, "status": "OPTIMAL"})
    heuristic = solve(problem, get_algorithm("bfd"), None)  # an upper bound and a first solution
    index = problem.index
    sets = []
    for members in params.anti_collocation:
        missing = [f"{m.topic}/{m.partition}" for m in members if (m.topic, m.partition) not in index]
        if missing:
            raise AssignmentError("invalid_parameter", f"anti_collocation names unknown partitions: {', '.join(missing)}.")
        sets.append([index[m.topic, m.partition] for m in members])
    # The heuristic ignores anti-collocation: room for splitting each set apart.
    bins = _bins(problem, heuristic, extra=min(n, sum(len(members) - 1 for members in sets)))
    position = {consumer: b for b, consumer in enumerate(bins)}
    if n * len(bins) > MAX_VARIABLES:
        raise AssignmentError(
            "too_large_for_exact",
            f"{n} partitions × {len(bins)} candidate consumers is beyond the exact model ({MAX_VARIABLES} variables); "
            "use a heuristic such as mwf or bfd.",
        )
    capacity = RESOLUTION
    weight = [math.ceil(rate / problem.capacity * RESOLUTION - 1e-9) for rate in problem.rates]
    model = cp_model.CpModel()
    x = {(j, b): model.NewBoolVar(f"x{j}_{b}") for j in range(n) for b in range(len(bins))}
    used = [model.NewBoolVar(f"y{b}") for b in range(len(bins))]
    for j in range(n):
        model.AddExactlyOne(x[j, b] for b in range(len(bins)))
    small = [j for j in range(n) if weight[j] <= capacity]
    for b in range(len(bins)):
        model.Add(sum(weight[j] * x[j, b] for j in small) <= capacity * used[b])
        for j in range(n):
            model.AddImplication(x[j, b], used[b])
            if weight[j] > capacity:  # an oversized partition sits alone
                model.Add(sum(x[i, b] for i in range(n) if i != j) == 0).OnlyEnforceIf(x[j, b])
        for members in sets:
            model.AddAtMostOne(x[j, b] for j in members)
    fresh = [b for b, consumer in enumerate(bins) if consumer not in problem.previous]
    for a, b in zip(fresh, fresh[1:]):  # fresh consumers are interchangeable: use them in order
        model.AddImplication(used[b], used[a])
    for j, consumer in enumerate(heuristic.owner):
        model.AddHint(x[j, position[consumer]], 1)

    budget = params.time_limit_ms / 1000
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0

    def run(share: float) -> int:
        solver.parameters.max_deterministic_time = budget * share
        solver.parameters.max_time_in_seconds = 2 * budget * share + 1
        return solver.Solve(model)

    # Phase 1: fewest consumers.
    model.Minimize(sum(used))
    status = run(0.6)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _fallback(heuristic, solver.StatusName(status))
    consumers = round(solver.ObjectiveValue())
    consumers_bound = math.ceil(solver.BestObjectiveBound() - 1e-9)
    phase1_optimal = status == cp_model.OPTIMAL
    # Phase 2: with that many consumers, the least migrated rate (Rscore · C).
    model.ClearHints()
    for var in x.values():
        model.AddHint(var, solver.Value(var))
    model.Add(sum(used) == consumers)
    owner = problem.previous_owner
    kept = [x[j, position[owner[j]]] for j in range(n) if owner[j] in position]
    kept_weight = [weight[j] for j in range(n) if owner[j] in position]
    movable = sum(weight[j] for j in range(n) if owner[j] is not None)
    model.Minimize(movable - sum(w * v for w, v in zip(kept_weight, kept)))
    status2 = run(0.4)
    if status2 not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _fallback(heuristic, solver.StatusName(status2))
    assignment: dict[str, list[int]] = {}
    for (j, b), var in x.items():
        if solver.Value(var):
            assignment.setdefault(bins[b], []).append(j)
    rscore_bound = max(0.0, solver.BestObjectiveBound() / RESOLUTION)
    found = solver.ObjectiveValue() / RESOLUTION
    optimal = phase1_optimal and status2 == cp_model.OPTIMAL
    return Placement(
        {c: sorted(held, key=problem.keys.__getitem__) for c, held in assignment.items()},
        {
            "optimal": optimal,
            "status": f"{'OPTIMAL' if phase1_optimal else 'FEASIBLE'}/{solver.StatusName(status2)}",
            "consumers_bound": consumers_bound,
            "consumers_gap": (consumers - consumers_bound) / consumers if consumers else 0.0,
            "rscore_bound": rscore_bound,
            "rscore_gap": (found - rscore_bound) / found if found > 0 else 0.0,
            "heuristic_consumers": heuristic.consumer_count,
        },
    )


def _bins(problem: Problem, heuristic, extra: int) -> list[str]:
    """Candidate consumers: the members, or the previous consumers, with the heuristic's consumers
    and fresh ids up to as many as the heuristic needed."""
    pool = ConsumerPool(problem.members)
    if problem.members is not None:
        wanted = list(pool.members or [])
    else:
        wanted = sorted_consumers({c for c, held in problem.previous_indices.items() if held} | set(heuristic.owner))
    bins = [pool.open(c) for c in wanted]
    while len(bins) < heuristic.bins_used + extra:
        bins.append(pool.open())
    return bins


def _fallback(heuristic, status: str) -> Placement:
    """No solution within the budget: the heuristic's, said plainly."""
    return Placement(dict(heuristic.assignment), {"optimal": False, "status": status, "fallback": "bfd"})


register(
    Algorithm(
        name="exact",
        description="Exact constraint model (CP-SAT): fewest consumers, then least Rscore; reports bound and gap.",
        place=place,
        params=ExactParams,
        source="Constraint Based Kafka Partition Balancing; Landau et al. Eq. 3-7 and 11",
    )
)
