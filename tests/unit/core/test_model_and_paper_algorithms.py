"""Hand-worked cases of the model and the twelve algorithms of Landau et al. (worked from the paper
and the facts of the published implementation listed in docs/algorithms.md, not from running the code)."""

from __future__ import annotations

import json
import math

import pytest

from app.codec.assign_input import Limits, answer
from app.core.algorithm import get_algorithm
from app.core.assign import solve
from app.core.errors import AssignmentError
from app.core.model import build_problem, capacity_from_throughput, consumer_sort_key

LIMITS = Limits(max_partitions=1_000_000, max_dense_cells=1_000_000)

PAPER_TWELVE = ["nf", "ff", "bf", "wf", "nfd", "ffd", "bfd", "wfd", "mwf", "mbf", "mwfp", "mbfp"]


def run(name, rates, capacity=100.0, previous=None, members=None, topic="t"):
    keys = [(topic, p) for p in range(len(rates))]
    previous = {c: [(topic, p) for p in held] for c, held in (previous or {}).items()}
    outcome = solve(build_problem(keys, rates, None, capacity, previous, members), get_algorithm(name), None)
    return {
        c: sorted(p for _, p in (outcome.problem.keys[j] for j in held)) for c, held in outcome.assignment.items()
    }, outcome


# -- the model ------------------------------------------------------------------------------


def test_section_iv_a_example_three_migrations_of_100_give_rscore_3():
    # Three partitions of 100 B/s, C = 100, each held by one consumer and moved to another.
    keys = [("t", p) for p in range(3)]
    problem = build_problem(keys, [100, 100, 100], None, 100, {"a": [("t", 0)], "b": [("t", 1)], "c": [("t", 2)]})
    from app.core.algorithm import Algorithm, Packing

    rotate = Algorithm("rotate", "test", lambda _p, _q: Packing({"b": [0], "c": [1], "a": [2]}))
    outcome = solve(problem, rotate, None)
    assert outcome.rscore == 3
    assert sorted(outcome.moved) == [0, 1, 2]


def test_new_and_gone_partitions_are_not_migrations():
    keys = [("t", 0), ("t", 2)]  # t/1 is gone, t/2 is new
    problem = build_problem(keys, [10, 20], None, 100, {"a": [("t", 0), ("t", 1)]})
    outcome = solve(problem, get_algorithm("mwf"), None)
    assert outcome.moved == [] and outcome.rscore == 0
    d = outcome.delta(full=True)
    assert d.columns == [("t", 0), ("t", 2), ("t", 1)]
    new, gone = d.columns.index(("t", 2)), d.columns.index(("t", 1))
    assert [v for _, c, v in d.cells if c == new] == [1]
    assert [v for _, c, v in d.cells if c == gone] == [-1]


def test_delta_cells_and_dense_matrix():
    keys = [("t", 0), ("t", 1)]
    problem = build_problem(keys, [60, 60], None, 100, {"a": [("t", 0), ("t", 1)]})
    outcome = solve(problem, get_algorithm("ffd"), None)  # 60+60 > 100: t/1 must leave a
    full = outcome.delta(full=True)
    assert full.rows == ["a", "c0"]
    assert full.dense() == [[0, -1], [0, 1]]
    sparse = outcome.delta()
    assert (
        sparse.rows == ["a", "c0"] and sparse.columns == [("t", 1)] and sorted(sparse.cells) == [(0, 0, -1), (1, 0, 1)]
    )
    assert outcome.rscore == pytest.approx(0.6)


def test_lower_bound_and_overloaded_partition_alone():
    assignment, outcome = run("bfd", [150, 30, 30])
    assert outcome.problem.lower_bound == 3  # ⌈210 / 100⌉
    big = outcome.owner[0]
    assert assignment[big] == [0]
    assert outcome.overloaded == [0]


def test_zero_rate_partitions_are_placed():
    assignment, _ = run("ffd", [0, 0, 0])
    assert assignment == {"c0": [0, 1, 2]}


