"""The core's limits (issue #13), without a server: counts of consumers refused before anything is allocated,
sums that overflow refused, the sort-key cache bounded whatever the ids."""

from __future__ import annotations

import math

import pytest

from app.core.algorithm import get_algorithm
from app.core.assign import solve
from app.core.errors import AssignmentError
from app.core.model import build_problem, consumer_sort_key


def run(name: str, rates: list[float], capacity: float = 100, lags=None, members=None, limit=100_000, **params):
    algorithm = get_algorithm(name)
    keys = [("t", p) for p in range(len(rates))]
    problem = build_problem(keys, rates, lags, capacity, {}, members, max_consumers=limit)
    return solve(problem, algorithm, algorithm.parse_params(params))


@pytest.mark.parametrize(
    ("name", "rates", "capacity", "params"),
    [
        ("least-loaded", [10.0], 100, {"mu": 1e-300}),
        ("linear", [10.0], 100, {"mu": 1e-300}),
        ("linear", [10.0], 100, {"mu": 1e-300, "f": 1e-300}),
        ("linear", [1e9], 1e-9, {}),
        ("roundrobin", [1e9], 1e-9, {}),
        ("range", [1e9], 1e-9, {}),
        ("mwf", [10.0], 1e-320, {}),
        ("mwf", [1e300], 1e-300, {}),
    ],
)
def test_an_implied_count_above_the_limit_is_refused(name, rates, capacity, params):
    with pytest.raises(AssignmentError) as refused:
        run(name, rates, capacity, **params)
    assert refused.value.code == "too_many_consumers"


def test_the_limit_is_the_callers():
    assert run("ffd", [100.0] * 10, limit=10).consumer_count == 10
    for name, params in (("ffd", {}), ("linear", {}), ("least-loaded", {"rebalance_s": 0})):
        with pytest.raises(AssignmentError, match="more than this service gives one answer"):
            run(name, [100.0] * 11, limit=10, **params)
    with pytest.raises(AssignmentError) as fixed:
        run("roundrobin", [1.0], limit=10, consumers=11)
    assert fixed.value.code == "too_many_consumers"
    with pytest.raises(AssignmentError) as members:
        run("mwf", [1.0], members=[f"m{i}" for i in range(11)], limit=10)
    assert members.value.code == "too_many_consumers"


def test_least_loadeds_lag_bound_is_checked_too():
    with pytest.raises(AssignmentError) as refused:
        run("least-loaded", [1.0], lags=[1e12], rebalance_s=0, plan_rebalance_lag=False)
    assert refused.value.code == "too_many_consumers" and "lag" in refused.value.message


@pytest.mark.parametrize(
    ("rates", "lags", "params", "code"),
    [
        ([1e308, 1e308], None, {}, "invalid_rate"),
        ([1.0, 1.0], [1e308, 1e308], {}, "invalid_rate"),
        ([10.0], None, {"rebalance_s": 1e308}, "invalid_parameter"),
    ],
)
def test_sums_that_overflow_are_refused(rates, lags, params, code):
    with pytest.raises(AssignmentError) as refused:
        run("least-loaded", rates, lags=lags, **params)
    assert refused.value.code == code


def test_algorithm_parameters_are_not_coerced():
    with pytest.raises(AssignmentError) as refused:
        get_algorithm("exact").parse_params({"time_limit_ms": "100"})
    assert refused.value.code == "invalid_parameter"


def test_kip441_refuses_a_partition_listed_twice():
    base = {"members": ["a", "b"]}
    for params in (
        {"stateless": [{"topic": "t", "partition": 0}] * 2},
        {"member_lags": {"a": [{"topic": "t", "partition": 0, "lag": 1}] * 2}},
    ):
        with pytest.raises(AssignmentError, match="twice"):
            run("kip441", [1.0, 1.0], **base, **params)


def test_the_sort_key_keeps_nothing_between_calls():
    """No cache at all (callers compute each id's key once per request), so hostile ids fill no memory."""
    import app.core.model as model

    assert not any(hasattr(value, "cache_info") for value in vars(model).values())
    keys = [consumer_sort_key("x" * 200 + str(i)) for i in range(12)]
    assert keys[2] < keys[10]  # long ids still in natural order


def test_a_negative_implied_count_is_no_consumer_not_a_crash():
    """Σ rate / C of negative rates (refused later, as invalid_rate) may be -inf: not an OverflowError."""
    from app.core.model import consumers_implied

    assert consumers_implied(-math.inf, 10, "Σ rate / capacity") == 0
    assert consumers_implied(2.5, 10, "Σ rate / capacity") == 3
