"""The scaling decision (app/core/decision.py): up, down, reass or none for any registered algorithm, and the
guards against rebalance storms."""

from __future__ import annotations

import math

import pytest

from app.core import native
from app.core.algorithm import get_algorithm
from app.core.decision import GroupState, Guards, decide
from app.core.errors import AssignmentError

KEYS = [("t", p) for p in range(6)]
TWO = {"a": [("t", 0), ("t", 1), ("t", 2)], "b": [("t", 3), ("t", 4), ("t", 5)]}


def state(rates, assignment=TWO, lags=None, capacity=100.0, age_s=math.inf, caps=None, keys=KEYS) -> GroupState:
    lags = lags or [None] * len(rates)
    return GroupState(list(keys), list(map(float, rates)), lags, capacity, assignment, caps or {}, age_s)


def decision(name, rates, params=None, guards=Guards(), **group):
    return decide(state(rates, **group), get_algorithm(name), params, guards)


def loads(assignment_of_indices, rates):
    return {m: sum(rates[j] for j in held) for m, held in assignment_of_indices.items()}


@pytest.mark.parametrize("name", ["mwf", "bfd", "repack", "least-loaded"])
def test_a_group_within_capacity_needs_nothing(name):
    params = {"mu": 100.0, "w_sla": 5.0} if name == "least-loaded" else None
    d = decision(name, [30, 30, 30, 10, 10, 10], params)
    assert (d.action, d.needed, d.current, d.overloaded, d.unowned) == ("none", 2, 2, [], 0)
    assert d.rscore is d.moves is d.gain is None and "within" in d.reason
    assert (d.lower_bound, d.total_rate) == (2, 120)


@pytest.mark.parametrize("name", ["mwf", "bfd", "repack"])
def test_an_overloaded_member_at_the_same_size_is_reassigned(name):
    # a holds 60 + 30 + 20 = 110 > 100; 140 fits two consumers, so the same members are reassigned
    d = decision(name, [60, 30, 20, 10, 10, 10])
    assert (d.action, d.needed, d.current, d.overloaded) == ("reass", 2, 2, ["a"])
    assert d.gain == pytest.approx(0.1) and d.moves >= 1 and d.rscore > 0
    assert "a by 0.1" in d.reason and f"gain {d.gain:.3g}" in d.reason


def test_up_and_down_use_f_up_and_f_down_and_the_band_between_holds():
    up = decision("mwf", [90, 90, 90, 10, 10, 10])
    assert (up.action, up.needed, up.current) == ("up", 4, 2) and "4 consumers of f_up·C = 100" in up.reason
    headroom = decision("mwf", [90, 90, 90, 10, 10, 10], guards=Guards(f_up=0.9, f_down=0.4))
    assert headroom.needed == 4
    # 60 in all fits one consumer of 0.7·C = 70: down to one, and the packing leaves b out
    down = decision("mwf", [10, 10, 10, 10, 10, 10])
    assert (down.action, down.needed, down.remove) == ("down", 1, ["b"])
    assert "1 consumer of f_down·C = 70" in down.reason
    # 90 in all: one consumer of C holds it, but not one of 0.7·C: the band, so the group keeps its two
    band = decision("mwf", [15, 15, 15, 15, 15, 15])
    assert (band.action, band.needed) == ("none", 2)
    # the seed's (0.9, 0.4): down only when the load fits fewer consumers of 40
    assert decision("mwf", [10] * 6, guards=Guards(f_up=0.9, f_down=0.4)).action == "none"
    assert decision("mwf", [5] * 6, guards=Guards(f_up=0.9, f_down=0.4)).action == "down"


def test_down_names_the_members_the_smaller_packing_leaves_out():
    three = {"a": [("t", 0), ("t", 1)], "b": [("t", 2), ("t", 3)], "c": [("t", 4), ("t", 5)]}
    d = decision("mwf", [1, 1, 1, 1, 1, 1], assignment=three)
    assert d.action == "down" and d.needed == 1 and len(d.remove) == 2 and set(d.remove) < {"a", "b", "c"}


def test_guards_hold_back_a_reassignment_and_say_which():
    rates = [60, 30, 20, 10, 10, 10]
    free = decision("mwf", rates)
    assert free.action == "reass"
    small = decision("mwf", rates, guards=Guards(min_gain=0.5))
    assert small.action == "none" and "under min_gain 0.5" in small.reason and small.gain == free.gain
    moves = decision("mwf", rates, guards=Guards(max_moves=free.moves - 1))
    assert moves.action == "none" and f"more than max_moves {free.moves - 1}" in moves.reason
    budget = decision("mwf", rates, guards=Guards(max_rscore=free.rscore / 2))
    assert budget.action == "none" and "above max_rscore" in budget.reason
    young = decision("mwf", rates, guards=Guards(min_interval_s=30), age_s=12.5)
    assert young.action == "none" and "12.5 s old" in young.reason and young.gain is None
    old = decision("mwf", rates, guards=Guards(min_interval_s=30), age_s=31)
    assert old.action == "reass"
    # the algorithm's own budget shapes the proposal: mwf then moves at most one partition
    capped = decision("mwf", rates, params={"max_moves": 1})
    assert capped.moves <= 1


