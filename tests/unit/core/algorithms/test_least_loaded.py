"""least-loaded: Ezzeddine et al.'s lag-aware Least-Loaded autoscaler."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.algorithm import get_algorithm
from app.core.algorithms.least_loaded import least_loaded
from app.core.assign import solve
from app.core.errors import AssignmentError
from app.core.model import build_problem
from tests.unit.core.algorithms.cases import outcome_of, partitions_of
from tests.unit.core.test_properties import instances


def loads(outcome):
    return sorted(sum(outcome.problem.rates[j] for j in held) for held in outcome.assignment.values())


def test_least_loaded_scales_up_and_balances():
    out = outcome_of("least-loaded", [60, 50, 40, 30, 20], f_up=0.9)
    assert out.outputs["scale_action"] == "UP" and out.outputs["consumers_before"] == 0
    # 200 / 90 → 3 bins; LL: 60→b0, 50→b1, 40→b2, 30→b2 (least loaded: 40), 20→b1 (50).
    assert sorted(partitions_of(out).values()) == [[0], [1, 4], [2, 3]]
    # First Fit Decreasing at the same capacity fills the first consumer instead: 60+30, 50+40, 20.
    assert loads(outcome_of("ffd", [60, 50, 40, 30, 20], capacity=90)) == [20, 90, 90]
    assert loads(out) == [60, 70, 70]


def test_least_loaded_opens_one_more_consumer_where_a_partition_fits_nowhere():
    # Five partitions of 36 into μ·f = 90: the lower bound says 2, but the fifth fits in neither (72 + 36),
    # so a third consumer is opened for it (not a restart of the packing).
    assert least_loaded([36] * 5, [0] * 5, list(range(5)), 90, 450, 2) == [[0, 2], [1, 3], [4]]
    assert outcome_of("least-loaded", [36] * 5).consumer_count == 3


def test_least_loaded_opened_consumer_takes_what_follows():
    # 80, 80 fill two consumers of 90; 30 fits in neither and opens a third, which is then the least loaded:
    # the next 20 goes there, and the one after (20) too (50 < 80).
    assert least_loaded([80, 80, 30, 20, 20], [0] * 5, list(range(5)), 90, 450, 2) == [[0], [1], [2, 3, 4]]


def test_least_loaded_respects_the_lag_dimension():
    # Rates fit one consumer (10 each), but each lag (300) takes most of μ·w_sla·f = 100·5·0.9 = 450.
    out = outcome_of("least-loaded", [10, 10, 10], lags=[300, 300, 300], plan_rebalance_lag=False)
    assert out.consumer_count == 3
    # Lag 100 each fits one consumer (300 ≤ 450), but planning for a 10 s rebalance makes each 100 + 10·10 = 200:
    # 600 > 450, so two consumers.
    unplanned = outcome_of("least-loaded", [10, 10, 10], lags=[100, 100, 100], rebalance_s=10, plan_rebalance_lag=False)
    assert unplanned.consumer_count == 1
    planned = outcome_of("least-loaded", [10, 10, 10], lags=[100, 100, 100], rebalance_s=10)
    assert planned.consumer_count == 2


def test_mu_and_w_sla_set_the_two_capacities():
    out = outcome_of(
        "least-loaded", [30, 30, 30], lags=[40, 40, 40], mu=50, w_sla=2, f_up=1.0, f_down=0.5, plan_rebalance_lag=False
    )
    # rate ≤ 50 and lag ≤ 100 per consumer: 30+30 > 50, so one partition each.
    assert out.consumer_count == 3
    assert out.outputs["rate_capacity"] == 50 and out.outputs["lag_capacity"] == 100


def test_least_loaded_none_keeps_the_previous_assignment():
    out = outcome_of("least-loaded", [40, 40], previous={"a": [0], "b": [1]}, f_up=0.9, f_down=0.3)
    # |G_up| = ⌈80/90⌉ = 1 ≤ 2; |G_down| = ⌈80/30⌉ = 3 ≥ 2; no consumer over 90: nothing to do.
    assert out.outputs["scale_action"] == "NONE"
    assert partitions_of(out) == {"a": [0], "b": [1]} and out.rscore == 0


def test_a_new_partition_is_placed_even_when_the_group_is_right_sized():
    # Two consumers are right (|G_up| = ⌈100/90⌉ = 2, |G_down| ≥ 3), but the new partition 2 has none: REASS.
    out = outcome_of("least-loaded", [50, 45, 5], previous={"a": [0], "b": [1]}, f_up=0.9, f_down=0.3)
    assert out.outputs["scale_action"] == "REASS"
    # LL: 50→b0, 45→b1, 5→b1 (the least loaded); the bins keep the names of the consumers they overlap.
    assert partitions_of(out) == {"a": [0], "b": [1, 2]} and out.rscore == 0


def test_least_loaded_scales_down_and_reassigns():
    down = outcome_of("least-loaded", [10, 10, 10], previous={"a": [0], "b": [1], "c": [2]}, f_down=0.5)
    assert down.outputs["scale_action"] == "DOWN" and down.consumer_count == 1
    assert down.outputs["consumers_before"] == 3 and down.outputs["consumers_after"] == 1
    reass = outcome_of("least-loaded", [80, 20, 20], previous={"a": [0, 1], "b": [2]}, f_up=0.9, f_down=0.4)
    assert reass.outputs["scale_action"] == "REASS"
    assert all(sum(reass.problem.rates[j] for j in held) <= 90 for held in reass.assignment.values())


def test_a_down_that_the_planned_lag_cancels_is_none():
    # Current lags allow one consumer at f_down = 0.5 (lag 100 ≤ 250), but with 20 s of rebalance lag each
    # partition carries 100 + 10·20 = 300 > 250: the scale-down is dropped and the assignment stays.
    out = outcome_of("least-loaded", [10, 10], lags=[50, 50], previous={"a": [0], "b": [1]}, f_down=0.5, rebalance_s=20)
    assert out.outputs["scale_action"] == "NONE"
    assert partitions_of(out) == {"a": [0], "b": [1]}


def test_members_are_the_current_group():
    # Three members, two of them idle: the group can shrink to one consumer.
    out = outcome_of("least-loaded", [10, 10], previous={"a": [0, 1]}, members=["a", "b", "c"])
    assert out.outputs["scale_action"] == "DOWN" and out.outputs["consumers_before"] == 3
    assert partitions_of(out) == {"a": [0, 1], "b": [], "c": []} and out.recommended_consumers == 1
    # A member left: its partition has no consumer in the group, so the assignment is redone.
    left = outcome_of("least-loaded", [50, 50], previous={"a": [0], "gone": [1]}, members=["a", "b"], f_down=0.3)
    assert left.outputs["scale_action"] == "REASS" and partitions_of(left) == {"a": [0], "b": [1]}


def test_no_partitions_no_action():
    out = outcome_of("least-loaded", [], previous={"a": []})
    assert out.outputs["scale_action"] == "NONE" and out.assignment == {}


def test_least_loaded_rejects_inverted_factors():
    with pytest.raises(AssignmentError) as error:
        get_algorithm("least-loaded").parse_params({"f_up": 0.3, "f_down": 0.5})
    assert error.value.code == "invalid_parameter"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=instances(), data=st.data(), w_sla=st.sampled_from([0.5, 5.0]), plan=st.booleans())
def test_least_loaded_respects_both_dimensions(problem, data, w_sla, plan):
    lag_cap = problem.capacity * w_sla
    lags = data.draw(
        st.lists(st.floats(0, lag_cap * 1.2, allow_nan=False), min_size=problem.size, max_size=problem.size)
    )
    problem = build_problem(problem.keys, problem.rates, lags, problem.capacity, problem.previous)
    algorithm = get_algorithm("least-loaded")
    params = algorithm.parse_params({"w_sla": w_sla, "plan_rebalance_lag": plan})
    out = solve(problem, algorithm, params)
    # Whatever the decision, Eq. 4 holds at f_up for every consumer that shares (NONE only when it already did).
    for held in out.assignment.values():
        if len(held) > 1:
            assert sum(problem.rates[j] for j in held) <= problem.capacity * params.f_up * (1 + 1e-9)
            assert sum(lags[j] for j in held) <= lag_cap * params.f_up * (1 + 1e-9)
    if out.outputs["scale_action"] == "NONE":
        assert out.rscore == 0 and not out.moved
        assert {c: held for c, held in out.assignment.items() if held} == {
            c: held for c, held in problem.previous_indices.items() if held
        }


def test_a_partition_above_capacity_is_not_a_false_up():
    # ⌈300/90⌉ = 4 is no lower bound: the partition sits alone on one consumer, as it already does.
    out = outcome_of("least-loaded", [300], previous={"a": [0]})
    assert out.outputs["scale_action"] != "UP"
    assert out.outputs["consumers_after"] == 1 and partitions_of(out) == {"a": [0]}


def test_a_lag_above_capacity_does_not_block_down():
    # The lag of 2000 sits alone; the other two share one consumer: 3 → 2.
    out = outcome_of("least-loaded", [5, 5, 5], lags=[2000, 0, 0], previous={"a": [0], "b": [1], "c": [2]})
    assert out.outputs["scale_action"] == "DOWN"
    assert out.outputs["consumers_after"] == 2


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rates=st.lists(st.floats(0, 300, allow_nan=False), min_size=1, max_size=12),
    lags=st.lists(st.floats(0, 3000, allow_nan=False), min_size=12, max_size=12),
)
def test_least_loaded_uses_no_empty_consumer_and_never_more_than_one_each(rates, lags):
    packing = least_loaded(rates, lags[: len(rates)], list(range(len(rates))), 90, 450, 1)
    assert all(packing) and len(packing) <= len(rates)
