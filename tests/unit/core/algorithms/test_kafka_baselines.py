"""The baselines: Kafka's range, roundrobin and sticky assignors and the KEDA-style linear autoscaler."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.algorithm import get_algorithm
from app.core.assign import solve
from app.core.errors import AssignmentError
from app.core.model import build_problem
from tests.unit.core.algorithms.cases import outcome_of, partitions_of
from tests.unit.core.test_properties import instances


def test_roundrobin_and_range_deal_equal_counts_over_n_consumers():
    rr = outcome_of("roundrobin", [90] * 5, consumers=2)
    assert partitions_of(rr) == {"c0": [0, 2, 4], "c1": [1, 3]}
    rg = outcome_of("range", [90] * 5, consumers=2)
    assert partitions_of(rg) == {"c0": [0, 1, 2], "c1": [3, 4]}


def test_range_cuts_each_topic_on_its_own():
    # Two topics of three partitions over two consumers: c0 gets the first two of each topic (Kafka's
    # RangeAssignor), so c0 holds 4 and c1 holds 2 — range balances per topic, not overall.
    keys = [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2)]
    problem = build_problem(keys, [1.0] * 6, None, 100, None, ["m2", "m1"])
    out = solve(problem, get_algorithm("range"), get_algorithm("range").parse_params(None))
    assert {c: [keys[j] for j in held] for c, held in out.assignment.items()} == {
        "m1": [("a", 0), ("a", 1), ("b", 0), ("b", 1)],
        "m2": [("a", 2), ("b", 2)],
    }


def test_baselines_use_the_members_and_ignore_rates():
    out = outcome_of("roundrobin", [500, 1, 1, 1], members=["b", "a"])
    assert partitions_of(out) == {"a": [0, 2], "b": [1, 3]}
    assert out.overloaded_members() == ["a"]


def test_consumers_and_members_together_are_refused():
    with pytest.raises(AssignmentError) as error:
        outcome_of("sticky", [1, 1], members=["a"], consumers=3)
    assert error.value.code == "invalid_parameter"


def test_without_members_or_consumers_the_group_keeps_its_size():
    # Previously three consumers: the same three again.
    out = outcome_of("roundrobin", [10] * 4, previous={"c1": [0], "c4": [1], "x": [2]})
    assert sorted(out.assignment) == ["c1", "c4", "x"]
    # A new group: the lower bound ⌈Σ rate / C⌉ = ⌈250 / 100⌉ = 3.
    assert outcome_of("range", [50] * 5).consumer_count == 3


def test_sticky_keeps_previous_owners_where_balance_allows():
    # x held 4 and y held 1; balanced is 3/2: x keeps its first three, y keeps its own and gains one.
    out = outcome_of("sticky", [10] * 5, previous={"x": [0, 1, 2, 3], "y": [4]})
    assert partitions_of(out) == {"x": [0, 1, 2], "y": [3, 4]}
    assert sorted(out.problem.keys[j][1] for j in out.moved) == [3]


def test_sticky_is_unchanged_when_already_balanced():
    out = outcome_of("sticky", [10] * 4, previous={"x": [0, 3], "y": [1, 2]})
    assert partitions_of(out) == {"x": [0, 3], "y": [1, 2]} and out.rscore == 0


def test_linear_sizes_by_total_rate():
    out = outcome_of("linear", [60, 60, 60, 60, 60], f=0.8)  # ⌈300 / 80⌉ = 4
    assert out.outputs["replicas"] == 4 and out.consumer_count == 4
    assert partitions_of(out) == {"c0": [0, 4], "c1": [1], "c2": [2], "c3": [3]}


def test_linear_with_fewer_members_than_replicas_recommends_the_replicas():
    out = outcome_of("linear", [60] * 5, members=["a", "b"])  # ⌈300 / 100⌉ = 3 wanted, 2 members
    assert out.outputs["replicas"] == 3 and out.recommended_consumers == 3
    assert sorted(out.assignment) == ["a", "b"]
    assert sum(len(held) for held in out.assignment.values()) == 5


# -- properties ---------------------------------------------------------------------------------


def most_kept(previous_counts: list[int], size: int) -> int:
    """The most partitions a count-balanced assignment of `size` partitions over these consumers can leave
    where they were: each keeps up to its quota, and the one-more quotas go to those that held more."""
    share, extra = divmod(size, len(previous_counts))
    return sum(min(count, share) for count in previous_counts) + min(
        extra, sum(1 for c in previous_counts if c > share)
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=instances(), consumers=st.integers(1, 8))
def test_count_balancing_assignors(problem, consumers):
    for name in ("roundrobin", "sticky"):
        algorithm = get_algorithm(name)
        out = solve(problem, algorithm, algorithm.parse_params({"consumers": consumers}))
        counts = [len(held) for held in out.assignment.values()] + [0] * (consumers - len(out.assignment))
        assert max(counts) - min(counts) <= 1
    # Range balances each topic.
    out = solve(problem, get_algorithm("range"), get_algorithm("range").parse_params({"consumers": consumers}))
    for topic in {key[0] for key in problem.keys}:
        per_consumer = Counter(out.owner[j] for j, key in enumerate(problem.keys) if key[0] == topic)
        counts = [per_consumer.get(c, 0) for c in out.assignment]
        assert max(counts) - min(counts) <= 1


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=instances(with_members=True))
def test_sticky_moves_no_more_than_balance_requires(problem):
    out = solve(problem, get_algorithm("sticky"), get_algorithm("sticky").parse_params(None))
    previous_counts = [len(problem.previous_indices.get(m, [])) for m in problem.members]
    kept = sum(1 for j, owner in enumerate(problem.previous_owner) if owner is not None and out.owner[j] == owner)
    assert kept == most_kept(previous_counts, problem.size)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=instances(), f=st.sampled_from([0.5, 0.8, 1.0]))
def test_linear_replicas_are_the_rate_over_the_target(problem, f):
    out = solve(problem, get_algorithm("linear"), get_algorithm("linear").parse_params({"f": f}))
    expected = max(1, math.ceil(problem.total_rate / (problem.capacity * f) - 1e-9)) if problem.size else 0
    assert out.outputs["replicas"] == expected
    assert out.consumer_count == min(expected, problem.size)
