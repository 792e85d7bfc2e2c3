"""A migration budget for one rebalance: caps on the Rscore (Eq. 11) and on the number of partitions
that change consumer. Algorithms that honour it charge every move they make and make none it cannot
afford; a move that cannot be avoided (the partition's consumer is gone) is charged but always made."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.core.model import ROUNDING, Problem


class MigrationBudget(BaseModel):
    """Hard caps on what one rebalance may move (none by default)."""

    model_config = ConfigDict(extra="forbid")
    max_rscore: float | None = Field(None, ge=0, description="most migrated rate / C (Rscore, Eq. 11) to spend")
    max_moves: int | None = Field(None, ge=0, description="most partitions that may change consumer")


class Spending:
    """What a rebalance has spent of its budget."""

    def __init__(self, problem: Problem, budget: MigrationBudget) -> None:
        self.rates = problem.rates
        self.capacity = problem.capacity
        self.budget = budget
        # the Rscore cap as a rate, up to float rounding of the summed rates
        self.max_rate = None if budget.max_rscore is None else budget.max_rscore * problem.capacity * ROUNDING
        self.max_moves = budget.max_moves
        self.rate = 0.0
        self.moves = 0
        self.refused = 0  # moves the budget did not allow

    @property
    def limited(self) -> bool:
        return self.max_rate is not None or self.max_moves is not None

    def affords(self, j: int) -> bool:
        """Whether moving partition j stays within both caps."""
        if self.max_moves is not None and self.moves + 1 > self.max_moves:
            return False
        return self.max_rate is None or self.rate + self.rates[j] <= self.max_rate

    def within(self) -> bool:
        """Whether what is spent is within both caps."""
        if self.max_moves is not None and self.moves > self.max_moves:
            return False
        return self.max_rate is None or self.rate <= self.max_rate

    def spend(self, j: int) -> None:
        self.rate += self.rates[j]
        self.moves += 1

    def refuse(self) -> None:
        self.refused += 1

    def outputs(self) -> dict[str, Any]:
        return {
            "max_rscore": self.budget.max_rscore,
            "max_moves": self.budget.max_moves,
            "rscore": self.rate / self.capacity,
            "moves": self.moves,
            "refused_moves": self.refused,
        }
