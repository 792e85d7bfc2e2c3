"""Differential fuzz of the two cores on extreme numbers (issue #27): rates, lags, capacities and parameters
from 0 and the smallest subnormal to the largest float, sums at the edge of overflow, counts beyond 64 bits,
consumer limits a request just reaches, and ids whose numbers tie ("c01", "c1"); half of the requests zone-aware
(partitions with racks, members with a rack or not, previous_racks: issue #29). On every request both cores
give the same answer bytes or the same error (code, message, details), and nothing else: no exception but
AssignmentError escapes either (a Rust panic would come as a RuntimeError, and fail here).

Each request goes every way of the compiled core: read from the JSON into arrays (`parse_assign`, sparse
delta), converted from the reference's Problem (`from_objects`, dense delta), and for a group (what is stored
and observed of the answer: `compute_compiled` against `run_job`).

The seed is fixed, so `make test` cannot fail by chance. A longer campaign with another seed is the same test:

    GROUPFIT_FUZZ_SEED=$RANDOM GROUPFIT_FUZZ_CASES=5000 .venv/bin/python -m pytest tests/unit/codec/test_core_extremes.py

and whatever it finds becomes a case of `REGRESSIONS` below.
"""

from __future__ import annotations

import json
import math
import os
import random
import typing
from typing import Any

import pytest

from app.codec.assign import DeltaForm
from app.codec.assign_input import CompiledInput, Computation, Limits, answer, decode_assign
from app.core import native
from app.core.errors import AssignmentError
from app.settings import Settings

DELTA_FORMS: tuple[DeltaForm, ...] = typing.get_args(DeltaForm)

pytestmark = pytest.mark.skipif(not native.AVAILABLE, reason="the compiled core is not installed")

SEED = os.environ.get("GROUPFIT_FUZZ_SEED", "extremes")
CASES = int(os.environ.get("GROUPFIT_FUZZ_CASES", "150"))
"""Requests per algorithm (each answered four times: two cores, two ways)."""

MAX = 1.7976931348623157e308
TINY = 5e-324
HALF_ULP_OF_MAX = 2.0**970  # what the largest float rounds up by to overflow
EXTREMES = [
    0.0,
    -0.0,
    TINY,
    2 * TINY,
    2.2250738585072014e-308,  # smallest normal
    1e-300,
    1e-12,
    0.1,
    1.0,
    3.0,
    100.0,
    1e15,
    2.0**53 + 1,
    1e300,
    MAX / 2,
    MAX / 3,
    HALF_ULP_OF_MAX,
    HALF_ULP_OF_MAX * 0.8,
    MAX,
]
IDS = ["c0", "c00", "c01", "c1", "c001", "c10", "c2", "surplus-0", "surplus-01", "m1", "m01", "m2", "a", "a0"]
TOPICS = ["t", "orders", "t0"]
RACKS = ["eu-1a", "eu-1b", "é", "r" * 255]


def number(rnd: random.Random) -> float:
    """An extreme float, a random one across every magnitude, or a plain one."""
    kind = rnd.random()
    if kind < 0.55:
        return rnd.choice(EXTREMES)
    if kind < 0.8:
        return math.ldexp(rnd.random(), rnd.randint(-1074, 1024))  # subnormal to the largest
    return rnd.choice([10.0, 25.0, 50.0, 60.0, 99.5])


def positive(rnd: random.Random) -> float:
    value = number(rnd)
    return value if value > 0 else TINY


