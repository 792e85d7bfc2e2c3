"""Differential tests: the compiled core (groupfit_native) against the pure-Python reference, on random
instances of every algorithm it runs — autoscale and member mode, equal and mixed member capacities, ties
(integer rates), partitions above capacity, new and gone partitions, migration budgets, lags — requiring
the same assignment (each consumer's partitions in the same order), loads, moves, Rscore, delta and
outputs."""

from __future__ import annotations

import random
import typing

import pytest

from app.core import extension, native
from app.core.algorithm import get_algorithm
from app.core.assign import Outcome, solve
from app.core.model import Problem, build_problem

pytestmark = pytest.mark.skipif(not native.AVAILABLE, reason="the compiled core is not installed")

INSTANCES = 10_000
IDS = [
    "c0",
    "c1",
    "c2",
    "c3",
    "c10",
    "c11",
    "a",
    "b7",
    "b7x",
    "surplus-0",
    "surplus-2",
    "m1",
    "m2",
    "m10",
    "c01",
    "m01",
]


def instance(rnd: random.Random, name: str) -> tuple[Problem, dict]:
    capacity = rnd.choice([100.0, 100.0, 60.0, 250.5])
    n = rnd.randint(0, 24)
    topics = rnd.sample(["t", "u", "orders", "a"], rnd.randint(1, 3))
    keys = rnd.sample([(t, p) for t in topics for p in range(12)], min(n, 12 * len(topics)))

    def rate() -> float:
        kind = rnd.random()
        if kind < 0.5:
            return float(rnd.choice([0, 10, 20, 25, 30, 40, 50, 60]))  # ties
        if kind < 0.6:
            return capacity * rnd.uniform(1.0, 1.8)  # alone above capacity
        return rnd.uniform(0, capacity)

    rates = [rate() for _ in keys]
    lags = [rnd.choice([None, 0.0, rnd.uniform(0, 3 * capacity)]) for _ in keys] if rnd.random() < 0.5 else None
    previous: dict[str, list] = {}
    owners = rnd.sample(IDS, rnd.randint(0, 6))
    if owners:
        gone = [("gone", p) for p in range(rnd.randint(0, 3))]
        for key in [k for k in keys if rnd.random() < 0.8] + gone:
            previous.setdefault(rnd.choice(owners), []).append(key)
        for c in owners:  # a consumer may be listed with nothing
            previous.setdefault(c, []) if rnd.random() < 0.2 else None
    members = None
    capacities: dict[str, float] = {}
    if rnd.random() < 0.4:
        members = rnd.sample(IDS, rnd.randint(1, 6))
        if rnd.random() < 0.5:
            capacities = {m: rnd.choice([capacity, capacity / 2, capacity * 2, 75.0]) for m in members}
    params: dict = {}
    if name.startswith("m") and rnd.random() < 0.5:
        if rnd.random() < 0.7:
            params["max_rscore"] = rnd.choice([0.0, 0.3, 1.0, 2.5])
        if rnd.random() < 0.6:
            params["max_moves"] = rnd.randint(0, 5)
    if name == "least-loaded" and rnd.random() < 0.7:
        params = {
            "mu": rnd.choice([None, capacity, capacity * 0.7]),
            "w_sla": rnd.choice([0.5, 5.0]),
            "f_up": rnd.choice([0.9, 1.0]),
            "f_down": rnd.choice([0.4, 0.2]),
            "rebalance_s": rnd.choice([0.0, 5.0]),
            "plan_rebalance_lag": rnd.random() < 0.7,
        }
    return build_problem(keys, rates, lags, capacity, previous, members, capacities), params


def same(python: Outcome, compiled: Outcome) -> None:
    assert compiled.assignment == python.assignment
    assert compiled.consumers == python.consumers
    assert compiled.owner == python.owner
    assert compiled.loads == python.loads
    assert (compiled.moved, compiled.moved_from) == (python.moved, python.moved_from)
    assert compiled.rscore == python.rscore
    assert compiled.overloaded == python.overloaded
    assert compiled.bins_used == python.bins_used
    assert compiled.outputs == python.outputs
    assert compiled.sparse is not None
    reference = python.delta()
    assert (compiled.sparse.rows, compiled.sparse.columns) == (reference.rows, reference.columns)
    assert compiled.sparse.cells == reference.cells


@pytest.mark.parametrize("name", sorted(native.ALGORITHMS))
def test_compiled_core_equals_the_reference(name: str) -> None:
    algorithm = get_algorithm(name)
    rnd = random.Random(name)
    for i in range(INSTANCES):
        problem, raw = instance(rnd, name)
        params = algorithm.parse_params(raw)
        python = solve(problem, algorithm, params)
        compiled = solve(problem, algorithm, params, native=True)
        try:
            same(python, compiled)
        except AssertionError:
            print(f"instance {i}: {problem!r} params={raw}")
            raise


