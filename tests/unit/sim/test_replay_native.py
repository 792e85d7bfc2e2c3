"""Differential tests of the replay: the whole stream through the compiled core in one call against the
reference (each measurement's Problem built and solved in Python), for every algorithm the compiled core runs,
on the published stream and generated ones (shuffled listings, several topics, partitions that leave and
return, ties, rates above C, migration budgets, least-loaded's parameters): the same consumers, Rscore,
capacity verdicts, moves and owners per measurement, so the same latency; and the same error where the
reference refuses a stream."""

from __future__ import annotations

import random

import numpy as np
import pytest

from app.core import native
from app.core.algorithm import get_algorithm
from app.core.errors import AssignmentError
from app.sim.latency import LatencyModel, Owners
from app.sim.replay import Run, replay
from app.sim.stream import generate_stream, load_stream

pytestmark = pytest.mark.skipif(not native.AVAILABLE, reason="the compiled core is not installed")

ALGORITHMS = sorted(native.ALGORITHMS)


def stream_of(rnd: random.Random, measurements: int) -> list[dict]:
    """Partitions of up to three topics, listed in a random order, some leaving and coming back; rates from
    a few integers (ties), anywhere below C, or above it."""
    topics = rnd.sample(["t", "orders", "a", "u-2"], rnd.randint(1, 3))
    universe = [(t, p) for t in topics for p in range(rnd.randint(1, 40))]
    level = {key: rnd.uniform(0, 100) for key in universe}
    stream = []
    for _ in range(measurements):
        present = [key for key in universe if rnd.random() < 0.9]
        rnd.shuffle(present)
        measurement: dict[str, dict[str, float]] = {}
        for topic, partition in present:
            kind = rnd.random()
            if kind < 0.3:
                rate = float(rnd.choice([0, 10, 25, 50]))
            elif kind < 0.35:
                rate = rnd.uniform(100, 150)
            else:
                level[(topic, partition)] = min(100.0, max(0.0, level[(topic, partition)] + rnd.uniform(-15, 15)))
                rate = level[(topic, partition)]
            measurement.setdefault(topic, {})[str(partition)] = rate
        stream.append(measurement)
    return stream


def params_of(rnd: random.Random, name: str) -> dict:
    if name.startswith("m") and rnd.random() < 0.6:
        return {"max_rscore": rnd.choice([None, 0.0, 0.5, 2.0]), "max_moves": rnd.choice([None, 0, 3, 10])}
    if name == "least-loaded" and rnd.random() < 0.7:
        return {
            "mu": rnd.choice([None, 80.0, 130.0]),
            "w_sla": rnd.choice([0.5, 5.0]),
            "f_up": rnd.choice([0.9, 1.0]),
            "f_down": rnd.choice([0.4, 0.2]),
            "rebalance_s": rnd.choice([0.0, 5.0]),
            "plan_rebalance_lag": rnd.random() < 0.5,
        }
    return {}


def owned(run: Run) -> list[tuple[str, str | None]]:
    """Each partition's (consumer, previous consumer) by id: the runs may number their consumers apart."""
    owners = run.owners
    assert owners is not None
    ids = owners.consumers
    return [(ids[o], ids[p] if p >= 0 else None) for o, p in zip(owners.owner.tolist(), owners.previous.tolist())]


def same(compiled: Run, reference: Run) -> None:
    assert compiled.consumers == reference.consumers
    assert compiled.rscore == reference.rscore
    assert compiled.within_capacity == reference.within_capacity
    assert compiled.moves == reference.moves
    assert compiled.owners is not None and reference.owners is not None
    assert np.array_equal(compiled.owners.counts, reference.owners.counts)
    assert np.array_equal(compiled.owners.rates, reference.owners.rates)
    assert owned(compiled) == owned(reference)
    model = LatencyModel(120, 30, 5)
    ours, theirs = compiled.latency(model), reference.latency(model)
    assert np.array_equal(ours.slope, theirs.slope) and np.array_equal(ours.length, theirs.length)
    assert ours.summary() == theirs.summary()


@pytest.mark.parametrize("name", ALGORITHMS)
def test_the_published_stream_replays_alike(name, reference_stream_path):
    stream = load_stream(reference_stream_path)
    same(replay(stream, 100, name, keep=True, compiled=True), replay(stream, 100, name, keep=True, compiled=False))