def test_capacity_from_throughput():
    assert capacity_from_throughput(120, 30, 5) == pytest.approx(100)
    with pytest.raises(AssignmentError) as error:
        capacity_from_throughput(120, 30, 30)
    assert error.value.code == "invalid_capacity"


def test_consumer_ids_sort_naturally():
    assert sorted(["c10", "c2", "b", "c1"], key=consumer_sort_key) == ["b", "c1", "c2", "c10"]


@pytest.mark.parametrize(
    ("request_change", "code"),
    [
        ({"algorithm": "nope"}, "unknown_algorithm"),
        ({"capacity": 0}, "invalid_capacity"),
        ({"capacity": math.inf}, "invalid_capacity"),
        ({"partitions": [{"topic": "t", "partition": 0, "rate": math.inf}]}, "invalid_rate"),
        ({"partitions": [{"topic": "t", "partition": 0, "rate": -0.5}]}, "invalid_rate"),
        ({"partitions": [{"topic": "t", "partition": 0, "rate": "fast"}]}, "invalid_rate"),
        ({"partitions": [{"topic": "t", "partition": 0, "rate": 1}] * 2}, "duplicate_partition"),
        ({"previous": {"a": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}}, "invalid_previous"),
        ({"members": []}, "invalid_members"),
        ({"params": {"x": 1}}, "invalid_parameter"),
        ({"partitions": [{"topic": "", "partition": 0, "rate": 1}]}, "invalid_request"),
        ({"partitions": "all"}, "invalid_request"),
    ],
)
def test_bad_requests_raise_stable_codes(request_change, code):
    request = {"algorithm": "mwf", "capacity": 100, "partitions": [{"topic": "t", "partition": 0, "rate": 1}]}
    request.update(request_change)
    with pytest.raises(AssignmentError) as error:
        body = json.dumps(request).replace("Infinity", "1e999")  # JSON has no infinity; 1e999 is out of range
        answer(body.encode(), LIMITS)
    assert error.value.code == code
    assert error.value.message.endswith(".")


# -- Any Fit (§II-B, §VI-A) -----------------------------------------------------------------


def test_next_fit_keeps_one_bin_open():
    # 60 → c0; 50 does not fit c0 → c1 (c0 closes); 40 fits c1 (90); 30 does not → c2.
    assignment, _ = run("nf", [60, 50, 40, 30])
    assert assignment == {"c0": [0], "c1": [1, 2], "c2": [3]}


def test_first_fit_scans_bins_in_id_order():
    # 60 → c0; 50 → c1; 40 → c0 (first that fits, 100); 30 → c1 (80).
    assignment, _ = run("ff", [60, 50, 40, 30])
    assert assignment == {"c0": [0, 2], "c1": [1, 3]}


def test_best_fit_takes_the_most_loaded_bin_that_fits():
    # 50 → c0; 70 → c1; 20: both fit, c1 is fuller (90) → c1; 30: only c0 fits (80).
    assignment, _ = run("bf", [50, 70, 20, 30])
    assert assignment == {"c0": [0, 3], "c1": [1, 2]}


def test_worst_fit_takes_the_least_loaded_bin():
    # 50 → c0; 70 → c1; 20: c0 is least loaded → c0 (70); 30: both at 70, tie → lowest id c0 (100).
    assignment, _ = run("wf", [50, 70, 20, 30])
    assert assignment == {"c0": [0, 2, 3], "c1": [1]}


def test_decreasing_variants_sort_by_rate_ties_by_partition():
    # FFD order: 70 (t/1), 50 (t/0), 30 (t/3), 20 (t/2): 70 → c0; 50 → c1; 30 → c0 (100); 20 → c1.
    assignment, _ = run("ffd", [50, 70, 20, 30])
    assert assignment == {"c0": [1, 3], "c1": [0, 2]}
    # Equal rates keep (topic, partition) order: NFD fills c0 with t/0, t/1 then opens c1.
    assignment, _ = run("nfd", [50, 50, 50])
    assert assignment == {"c0": [0, 1], "c1": [2]}


