"""Zone-aware assignment (issue #29) in the core: when a request is zone-aware, the invariants of every algorithm
on zone-aware instances, the racks consumers get and keep, reads kept in their zone where capacity allows, the
zone-aware heuristics against the exact model where a zone lacks capacity, and the migration budget."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core import native
from app.core.algorithm import algorithms, get_algorithm
from app.core.algorithms import modified_any_fit, search
from app.core.assign import Outcome, solve, zone_report
from app.core.errors import AssignmentError
from app.core.model import MAX_PARTITION_RACKS, Problem, build_problem
from tests.unit.core.test_native import same
from tests.unit.core.test_properties import NEEDS_PARAMETERS, check_invariants, instances

RACKS = ("a", "b", "c")
ZONE_AWARE = ("bf", "wf", "bfd", "wfd", "mwf", "mbf", "mwfp", "mbfp", "repack", "exact")
HEURISTICS = ("bfd", "wfd", "mwf", "mbf", "mwfp", "mbfp", "repack")


def run(problem: Problem, name: str, **params) -> Outcome:
    algorithm = get_algorithm(name)
    return solve(problem, algorithm, algorithm.parse_params(params))


def over_capacity(problem: Problem, outcome: Outcome) -> list[str]:
    """Consumers holding two or more partitions above their capacity."""
    return [
        c
        for c, held in outcome.assignment.items()
        if len(held) > 1 and outcome.loads[c] > problem.capacity_of(c) * (1 + 1e-9)
    ]


def test_a_request_is_zone_aware_when_partitions_and_consumers_can_have_racks() -> None:
    keys, rates = [("t", 0), ("t", 1)], [10.0, 20.0]
    assert build_problem(keys, rates, None, 100).zones is None
    assert build_problem(keys, rates, None, 100, racks=[None, []]).zones is None  # none names one
    assert build_problem(keys, rates, None, 100, racks=[["a"], None]).zones is not None  # groupfit sizes the group
    members = ["m1", "m2"]
    assert build_problem(keys, rates, None, 100, None, members, racks=[["a"], ["b"]]).zones is None  # no member rack
    zoned = build_problem(
        keys, rates, None, 100, None, members, racks=[["a"], ["b", "a", "b"]], consumer_racks={"m1": "c"}
    )
    assert zoned.zones is not None
    assert zoned.zones.names == ["a", "b", "c"] and zoned.zones.of_partition == [(0,), (0, 1)]
    assert zoned.zones.rack_of("m1") == 2 and zoned.zones.rack_of("m2") == -1


@pytest.mark.parametrize(
    ("racks", "consumer_racks", "members", "says"),
    [
        ([["a"], [""]], {}, None, "non-empty string"),
        ([["a"], ["x" * 256]], {}, None, "at most 255"),
        ([["a"], [f"r{i}" for i in range(MAX_PARTITION_RACKS + 1)]], {}, None, "lists 33 racks"),
        ([["a"], ["b"]], {"m9": "a"}, ["m1"], "not a member"),
        ([["a"], ["b"]], {"c0": "a"}, None, "not a consumer of the previous assignment"),
        ([["a"], ["b"]], {"m1": ""}, ["m1"], "non-empty string"),
    ],
)
def test_bad_racks_are_refused_by_the_model(racks, consumer_racks, members, says) -> None:
    with pytest.raises(AssignmentError) as caught:
        build_problem(
            [("t", 0), ("t", 1)], [1.0, 1.0], None, 100, {}, members, None, racks=racks, consumer_racks=consumer_racks
        )
    assert caught.value.code == "invalid_racks" and says in caught.value.message


@st.composite
def zone_instances(draw, with_members: bool):
    """test_properties' instances with racks: partitions with one to three racks (or none), some previous
    consumers or members with a rack."""
    plain = draw(instances(with_members))
    if not plain.size:
        plain = build_problem([("t", 0)], [1.0], None, plain.capacity, {}, plain.members)
    racks = [draw(st.lists(st.sampled_from(RACKS), max_size=3)) for _ in plain.keys]
    racks[0] = racks[0] or ["a"]
    consumers = plain.members if plain.members is not None else list(plain.previous)
    known = {c: draw(st.sampled_from(RACKS)) for c in consumers if draw(st.booleans())}
    if plain.members is not None and not known:
        known = {plain.members[0]: "a"}
    return build_problem(
        plain.keys, plain.rates, None, plain.capacity, plain.previous, plain.members, racks=racks, consumer_racks=known
    )


def runnable() -> list[str]:
    return sorted(name for name in algorithms() if name not in NEEDS_PARAMETERS)


@pytest.mark.parametrize("with_members", [False, True], ids=["autoscale", "members"])
@pytest.mark.parametrize("name", runnable())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_invariants_on_zone_aware_requests(name: str, with_members: bool, data) -> None:
    problem = data.draw(zone_instances(with_members))
    params = {"time_limit_ms": 200} if name == "exact" else {}
    outcome = run(problem, name, **params)
    check_invariants(problem, outcome, name)
    if name in ZONE_AWARE and problem.members is None:  # (members may be too few for what they must take)
        assert not over_capacity(problem, outcome)
    report = outcome.zones
    assert report is not None and set(report.racks) == set(outcome.assignment)
    zones = problem.zones
    assert zones is not None
    for consumer, rack in report.racks.items():
        if consumer in problem.consumer_racks:  # a member, or a consumer that ran before: its rack is its own
            assert rack == problem.consumer_racks[consumer]
        elif problem.members is not None or consumer in problem.previous:
            assert rack is None
        held = outcome.assignment[consumer]
        expected = math.fsum(
            problem.rates[j] for j in held if rack is None or zones.rack(rack) not in zones.of_partition[j]
        )
        assert report.cross_zone[consumer] == pytest.approx(expected)
    if name != "exact":  # exact's wall clock guard aside, the same input gives the same answer
        again = run(problem, name, **params)
        assert again.assignment == outcome.assignment and again.zones == report


def even_instance(seed: int, members: bool) -> Problem:
    """Small partitions (up to 15 % of C) on three racks; with members, two per rack of 1.4 times its load."""
    rnd = random.Random(seed)
    keys = [("t", p) for p in range(60)]
    rates = [float(rnd.randint(1, 15)) for _ in keys]
    racks = [[RACKS[p % 3]] for p in range(60)]
    if not members:
        return build_problem(keys, rates, None, 100.0, racks=racks)
    load = {r: sum(rate for rate, listed in zip(rates, racks) if listed == [r]) for r in RACKS}
    per_rack = {r: math.ceil(1.4 * load[r] / 100) for r in RACKS}
    known = {f"{r}{i}": r for r in RACKS for i in range(per_rack[r])}
    return build_problem(keys, rates, None, 100.0, {}, list(known), None, racks=racks, consumer_racks=known)


@pytest.mark.parametrize("members", [False, True], ids=["autoscale", "members"])
@pytest.mark.parametrize("name", ZONE_AWARE)
def test_every_read_stays_in_its_zone_where_capacity_allows(name: str, members: bool) -> None:
    problem = even_instance(3, members)
    outcome = run(problem, name)
    assert outcome.zones is not None and outcome.zones.cross_zone_rate == 0
    assert not over_capacity(problem, outcome)
    unaware = build_problem(problem.keys, problem.rates, None, 100.0, {}, problem.members)
    assert outcome.consumer_count <= run(unaware, "bfd").consumer_count + 1


def test_new_consumers_are_named_in_the_racks_of_what_they_read_and_running_ones_keep_theirs() -> None:
    """x runs in rack a and read (at twice its capacity) every partition; three consumers are needed anyway: the
    zone-aware MWF keeps x's a-partitions on it and starts consumers in b and c for the others."""
    keys = [("t", p) for p in range(6)]
    racks = [[RACKS[p % 3]] for p in range(6)]
    previous = {"x": keys}
    problem = build_problem(keys, [40.0] * 6, None, 100.0, previous, racks=racks, consumer_racks={"x": "a"})
    outcome = run(problem, "mwf")
    assert outcome.zones is not None and outcome.zones.cross_zone_rate == 0
    assert outcome.zones.racks["x"] == "a" and outcome.assignment["x"] == [0, 3]
    others = {rack: held for c, held in outcome.assignment.items() if c != "x" for rack in [outcome.zones.racks[c]]}
    assert others == {"b": [1, 4], "c": [2, 5]}


