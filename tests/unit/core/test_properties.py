"""Invariants of every registered algorithm over random instances (hypothesis)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.algorithm import algorithms, get_algorithm
from app.core.assign import solve
from app.core.model import build_problem

# Algorithms whose parameters have no defaults need inputs these generic properties do not make;
# each has its own property tests.
NEEDS_PARAMETERS = {"kip441": "needs per-member state lags"}
# Kafka's count-balancing assignors and the linear autoscaler ignore rates by design (they are the
# baselines): the capacity property does not apply to them.
RATE_BLIND = {"range", "roundrobin", "sticky", "linear"}


def runnable():
    return sorted(name for name in algorithms() if name not in NEEDS_PARAMETERS)


@st.composite
def instances(draw, with_members: bool = False):
    n = draw(st.integers(0, 40))
    capacity = draw(st.sampled_from([10.0, 100.0, 1000.0]))
    rates = draw(st.lists(st.floats(0, capacity * 1.3, allow_nan=False), min_size=n, max_size=n))
    keys = [(draw(st.sampled_from(["a", "b"])) + "-topic", j) for j in range(n)]
    # A previous assignment over some of these partitions and some that are gone.
    consumers = [f"c{i}" for i in range(draw(st.integers(0, 6)))] + ["x", "y"]
    previous: dict[str, list] = {}
    for key in keys + [("gone", g) for g in range(draw(st.integers(0, 3)))]:
        if draw(st.booleans()):
            previous.setdefault(draw(st.sampled_from(consumers)), []).append(key)
    members = None
    if with_members:
        members = draw(
            st.lists(st.sampled_from(["m1", "m2", "m3", "x", "c1", "m10"]), min_size=1, max_size=5, unique=True)
        )
    return build_problem(keys, rates, None, capacity, previous, members)


def check_invariants(problem, outcome, name):
    # Each partition exactly once.
    placed = sorted(j for held in outcome.assignment.values() for j in held)
    assert placed == list(range(problem.size))
    # No consumer over C unless it holds one oversized partition alone (bin-packing algorithms).
    if name not in RATE_BLIND and problem.members is None:
        for consumer, held in outcome.assignment.items():
            load = sum(problem.rates[j] for j in held)
            assert load <= problem.capacity * (1 + 1e-9) or len(held) == 1, (consumer, held, load)
    # The delta turns the previous assignment into the new one.
    d = outcome.delta(full=True)
    matrix = d.dense()
    before = {(c, key) for c, keys in problem.previous.items() for key in keys}
    after = {(d.rows[r], d.columns[col]) for r, row in enumerate(matrix) for col, v in enumerate(row) if v == 1}
    stopped = {(d.rows[r], d.columns[col]) for r, row in enumerate(matrix) for col, v in enumerate(row) if v == -1}
    new = {(c, problem.keys[j]) for c, held in outcome.assignment.items() for j in held}
    assert (before - stopped) | after == new
    assert stopped <= before and not (after & before)
    # The Rscore is the migrated rate over C, from the moves.
    moved_rate = math.fsum(problem.rates[j] for j in outcome.moved)
    assert outcome.rscore == pytest.approx(moved_rate / problem.capacity)
    for j in outcome.moved:
        assert problem.previous_owner[j] not in (None, outcome.owner[j])


@pytest.mark.parametrize("name", runnable())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=instances())
def test_invariants_autoscale(name, problem):
    algorithm = get_algorithm(name)
    params = algorithm.parse_params(None)
    outcome = solve(problem, algorithm, params)
    check_invariants(problem, outcome, name)
    # Deterministic: the same input gives the same output.
    again = solve(
        build_problem(problem.keys, problem.rates, None, problem.capacity, problem.previous), algorithm, params
    )
    assert again.assignment == outcome.assignment


@pytest.mark.parametrize("name", runnable())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=instances(with_members=True))
def test_member_mode_uses_only_members(name, problem):
    algorithm = get_algorithm(name)
    outcome = solve(problem, algorithm, algorithm.parse_params(None))
    assert set(outcome.assignment) == set(problem.members)
    check_invariants(problem, outcome, name)
    assert outcome.recommended_consumers >= min(1, problem.size)
