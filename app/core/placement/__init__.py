"""Broker replica placement (seed 003): the problem (model), its solvers behind one registry (solver, heuristic,
exact) and the plan an operator applies (plan)."""

from __future__ import annotations

from app.core.placement.model import PlacementProblem
from app.core.placement.plan import Plan, plan_of
from app.core.placement.solver import get_solver


def place(problem: PlacementProblem, solver: str) -> Plan:
    """The plan of the named solver for the problem."""
    chosen = get_solver(solver)
    return plan_of(problem, chosen.name, chosen.solve(problem))