def test_a_member_without_a_rack_reads_everything_across_zones() -> None:
    keys = [("t", 0), ("t", 1)]
    problem = build_problem(
        keys, [30.0, 30.0], None, 100.0, {}, ["m1", "m2"], None, racks=[["a"], ["a"]], consumer_racks={"m1": "a"}
    )
    outcome = run(problem, "mwf")
    assert outcome.assignment["m1"] == [0, 1] and outcome.zones is not None and outcome.zones.cross_zone_rate == 0
    report = zone_report(problem, {"m1": [0], "m2": [1]}, {})
    assert report.racks == {"m1": "a", "m2": None} and report.cross_zone == {"m1": 0.0, "m2": 30.0}


def test_partitions_without_racks_are_read_across_zones_wherever_they_go() -> None:
    keys = [("t", 0), ("t", 1)]
    problem = build_problem(keys, [30.0, 50.0], None, 100.0, racks=[["a"], None])
    outcome = run(problem, "bfd")
    assert outcome.zones is not None and outcome.zones.cross_zone_rate == 50.0


def test_members_beyond_capacity_fold_into_a_member_of_the_partitions_zone() -> None:
    """Two members, each full of its zone's partitions; a third b-partition has nowhere to fit: it goes to the
    b-member (above capacity), not to the a-member with as much room."""
    keys = [("t", p) for p in range(3)]
    racks = [["a"], ["b"], ["b"]]
    problem = build_problem(
        keys,
        [90.0, 60.0, 30.0],
        None,
        100.0,
        {},
        ["ma", "mb"],
        None,
        racks=racks,
        consumer_racks={"ma": "a", "mb": "b"},
    )
    outcome = run(problem, "mwf")
    assert outcome.assignment == {"ma": [0], "mb": [1, 2]} and outcome.zones is not None
    assert outcome.zones.cross_zone_rate == 0


