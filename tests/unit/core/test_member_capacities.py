"""Consumers of different sizes: each member's own capacity, respected by every capacity-aware algorithm."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.algorithm import get_algorithm
from app.core.assign import solve
from app.core.bins import FIT_RULES
from app.core.errors import AssignmentError
from app.core.model import build_problem
from tests.unit.core.algorithms.cases import outcome_of, partitions_of
from tests.unit.core.test_properties import RATE_BLIND, check_invariants, runnable

CAPACITY_AWARE = [name for name in runnable() if name not in RATE_BLIND]


@st.composite
def mixed_groups(draw):
    """Members of capacities from C/4 to 4·C (some left at C), partitions up to 1.3·C, a previous assignment."""
    n = draw(st.integers(0, 30))
    capacity = 100.0
    rates = draw(st.lists(st.floats(0, capacity * 1.3, allow_nan=False), min_size=n, max_size=n))
    keys = [("t", j) for j in range(n)]
    members = draw(st.lists(st.sampled_from(["m1", "m2", "m3", "m10", "x"]), min_size=1, max_size=5, unique=True))
    sizes = draw(st.lists(st.sampled_from([25.0, 50.0, 100.0, 150.0, 400.0]), min_size=len(members), max_size=5))
    own = dict(zip(members, sizes))
    previous: dict[str, list] = {}
    for key in keys:
        if draw(st.booleans()):
            previous.setdefault(draw(st.sampled_from(members + ["gone-consumer"])), []).append(key)
    return build_problem(keys, rates, None, capacity, previous, members, own)


@pytest.mark.parametrize("name", runnable())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=mixed_groups())
def test_mixed_capacities_invariants(name, problem):
    algorithm = get_algorithm(name)
    params = algorithm.parse_params(None)
    outcome = solve(problem, algorithm, params)
    assert set(outcome.assignment) == set(problem.members)
    check_invariants(problem, outcome, name)
    placed = {c for c, held in algorithm.pack(problem, params).assignment.items() if held}
    if name not in RATE_BLIND and placed <= set(problem.members):
        # Nothing folded in: every member within its own capacity, unless it holds one partition alone.
        for member, held in outcome.assignment.items():
            load = sum(problem.rates[j] for j in held)
            assert load <= problem.capacity_of(member) * (1 + 1e-9) or len(held) == 1, (member, held, load)
    for member in outcome.assignment:
        assert outcome.utilization(member) == pytest.approx(outcome.loads[member] / problem.capacity_of(member))
    assert outcome.overloaded_members() == sorted(
        (m for m in outcome.assignment if outcome.loads[m] > problem.capacity_of(m) * (1 + 1e-12)),
        key=lambda m: (m.rstrip("0123456789"), int(m[len(m.rstrip("0123456789")) :] or 0)),
    )
    again = solve(problem, algorithm, params)
    assert again.assignment == outcome.assignment


@pytest.mark.parametrize("name", CAPACITY_AWARE)
def test_a_large_member_takes_what_two_small_ones_could_not(name):
    rates = [70, 70, 50]  # no two of them fit in 100
    small = outcome_of(name, rates, members=["a", "b"])
    assert small.overloaded_members(), partitions_of(small)
    large = outcome_of(name, rates, members=["a", "big"], member_capacities={"big": 200})
    assert large.overloaded_members() == [], partitions_of(large)
    assert max(large.utilization(m) for m in large.assignment) <= 1.0
    assert sorted(p for held in partitions_of(large).values() for p in held) == [0, 1, 2]


@pytest.mark.parametrize("name", CAPACITY_AWARE)
def test_equal_capacities_given_explicitly_change_nothing(name):
    rates = [30, 70, 20, 50, 90, 10, 40]
    previous = {"a": [0, 1], "b": [2, 3, 4]}
    plain = outcome_of(name, rates, previous=previous, members=["a", "b", "c"])
    explicit = outcome_of(name, rates, previous=previous, members=["a", "b", "c"], member_capacities={"a": 100})
    assert explicit.assignment == plain.assignment


@pytest.mark.parametrize(("rule", "chosen"), [("best", "a"), ("worst", "big"), ("first", "a"), ("next", "a")])
def test_fit_rules_use_remaining_capacity(rule, chosen):
    # Open bins: big (capacity 200, load 130: 70 left) and a (capacity 100, load 50: 50 left). A 40 goes to a
    # under Best Fit (least remaining that fits; big is the more loaded) and to big under Worst Fit (most
    # remaining; a is the less loaded); First Fit scans ids, Next Fit has only the last bin opened.
    problem = build_problem([("t", j) for j in range(3)], [130, 50, 40], None, 100.0, {}, ["a", "big"], {"big": 200})
    bins = FIT_RULES[rule](problem)
    for consumer, j in (("big", 0), ("a", 1)):
        bins.put(bins.open(consumer), j)
    assert bins.ids[bins.find(2)] == chosen
    assert bins.cap == [200.0, 100.0]


def test_surplus_goes_to_the_member_with_the_most_room():
    # Three partitions of 90 for a member of 100 and one of 300: BFD opens big first and fills it.
    outcome = outcome_of("bfd", [90, 90, 90, 90], members=["a", "big"], member_capacities={"big": 300})
    assert partitions_of(outcome) == {"a": [3], "big": [0, 1, 2]}
    assert outcome.overloaded_members() == []


@pytest.mark.parametrize(
    ("own", "code"),
    [({"stranger": 50}, "invalid_members"), ({"a": 0}, "invalid_capacity"), ({"a": float("inf")}, "invalid_capacity")],
)
def test_bad_member_capacities_are_refused(own, code):
    with pytest.raises(AssignmentError) as error:
        build_problem([("t", 0)], [1.0], None, 100.0, {}, ["a"], own)
    assert error.value.code == code