def test_non_ascii_ids_go_to_the_reference() -> None:
    """Ids whose natural order the compiled core does not reproduce (Python's \\d also matches other scripts'
    digits) are solved by the reference."""
    problem = build_problem([("t", 0), ("t", 1)], [60.0, 60.0], None, 100.0, {"é1": [("t", 0)], "e2": [("t", 1)]})
    assert native.solve(problem, "mwf", get_algorithm("mwf").parse_params({})) is None
    assert solve(problem, get_algorithm("mwf"), None, native=True).sparse is None


def test_ids_whose_numbers_tie_are_ordered_by_the_id_in_both_cores() -> None:
    """ "c01" and "c1" name the same number: the id itself decides ("c01" first), whatever the order they come
    in (the delta's rows were a set's order), and the compiled core ranks them as the reference does."""
    keys = [("t", 0), ("t", 1)]
    for previous in (
        {"c1": [("t", 0), ("gone", 0)], "c01": [("t", 1), ("gone", 1)]},
        {"c01": [("t", 1), ("gone", 1)], "c1": [("t", 0), ("gone", 0)]},
    ):
        problem = build_problem(keys, [60.0, 60.0], None, 100.0, previous)
        python = solve(problem, get_algorithm("bfd"), None)
        compiled = solve(problem, get_algorithm("bfd"), None, native=True)
        assert compiled.sparse is not None
        same(python, compiled)
        assert python.consumers == python.delta().rows == ["c01", "c1"]


def test_the_compiled_table_matches_the_registry() -> None:
    """The compiled core's table of algorithms (ALGORITHMS is its names) against the reference's registry: each
    reads exactly the parameters of the algorithm's model, and a budget is honoured where the model has one."""
    table = extension.module.ALGORITHM_TABLE  # type: ignore[union-attr]
    assert [row["name"] for row in table] == list(extension.module.ALGORITHMS)  # type: ignore[union-attr]
    for row in table:
        model = get_algorithm(row["name"]).params
        assert row["params"] == tuple(model.model_fields), row["name"]
        assert row["budget"] == ("max_moves" in model.model_fields)
        if row["kind"] == "any-fit":  # the registry's names: the rule's initial, "f", "d" when decreasing
            assert row["name"] == row["fit"][0] + "f" + ("d" if row["decreasing"] else "")


def test_parameters_come_complete() -> None:
    """The compiled core holds no defaults: a parameter missing (or one it does not read) is a bug, said so."""
    problem = build_problem([("t", 0)], [1.0], None, 100.0)
    for name, params in (("least-loaded", {"mu": None}), ("mwf", {}), ("bfd", {"max_moves": 1})):
        bulk = extension.module.from_objects(problem.keys, problem.rates, problem.lags, {}, None, {})  # type: ignore[union-attr]
        with pytest.raises(RuntimeError, match="a bug"):
            bulk.solve(name, 100.0, params)
    # without parameters the reference's model gives its defaults
    assert solve(problem, get_algorithm("mwf"), None, native=True).sparse is not None


def test_choice_of_core() -> None:
    assert native.choose("python") is False
    assert native.choose("auto") is True and native.choose("native") is True
    with pytest.raises(ValueError, match="GROUPFIT_CORE"):
        native.choose("fast")
    assert "compiled" in native.describe(True, "auto") and "pure Python" in native.describe(False, "python")


def test_the_service_answers_the_same_with_either_core() -> None:
    """The whole answer (assignment, consumers, moves, delta, outputs), as the service and the CLI encode it."""
    import msgspec

    from app.codec.assign import AssignRequest, DeltaForm
    from app.codec.assign_input import Limits, ReferenceInput
    from app.settings import Settings

    rnd = random.Random(5)
    partitions = [{"topic": f"t{j % 3}", "partition": j, "rate": rnd.choice([10, 30, 45, 120])} for j in range(60)]
    previous = {f"c{i}": [{"topic": f"t{j % 3}", "partition": j} for j in range(i, 70, 7)] for i in range(7)}
    compiled, python = Limits.of(Settings(core="native")), Limits.of(Settings(core="python"))

    def answered(request: AssignRequest, delta: DeltaForm, limits: Limits) -> bytes:
        return ReferenceInput.of(request, delta, keyed=False).completed(None, None, None).compute(limits).answer

    assert compiled.native and not python.native
    for body in (
        {"algorithm": "mwf", "capacity": 100, "partitions": partitions, "previous": previous},
        {"algorithm": "bfd", "capacity": 100, "partitions": partitions, "previous": previous, "members": ["c1", "c3"]},
        {
            "algorithm": "mbfp",
            "capacity": 100,
            "partitions": partitions,
            "previous": previous,
            "params": {"max_moves": 3},
        },
    ):
        request = msgspec.convert(body, AssignRequest)
        for delta in typing.get_args(DeltaForm):
            assert answered(request, delta, compiled) == answered(request, delta, python)


def test_values_the_arrays_cannot_hold_go_to_the_reference() -> None:
    problem = build_problem([("t", 2**70), ("t", 1)], [60.0, 60.0], None, 100.0, {"a": [("t", 2**70)]})
    assert native.solve(problem, "bfd", None) is None
    assert solve(problem, get_algorithm("bfd"), None, native=True).assignment == {"a": [0], "c0": [1]}