def short_zone_instance(seed: int) -> Problem:
    """40 partitions of 2-25 % of C on racks a, b, c; members with 1.25 times the total capacity, c with one member
    (half of a's and b's), so c's leaders do not fit in it."""
    rnd = random.Random(seed)
    keys = [("t", p) for p in range(40)]
    rates = [float(rnd.randint(2, 25)) for _ in keys]
    racks = [[rnd.choice(RACKS)] for _ in keys]
    count = int(1.25 * sum(rates) / 100) + 1
    known = {f"m{i}": RACKS[min(2, i * 5 // (2 * count))] for i in range(count)}
    return build_problem(keys, rates, None, 100.0, {}, list(known), None, racks=racks, consumer_racks=known)


@pytest.mark.parametrize("seed", [0, 2, 4, 6])
def test_where_a_zone_lacks_capacity_the_heuristics_are_within_1_percent_of_the_least_cross_zone_rate(
    seed: int,
) -> None:
    problem = short_zone_instance(seed)
    total = math.fsum(problem.rates)
    exact = run(problem, "exact", time_limit_ms=5000)
    assert exact.outputs["optimal"] is True and exact.outputs["status"]["cross_zone"] == "OPTIMAL"
    assert exact.zones is not None and exact.outputs["cross_zone_rate"] == pytest.approx(exact.zones.cross_zone_rate)
    shortfall = sum(
        max(0.0, sum(r for r, listed in zip(problem.rates, problem.racks or []) if listed == (rack,)) - 100.0 * n)
        for rack, n in ((rack, sum(1 for m in problem.consumer_racks.values() if m == rack)) for rack in RACKS)
    )
    assert exact.zones.cross_zone_rate >= shortfall > 0  # c lacks capacity: some rate must cross
    for name in ("mwf", "bfd", "repack"):
        outcome = run(problem, name)
        assert outcome.zones is not None and not over_capacity(problem, outcome)
        assert outcome.consumer_count <= exact.consumer_count + 1
        assert outcome.zones.cross_zone_rate <= exact.zones.cross_zone_rate + 0.01 * total, name


def transition_instance() -> Problem:
    """Rack-unaware MWF's assignment of 90 partitions on three racks (about two thirds read across zones) as the
    previous one, each consumer's rack where most of its rate is local."""
    rnd = random.Random(7)
    keys = [("t", p) for p in range(90)]
    rates = [float(rnd.randint(1, 15)) for _ in keys]
    racks = [[RACKS[p % 3]] for p in range(90)]
    unaware = run(build_problem(keys, rates, None, 100.0), "mwf")
    previous = {c: [keys[j] for j in held] for c, held in unaware.assignment.items()}
    started = build_problem(keys, rates, None, 100.0, racks=racks)  # each consumer new: started where it reads most
    known = {c: rack for c, rack in zone_report(started, unaware.assignment, {}).racks.items() if rack}
    assert len(known) == len(previous)
    return build_problem(keys, rates, None, 100.0, previous, racks=racks, consumer_racks=known)


@pytest.mark.parametrize("name", ["mwf", "mbf", "mwfp", "repack"])
@pytest.mark.parametrize("budget", [{"max_moves": 5}, {"max_rscore": 0.4}, {"max_moves": 12, "max_rscore": 1.0}])
def test_the_migration_budget_caps_the_moves_into_zones(name: str, budget: dict) -> None:
    problem = transition_instance()
    before = zone_report(problem, problem.previous_indices, {}).cross_zone_rate
    outcome = run(problem, name, **budget)
    assert len(outcome.moved) <= budget.get("max_moves", math.inf)
    assert outcome.rscore <= budget.get("max_rscore", math.inf) + 1e-9
    assert outcome.zones is not None and outcome.zones.cross_zone_rate <= before  # no move takes a read out of its zone
    free = run(problem, name)
    assert free.zones is not None and free.zones.cross_zone_rate <= 0.05 * math.fsum(problem.rates)


def test_the_objectives_come_in_order_consumers_then_cross_zone_then_moves() -> None:
    """Three consumers of 60 each in racks a, b, c: two of 20 fit beside any, so a zone-aware heuristic closes
    none to keep reads local (consumers first: it may not open a fourth), and moves nothing it need not."""
    keys = [("t", p) for p in range(5)]
    racks = [["a"], ["b"], ["c"], ["a"], ["b"]]
    previous = {"x": [keys[0], keys[4]], "y": [keys[1], keys[3]], "z": [keys[2]]}
    known = {"x": "a", "y": "b", "z": "c"}
    problem = build_problem(
        keys, [60.0, 60.0, 60.0, 20.0, 20.0], None, 100.0, previous, racks=racks, consumer_racks=known
    )
    for name in ("mwf", "bfd"):
        outcome = run(problem, name)
        assert outcome.consumer_count == 3 and outcome.zones is not None
        assert outcome.zones.cross_zone_rate == 0 and sorted(outcome.assignment) == ["x", "y", "z"]
        assert outcome.assignment == {"x": [0, 3], "y": [1, 4], "z": [2]} and len(outcome.moved) == 2


def drifted_short_zone_instance(n: int) -> Problem:
    """n partitions of up to a tenth of C, each led in one of three racks; members with 1.25 times the total
    capacity, rack c's half of a's or b's; the previous assignment is MWF's for the rates before a drift of
    up to 10 %: many of c's reads cross zones and its members are full."""
    rnd = random.Random(29)
    keys = [("t", p) for p in range(n)]
    before = [rnd.uniform(0, 100.0) for _ in keys]
    racks = [[RACKS[p % 3]] for p in range(n)]
    count = math.ceil(1.25 * math.fsum(before) / 1000.0)
    known = {f"m{i}": RACKS[0 if i < 2 * count // 5 else 1 if i < 4 * count // 5 else 2] for i in range(count)}
    first = build_problem(keys, before, None, 1000.0, {}, list(known), None, racks=racks, consumer_racks=known)
    previous = {c: [keys[j] for j in held] for c, held in run(first, "mwf").assignment.items() if held}
    rates = [rate * rnd.uniform(0.9, 1.1) for rate in before]
    return build_problem(keys, rates, None, 1000.0, previous, list(known), None, racks=racks, consumer_racks=known)


@pytest.mark.skipif(not native.AVAILABLE, reason="the compiled core is not installed")
def test_localize_stops_its_exact_re_placements_at_their_budget_alike_in_both_cores(monkeypatch) -> None:
    problem = drifted_short_zone_instance(3000)
    states: list[search.SearchState] = []

    def kept(*args):
        states.append(search.finish_zoned(*args))
        return states[-1]

    monkeypatch.setattr(modified_any_fit, "finish_zoned", kept)
    algorithm = get_algorithm("mwf")
    params = algorithm.parse_params({})
    reference = solve(problem, algorithm, params)
    assert states and states[0].exact_left is not None and states[0].exact_left <= 0  # the budget was spent
    same(reference, solve(problem, algorithm, params, native=True))
    assert reference.zones is not None and not over_capacity(problem, reference)
    shortfall = math.fsum(problem.rates[j] for j in range(problem.size) if j % 3 == 2) - 1000.0 * sum(
        1 for rack in problem.consumer_racks.values() if rack == "c"
    )
    assert 0 < shortfall <= reference.zones.cross_zone_rate <= shortfall + 0.01 * math.fsum(problem.rates)