def test_new_bin_reopens_the_previous_consumer_h_of_j_k():
    # t/0 was on "x", t/1 on "y". FF: t/0 opens h = x; t/1 (60) does not fit x → h = y.
    assignment, outcome = run("ff", [60, 60], previous={"x": [0], "y": [1]})
    assert assignment == {"x": [0], "y": [1]} and outcome.rscore == 0


def test_next_fit_opens_its_first_consumer_by_f_of_k():
    # The published implementation opens one bin before any partition: f(k) = c0, not t/0's previous x.
    # Later bins follow h(j,k): t/1 (60) does not fit c0 → h = y.
    assignment, outcome = run("nf", [60, 60], previous={"x": [0], "y": [1]})
    assert assignment == {"c0": [0], "y": [1]} and outcome.rscore == pytest.approx(0.6)


def test_new_bin_takes_the_lowest_unused_id_when_the_previous_owner_is_open():
    # Both were on "x": t/0 reopens x, t/1 cannot fit → f(k) = c0.
    assignment, outcome = run("ffd", [60, 50], previous={"x": [0, 1]})
    assert assignment == {"x": [0], "c0": [1]}
    assert outcome.rscore == pytest.approx(0.5)


def test_lowest_unused_skips_ids_already_open():
    # Previous owner c0 reopened by t/0; a new partition gets c1, the lowest id not open.
    assignment, _ = run("ffd", [90, 90], previous={"c0": [0]})
    assert assignment == {"c0": [0], "c1": [1]}


def test_partition_above_capacity_gets_an_empty_bin_and_nothing_joins_it():
    assignment, outcome = run("ff", [10, 150, 20])
    assert assignment == {"c0": [0, 2], "c1": [1]}
    assert outcome.overloaded == [1]


# -- Modified Any Fit (Algorithm 1, Table II) -----------------------------------------------


def test_mwf_keeps_large_partitions_and_migrates_small_ones():
    # Previous: a = {t/0: 60, t/1: 30} (90), b = {t/2: 50, t/3: 20} (70). Rates unchanged.
    # Consumers by cumulative rate: a (90) then b (70).
    # a: smallest t/1 (30) → no open bin → open a; a takes 60, 30 → a = 90.
    # b: smallest t/3 (20) → open bins: a (90) → 110 > 100 → does not fit → open b; b takes 50, 20.
    assignment, outcome = run("mwf", [60, 30, 50, 20], previous={"a": [0, 1], "b": [2, 3]})
    assert assignment == {"a": [0, 1], "b": [2, 3]} and outcome.rscore == 0


def test_mwf_migrates_the_smallest_into_an_open_consumer():
    # Previous: a = {t/0: 70} (70), b = {t/1: 40, t/2: 20} (60).
    # a first: t/0 tries open bins (none) → open a; a = 70.
    # b: smallest t/2 (20) fits a (least loaded open, 90) → migrates; next t/1 (40) fits nowhere (a at 90)
    # → open b; b takes t/1.
    assignment, outcome = run("mwf", [70, 40, 20], previous={"a": [0], "b": [1, 2]})
    assert assignment == {"a": [0, 2], "b": [1]}
    assert outcome.moved == [2] and outcome.rscore == pytest.approx(0.2)


def test_mwf_overflow_joins_the_unassigned_set_and_goes_worst_fit():
    # Rates grew: a = {t/0: 60, t/1: 50, t/2: 30} (140), b = {t/3: 10} (10).
    # a (140) first: smallest t/2 (30): no open bin → open a; a takes 60 (60), then 50 does not fit (110)
    # → t/1 and t/2 join U. b: t/3 (10) fits a (70) → migrates; pset empty.
    # U largest first: t/1 (50): least loaded open is a (70) → 120 no → new bin h = a (open) → c0 (50).
    # t/2 (30): least loaded is now c0 (50) → 80 fits → c0.
    assignment, outcome = run("mwf", [60, 50, 30, 10], previous={"a": [0, 1, 2], "b": [3]})
    assert assignment == {"a": [0, 3], "c0": [1, 2]}
    assert sorted(outcome.moved) == [1, 2, 3]


