"""repack: W·consumers + Rscore from the previous assignment; migration budget; determinism."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.algorithm import get_algorithm
from app.core.assign import solve
from app.core.model import build_problem
from tests.unit.core.algorithms.cases import outcome_of, partitions_of
from tests.unit.core.test_properties import check_invariants


def test_a_group_that_fits_stays_as_it_is():
    out = outcome_of("repack", [60, 30, 50, 40], previous={"a": [0, 1], "b": [2, 3]})
    assert partitions_of(out) == {"a": [0, 1], "b": [2, 3]} and out.rscore == 0


def test_an_overloaded_consumer_gives_up_the_cheapest_partitions():
    # a holds 60 + 30 + 25 = 115: giving up the 25 suffices (cheaper than 30, or 60).
    out = outcome_of("repack", [60, 30, 25, 40], previous={"a": [0, 1, 2], "b": [3]})
    assert partitions_of(out) == {"a": [0, 1], "b": [2, 3]}
    assert out.rscore == pytest.approx(0.25)


def test_the_consumer_weight_decides_whether_a_consumer_is_closed():
    # Closing b moves 40 (Rscore 0.4): worth it when one consumer weighs more than that.
    previous = {"a": [0], "b": [1]}
    heavy = outcome_of("repack", [50, 40], previous=previous, consumer_weight=1.0)
    light = outcome_of("repack", [50, 40], previous=previous, consumer_weight=0.3)
    assert partitions_of(heavy) == {"a": [0, 1]} and heavy.rscore == pytest.approx(0.4)
    assert partitions_of(light) == {"a": [0], "b": [1]} and light.rscore == 0


def test_a_partition_that_fits_nowhere_ejects_a_smaller_one():
    # Close c (30): a (60) and b (75) have 40 and 25 free; 30 fits a. Then d (25): only b takes it … the
    # chain: closing c puts 30 on a; the search ends with three consumers instead of four.
    out = outcome_of("repack", [60, 75, 30, 20, 25], previous={"a": [0], "b": [1], "c": [2], "d": [3, 4]})
    assert out.consumer_count == 3
    check_invariants(out.problem, out, "repack")


def test_the_budget_cannot_fix_everything_and_says_so():
    out = outcome_of("repack", [60, 30, 25, 90, 20], previous={"a": [0, 1, 2], "b": [3, 4]}, max_rscore=0.1)
    assert out.rscore <= 0.1
    assert out.outputs["overloaded_consumers"] == ["a", "b"]
    assert out.outputs["rscore_needed"] == pytest.approx(0.25 + 0.2)
    assert out.outputs["budget"]["refused_moves"] == 2


def test_without_a_previous_assignment_it_packs_like_best_fit_decreasing():
    rates = [70, 20, 50, 40, 30, 60, 10, 20]
    assert outcome_of("repack", rates).consumer_count <= outcome_of("bfd", rates).consumer_count


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_caps_hold_and_answers_repeat(data):
    n = data.draw(st.integers(1, 30))
    rates = data.draw(st.lists(st.floats(0, 130, allow_nan=False), min_size=n, max_size=n))
    owners = data.draw(st.lists(st.sampled_from(["a", "b", "c", "d", "e", None]), min_size=n, max_size=n))
    keys = [("t", j) for j in range(n)]
    previous: dict[str, list] = {}
    for key, owner in zip(keys, owners):
        if owner is not None:
            previous.setdefault(owner, []).append(key)
    raw = {
        "max_rscore": data.draw(st.none() | st.floats(0, 3)),
        "max_moves": data.draw(st.none() | st.integers(0, 6)),
        "consumer_weight": data.draw(st.sampled_from([0.2, 1.0, 3.0])),
        "neighbourhood": data.draw(st.integers(2, 8)),
        "neighbourhood_nodes": data.draw(st.sampled_from([1, 50, 1000])),
        "time_limit_ms": data.draw(st.sampled_from([1, 20, 200])),
    }
    algorithm = get_algorithm("repack")
    problem = build_problem(keys, rates, None, 100.0, previous)
    outcome = solve(problem, algorithm, algorithm.parse_params(raw))
    if raw["max_rscore"] is not None:
        assert outcome.rscore <= raw["max_rscore"] + 1e-9
    if raw["max_moves"] is not None:
        assert len(outcome.moved) <= raw["max_moves"]
    budget = outcome.outputs["budget"]
    assert budget["moves"] == len(outcome.moved) and budget["rscore"] == pytest.approx(outcome.rscore)
    over = [c for c, held in outcome.assignment.items() if len(held) > 1 and outcome.loads[c] > 100 * (1 + 1e-12)]
    assert sorted(over) == sorted(outcome.outputs["overloaded_consumers"])
    if not over:
        assert outcome.outputs["rscore_needed"] == 0
    # Without a budget nothing is left above capacity.
    if raw["max_rscore"] is None and raw["max_moves"] is None:
        assert over == []
    check_invariants(problem, outcome, "range")
    again = solve(problem, algorithm, algorithm.parse_params(raw))
    assert again.assignment == outcome.assignment


def test_the_budget_takes_the_cheapest_repair_it_can_afford():
    # a holds 60 + 30 + 8 + 7 + 10 = 115. Its cheapest repair gives up the 7 and the 8 (Rscore 0.15, two
    # moves); the other gives up the 30 alone (0.3, one move). With max_moves 1 only that one is affordable;
    # with max_rscore 0.12 neither is, and the answer says what the cheapest would have cost.
    rates, previous = [60, 30, 8, 7, 10, 50], {"a": [0, 1, 2, 3, 4], "b": [5]}
    free = outcome_of("repack", rates, previous=previous)
    assert free.rscore == pytest.approx(0.15) and partitions_of(free)["a"] == [0, 1, 4]
    one = outcome_of("repack", rates, previous=previous, max_moves=1)
    assert partitions_of(one) == {"a": [0, 2, 3, 4], "b": [1, 5]} and one.rscore == pytest.approx(0.3)
    assert one.outputs["overloaded_consumers"] == []
    poor = outcome_of("repack", rates, previous=previous, max_rscore=0.12)
    assert poor.rscore == 0 and poor.outputs["overloaded_consumers"] == ["a"]
    assert poor.outputs["rscore_needed"] == pytest.approx(0.15)


def test_the_search_stops_on_counted_work_and_repeats_exactly():
    # A small limit on a large instance: the search stops on its work count, never on a clock, so two runs
    # (whatever the machine's load) stop at the same step with the same answer.
    from app.core.algorithms.repack import WORK_PER_MS
    from app.sim.stream import flatten, generate_stream

    first, second = generate_stream(400, 2, 25, seed=3)
    keys, rates = flatten(first)
    before = outcome_of("bfd", rates)
    previous = {c: [keys[j][1] for j in held] for c, held in before.assignment.items()}
    _, rates = flatten(second)
    runs = [outcome_of("repack", rates, previous=previous, time_limit_ms=1) for _ in range(2)]
    search = runs[0].outputs["search"]
    assert search["stopped"] == "work_limit" and search["work"] >= WORK_PER_MS
    assert runs[1].outputs["search"] == search and runs[1].assignment == runs[0].assignment
