"""One rebalance end to end: request → problem → algorithm → assignment, delta, moves, Rscore.

`solve` is what the CLI, the service and the replay share; `answer_document` gives the JSON
shape of `groupfit assign` and `POST /v1/assign`.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core.algorithm import Algorithm, get_algorithm
from app.core.delta import Delta, delta, dense_size, migrated, rscore
from app.core.errors import AssignmentError
from app.core.model import (
    PartitionKey,
    Problem,
    build_problem,
    capacity_from_throughput,
    consumer_sort_key,
    sorted_consumers,
    within,
)


@dataclass
class Outcome:
    algorithm: str
    problem: Problem
    assignment: dict[str, list[int]]
    owner: list[str]
    loads: dict[str, float]
    moved: list[int]
    rscore: float
    outputs: dict[str, Any]
    bins_used: int

    @property
    def consumer_count(self) -> int:
        """z(k): consumers that hold at least one partition."""
        return sum(1 for held in self.assignment.values() if held)

    @property
    def recommended_consumers(self) -> int | None:
        """In member mode, how many consumers the algorithm wanted (it may differ from the members)."""
        return self.bins_used if self.problem.members is not None else None

    def overloaded_members(self) -> list[str]:
        if self.problem.members is None:
            return []
        capacity = self.problem.capacity
        return [c for c in sorted_consumers(self.assignment) if not within(self.loads[c], capacity)]

    def overloaded_partitions(self) -> list[int]:
        """Partitions whose rate alone exceeds C: each still has a consumer."""
        capacity = self.problem.capacity
        return [j for j, rate in enumerate(self.problem.rates) if rate > capacity]

    def delta(self, full: bool = False) -> Delta:
        return delta(self.problem, self.owner, full)

    def dense_delta_size(self) -> int:
        return dense_size(self.problem, self.owner)


def solve(problem: Problem, algorithm: Algorithm, params: Any) -> Outcome:
    placement = algorithm.place(problem, params)
    assignment = {c: held for c, held in placement.assignment.items() if held}
    bins_used = len(assignment)
    if problem.members is not None:
        assignment = _fold_into_members(problem, assignment)
    owner, loads = _owners_and_loads(problem, assignment, algorithm.name)
    moved = migrated(problem, owner)
    return Outcome(
        algorithm=algorithm.name,
        problem=problem,
        assignment=assignment,
        owner=owner,
        loads=loads,
        moved=moved,
        rscore=rscore(problem, moved),
        outputs=placement.outputs,
        bins_used=bins_used,
    )


def _fold_into_members(problem: Problem, assignment: dict[str, list[int]]) -> dict[str, list[int]]:
    """Member mode: bins beyond the members go, largest partition first, to the member with the most
    slack (ties to the lowest id); members the algorithm left unused get empty assignments."""
    members = sorted_consumers(problem.members or [])
    result = {m: list(assignment.get(m, ())) for m in members}
    surplus = [j for c, held in assignment.items() if c not in result for j in held]
    if surplus:
        rates = problem.rates
        heap = [(sum(map(rates.__getitem__, result[m])), consumer_sort_key(m), m) for m in members]
        heapq.heapify(heap)
        for j in problem.decreasing(surplus):
            load, key, member = heapq.heappop(heap)
            result[member].append(j)
            heapq.heappush(heap, (load + rates[j], key, member))
    return result


def _owners_and_loads(
    problem: Problem, assignment: dict[str, list[int]], name: str
) -> tuple[list[str], dict[str, float]]:
    """owner[j]: partition j's consumer, and each consumer's load. An algorithm that places a
    partition twice or never is a bug, not bad input."""
    owner: list[str | None] = [None] * problem.size
    loads: dict[str, float] = {}
    rates = problem.rates
    placed = 0
    for consumer, held in assignment.items():
        placed += len(held)
        load = 0.0
        for j in held:
            owner[j] = consumer
            load += rates[j]
        loads[consumer] = load
    if placed != problem.size or None in owner:
        raise RuntimeError(f"algorithm {name!r} did not place every partition exactly once")
    return owner, loads  # type: ignore[return-value]


# -- JSON documents ------------------------------------------------------------------------


def _key_doc(key: PartitionKey) -> dict[str, Any]:
    return {"topic": key[0], "partition": key[1]}


def answer_document(outcome: Outcome, dense: bool = False) -> dict[str, Any]:
    """The answer of `groupfit assign` and `POST /v1/assign`. The delta is sparse (only rows and
    columns with a non-zero cell) unless `dense`, which labels every row and column and adds `matrix`."""
    problem = outcome.problem
    keys, rates, capacity = problem.keys, problem.rates, problem.capacity
    key_docs = [{"topic": t, "partition": p} for t, p in keys]
    consumers = sorted_consumers(outcome.assignment)
    d = outcome.delta(full=dense)
    delta_doc: dict[str, Any] = {
        "rows": d.rows,
        "columns": [_key_doc(key) for key in d.columns],
        "cells": [list(cell) for cell in d.cells],
    }
    if dense:
        delta_doc["matrix"] = d.dense()
    previous_owner, owner, loads = problem.previous_owner, outcome.owner, outcome.loads
    return {
        "algorithm": outcome.algorithm,
        "capacity": capacity,
        "assignment": {c: [key_docs[j] for j in outcome.assignment[c]] for c in consumers},
        "consumers": [
            {
                "id": c,
                "load": loads[c],
                "utilization": loads[c] / capacity,
                "partition_count": len(outcome.assignment[c]),
            }
            for c in consumers
        ],
        "moves": [
            {"topic": keys[j][0], "partition": keys[j][1], "from": previous_owner[j], "to": owner[j], "rate": rates[j]}
            for j in outcome.moved
        ],
        "delta": delta_doc,
        "rscore": outcome.rscore,
        "consumer_count": outcome.consumer_count,
        "lower_bound": problem.lower_bound,
        "overloaded_partitions": [
            {"topic": keys[j][0], "partition": keys[j][1], "rate": rates[j], "consumer": owner[j]}
            for j in outcome.overloaded_partitions()
        ],
        "overloaded_members": outcome.overloaded_members(),
        "recommended_consumers": outcome.recommended_consumers,
        "outputs": outcome.outputs,
    }


def _invalid(message: str) -> AssignmentError:
    return AssignmentError("invalid_request", message)


def _partition_key(item: Any, where: str) -> PartitionKey:
    if not isinstance(item, Mapping):
        raise _invalid(f"{where} must be an object with 'topic' and 'partition'.")
    topic, partition = item.get("topic"), item.get("partition")
    if not isinstance(topic, str) or not topic:
        raise _invalid(f"{where}.topic must be a non-empty string.")
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise _invalid(f"{where}.partition must be an integer at least 0.")
    return (topic, partition)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AssignmentError("invalid_rate", f"{where} must be a number, got {value!r}.")
    return value


def capacity_of(doc: Mapping[str, Any]) -> float:
    """`capacity`, or the throughput form `consumer_throughput` with `iteration_s` and `rebalance_s`."""
    if doc.get("capacity") is not None:
        capacity = doc["capacity"]
        if isinstance(capacity, bool) or not isinstance(capacity, (int, float)):
            raise AssignmentError("invalid_capacity", f"capacity must be a number above 0, got {capacity!r}.")
        return capacity
    if doc.get("consumer_throughput") is not None:
        return capacity_from_throughput(
            doc["consumer_throughput"], doc.get("iteration_s", 30.0), doc.get("rebalance_s", 5.0)
        )
    raise AssignmentError(
        "invalid_capacity",
        "give 'capacity' (rate per consumer) or 'consumer_throughput' (with iteration_s, rebalance_s).",
    )


def problem_from_document(doc: Mapping[str, Any]) -> Problem:
    """A request of plain JSON values (as `json.load` gives it) → a validated problem."""
    partitions = doc.get("partitions")
    if not isinstance(partitions, list):
        raise _invalid("'partitions' must be a list of {topic, partition, rate, lag}.")
    keys: list[PartitionKey] = []
    rates: list[float] = []
    lags: list[float | None] = []
    for i, item in enumerate(partitions):
        keys.append(_partition_key(item, f"partitions[{i}]"))
        rates.append(_number(item.get("rate"), f"partitions[{i}].rate"))
        lag = item.get("lag")
        lags.append(None if lag is None else _number(lag, f"partitions[{i}].lag"))
    previous_raw = doc.get("previous") or {}
    if not isinstance(previous_raw, Mapping):
        raise AssignmentError("invalid_previous", "'previous' must map consumer ids to lists of partitions.")
    previous: dict[str, list[PartitionKey]] = {}
    for consumer, held in previous_raw.items():
        if not isinstance(held, list):
            raise AssignmentError("invalid_previous", f"previous[{consumer!r}] must be a list of partitions.")
        previous[consumer] = [_partition_key(item, f"previous[{consumer!r}][{i}]") for i, item in enumerate(held)]
    members = doc.get("members")
    if members is not None and not isinstance(members, list):
        raise AssignmentError("invalid_members", "'members' must be a list of consumer ids.")
    return build_problem(keys, rates, lags, capacity_of(doc), previous, members)


def assign_document(doc: Mapping[str, Any], dense: bool = False) -> dict[str, Any]:
    """`groupfit assign`: a whole request document in, the answer document out."""
    name = doc.get("algorithm")
    if not isinstance(name, str):
        raise _invalid("'algorithm' must name a registered algorithm (see `groupfit algorithms`).")
    algorithm = get_algorithm(name)
    params = algorithm.parse_params(doc.get("params"))
    return answer_document(solve(problem_from_document(doc), algorithm, params), dense=dense)
