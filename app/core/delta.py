"""Δ(k) = X(t_k) − X(t_{k−1}) (Eq. 9), the migrated partitions and the Rscore (Eq. 11)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.core.model import PartitionKey, Problem, sorted_consumers


@dataclass
class Delta:
    """The delta matrix, labelled, with its non-zero cells as (row, column, ±1).

    The full matrix has a row per old ∪ new consumer (id order) and a column per current partition
    (request order) then per partition that is gone. The sparse form keeps only the rows and
    columns that hold a non-zero cell: the same information, without 10^5 empty columns.
    """

    rows: list[str]
    columns: list[PartitionKey]
    cells: list[tuple[int, int, int]]

    def dense(self) -> list[list[int]]:
        matrix = [[0] * len(self.columns) for _ in self.rows]
        for row, column, value in self.cells:
            matrix[row][column] = value
        return matrix


def gone_partitions(problem: Problem) -> list[tuple[PartitionKey, str]]:
    """Partitions of the previous assignment that are no longer listed, with their old consumer."""
    index = problem.index
    return [(key, consumer) for consumer, keys in problem.previous.items() for key in keys if key not in index]


def dense_size(problem: Problem, owner: list[str]) -> int:
    """Cells of the full matrix, to refuse a dense delta that would not fit before building it."""
    rows = len(set(problem.previous).union(owner))
    return rows * (problem.size + len(gone_partitions(problem)))


def delta(problem: Problem, owner: list[str], full: bool = False) -> Delta:
    """Δ(k) between the previous assignment in `problem` and `owner[j]`, partition j's new consumer."""
    changes: list[tuple[PartitionKey, str | None, str | None]] = [
        (problem.keys[j], old, new) for j, (old, new) in enumerate(zip(problem.previous_owner, owner)) if old != new
    ]
    gone = gone_partitions(problem)
    changes.extend((key, consumer, None) for key, consumer in gone)
    if full:
        rows = sorted_consumers(set(problem.previous).union(owner))
        columns = problem.keys + [key for key, _ in gone]
        column = {key: c for c, key in enumerate(columns)}
    else:
        rows = sorted_consumers({c for _, old, new in changes for c in (old, new) if c is not None})
        columns = [key for key, _, _ in changes]
        column = {key: c for c, key in enumerate(columns)}
    row = {consumer: r for r, consumer in enumerate(rows)}
    cells: list[tuple[int, int, int]] = []
    for key, old, new in changes:
        if old is not None:
            cells.append((row[old], column[key], -1))
        if new is not None:
            cells.append((row[new], column[key], 1))
    return Delta(rows, columns, cells)


def migrated(problem: Problem, owner: list[str]) -> list[int]:
    """Partitions whose column holds both +1 and −1 (§IV-A): kept, but by another consumer."""
    return [j for j, (old, new) in enumerate(zip(problem.previous_owner, owner)) if old is not None and old != new]


def rscore(problem: Problem, moved: list[int]) -> float:
    """Rscore(k) = (1/C)·Σ_{j∈P_k} s_j(t_k), Eq. 11, over the current rates."""
    rates = problem.rates
    return math.fsum(rates[j] for j in moved) / problem.capacity