def request(rnd: random.Random, algorithm: str) -> dict[str, Any]:
    """A request; half of them zone-aware (partitions with racks, members with a rack or not, previous_racks)."""
    zoned = rnd.random() < 0.5
    keys = rnd.sample([(t, p) for t in TOPICS for p in (0, 1, 2, 2**31 - 1)], rnd.randint(0, 8))
    scale = rnd.choice([1.0, 1e-300, 1e300, MAX / 4])  # rates of one magnitude, so their sums near the edge
    partitions = []
    for topic, partition in keys:
        rate = number(rnd) if rnd.random() < 0.5 else min(MAX, scale * rnd.choice([0.25, 0.5, 1.0, 1.5]))
        entry: dict[str, Any] = {"topic": topic, "partition": partition, "rate": rate}
        if rnd.random() < 0.4:
            entry["lag"] = rnd.choice([None, number(rnd)])
        if zoned and rnd.random() < 0.8:
            entry["racks"] = rnd.sample(RACKS, rnd.randint(0, 2))
        partitions.append(entry)
    body: dict[str, Any] = {"algorithm": algorithm, "partitions": partitions}
    if rnd.random() < 0.85:
        body["capacity"] = rnd.choice([positive(rnd), scale, 100.0])
    else:
        body["consumer_throughput"] = positive(rnd)
        body["iteration_s"] = rnd.choice([30.0, positive(rnd)])
        body["rebalance_s"] = rnd.choice([0.0, 5.0, number(rnd)])
    owners = rnd.sample(IDS, rnd.randint(0, 5))
    if owners:
        previous: dict[str, list[dict[str, Any]]] = {c: [] for c in owners}
        for topic, partition in [k for k in keys if rnd.random() < 0.8] + [("gone", 0)] * (rnd.random() < 0.3):
            previous[rnd.choice(owners)].append({"topic": topic, "partition": partition})
        body["previous"] = previous
        if zoned and rnd.random() < 0.5:
            body["previous_racks"] = {c: rnd.choice(RACKS) for c in owners if rnd.random() < 0.7}
    if rnd.random() < 0.35:
        members = rnd.sample(IDS, rnd.randint(1, 4))
        body["members"] = [m if rnd.random() < 0.5 else {"id": m, "capacity": positive(rnd)} for m in members]
        if zoned:
            body.pop("previous_racks", None)
            body["members"] = [
                {"id": m, "rack": rnd.choice(RACKS)} if isinstance(m, str) and rnd.random() < 0.6 else m
                for m in body["members"]
            ]
    if algorithm.startswith("m") and rnd.random() < 0.7:
        body["params"] = {
            "max_rscore": rnd.choice([None, 0.0, TINY, 0.5, 1e308, MAX]),
            "max_moves": rnd.choice([None, 0, 1, 2**63, 2**64, 2**70]),
        }
    if algorithm == "least-loaded" and rnd.random() < 0.8:
        params: dict[str, Any] = {
            "mu": rnd.choice([None, positive(rnd)]),
            "w_sla": rnd.choice([5.0, positive(rnd)]),
            "f_up": rnd.choice([0.9, 1.0, TINY * 4, 0.5]),
            "f_down": rnd.choice([0.4, TINY, 0.1]),
            "rebalance_s": rnd.choice([0.0, 5.0, number(rnd)]),
            "plan_rebalance_lag": rnd.random() < 0.7,
        }
        body["params"] = {k: v for k, v in params.items() if rnd.random() < 0.8}
    return body


def outcome(body: bytes, delta: DeltaForm, limits: Limits) -> tuple[Any, ...]:
    try:
        return ("answer", answer(body, limits, delta))
    except AssignmentError as error:
        return ("error", error.code, error.message, error.details)


def limits(core: str, max_consumers: int) -> Limits:
    return Limits.of(Settings(core=core, max_consumers=max_consumers))


def stored(text: bytes, compiled: Limits, reference: Limits) -> tuple[Any, Any] | None:
    """A group's computation by each core (what the store keeps and the history and metrics observe), or
    None where the compiled reader leaves the request to the reference (`outcome` compared that)."""

    def computed(limits: Limits) -> Any:
        try:
            decoded = decode_assign(text, limits)
            computation: Computation = decoded.completed(None, None, None)
            result = computation.compute(limits)
        except AssignmentError as error:
            return ("error", error.code, error.message, error.details)
        result.seconds = 0.0
        return result

    try:
        if not isinstance(decode_assign(text, compiled), CompiledInput):
            return None
    except AssignmentError:
        return None
    return computed(compiled), computed(reference)


def check(body: dict[str, Any], max_consumers: int = 100_000) -> set[str]:
    """Both cores, every way: the same outcome; which it was (an answer, zone-aware or not, or an error)."""
    body = {**body, "group": "g"}
    text = json.dumps(body).encode()
    compiled, reference = limits("native", max_consumers), limits("python", max_consumers)
    for delta in DELTA_FORMS:
        expected = outcome(text, delta, reference)
        assert outcome(text, delta, compiled) == expected, f"delta={delta}, max_consumers={max_consumers}: {text!r}"
    group = stored(text, compiled, reference)
    if group is not None:
        assert group[0] == group[1], f"stored, max_consumers={max_consumers}: {text!r}"
    if expected[0] != "answer":
        return {"error"}
    return {"answer", *(["zone-aware"] if b'"cross_zone_rate"' in expected[1] else [])}


