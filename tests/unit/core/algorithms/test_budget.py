"""max_rscore and max_moves: hard caps on what one rebalance of Modified Any Fit may move."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.algorithm import get_algorithm
from app.core.assign import solve
from app.core.errors import AssignmentError
from app.core.model import build_problem
from tests.unit.core.algorithms.cases import outcome_of, partitions_of
from tests.unit.core.test_properties import check_invariants

MODIFIED = ["mwf", "mbf", "mwfp", "mbfp"]


@pytest.mark.parametrize("name", MODIFIED)
def test_no_budget_is_the_published_algorithm(name):
    rates, previous = [30, 70, 20, 50, 90, 10, 40], {"a": [0, 1], "b": [2, 3, 4], "c": [5, 6]}
    plain = outcome_of(name, rates, previous=previous)
    assert plain.outputs == {}
    unlimited = outcome_of(name, rates, previous=previous, max_rscore=100, max_moves=100)
    assert unlimited.assignment == plain.assignment
    assert unlimited.outputs["overloaded_consumers"] == []
    assert unlimited.outputs["budget"]["rscore"] == pytest.approx(plain.rscore)


def test_a_spent_budget_leaves_partitions_where_they_are_and_says_who_is_overloaded():
    # a grew to 130: MWF would move its 30 away (Rscore 0.3). With max_rscore 0.2 it stays.
    previous = {"a": [0, 1], "b": [2]}
    free = outcome_of("mwf", [100, 30, 20], previous=previous)
    assert free.rscore == pytest.approx(0.3)
    capped = outcome_of("mwf", [100, 30, 20], previous=previous, max_rscore=0.2)
    assert capped.rscore == 0 and partitions_of(capped) == {"a": [0, 1], "b": [2]}
    assert capped.outputs["overloaded_consumers"] == ["a"]
    assert capped.outputs["budget"] == {
        "max_rscore": 0.2,
        "max_moves": None,
        "rscore": 0.0,
        "moves": 0,
        "refused_moves": 1,
    }
    no_moves = outcome_of("mwf", [100, 30, 20], previous=previous, max_moves=0)
    assert no_moves.assignment == capped.assignment


def test_migration_into_open_consumers_stops_when_the_budget_is_spent():
    # MWF opens a (90) first; b (60) then migrates its 10 into a, then would its 20 (a is full) — no: b's
    # 10 moves (a: 100), b keeps 20 and 30. With max_moves 0 b keeps everything.
    previous = {"a": [0], "b": [1, 2, 3]}
    free = outcome_of("mwf", [90, 30, 20, 10], previous=previous)
    assert partitions_of(free) == {"a": [0, 3], "b": [1, 2]}
    capped = outcome_of("mwf", [90, 30, 20, 10], previous=previous, max_moves=0)
    assert partitions_of(capped) == {"a": [0], "b": [1, 2, 3]} and capped.outputs["overloaded_consumers"] == []


@pytest.mark.parametrize("name", MODIFIED)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_caps_hold_unless_a_consumer_is_gone(name, data):
    n = data.draw(st.integers(1, 25))
    rates = data.draw(st.lists(st.floats(0, 130, allow_nan=False), min_size=n, max_size=n))
    owners = data.draw(st.lists(st.sampled_from(["a", "b", "c", "d", None]), min_size=n, max_size=n))
    keys = [("t", j) for j in range(n)]
    previous: dict[str, list] = {}
    for key, owner in zip(keys, owners):
        if owner is not None:
            previous.setdefault(owner, []).append(key)
    max_rscore = data.draw(st.floats(0, 3))
    max_moves = data.draw(st.integers(0, 5))
    algorithm = get_algorithm(name)
    problem = build_problem(keys, rates, None, 100.0, previous)
    outcome = solve(problem, algorithm, algorithm.parse_params({"max_rscore": max_rscore, "max_moves": max_moves}))
    assert outcome.rscore <= max_rscore + 1e-9 and len(outcome.moved) <= max_moves
    assert outcome.outputs["budget"]["moves"] == len(outcome.moved)
    over = [c for c, held in outcome.assignment.items() if len(held) > 1 and outcome.loads[c] > 100 * (1 + 1e-12)]
    assert sorted(over) == sorted(outcome.outputs["overloaded_consumers"])
    # Each partition once, the delta and the Rscore consistent (the capacity check does not apply).
    check_invariants(problem, outcome, "range")


def test_departed_members_partitions_move_even_beyond_the_budget():
    out = outcome_of("mwf", [10, 10], previous={"gone": [0, 1]}, members=["a"], max_moves=0)
    assert partitions_of(out) == {"a": [0, 1]}
    assert out.outputs["budget"]["moves"] == 2


def test_negative_budgets_are_refused():
    with pytest.raises(AssignmentError) as error:
        get_algorithm("mwf").parse_params({"max_rscore": -1})
    assert error.value.code == "invalid_parameter"
