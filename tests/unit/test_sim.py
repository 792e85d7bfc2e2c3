"""The latency model, kd_N, the Pareto front and the report; and the paper's published figures."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.cli import main
from app.core.algorithm import Algorithm, Placement
from app.sim.evaluate import evaluate, run_named
from app.sim.latency import LatencyModel, Segments, segments
from app.sim.replay import replay_with
from app.sim.report import pareto_front
from app.sim.stream import generate_stream, load_stream


def fixed_replay(stream, owners):
    """A replay whose assignment is given: owners[k] maps partition → consumer at iteration k."""
    state = {"k": 0}

    def place(problem, _params):
        held = {}
        for j, key in enumerate(problem.keys):
            held.setdefault(owners[min(state["k"], len(owners) - 1)][key[1]], []).append(j)
        state["k"] += 1
        return Placement(held)

    return replay_with(stream, 100, Algorithm("fixed", "test", place), None, keep=True)


def test_overloaded_fixed_queue_grows_and_carries_over():
    # One consumer, 10 B/s into it, reads 5 B/s: each byte waits 1/5 − 1/10 = 0.1 s more than the one before.
    stream = [{"t": {"0": 10.0}}] * 3
    run = fixed_replay(stream, [{0: "a"}])
    seg = segments(run.outcomes, LatencyModel(consumer_throughput=5, iteration_s=30, rebalance_s=5))
    # Iterations 2 and 3 (Δ exists for k > 1): 300 bytes each, 0 → 30 s, then 30 → 60 s (backlog carried).
    assert seg.bytes == 600
    assert seg.summary()["max"] == pytest.approx(60)
    assert seg.quantile(0.5) == pytest.approx(30, rel=1e-6)
    assert seg.quantile(0.25) == pytest.approx(15, rel=1e-6)


def test_rebalanced_queue_waits_for_the_rebalance_then_catches_up():
    # t/1 moves from b to a at iteration 2. a keeps t/0 (4 B/s) and starts t/1 (6 B/s) with C̄ = 10:
    # fixed read at min(C̄, 4) = 4 → no latency; rebalanced read at 10 − 4 = 6 = W_R → flat at t_r = 5 s.
    stream = [{"t": {"0": 4.0, "1": 6.0}}] * 2
    run = fixed_replay(stream, [{0: "a", 1: "b"}, {0: "a", 1: "a"}])
    seg = segments(run.outcomes, LatencyModel(consumer_throughput=10, iteration_s=30, rebalance_s=5))
    assert seg.bytes == 300
    assert seg.count_at_most(0.0) == pytest.approx(120)  # the fixed queue's 30·4 bytes
    assert seg.summary()["max"] == pytest.approx(5)


def test_quantiles_match_brute_force_sampling():
    rng = np.random.default_rng(1)
    slope, start, length = rng.normal(0, 0.05, 30), rng.uniform(0, 20, 30), rng.integers(1, 400, 30).astype(float)
    seg = Segments(slope, start, length)
    samples = np.concatenate([np.maximum(m * np.arange(n) + b, 0) for m, b, n in zip(slope, start, length.astype(int))])
    for q in (0.5, 0.9, 0.99):
        assert seg.quantile(q) == pytest.approx(np.quantile(samples, q), abs=0.2)


def test_kd_n_deals_in_order_of_first_appearance_and_never_moves():
    stream = [{"t": {"0": 1.0, "1": 1.0, "2": 1.0}}, {"t": {"0": 1.0, "1": 1.0, "2": 1.0, "3": 1.0}}]
    run = run_named(stream, 100, "kd_2", keep=True)
    first, second = run.outcomes
    assert {c: sorted(held) for c, held in first.assignment.items()} == {"c0": [0, 2], "c1": [1]}
    assert second.moved == [] and sorted(second.assignment["c1"]) == [1, 3]


def test_pareto_front():
    points = {"a": (0.0, 5.0), "b": (1.0, 1.0), "c": (1.0, 2.0), "d": (0.5, 3.0), "e": (2.0, 1.0)}
    assert pareto_front(points) == ["a", "d", "b"]


def test_evaluate_with_latency_and_kd(reference_stream_path, capsys):
    assert main(["evaluate", "--stream", str(reference_stream_path), "--capacity", "100", "--algorithms",
                 "mwf,kd_15", "--latency", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert set(results["kd_15"]["latency"]) == {"p50", "p90", "p95", "p99", "max"}
    assert results["kd_15"]["avg_consumers"] == 15 and results["kd_15"]["avg_rscore"] == 0


def test_report_writes_a_page_with_plots(reference_stream_path, tmp_path):
    short = tmp_path / "short.json"
    short.write_text(json.dumps(load_stream(reference_stream_path)[:12]))
    assert main(["report", "--stream", str(short), "--out", str(tmp_path / "r"), "--algorithms", "mwf,bfd",
                 "--kafka", "15"]) == 0
    page = (tmp_path / "r" / "index.html").read_text()
    for name in ("consumers_over_time", "rscore_over_time", "latency_histograms", "pareto_front"):
        assert (tmp_path / "r" / f"{name}.png").stat().st_size > 1000
        assert f'alt="{name}"' in page
    assert main(["report", "--generate", "--partitions", "20", "--measurements", "15", "--algorithms", "mwf,nfd",
                 "--out", str(tmp_path / "g")]) == 0
    assert (tmp_path / "g" / "pareto_delta_25.png").exists()


# -- the published figures (Landau et al., JPDC 2025; shared/reference/README.md) ----------------


@pytest.fixture(scope="module")
def reference(reference_stream_path):
    return load_stream(reference_stream_path)


def p99(stream, name):
    return segments(run_named(stream, 100, name, keep=True).outcomes, LatencyModel(133, 30, 5)).quantile(0.99)


def test_kd_15_tail_latency_as_published(reference):
    assert p99(reference, "kd_15") == pytest.approx(364.66, rel=0.01)


def test_mwf_tail_latency_as_published(reference):
    assert 1.5 <= p99(reference, "mwf") <= 3.5


def test_kafka_needs_about_60_percent_more_consumers_than_mwf(reference):
    mwf_consumers = run_named(reference, 100, "mwf").avg_consumers
    smallest = next(n for n in range(1, 33) if p99(reference, f"kd_{n}") < 0.5)
    assert smallest == 24
    assert smallest / mwf_consumers == pytest.approx(1.6, abs=0.15)


def test_generated_streams_delta_5_mwf_halves_nfd_rebalance_cost():
    stream = generate_stream(200, 500, 5, seed=1)
    results = evaluate(stream, 100, ["mwf", "nfd", "bfd"])["results"]
    assert results["mwf"]["avg_rscore"] / results["nfd"]["avg_rscore"] == pytest.approx(0.5, abs=0.12)
    assert results["mwf"]["avg_consumers"] / results["bfd"]["avg_consumers"] == pytest.approx(1.12, abs=0.05)