REGRESSIONS: dict[str, dict[str, Any]] = {
    "least-loaded's bound a bit above the limit, its totals not (sums added in another order)": {
        "algorithm": "least-loaded",
        "capacity": 1,
        "partitions": [
            {"topic": "t", "partition": j, "rate": rate} for j, rate in enumerate([0.2, 0.4, 0.15, 0.4, 0.25, 0.1])
        ],
        "previous": {f"c{j}": [{"topic": "t", "partition": j}] for j in range(6)},
        "params": {"f_up": 1.0, "f_down": 0.5},
        "max_consumers": 3,  # Σ rate / (μ·f_down) = 3 by math.fsum; 3.0000000000000004 added one by one
    },
    "the exact sum of the rates overflows (issue #27)": {
        "algorithm": "mwf",
        "capacity": 1e300,
        "partitions": [
            {"topic": "t", "partition": j, "rate": rate} for j, rate in enumerate([MAX, 7.98e291, 7.98e291])
        ],
    },
    "the lags' exact sum overflows": {
        "algorithm": "least-loaded",
        "capacity": 100,
        "partitions": [
            {"topic": "t", "partition": j, "rate": 1, "lag": lag} for j, lag in enumerate([MAX, 7.98e291, 7.98e291])
        ],
    },
    "a utilization past the largest float (a member of subnormal capacity)": {
        "algorithm": "bfd",
        "capacity": 100,
        "partitions": [{"topic": "t", "partition": 0, "rate": 1}],
        "members": [{"id": "m", "capacity": TINY}],
    },
    "least-loaded with a member capacity whose ratio to C underflows (the reference divided by 0)": {
        "algorithm": "least-loaded",
        "capacity": 1e300,
        "partitions": [{"topic": "t", "partition": j, "rate": 1e299} for j in range(3)],
        "members": ["a", {"id": "m", "capacity": TINY}],
    },
    "a move budget beyond 64 bits": {
        "algorithm": "mwf",
        "capacity": 100,
        "partitions": [{"topic": "t", "partition": j, "rate": 60} for j in range(3)],
        "previous": {"c0": [{"topic": "t", "partition": j} for j in range(3)]},
        "params": {"max_moves": 2**70},
    },
    "a move budget beyond 64 bits in the zone-aware search (the compiled core's free moves overflowed)": {
        "algorithm": "mwfp",
        "capacity": 25.0,
        "partitions": [
            {"topic": "t", "partition": 0, "rate": 1.564449890336129e-33},
            {"topic": "t", "partition": 1, "rate": 2.2250738585072014e-308, "lag": 50.0, "racks": ["eu-1b", "eu-1a"]},
        ],
        # the search merges two consumers whose partitions both moved (the gone consumer's and m2's)
        "previous": {
            "c0": [],
            "c01": [],
            "c10": [],
            "surplus-01": [{"topic": "t", "partition": 0}],
            "m2": [{"topic": "t", "partition": 1}],
        },
        "members": [{"id": "m2", "rack": "r"}],
        "params": {"max_rscore": 5e-324, "max_moves": 2**64},
        "max_consumers": 20,
    },
    "a moved partition of rate -0.0 (Rscore 0.0, as math.fsum adds it)": {
        "algorithm": "bfd",
        "capacity": 100,
        "partitions": [{"topic": "t", "partition": 0, "rate": -0.0}],
        "previous": {"gone": [{"topic": "t", "partition": 0}]},
        "members": ["m"],
    },
    "ids whose numbers tie": {
        "algorithm": "mbf",
        "capacity": 100,
        "partitions": [{"topic": "t", "partition": j, "rate": 40} for j in range(6)],
        "previous": {c: [{"topic": "t", "partition": j}] for j, c in enumerate(["c1", "c01", "c001", "c0", "c00"])},
    },
}


@pytest.mark.parametrize("case", sorted(REGRESSIONS))
def test_each_regression_gets_the_same_outcome_from_both_cores(case: str) -> None:
    body = dict(REGRESSIONS[case])
    check(body, body.pop("max_consumers", 100_000))


def test_a_member_capacity_least_loaded_cannot_scale_is_a_clear_error() -> None:
    text = json.dumps(
        REGRESSIONS["least-loaded with a member capacity whose ratio to C underflows (the reference divided by 0)"]
    ).encode()
    for core in ("native", "python"):
        assert outcome(text, False, limits(core, 100_000))[1:3] == (
            "invalid_capacity",
            "member 'm' has capacity 5e-324, too far from capacity 1e+300 for least-loaded to scale by (their "
            "ratio is not a positive finite float); give capacities of one magnitude.",
        )


@pytest.mark.parametrize("algorithm", sorted(native.ALGORITHMS))
def test_both_cores_agree_on_extreme_numbers(algorithm: str) -> None:
    rnd = random.Random(f"{SEED}-{algorithm}")
    seen: set[str] = set()
    for _ in range(CASES):
        seen |= check(request(rnd, algorithm), rnd.choice([100_000, 100_000, 3, 20]))
    # the fuzz reaches answers (zone-aware ones too), and the errors of extreme inputs
    assert seen == {"answer", "zone-aware", "error"}
