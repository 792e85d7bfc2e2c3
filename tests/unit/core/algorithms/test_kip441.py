"""kip441: KIP-441's lag-ranked assignment, with the KIP's three example scenarios."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.algorithm import get_algorithm
from app.core.assign import solve
from app.core.errors import AssignmentError
from app.core.model import build_problem

ACCEPTABLE = 10_000  # acceptable_recovery_lag's default


def kip(members, previous, lags, tasks=3, stateless=(), **params):
    """Tasks T/1..T/tasks (plus stateless partitions S/n); lags: member → {task: lag}; previous: member → tasks."""
    keys = [("T", t) for t in range(1, tasks + 1)] + [("S", s) for s in stateless]
    member_lags = {
        m: [{"topic": "T", "partition": t, "lag": lag} for t, lag in hosted.items()] for m, hosted in lags.items()
    }
    previous = {m: [("T", t) if isinstance(t, int) else t for t in held] for m, held in previous.items()}
    problem = build_problem(keys, [1.0] * len(keys), None, 100, previous, members)
    algorithm = get_algorithm("kip441")
    raw = {"member_lags": member_lags, "stateless": [{"topic": "S", "partition": s} for s in stateless], **params}
    out = solve(problem, algorithm, algorithm.parse_params(raw))
    view = {
        role: {m: sorted(partition for _, partition in held) for m, held in out.outputs[role].items()}
        for role in ("actives", "standbys", "warmups")
    }
    return out, view


def holders(view, role, task):
    return [m for m, held in view[role].items() if task in held]


def test_kip_scaling_out():
    # Initial state: I1 active T1, T3 and standby T2; I2 active T2 and standby T1, T3. I3 joins with no state.
    lags = {"I1": {1: 0, 3: 0, 2: 0}, "I2": {2: 0, 1: 0, 3: 0}}
    out, view = kip(["I1", "I2", "I3"], {"I1": [1, 3], "I2": [2]}, lags, num_standbys=1)
    # First rebalance (catching up): the actives stay where the state is; I3 warms up T3, the task the
    # balanced proposal moves to it, and a probing rebalance is asked for.
    assert view["actives"] == {"I1": [1, 3], "I2": [2], "I3": []}
    assert view["warmups"] == {"I1": [], "I2": [], "I3": [3]}
    assert out.outputs["probing_rebalance_after_ms"] == 600_000 and out.outputs["balanced"] is False
    # One standby per task, on the next most caught-up member (I3 has no state yet).
    assert view["standbys"] == {"I1": [2], "I2": [1, 3], "I3": []}
    # I3 finished catching up on T3: the second rebalance is the stable, balanced state.
    lags["I3"] = {3: 0}
    out, view = kip(["I1", "I2", "I3"], {"I1": [1, 3], "I2": [2]}, lags, num_standbys=1)
    assert view["actives"] == {"I1": [1], "I2": [2], "I3": [3]}
    assert not any(view["warmups"].values()) and out.outputs["probing_rebalance_after_ms"] is None
    for t in (1, 2, 3):
        standby = holders(view, "standbys", t)
        assert len(standby) == 1 and t not in view["actives"][standby[0]]


def test_kip_scaling_in_with_standbys_in_sync():
    # Initial state: I1 active T1, T4; I2 active T2; I3 active T3; standbys in sync. I1 goes away.
    lags = {"I2": {2: 0, 1: 0, 4: 0}, "I3": {3: 0, 2: 0}}
    out, view = kip(["I2", "I3"], {"I1": [1, 4], "I2": [2], "I3": [3]}, lags, tasks=4, num_standbys=1)
    # The KIP's table: one rebalance and done.
    assert view["actives"] == {"I2": [1, 4], "I3": [2, 3]}
    assert view["standbys"] == {"I2": [2, 3], "I3": [1, 4]}
    assert out.outputs["probing_rebalance_after_ms"] is None


def test_kip_scaling_in_with_lagging_standbys():
    lags = {"I2": {2: 0, 1: 50_000, 4: 50_000}, "I3": {3: 0, 2: 50_000}}
    out, view = kip(["I2", "I3"], {"I1": [1, 4], "I2": [2], "I3": [3]}, lags, tasks=4, num_standbys=1)
    # The KIP's first rebalance: I2 is the most caught up on T1, T2, T4 and takes them all for now; I3
    # holds T1, T2, T4 as replicas (the KIP lists warm-ups with the standbys): a standby of T1 and T2 and
    # a warm-up of T4, the task the balanced assignment gives it.
    assert view["actives"] == {"I2": [1, 2, 4], "I3": [3]}
    assert view["warmups"] == {"I2": [], "I3": [4]}
    assert view["standbys"] == {"I2": [3], "I3": [1, 2]}
    assert out.outputs["probing_rebalance_after_ms"] == 600_000
    # I3 finished restoring T4: the second rebalance is the KIP's stable state.
    lags["I3"][4] = 0
    out, view = kip(["I2", "I3"], {"I2": [1, 2, 4], "I3": [3]}, lags, tasks=4, num_standbys=1)
    assert view["actives"] == {"I2": [1, 2], "I3": [3, 4]}
    assert view["standbys"] == {"I2": [3, 4], "I3": [1, 2]}
    assert out.outputs["probing_rebalance_after_ms"] is None


def test_kip_converged_assignment_comes_back_unchanged():
    lags = {"a": {1: 0, 2: 0, 3: 0}, "b": {1: 0, 2: 0, 3: 0}}
    out, view = kip(["a", "b"], {"a": [2], "b": [1, 3]}, lags)
    assert view["actives"] == {"a": [2], "b": [1, 3]} and out.rscore == 0


def test_balance_factor_and_max_warmup_replicas():
    # Six tasks, all on a; b and c have no state. balance_factor 1 wants 2/2/2: four moves, two warm-ups at a time.
    lags = {"a": {t: 0 for t in range(1, 7)}}
    out, view = kip(["a", "b", "c"], {"a": [1, 2, 3, 4, 5, 6]}, lags, tasks=6)
    assert view["actives"] == {"a": [1, 2, 3, 4, 5, 6], "b": [], "c": []}
    assert sum(len(held) for held in view["warmups"].values()) == 2
    out, view = kip(["a", "b", "c"], {"a": [1, 2, 3, 4, 5, 6]}, lags, tasks=6, max_warmup_replicas=10)
    assert sorted(len(held) for held in view["warmups"].values()) == [0, 2, 2]
    # balance_factor 6 accepts 6/0/0 as balanced: nothing to warm up, no probing rebalance.
    out, view = kip(["a", "b", "c"], {"a": [1, 2, 3, 4, 5, 6]}, lags, tasks=6, balance_factor=6)
    assert not any(view["warmups"].values()) and out.outputs["probing_rebalance_after_ms"] is None


def test_stateless_partitions_fill_around_the_actives_and_stay_put():
    lags = {"a": {1: 0, 2: 0}, "b": {1: 0, 2: 0}}
    out, view = kip(["a", "b"], {"a": [1, ("S", 0)], "b": [2, ("S", 1)]}, lags, tasks=2, stateless=(0, 1))
    assert out.rscore == 0
    assert view["actives"] == {"a": [1], "b": [2]}
    # A new member: the stateless partitions go to the member with the fewest tasks.
    out, view = kip(["a", "b", "c"], {"a": [1, 2]}, lags, tasks=2, stateless=(0,))
    assert [out.problem.keys[j] for j in out.assignment["c"]] == [("S", 0)]


def test_kip_needs_members_and_known_partitions():
    problem = build_problem([("T", 1)], [1.0], None, 1)
    kip441 = get_algorithm("kip441")
    with pytest.raises(AssignmentError) as error:
        solve(problem, kip441, kip441.parse_params({}))
    assert error.value.code == "invalid_members"
    with pytest.raises(AssignmentError) as error:
        kip(["a"], {}, {"b": {1: 0}})
    assert error.value.code == "invalid_parameter" and "b" in error.value.message
    with pytest.raises(AssignmentError) as error:
        kip(["a"], {}, {"a": {9: 0}})
    assert error.value.code == "invalid_parameter" and "T/9" in error.value.message
    with pytest.raises(AssignmentError) as error:
        kip441.parse_params({"probing_rebalance_interval_ms": 1000})  # at least one minute
    assert error.value.code == "invalid_parameter"


@st.composite
def groups(draw):
    tasks = draw(st.integers(1, 8))
    members = ["m1", "m2", "m3", "m4"][: draw(st.integers(1, 4))]
    lags = {
        m: {t: draw(st.sampled_from([0, 5, 20_000, 90_000])) for t in range(1, tasks + 1) if draw(st.booleans())}
        for m in members
    }
    previous = {}
    for t in range(1, tasks + 1):
        owner = draw(st.sampled_from(members + ["gone", None]))
        if owner is not None:
            previous.setdefault(owner, []).append(t)
    return tasks, members, lags, previous, draw(st.integers(0, 2))


def rank(lags, member, task):
    lag = lags[member].get(task)
    return math.inf if lag is None else (0 if lag <= ACCEPTABLE else lag)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(group=groups())
def test_kip_invariants(group):
    tasks, members, lags, previous, standbys = group
    out, view = kip(members, previous, lags, tasks=tasks, num_standbys=standbys)
    for t in range(1, tasks + 1):
        # Exactly one active, on a most caught-up member: never a lagging one when a caught-up one exists.
        active = holders(view, "actives", t)
        assert len(active) == 1
        assert rank(lags, active[0], t) == min(rank(lags, m, t) for m in members)
        # Standbys and warm-ups never share a member with the active or with each other.
        replicas = active + holders(view, "standbys", t) + holders(view, "warmups", t)
        assert len(replicas) == len(set(replicas))
        assert len(holders(view, "standbys", t)) == min(standbys, len(members) - 1 - len(holders(view, "warmups", t)))
    assert out.assignment == {m: [out.problem.index["T", t] for t in held] for m, held in view["actives"].items()}
    # Convergence: once no warm-up is pending, the answer fed back comes back unchanged.
    if not any(view["warmups"].values()):
        again, view_again = kip(members, view["actives"], lags, tasks=tasks, num_standbys=standbys)
        assert view_again["actives"] == view["actives"] and again.rscore == 0


def test_a_new_idle_instance_gets_a_warmup_toward_balance_and_the_group_converges():
    lags = {"I1": {1: 0, 2: 0}, "I2": {3: 0, 4: 0}}
    members = ["I1", "I2", "I3"]
    out, view = kip(members, {"I1": [1, 2], "I2": [3, 4]}, lags, tasks=4)
    assert view["actives"] == {"I1": [1, 2], "I2": [3, 4], "I3": []}  # I3 has no state yet
    assert view["warmups"] == {"I1": [], "I2": [], "I3": [1]}
    assert out.outputs["balanced"] is False and out.outputs["probing_rebalance_after_ms"] is not None
    # The probing rebalance after the warm-up caught up hands T1 over; nothing is left to warm up.
    lags["I3"] = {1: 0}
    out, view = kip(members, view["actives"], lags, tasks=4)
    assert view["actives"] == {"I1": [2], "I2": [3, 4], "I3": [1]}
    assert out.outputs["balanced"] is True and out.outputs["probing_rebalance_after_ms"] is None
    assert not any(view["warmups"].values())
    # And then it stays.
    out, again = kip(members, view["actives"], lags, tasks=4)
    assert again["actives"] == view["actives"] and not any(again["warmups"].values())


def test_no_warmup_on_an_instance_that_holds_a_lagging_standby():
    lags = {"I1": {1: 0, 2: 0}, "I2": {1: 50_000, 2: 50_000}}
    out, view = kip(["I1", "I2"], {"I1": [1, 2]}, lags, tasks=2, num_standbys=1, max_warmup_replicas=1)
    assert view["actives"] == {"I1": [1, 2], "I2": []}
    assert view["warmups"] == {"I1": [], "I2": []}
    assert view["standbys"] == {"I1": [], "I2": [1, 2]}  # every task keeps its standby
    assert out.outputs["probing_rebalance_after_ms"] is not None  # T2 still heads to I2
