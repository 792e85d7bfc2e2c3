"""exact: the CP-SAT constraint model, fewest consumers then least Rscore. Instances stay small and
time-limited."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.algorithms.exact import martello_toth_l2
from app.core.errors import AssignmentError
from tests.unit.core.algorithms.cases import outcome_of, partitions_of, previous_of

HEURISTICS = ("bfd", "ffd", "wfd", "nfd", "mwf", "mbf", "least-loaded")


def test_exact_finds_fewer_consumers_than_first_fit_decreasing_when_possible():
    # FFD packs 50,40,30,30,25,25 into 3 bins (90, 85, 25); the optimum is 2 (50+25+25, 40+30+30).
    rates = [50, 40, 30, 30, 25, 25]
    assert outcome_of("ffd", rates).consumer_count == 3
    exact = outcome_of("exact", rates)
    assert exact.consumer_count == 2 and exact.outputs["optimal"] is True
    assert exact.outputs["status"] == {"consumers": "OPTIMAL", "rscore": "OPTIMAL"}
    assert exact.outputs["consumers_bound"] == 2 and exact.outputs["consumers_gap"] == 0
    assert exact.outputs["heuristic_consumers"] == 3
    assert set(exact.outputs["phase_times"]) == {"consumers_s", "rscore_s"}


def test_exact_then_minimises_the_rscore():
    # a = {60, 50} is over capacity; b = {40, 50}, c = {30, 70}. Three consumers are needed; the cheapest
    # way moves 90 of rate (a keeps 60 and takes the 40; b keeps its 50 and takes a's 50).
    out = outcome_of("exact", [60, 40, 50, 50, 30, 70], previous={"a": [0, 2], "b": [1, 3], "c": [4, 5]})
    assert out.consumer_count == 3 and out.rscore == pytest.approx(0.9)
    assert partitions_of(out) == {"a": [0, 1], "b": [2, 3], "c": [4, 5]}
    assert out.outputs["rscore_bound"] == pytest.approx(0.9) and out.outputs["rscore_gap"] == 0


def test_fewer_consumers_come_before_a_lower_rscore():
    # Keeping everything costs three consumers (a: 60, b: 30, c: 30); two are enough if 30 moves.
    out = outcome_of("exact", [60, 30, 30], previous={"a": [0], "b": [1], "c": [2]})
    assert out.consumer_count == 2 and out.rscore == pytest.approx(0.3)


def test_exact_anti_collocation_and_oversized():
    params = {"anti_collocation": [[{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]]}
    out = outcome_of("exact", [10, 10, 150], **params)
    assert out.owner[0] != out.owner[1]
    assert partitions_of(out)[out.owner[2]] == [2]
    assert out.consumer_count == 3 and out.outputs["optimal"]
    # A set whose other member is above capacity costs nothing extra: that one sits alone anyway.
    out = outcome_of(
        "exact", [10, 10, 150], anti_collocation=[[{"topic": "t", "partition": 0}, {"topic": "t", "partition": 2}]]
    )
    assert out.consumer_count == 2 and out.outputs["consumers_bound"] == 2
    # Overlapping sets {0, 1} and {1, 2}: 1 alone, 0 and 2 together.
    chain = [[{"topic": "t", "partition": p} for p in pair] for pair in ((0, 1), (1, 2))]
    assert sorted(partitions_of(outcome_of("exact", [1, 1, 1], anti_collocation=chain)).values()) == [[0, 2], [1]]
    with pytest.raises(AssignmentError) as error:
        outcome_of("exact", [10], anti_collocation=[[{"topic": "x", "partition": 9}]])
    assert error.value.code == "invalid_parameter"


def test_members_are_the_candidates_and_surplus_is_recommended():
    out = outcome_of("exact", [60, 60, 60], previous={"a": [0, 1]}, members=["a", "b"])
    # Three consumers are needed: a keeps one of its two, b takes one, and the third is surplus, folded
    # into the members and recommended.
    assert out.recommended_consumers == 3 and sorted(out.assignment) == ["a", "b"]
    assert out.outputs["optimal"]


def test_unused_previous_consumers_are_named_before_fresh_ones():
    out = outcome_of("exact", [90, 90, 10], previous={"c3": [2]})
    assert sorted(out.assignment) == ["c0", "c3"]
    assert out.owner[2] == "c3" and out.rscore == 0


def test_out_of_time_the_answer_is_still_whole_and_says_how_far_it_may_be():
    # 40 partitions and 10 ms: CP-SAT cannot even prove the count. The packing it falls back to is the
    # heuristic's, and the bound is Martello and Toth's L2.
    rng = random.Random(2)
    rates = [rng.randint(20, 60) for _ in range(40)]
    out = outcome_of("exact", rates, previous={"a": list(range(0, 40, 3))}, time_limit_ms=10)
    assert out.outputs["optimal"] is False and out.outputs["status"]["consumers"] == "UNKNOWN"
    assert out.outputs["consumers_bound"] == martello_toth_l2(rates, 100) < out.consumer_count
    assert out.outputs["consumers_gap"] == pytest.approx(1 - out.outputs["consumers_bound"] / out.consumer_count)
    assert sorted(j for held in out.assignment.values() for j in held) == list(range(40))
    assert max(out.loads.values()) <= 100


def test_time_limit_is_validated():
    with pytest.raises(AssignmentError) as error:
        outcome_of("exact", [1], time_limit_ms=1)
    assert error.value.code == "invalid_parameter"


def test_martello_toth_l2():
    assert martello_toth_l2([51, 51, 51], 100) == 3  # ⌈153/100⌉ = 2, but no two fit together
    assert martello_toth_l2([60, 60, 30, 30, 30], 100) == 3
    assert martello_toth_l2([50, 50, 50, 50], 100) == 2
    assert martello_toth_l2([], 100) == 0


rates_lists = st.lists(st.integers(1, 100), min_size=1, max_size=12)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rates=rates_lists, before=rates_lists)
def test_exact_is_never_worse_than_a_heuristic_when_optimal(rates, before):
    # Integer rates and C = 100: the integer model is exactly the real one, so the comparison is fair.
    previous = previous_of(outcome_of("bfd", before[: len(rates)] + rates[len(before) :]))
    previous = {c: [p for _, p in held] for c, held in previous.items()}
    exact = outcome_of("exact", rates, previous=previous, time_limit_ms=2000)
    assert martello_toth_l2(rates, 100) <= exact.consumer_count
    if exact.outputs["optimal"]:
        for name in HEURISTICS:
            heuristic = outcome_of(name, rates, previous=previous)
            assert exact.consumer_count <= heuristic.consumer_count, name
            if heuristic.consumer_count == exact.consumer_count:
                assert exact.rscore <= heuristic.rscore + 1e-9, name


def test_rates_that_sum_to_the_capacity_share_one_consumer():
    # 100/3 rounded up three times was above C: the bound (2) exceeded the count (1).
    out = outcome_of("exact", [100 / 3] * 3)
    assert out.consumer_count == 1
    assert out.outputs["consumers_bound"] == 1 and out.outputs["status"]["consumers"] == "OPTIMAL"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rates=st.lists(st.sampled_from([100 / 3, 100 / 7, 50.0, 0.1, 99.9999999, 100.0, 130.0, 20 / 3]), max_size=12),
    before=st.lists(st.integers(1, 100), max_size=12),
)
def test_the_bounds_never_exceed_the_answer(rates, before):
    previous = previous_of(outcome_of("bfd", before[: len(rates)]))
    previous = {c: [p for _, p in held] for c, held in previous.items()}
    out = outcome_of("exact", rates, previous=previous, time_limit_ms=200)
    assert out.outputs["consumers_bound"] <= out.consumer_count
    assert out.outputs["rscore_bound"] <= out.rscore + 1e-9
    assert out.outputs["consumers_gap"] >= 0 and out.outputs["rscore_gap"] >= 0
    for held in out.assignment.values():
        assert len(held) == 1 or sum(out.problem.rates[j] for j in held) <= 100 * (1 + 1e-12)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rates=st.lists(st.integers(1, 100), min_size=2, max_size=10), data=st.data())
def test_anti_collocation_sets_are_respected(rates, data):
    n = len(rates)
    sets = data.draw(st.lists(st.lists(st.integers(0, n - 1), min_size=2, max_size=3, unique=True), max_size=3))
    params = [[{"topic": "t", "partition": p} for p in members] for members in sets]
    out = outcome_of("exact", rates, anti_collocation=params, time_limit_ms=500)
    for members in sets:
        assert len({out.owner[p] for p in members}) == len(members)
