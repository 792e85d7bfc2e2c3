"""The §VI-C latency model: hand-worked queues, exact percentiles against per-byte sampling, unbounded
queues and parameter checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.core.algorithm import Algorithm, Packing
from app.core.assign import Outcome
from app.core.errors import AssignmentError
from app.core.model import build_problem
from app.sim.latency import LatencyModel, Segments, segments
from app.sim.replay import replay_with


def fixed_replay(stream, owners):
    """A replay whose assignment is given: owners[k] maps partition → consumer at iteration k."""
    state = {"k": 0}

    def pack(problem, _params):
        held = {}
        for j, key in enumerate(problem.keys):
            held.setdefault(owners[min(state["k"], len(owners) - 1)][key[1]], []).append(j)
        state["k"] += 1
        return Packing(held)

    return replay_with(stream, 100, Algorithm("fixed", "test", pack), None, keep=True)


def test_overloaded_fixed_queue_grows_and_carries_over():
    # One consumer, 10 B/s into it, reads 5 B/s: each byte waits 1/5 − 1/10 = 0.1 s more than the one before.
    stream = [{"t": {"0": 10.0}}] * 3
    run = fixed_replay(stream, [{0: "a"}])
    seg = run.latency(LatencyModel(consumer_throughput=5, iteration_s=30, rebalance_s=5))
    # Iterations 2 and 3 (Δ exists for k > 1): 300 bytes each, 0 → 30 s, then 30 → 60 s (backlog carried).
    assert seg.bytes == 600
    assert seg.summary()["max"] == pytest.approx(60)
    assert seg.quantile(0.5) == pytest.approx(30, rel=1e-6)
    assert seg.quantile(0.25) == pytest.approx(15, rel=1e-6)


def test_backlog_drains_when_the_consumer_reads_faster_than_it_receives():
    # 10 B/s in, 5 B/s read for one iteration (backlog 30 s), then 4 B/s in: slope 1/5 − 1/4 = −0.05 s per byte,
    # so the 120 bytes of iteration 3 start at 30 s and end at 24 s.
    stream = [{"t": {"0": 10.0}}, {"t": {"0": 10.0}}, {"t": {"0": 4.0}}]
    seg = fixed_replay(stream, [{0: "a"}]).latency(LatencyModel(5, 30, 5))
    assert seg.bytes == 300 + 120
    assert seg.count_at_most(24.0) == pytest.approx(240)  # iteration 2's first 240 bytes (0.1 s each), none of 3's
    assert seg.quantile(1.0) == pytest.approx(30, rel=1e-6)


def test_rebalanced_queue_waits_for_the_rebalance_then_catches_up():
    # t/1 moves from b to a at iteration 2. a keeps t/0 (4 B/s) and starts t/1 (6 B/s) with C̄ = 10:
    # fixed read at min(C̄, 4) = 4 → no latency; rebalanced read at 10 − 4 = 6 = W_R → flat at t_r = 5 s.
    stream = [{"t": {"0": 4.0, "1": 6.0}}] * 2
    run = fixed_replay(stream, [{0: "a", 1: "b"}, {0: "a", 1: "a"}])
    seg = run.latency(LatencyModel(consumer_throughput=10, iteration_s=30, rebalance_s=5))
    assert seg.bytes == 300
    assert seg.count_at_most(0.0) == pytest.approx(120)  # the fixed queue's 30·4 bytes
    assert seg.summary()["max"] == pytest.approx(5)


def test_a_rebalanced_queue_with_spare_throughput_falls_from_the_rebalance_time_to_zero():
    # C̄ = 12, a keeps 2 B/s and starts 4 B/s: R_R = 10, slope 1/10 − 1/4 = −0.15 s per byte from 5 s,
    # zero after 33.3 of the 120 rebalanced bytes.
    stream = [{"t": {"0": 2.0, "1": 4.0}}] * 2
    seg = fixed_replay(stream, [{0: "a", 1: "b"}, {0: "a", 1: "a"}]).latency(LatencyModel(12, 30, 5))
    assert seg.summary()["above_zero"] == pytest.approx(5 / 0.15)
    assert seg.count_at_most(2.0) == pytest.approx(60 + 120 - 20)  # bytes i ≥ 20 are at most 2 s


def test_a_starved_rebalanced_queue_is_unbounded_but_the_rest_is_not():
    # a keeps 10 B/s = C̄ and starts 1 B/s: R_R = 0, the 30 rebalanced bytes are never read.
    stream = [{"t": {"0": 10.0, "1": 1.0}}] * 2
    seg = fixed_replay(stream, [{0: "a", 1: "b"}, {0: "a", 1: "a"}]).latency(LatencyModel(10, 30, 5))
    figures = seg.summary()
    assert figures["max"] == math.inf and figures["p99"] == math.inf  # 30 of 330 bytes: above the 99th
    assert figures["p50"] == 0.0 and figures["p90"] == 0.0  # 300 of 330 bytes keep up


def test_quantiles_match_per_byte_sampling():
    rng = np.random.default_rng(1)
    slope, start, length = rng.normal(0, 0.05, 30), rng.uniform(0, 20, 30), rng.integers(1, 400, 30).astype(float)
    seg = Segments(slope, start, length)
    samples = np.concatenate([np.maximum(m * np.arange(n) + b, 0) for m, b, n in zip(slope, start, length.astype(int))])
    for q in (0.5, 0.9, 0.95, 0.99):
        assert seg.quantile(q) == pytest.approx(np.quantile(samples, q), abs=0.2)
    for value in np.linspace(0, seg.finite_max(), 11):  # the CDF the report plots
        assert seg.count_at_most(value) == pytest.approx((samples <= value).sum(), abs=len(slope))


@pytest.mark.parametrize(
    "field, value",
    [
        ("consumer_throughput", 0),
        ("iteration_s", -1),
        ("rebalance_s", -0.1),
        ("consumer_throughput", math.nan),
        ("iteration_s", math.inf),
    ],
)
def test_model_parameters_are_checked(field, value):
    with pytest.raises(AssignmentError) as error:
        LatencyModel(**{field: value})
    assert error.value.code == "invalid_parameter" and field in error.value.message


def test_segments_of_outcomes_equal_those_of_the_owners():
    """The model reads a replay's owners; outcomes (each holding its problem) give the same segments, in the
    same order, whatever order the consumers are numbered in."""
    stream = [{"t": {"0": 4.0, "1": 6.0, "2": 3.0}}, {"t": {"2": 5.0, "0": 4.0, "1": 9.0}}, {"t": {"0": 1.0}}]
    owners = [{0: "b", 1: "a", 2: "b"}, {0: "a", 1: "a", 2: "b"}, {0: "b"}]
    run = fixed_replay(stream, owners)
    problems, previous = [], {}
    for measurement, owned in zip(stream, owners):
        keys = [("t", int(p)) for p in measurement["t"]]
        problem = build_problem(keys, list(measurement["t"].values()), None, 100, previous)
        held = {}
        for j, key in enumerate(keys):
            held.setdefault(owned[key[1]], []).append(j)
        problems.append(
            Outcome("fixed", problem, held, sorted(held), [owned[k[1]] for k in keys], {}, [], [], 0.0, [], {}, 0)
        )
        previous = {c: [keys[j] for j in js] for c, js in held.items()}
    model = LatencyModel(8, 30, 5)
    expected, got = run.latency(model), segments(problems, model)
    for name in ("slope", "start", "length"):
        assert np.array_equal(getattr(got, name), getattr(expected, name))
    assert got.bytes == 30 * (5 + 4 + 9 + 1)
