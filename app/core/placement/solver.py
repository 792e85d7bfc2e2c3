"""The replica placement solvers' interface and registry, in the style of app/core/algorithm.py: a solver is a
name, a description, its source and a pure function from the problem to a solution. Each solver is one module
of this package that calls `register`; `SOLVER_MODULES` lists them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.core.errors import AssignmentError, ErrorCode
from app.core.placement.model import PlacementProblem

SOLVER_MODULES = ("heuristic", "exact")


@dataclass
class Solution:
    """Per partition, the broker indices of its replicas (in no particular order; `plan` orders them), whether
    the solver proved it optimal, and the lower bound of each objective it knows (objective name → value)."""

    sets: list[list[int]]
    optimal: bool
    bounds: dict[str, float] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Solver:
    name: str
    description: str
    solve: Callable[[PlacementProblem], Solution]
    source: str = ""


_REGISTRY: dict[str, Solver] = {}


def register(solver: Solver) -> Solver:
    if solver.name in _REGISTRY:
        raise ValueError(f"placement solver {solver.name!r} is registered twice")
    _REGISTRY[solver.name] = solver
    return solver


def solvers() -> dict[str, Solver]:
    """The registry, every solver module loaded."""
    for module in SOLVER_MODULES:
        importlib.import_module(f"{__package__}.{module}")
    return _REGISTRY


def get_solver(name: str) -> Solver:
    registry = solvers()
    try:
        return registry[name]
    except KeyError:
        known = sorted(registry)
        raise AssignmentError(
            ErrorCode.UNKNOWN_ALGORITHM,
            f"unknown placement solver {name!r}; choose one of: {', '.join(known)}.",
            {"solvers": known},
        ) from None
