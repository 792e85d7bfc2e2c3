"""Small instances for the tests of one algorithm: partitions ("t", 0..n-1) with the given rates."""

from __future__ import annotations

from app.core.algorithm import get_algorithm
from app.core.assign import Outcome, solve
from app.core.model import build_problem


def outcome_of(
    name: str, rates, capacity: float = 100.0, previous=None, members=None, lags=None, member_capacities=None, **params
) -> Outcome:
    """`name` on partitions t/0.. with these rates; `previous` maps consumers to partition numbers of t."""
    keys = [("t", p) for p in range(len(rates))]
    previous = {c: [("t", p) for p in held] for c, held in (previous or {}).items()}
    algorithm = get_algorithm(name)
    problem = build_problem(keys, rates, lags, capacity, previous, members, member_capacities)
    return solve(problem, algorithm, algorithm.parse_params(params))


def partitions_of(outcome: Outcome) -> dict[str, list[int]]:
    """consumer → sorted partition numbers."""
    return {c: sorted(outcome.problem.keys[j][1] for j in held) for c, held in outcome.assignment.items()}


def previous_of(outcome: Outcome) -> dict[str, list[tuple[str, int]]]:
    """The outcome as the previous assignment of the next rebalance."""
    keys = outcome.problem.keys
    return {c: [keys[j] for j in held] for c, held in outcome.assignment.items() if held}