@pytest.mark.parametrize("name", ALGORITHMS)
def test_generated_streams_replay_alike(name):
    rnd = random.Random(name)
    for case in range(25):
        stream = (
            stream_of(rnd, rnd.randint(1, 12))
            if case % 5
            else generate_stream(rnd.randint(1, 120), 8, rnd.choice([0, 5, 25]), case, topics=rnd.randint(1, 3))
        )
        assert native.stream(stream) is not None  # the compiled core takes it: the comparison is not void
        params = params_of(rnd, name)
        capacity = rnd.choice([100.0, 100.0, 60.0])
        compiled = replay(stream, capacity, name, params, keep=True, compiled=True)
        reference = replay(stream, capacity, name, params, keep=True, compiled=False)
        try:
            same(compiled, reference)
        except AssertionError:
            print(f"case {case}: capacity {capacity}, params {params}, stream {stream}")
            raise


def test_a_stream_on_arrays_replays_as_its_measurements():
    stream = generate_stream(50, 6, 10, 4, topics=2)
    topics = sorted({topic for measurement in stream for topic in measurement})
    keys = [(topics.index(t), int(p), rate) for m in stream for t, ps in m.items() for p, rate in ps.items()]
    arrays = native.module.Stream.of_arrays(
        topics,
        np.array([k[0] for k in keys], dtype=np.uint32),
        np.array([k[1] for k in keys], dtype=np.int64),
        np.array([k[2] for k in keys], dtype=float),
        np.array([sum(len(ps) for ps in m.values()) for m in stream], dtype=np.uint64),
    )
    params = get_algorithm("mwf").parse_params(None)
    ours = native.replay(arrays, "mwf", 100.0, params, 100, True)
    theirs = native.replay(native.stream(stream), "mwf", 100.0, params, 100, True)
    assert (ours.consumers, ours.rscore, ours.owners()) == (theirs.consumers, theirs.rscore, theirs.owners())


@pytest.mark.parametrize(
    "measurement",
    [
        {"t": {"0": -1.0}},
        {"t": {"0": float("nan")}},
        {"t": {"0": float("inf")}},
        {"t": {"x": 1.0}},
        {"": {"0": 1.0}},
        {"t": {"1": 1.0, "01": 2.0}},  # the same partition twice
        {"t": {"99999999999999999999": 1.0}},  # beyond 64 bits: the reference reads it
        {"t": {"0": 1e308, "1": 1e308}},  # a sum that overflows
    ],
)
def test_a_stream_the_compiled_core_declines_is_replayed_or_refused_by_the_reference(measurement):
    stream = [{"t": {"0": 10.0, "1": 20.0}}, measurement]
    assert native.stream(stream) is None
    try:
        expected = replay(stream, 100, "mwf", compiled=False)
    except AssignmentError as error:
        with pytest.raises(AssignmentError) as raised:
            replay(stream, 100, "mwf", compiled=True)
        assert (raised.value.code, raised.value.message) == (error.code, error.message)
    else:
        assert replay(stream, 100, "mwf", compiled=True).consumers == expected.consumers


@pytest.mark.parametrize(
    "name, params, capacity",
    [
        ("bfd", {}, 1e-3),  # Σ rate / C beyond the consumers one answer may have, at the second measurement
        ("least-loaded", {"mu": 1e-300, "f_down": 1e-10}, 100.0),  # μ·f underflows
        ("least-loaded", {"mu": 1e-3}, 100.0),  # least-loaded's Σ rate / (μ·f) beyond the limit
        ("mwf", {}, 0.0),
    ],
)
def test_the_checks_at_each_measurement_refuse_as_the_reference_does(name, params, capacity):
    stream = [{"t": {"0": 0.0}}, {"t": {"0": 90.0, "1": 80.0}}]
    with pytest.raises(AssignmentError) as expected:
        replay(stream, capacity, name, params, compiled=False)
    with pytest.raises(AssignmentError) as raised:
        replay(stream, capacity, name, params, compiled=True)
    assert (raised.value.code, raised.value.message) == (expected.value.code, expected.value.message)


def test_owners_of_names_number_consumers_as_they_appear():
    owners = Owners.of_names([2, 2], [1.0, 2.0, 3.0, 4.0], ["b", "a", "a", "a"], [None, None, "b", "a"])
    assert owners.consumers == ["b", "a"]
    assert owners.owner.tolist() == [0, 1, 1, 1] and owners.previous.tolist() == [-1, -1, 0, 1]
