"""Δ(k) = X(t_k) − X(t_{k−1}) (Eq. 9), the migrated partitions and the Rscore (Eq. 11)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.core.model import PartitionKey, Problem, sorted_consumers


@dataclass
class Delta:
    """The delta matrix, labelled. Rows: old ∪ new consumers in id order. Columns: the current
    partitions in request order, then the partitions that are gone. Cells: its non-zero entries."""

    rows: list[str]
    columns: list[PartitionKey]
    cells: list[tuple[int, int, int]]

    def dense(self) -> list[list[int]]:
        matrix = [[0] * len(self.columns) for _ in self.rows]
        for row, column, value in self.cells:
            matrix[row][column] = value
        return matrix

    @property
    def size(self) -> int:
        return len(self.rows) * len(self.columns)


def delta(problem: Problem, owner: list[str]) -> Delta:
    """`owner[j]` is partition j's consumer in the new assignment; the old one is in `problem`."""
    previous_owner = problem.previous_owner
    gone = [(key, consumer) for consumer, keys in problem.previous.items() for key in keys if key not in problem.index]
    rows = sorted_consumers(set(problem.previous) | set(owner))
    row = {consumer: r for r, consumer in enumerate(rows)}
    cells: list[tuple[int, int, int]] = []
    for j, (old, new) in enumerate(zip(previous_owner, owner)):
        if old != new:
            if old is not None:
                cells.append((row[old], j, -1))
            cells.append((row[new], j, 1))
    n = problem.size
    for g, (_, consumer) in enumerate(gone):
        cells.append((row[consumer], n + g, -1))
    return Delta(rows, problem.keys + [key for key, _ in gone], cells)


def migrated(problem: Problem, owner: list[str]) -> list[int]:
    """Partitions whose column holds both +1 and −1 (§IV-A): kept, but by another consumer."""
    return [j for j, (old, new) in enumerate(zip(problem.previous_owner, owner)) if old is not None and old != new]


def rscore(problem: Problem, moved: list[int]) -> float:
    """Rscore(k) = (1/C)·Σ_{j∈P_k} s_j(t_k), Eq. 11, over the current rates."""
    rates = problem.rates
    return math.fsum(rates[j] for j in moved) / problem.capacity
