"""The Java core (clients/java, package io.groupfit.kafka.core) against the Python reference on random instances:
the same assignment (each consumer's partitions, in the order placed), the same Rscore, moves, bins used and
outputs (the migration budget's, least-loaded's), for every algorithm the Java core runs; on zone-aware instances
(partitions with 0-3 racks, members with and without racks, previous consumers' racks, zones lacking capacity) also
the same racks and cross-zone rates (in all and per consumer).

The instances come from a fixed seed: integer rates (ties everywhere), partitions above the capacity, members of
mixed capacities or none (the algorithm sizes the group), ids in natural order with leading zeros and a member
named like a surplus bin, previous assignments with gone partitions, gone consumers and new ones, budgets.
`CoreDriver` (a test program of the Maven project) answers each instance, one JSON line each way.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
from typing import Any

import pytest

from app.codec.assign_input import Limits, compiled_input
from app.core import native
from app.core.algorithm import get_algorithm
from app.core.algorithms import modified_any_fit, search
from app.core.assign import solve
from app.core.errors import AssignmentError
from app.core.model import build_problem
from app.local.java_clients import JavaBuild
from app.local.kafka import java

pytestmark = pytest.mark.integration

SEED = 20260428
INSTANCES = 3000
ZONED_INSTANCES = 3000
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
    return case_of(algorithm, params, capacity, partitions, members, previous)


def case_of(
    algorithm: str,
    params: dict[str, Any],
    capacity: float,
    partitions: list[dict[str, Any]],
    members: list[Any] | None,
    previous: dict[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    """An instance in the driver's form (its request's fields)."""
    return {
        "algorithm": algorithm,
        "params": params,
        "capacity": capacity,
        "partitions": partitions,
        "members": members,
        "previous": previous,
    }


LIMITS = Limits(max_partitions=10_000, max_dense_cells=0, native=native.choose("native"))
"""The service's compiled way (the compiled core's answer, as it writes it)."""

RACKS = ["eu-1a", "eu-1b", "eu-1c", "Z", "é"]


def zoned(rng: random.Random, case: dict[str, Any]) -> dict[str, Any]:
    """The instance made zone-aware: each partition with 0-3 racks of a few (most with one, its leader's), members
    with racks or without, and without members the previous consumers' racks; the racks skewed, so one zone may lack
    capacity for its partitions."""
    racks = rng.sample(RACKS, rng.randint(1, 4))
    weights = [rng.choice([1, 1, 3, 6]) for _ in racks]
    for entry in case["partitions"]:
        count = rng.choice([0, 1, 1, 1, 1, 2, 3])
        if count:
            entry["racks"] = sorted(set(rng.choices(racks, weights, k=count)))
    if case["members"] is not None:
        case["members"] = [
            {"id": m if isinstance(m, str) else m["id"], "capacity": None if isinstance(m, str) else m["capacity"]}
            | ({"rack": rng.choice(racks)} if rng.random() < 0.85 else {})
            for m in case["members"]
        ]
    else:
        case["previous_racks"] = {c: rng.choice(racks) for c in case["previous"] if rng.random() < 0.8}
    return case


def reference(case: dict[str, Any]) -> dict[str, Any]:
    """The Python reference's answer (app.core.assign.solve), in the driver's form."""
    members = case["members"]
    racks = [p.get("racks") for p in case["partitions"]]
    consumer_racks = case.get("previous_racks") or {
        m["id"]: m["rack"] for m in members or [] if not isinstance(m, str) and m.get("rack")
    }
    try:
        problem = build_problem(
            [(p["topic"], p["partition"]) for p in case["partitions"]],
            [p["rate"] for p in case["partitions"]],
            [p.get("lag") for p in case["partitions"]],
            case["capacity"],
            {c: [(r["topic"], r["partition"]) for r in held] for c, held in case["previous"].items()},
            None if members is None else [m if isinstance(m, str) else m["id"] for m in members],
            None
            if members is None
            else {m["id"]: m["capacity"] for m in members if not isinstance(m, str) and m["capacity"] is not None},
            racks=racks,
            consumer_racks=consumer_racks,
        )
        algorithm = get_algorithm(case["algorithm"])
        outcome = solve(problem, algorithm, algorithm.parse_params(case["params"]))
    except AssignmentError as error:
        return {"error": error.code}
    answer = {
        "assignment": {c: [list(problem.keys[j]) for j in held] for c, held in outcome.assignment.items()},
        "rscore": outcome.rscore,
        "moves": len(outcome.moved),
        "bins_used": outcome.bins_used,
        "outputs": outcome.outputs,
    }
    if outcome.zones is not None:
        answer |= {
            "racks": outcome.zones.racks,
            "cross_zone": outcome.zones.cross_zone,
            "cross_zone_rate": outcome.zones.cross_zone_rate,
        }
    return answer


def test_the_java_core_equals_the_reference_on_random_instances(java_build: JavaBuild):
    rng = random.Random(SEED)
    cases = [instance(rng) for _ in range(INSTANCES)]
    compare(java_build, cases)
    references = [reference(case) for case in cases if case["algorithm"] == "mwf" and case["params"]]
    assert any(r.get("outputs", {}).get("budget", {}).get("refused_moves", 0) > 0 for r in references)
    assert any(r.get("bins_used", 0) > len(r.get("assignment", {})) for r in references)


def test_the_java_core_equals_the_reference_on_zone_aware_instances(java_build: JavaBuild):
    rng = random.Random(SEED + 1)
    cases = [zoned(rng, instance(rng)) for _ in range(ZONED_INSTANCES)]
    answers = compare(java_build, cases)
    zone_aware = [a for a in answers if "cross_zone_rate" in a]
    # most are zone-aware; some read across zones, some not at all; some members have no rack
    assert len(zone_aware) > ZONED_INSTANCES // 2
    assert any(a["cross_zone_rate"] > 0 for a in zone_aware) and any(a["cross_zone_rate"] == 0 for a in zone_aware)
    assert any(None in a["racks"].values() for a in zone_aware)
    assert any(a.get("outputs", {}).get("budget", {}).get("refused_moves", 0) > 0 for a in zone_aware), (
        "a zone-aware instance where the budget refused a move"
    )


def short_zone(rng: random.Random, algorithm: str) -> dict[str, Any]:
    """Partitions read within their leader's zone, the leaders spread evenly over three zones, rates up to C (two
    partitions a consumer, as in Landau et al.), members with 1.25 × the total capacity but zone "c" with half as
    many as each other: hundreds of its partitions stay across zones, and `localize` gives up on zone c in its
    passes (FAILED_LOCALIZES) before reaching some it could bring in."""
    capacity = 100.0
    partitions: list[dict[str, Any]] = [
        {"topic": "t", "partition": p, "rate": round(rng.uniform(0, capacity), 2), "racks": [rng.choice("abc")]}
        for p in range(1500)
    ]
    count = math.ceil(1.25 * math.fsum(p["rate"] for p in partitions) / capacity)
    members: list[Any] = [{"id": f"m{i:04d}", "capacity": None, "rack": "abbca"[i % 5]} for i in range(count)]
    previous: dict[str, list[dict[str, Any]]] = {}
    for entry in partitions[: rng.randint(0, 1500)]:
        previous.setdefault(rng.choice(members)["id"], []).append({"topic": "t", "partition": entry["partition"]})
    params = {"max_moves": 300} if algorithm == "mwf" and rng.random() < 0.5 else {}
    return case_of(algorithm, params, capacity, partitions, members, previous)


def test_the_cores_agree_where_a_zone_lacks_capacity(java_build: JavaBuild):
    """Java, the compiled core and the reference give the same answer where `localize` stops trying a zone."""
    rng = random.Random(SEED + 2)
    cases = [short_zone(rng, algorithm) for algorithm in ["mwf", "mwf", "mbf", "bfd", "wf"]]
    for case, answer in zip(cases, compare(java_build, cases, every_algorithm=False)):
        left_out = sum(
            1
            for consumer, held in answer["assignment"].items()
            if answer["racks"].get(consumer) != "c"
            for _, number in held
            if case["partitions"][number]["racks"] == ["c"]
        )
        assert left_out > 64, "zone c's partitions read across zones: more than localize tries in a row"
        compiled = compiled_answer(case)
        expected = {k: answer[k] for k in compiled} | {"assignment": sorted_held(answer["assignment"])}
        assert compiled == expected, case["algorithm"]


def drifted_short_zone(rng: random.Random) -> dict[str, Any]:
    """3 000 partitions of up to a tenth of C, led evenly in three zones; members with 1.25 × the total capacity,
    zone c's half as many as each other zone's; the previous assignment MWF's for the rates before a drift of up to
    10 %: `localize`'s exact re-placements spend the whole of their budget."""
    capacity = 1000.0
    partitions = [
        {"topic": "t", "partition": p, "rate": round(rng.uniform(0, 100.0), 3), "racks": ["abc"[p % 3]]}
        for p in range(3000)
    ]
    count = math.ceil(1.25 * math.fsum(p["rate"] for p in partitions) / capacity)
    members: list[Any] = [
        {"id": f"m{i:04d}", "capacity": None, "rack": "a" if i < 2 * count // 5 else "b" if i < 4 * count // 5 else "c"}
        for i in range(count)
    ]
    first = reference(case_of("mwf", {}, capacity, partitions, members, {}))
    previous = {c: [{"topic": t, "partition": p} for t, p in held] for c, held in first["assignment"].items() if held}
    drifted = [p | {"rate": round(p["rate"] * rng.uniform(0.9, 1.1), 3)} for p in partitions]
    return case_of("mwf", {}, capacity, drifted, members, previous)


def test_the_cores_agree_where_localize_spends_its_exact_budget(java_build: JavaBuild, monkeypatch):
    """Java, the compiled core and the reference give the same answer where `localize` stops re-placing exactly."""
    case = drifted_short_zone(random.Random(SEED + 3))
    states: list[search.SearchState] = []

    def kept(*args):
        states.append(search.finish_zoned(*args))
        return states[-1]

    monkeypatch.setattr(modified_any_fit, "finish_zoned", kept)
    (answer,) = compare(java_build, [case], every_algorithm=False)
    assert states[-1].exact_left is not None and states[-1].exact_left <= 0, "the budget was spent"
    compiled = compiled_answer(case)
    assert compiled == {k: answer[k] for k in compiled} | {"assignment": sorted_held(answer["assignment"])}


def sorted_held(assignment: dict[str, list[list[Any]]]) -> dict[str, list[list[Any]]]:
    return {c: sorted(held) for c, held in assignment.items()}


def test_the_java_core_takes_a_move_budget_beyond_64_bits(java_build: JavaBuild):
    """max_moves of 2^64 caps nothing, as in the reference: JSON's big integer read, the free moves of the search
    (two moves inside the neighbourhood it merges) not overflowing."""
    partitions = [
        {"topic": "t", "partition": 0, "rate": 1.564449890336129e-33},
        {"topic": "t", "partition": 1, "rate": 2.2250738585072014e-308, "racks": ["eu-1b", "eu-1a"]},
    ]
    previous = {"c0": [], "surplus-01": [{"topic": "t", "partition": 0}], "m2": [{"topic": "t", "partition": 1}]}
    members: list[Any] = [{"id": "m2", "capacity": None, "rack": "r"}]
    case = case_of("mwfp", {"max_rscore": 5e-324, "max_moves": 2**64}, 25.0, partitions, members, previous)
    (answer,) = compare(java_build, [case], every_algorithm=False)
    assert answer["bins_used"] == 1


def compiled_answer(case: dict[str, Any]) -> dict[str, Any]:
    """The compiled core's assignment, Rscore and cross-zone rate for the case (through the service's codec)."""
    members = [{k: v for k, v in m.items() if v is not None} for m in case["members"]]
    computed = compiled_input(json.dumps(case | {"members": members}).encode(), LIMITS)
    assert computed is not None, "the compiled core reads it"
    answer = json.loads(bytes(computed.completed(None, None, None).compute(LIMITS).answer))
    return {
        "assignment": sorted_held(
            {c: [[r["topic"], r["partition"]] for r in held] for c, held in answer["assignment"].items()}
        ),
        "rscore": answer["rscore"],
        "cross_zone_rate": answer["cross_zone_rate"],
    }


def compare(java_build: JavaBuild, cases: list[dict[str, Any]], every_algorithm: bool = True) -> list[dict[str, Any]]:
    """The driver's answers to the cases, each asserted equal to the reference's; every algorithm met."""
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
    assert not every_algorithm or set(counts) == set(ALGORITHMS), counts  # every algorithm met
    return answers
