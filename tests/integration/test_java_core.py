"""The Java core (clients/java, package io.groupfit.kafka.core) against the Python reference on random instances:
the same assignment (each consumer's partitions, in the order placed), the same Rscore, moves, bins used and
outputs (the migration budget's, least-loaded's), for every algorithm the Java core runs.

The instances come from a fixed seed: integer rates (ties everywhere), partitions above the capacity, members of
mixed capacities or none (the algorithm sizes the group), ids in natural order with leading zeros and a member
named like a surplus bin, previous assignments with gone partitions, gone consumers and new ones, budgets.
`CoreDriver` (a test program of the Maven project) answers each instance, one JSON line each way.
"""

from __future__ import annotations

import json
import random
import subprocess
from typing import Any

import pytest

from app.core.algorithm import get_algorithm
from app.core.assign import solve
from app.core.errors import AssignmentError
from app.core.model import build_problem
from app.local.java_clients import JavaBuild
from app.local.kafka import java

pytestmark = pytest.mark.integration

SEED = 20260428
INSTANCES = 3000
ALGORITHMS = ["mwf"] * 6 + ["mbf", "mwfp", "mbfp", "bfd", "bf", "wf", "wfd", "nf", "nfd", "least-loaded"]
IDS = ["c0", "c1", "c2", "c3", "c10", "c07", "m1", "m2", "member-2", "member-10", "surplus-0", "surplus-1", "x", "éa"]


def instance(rng: random.Random) -> dict[str, Any]:
    capacity = rng.choice([10, 20, 50, 100, 37.5])
    topics = rng.sample(["orders", "payments", "b", "t10", "t9"], rng.randint(1, 3))
    large = rng.random() < 0.05  # longer than the sorts' and heaps' short paths
    n = rng.randint(100, 600) if large else rng.randint(0, 40)
    per_topic = 600 if large else 30
    integer = rng.random() < 0.7
    keys = rng.sample([(t, p) for t in topics for p in range(per_topic)], min(n, per_topic * len(topics)))
    partitions = []
    for topic, number in keys:
        if integer:
            rate: float = rng.choice([0, 1, 2, 3, 5, 8, 10, 10, 15, 20]) * capacity / 20
        else:
            rate = round(rng.uniform(0, capacity), 3)
        if rng.random() < 0.05:
            rate = capacity * rng.choice([1.5, 2, 1]) + (0 if integer else 0.25)  # above (or at) C
        entry: dict[str, Any] = {"topic": topic, "partition": number, "rate": rate}
        if rng.random() < 0.5:
            entry["lag"] = float(rng.randint(0, 40) * capacity)
        partitions.append(entry)
    ids = rng.sample(IDS, rng.randint(1, 8)) + ([f"m{i:02d}" for i in range(rng.randint(10, 60))] if large else [])
    members: list[Any] | None = None
    if rng.random() < 0.75:
        members = []
        for m in rng.sample(ids, rng.randint(1, len(ids))):
            if rng.random() < 0.35:
                members.append({"id": m, "capacity": capacity * rng.choice([0.5, 1, 2, 3])})
            else:
                members.append(m)
    previous: dict[str, list[dict[str, Any]]] = {}
    held_by = rng.sample(ids, rng.randint(0, len(ids)))  # some not members: gone
    if held_by:
        for topic, number in keys:
            if rng.random() < 0.8:
                previous.setdefault(rng.choice(held_by), []).append({"topic": topic, "partition": number})
        for consumer in held_by:
            if rng.random() < 0.2:  # a partition that is gone
                previous.setdefault(consumer, []).append({"topic": "gone", "partition": held_by.index(consumer)})
    algorithm = rng.choice(ALGORITHMS)
    params: dict[str, Any] = {}
    if algorithm.startswith("m") and rng.random() < 0.5:
        if rng.random() < 0.7:
            params["max_rscore"] = rng.choice([0, 0.1, 0.5, 1, 2.5])
        if rng.random() < 0.5:
            params["max_moves"] = rng.randint(0, 8)
    if algorithm == "least-loaded":
        params = rng.choice(
            [{}, {"w_sla": 2.0}, {"f_up": 0.8, "f_down": 0.3, "rebalance_s": 0.0}, {"plan_rebalance_lag": False}]
        )
    return {
        "algorithm": algorithm,
        "params": params,
        "capacity": capacity,
        "partitions": partitions,
        "members": members,
        "previous": previous,
    }


def reference(case: dict[str, Any]) -> dict[str, Any]:
    """The Python reference's answer (app.core.assign.solve), in the driver's form."""
    members = case["members"]
    try:
        problem = build_problem(
            [(p["topic"], p["partition"]) for p in case["partitions"]],
            [p["rate"] for p in case["partitions"]],
            [p.get("lag") for p in case["partitions"]],
            case["capacity"],
            {c: [(r["topic"], r["partition"]) for r in held] for c, held in case["previous"].items()},
            None if members is None else [m if isinstance(m, str) else m["id"] for m in members],
            None if members is None else {m["id"]: m["capacity"] for m in members if not isinstance(m, str)},
        )
        algorithm = get_algorithm(case["algorithm"])
        outcome = solve(problem, algorithm, algorithm.parse_params(case["params"]))
    except AssignmentError as error:
        return {"error": error.code}
    return {
        "assignment": {c: [list(problem.keys[j]) for j in held] for c, held in outcome.assignment.items()},
        "rscore": outcome.rscore,
        "moves": len(outcome.moved),
        "bins_used": outcome.bins_used,
        "outputs": outcome.outputs,
    }


def test_the_java_core_equals_the_reference_on_random_instances(java_build: JavaBuild):
    rng = random.Random(SEED)
    cases = [instance(rng) for _ in range(INSTANCES)]
    done = subprocess.run(
        [java(), "-cp", java_build.classpath, "io.groupfit.kafka.core.CoreDriver"],
        input="".join(json.dumps(case) + "\n" for case in cases),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(cases), done.stderr[-3000:]
    mismatches = []
    counts: dict[str, int] = {}
    for number, (case, answer) in enumerate(zip(cases, answers)):
        expected = reference(case)
        counts[case["algorithm"]] = counts.get(case["algorithm"], 0) + 1
        if "error" in expected:
            same = "error" in answer
        else:
            same = answer == expected
        if not same:
            mismatches.append((number, case, expected, answer))
    assert not mismatches, (
        "\n\n".join(
            f"instance {n}: {json.dumps(c)}\nreference {json.dumps(e)}\njava      {json.dumps(a)}"
            for n, c, e, a in mismatches[:3]
        )
        + f"\n({len(mismatches)} of {len(cases)} differ)"
    )
    # every algorithm met, and what the budget and the fold exercise happened
    assert set(counts) == set(ALGORITHMS), counts
    references = [reference(case) for case in cases if case["algorithm"] == "mwf" and case["params"]]
    assert any(r.get("outputs", {}).get("budget", {}).get("refused_moves", 0) > 0 for r in references)
    assert any(r.get("bins_used", 0) > len(r.get("assignment", {})) for r in references)