def test_an_algorithm_that_cannot_improve_is_not_asked_to_rebalance():
    # range keeps its layout whatever the rates: no gain, so no rebalance storm
    d = decision("range", [60, 30, 20, 10, 10, 10])
    assert d.action == "none" and d.overloaded == ["a"] and d.gain == 0 and "min_gain" in d.reason


def test_a_partition_no_member_holds_is_reassigned_whatever_its_rate():
    held = {"a": [("t", 0), ("t", 1), ("t", 2)], "b": [("t", 3), ("t", 4)]}
    d = decision("mwf", [30, 30, 30, 20, 20, 0], assignment=held)
    assert d.action == "reass" and d.unowned == 1 and d.overloaded == [] and "1 partition no member holds" in d.reason
    assert d.gain == 0 and d.moves == 0  # a partition given its first member is not a move
    # partitions of a topic the group does not read are not the group's
    other = [*KEYS, ("other", 0)]
    d = decision("mwf", [30, 30, 30, 10, 10, 10, 500], keys=other)
    assert (d.action, d.unowned, d.total_rate) == ("none", 0, 120)


def test_member_capacities_set_each_members_limit():
    rates = [60, 30, 20, 10, 10, 10]
    big_a = decision("mwf", rates, caps={"a": 200.0})
    assert big_a.action == "none" and big_a.overloaded == []
    with pytest.raises(AssignmentError) as stranger:
        decision("mwf", rates, caps={"z": 200.0})
    assert stranger.value.code == "invalid_members"


def test_least_loaded_decides_by_its_own_procedure_1():
    params = {"mu": 100.0, "w_sla": 5.0, "rebalance_s": 0.0}
    up = decision("least-loaded", [90, 90, 90, 10, 10, 10], params)
    assert (up.action, up.needed) == ("up", 4) and "Procedure 1" in up.reason
    down = decision("least-loaded", [5] * 6, params)
    assert (down.action, down.needed, down.remove) == ("down", 1, ["b"])
    # a: 60 + 30 + 20 = 110 > μ·f_up = 90; two consumers still suffice: REASS
    reass = decision("least-loaded", [60, 30, 20, 10, 10, 10], params)
    assert reass.action == "reass" and reass.overloaded == ["a"] and reass.gain == pytest.approx(0.2)
    # f_up / f_down of the query are least-loaded's own when its params do not set them
    assert decision("least-loaded", [30, 30, 30, 10, 10, 10], params, Guards(f_up=0.5, f_down=0.2)).action == "up"
    with pytest.raises(AssignmentError) as unordered:
        decision("least-loaded", [30] * 6, params, Guards(f_up=0.3, f_down=0.4))
    assert unordered.value.code == "invalid_parameter"


def test_least_loaded_reassigns_on_lag_alone():
    params = {"mu": 100.0, "w_sla": 1.0, "f_up": 0.9, "f_down": 0.4, "rebalance_s": 0.0}
    # rates are low, but a holds 50 + 40 + 40 = 130 of lag > μ·w_sla·f = 90, while b holds none
    d = decision("least-loaded", [10, 10, 10, 10, 10, 10], params, lags=[50, 40, 40, 0, 0, 0])
    assert d.action == "reass" and d.overloaded == ["a"] and d.gain == pytest.approx(0.4)  # (130 − 90) / (μ·w_sla)


def test_an_algorithm_that_needs_members_is_sized_by_bfd():
    d = decision("kip441", [90, 90, 90, 10, 10, 10], {"member_lags": {"a": [], "b": []}})
    assert (d.action, d.algorithm, d.needed) == ("up", "bfd", 3) and "kip441 cannot size" in d.reason


def test_bad_input_is_refused_with_its_code():
    with pytest.raises(AssignmentError) as band:
        decision("mwf", [10] * 6, guards=Guards(f_up=0.5, f_down=0.5))
    assert band.value.code == "invalid_parameter" and "f_down" in str(band.value)
    with pytest.raises(AssignmentError) as params:
        decision("mwf", [10] * 6, params={"max_moves": -1})
    assert params.value.code == "invalid_parameter"
    with pytest.raises(AssignmentError) as rates:
        decision("mwf", [10, 10, 10, 10, 10, -1])
    assert rates.value.code == "invalid_rate"


@pytest.mark.skipif(not native.AVAILABLE, reason="the compiled core is not built")
@pytest.mark.parametrize("name", ["mwf", "bfd", "least-loaded"])
@pytest.mark.parametrize(
    "rates", [[60, 30, 20, 10, 10, 10], [90, 90, 90, 10, 10, 10], [5] * 6, [30, 30, 30, 10, 10, 10]]
)
def test_the_compiled_core_decides_as_the_reference(name, rates):
    params = {"mu": 100.0, "w_sla": 5.0} if name == "least-loaded" else None
    reference = decide(state(rates), get_algorithm(name), params, Guards())
    compiled = decide(state(rates), get_algorithm(name), params, Guards(), native=True)
    assert vars(compiled) == vars(reference)
    assert vars(decide(state(rates), get_algorithm(name), params, Guards())) == vars(reference)  # deterministic