def test_mbf_prefers_the_fullest_open_consumer():
    # Previous: a = {t/0: 80}, b = {t/1: 50}, c = {t/2: 15}. Cumulative order: a, b, c.
    # a: open a (80). b: t/1 (50) fits nowhere → open b (50). c: t/2 (15): fits a (95) and b (65);
    # best fit = the most loaded that fits = a.
    assignment, _ = run("mbf", [80, 50, 15], previous={"a": [0], "b": [1], "c": [2]})
    assert assignment == {"a": [0, 2], "b": [1]}
    assignment, _ = run("mwf", [80, 50, 15], previous={"a": [0], "b": [1], "c": [2]})
    assert assignment == {"a": [0], "b": [1, 2]}


def test_partition_sort_orders_consumers_by_their_largest_partition():
    # a = {45, 45} (cumulative 90, max 45), b = {70} (70, max 70).
    # MWF visits a first: a opens with both (90); b: t/2 (70) does not fit a → b opens.
    # MWFP visits b first: b opens (70); a: smallest t/1 (45) does not fit b → a opens with both.
    for name in ("mwf", "mwfp"):
        assignment, outcome = run(name, [45, 45, 70], previous={"a": [0, 1], "b": [2]})
        assert assignment == {"a": [0, 1], "b": [2]} and outcome.rscore == 0
    # a = {50, 30, 15} (95, max 50), b = {60} (60, max 60); rates as before, all fit.
    # MWFP: b first (60); a: smallest 15 fits b (75) → migrates; 30 fits? b at 75 → 105 no → open a (80).
    assignment, _ = run("mwfp", [50, 30, 15, 60], previous={"a": [0, 1, 2], "b": [3]})
    assert assignment == {"a": [0, 1], "b": [2, 3]}


def test_empty_previous_assignment_places_everything_like_the_fit_rule():
    rates = [30, 80, 20, 50, 40]
    for modified, plain in (("mwf", "wfd"), ("mbf", "bfd")):
        assert run(modified, rates)[0] == run(plain, rates)[0]


# -- member mode ------------------------------------------------------------------------------


def test_member_mode_uses_only_members_and_keeps_previous_owners():
    # m2 (60) opens first; m1's 50 does not fit beside it, so m1 reopens; m3 is left empty.
    assignment, outcome = run("mwf", [60, 50], previous={"m2": [0], "m1": [1]}, members=["m1", "m2", "m3"])
    assert assignment == {"m1": [1], "m2": [0], "m3": []}
    assert outcome.recommended_consumers == 2 and outcome.overloaded_members() == []


def test_member_mode_folds_surplus_into_the_members_with_most_slack():
    # BFD wants three consumers (80, 70, 60 cannot share); two members: the 60 goes to the member
    # with the most slack (m2 at 70) → m2 overloaded at 130.
    assignment, outcome = run("bfd", [80, 70, 60], members=["m1", "m2"])
    assert assignment == {"m1": [0], "m2": [1, 2]}
    assert outcome.recommended_consumers == 3
    assert outcome.overloaded_members() == ["m2"]


def test_member_mode_reassigns_a_departed_members_partitions():
    assignment, _ = run("mwf", [40, 40], previous={"gone": [0], "m1": [1]}, members=["m1", "m2"])
    assert set(assignment) == {"m1", "m2"}
    assert sorted(j for held in assignment.values() for j in held) == [0, 1]


@pytest.mark.parametrize("rate", [math.nan, math.inf, -1.0])
def test_the_core_refuses_rates_json_cannot_carry(rate):
    with pytest.raises(AssignmentError) as error:
        build_problem([("t", 0)], [rate], None, 100.0)
    assert error.value.code == "invalid_rate"
