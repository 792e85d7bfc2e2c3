"""Workloads of the live experiment: the stand-in's published figures, the skew, Landau's stream, exact event
counts and schedules, and a malformed file refused with a message that says what is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.cli import main
from app.experiment.workload import (
    STANDARD_DURATION_S,
    STANDARD_EVENTS,
    Workload,
    WorkloadError,
    landau,
    load,
    parse,
    resolve,
    skewed,
    standard,
)


def test_the_stand_in_has_the_seeds_duration_total_and_a_rise_and_fall():
    workload = standard()
    total = workload.total_rate()
    assert workload.partitions == 5 and workload.duration_s == STANDARD_DURATION_S
    assert workload.total_events == STANDARD_EVENTS == 109_000
    peak = int(np.argmax(total))
    assert 0.3 * len(total) < peak < 0.7 * len(total)  # rises, then falls
    assert total[:60].mean() < total.max() / 5 and total[-60:].mean() < total.max() / 5
    # Above 450 events/s a partition (rate / 5) no longer shares a consumer at μ·f_up = 180: the seed's
    # overprovisioning at 5 replicas implies such a peak.
    assert 450 < total.max() < 600
    assert np.allclose(workload.rates, workload.rates[:, :1])  # spread evenly


def test_the_stand_in_is_the_same_for_the_same_seed_and_differs_for_another():
    assert np.array_equal(standard().rates, standard().rates)
    assert not np.array_equal(standard(seed=1).rates, standard(seed=2).rates)


def test_skewed_sends_half_into_the_first_two_of_nine_partitions():
    workload = skewed()
    shares = workload.rates.sum(axis=0) / workload.rates.sum()
    assert workload.partitions == 9
    assert shares[:2].sum() == pytest.approx(0.5)
    assert np.allclose(shares[2:], 0.5 / 7)
    assert np.allclose(workload.total_rate(), standard().total_rate())


def test_landau_turns_percent_of_capacity_into_events_per_second(reference_stream_path):
    stream = json.loads(reference_stream_path.read_text())
    workload = landau(reference_stream_path, mu=200, consumer_throughput=133, iteration_s=30, time_scale=5)
    assert workload.partitions == 32 and workload.ticks == len(stream) and workload.tick_s == 6
    first = stream[0]["delivery_events_v6_topic"]["2"]
    assert workload.rates[0][2] == pytest.approx(first * 200 / 133)
    assert resolve("landau", reference_stream_path).duration_s == 600


def test_counts_carry_fractions_so_the_total_is_the_integral():
    workload = Workload("w", "", 0.5, np.array([[0.9, 3.0], [0.9, 3.0], [0.9, 3.0]]))
    counts = workload.counts()
    assert counts.sum(axis=0).tolist() == [1, 4]  # round(1.35) and round(4.5) (to even)
    assert (counts >= 0).all()


def test_the_schedule_sends_each_tick_s_events_evenly_and_in_time_order():
    workload = Workload("w", "", 1.0, np.array([[4.0, 2.0], [0.0, 1.0]]))
    times, partitions = workload.schedule()
    assert np.all(np.diff(times) >= 0)
    assert sorted(zip(partitions.tolist(), (times // 1).astype(int).tolist())) == [
        (0, 0), (0, 0), (0, 0), (0, 0), (1, 0), (1, 0), (1, 1),
    ]  # fmt: skip
    gaps = np.diff(times[partitions == 0])
    assert np.allclose(gaps, 0.25)


def test_time_scaling_keeps_the_rates_and_shortens_the_ticks():
    fast = standard().time_scaled(10)
    assert fast.name == "standard-x10" and fast.duration_s == 60
    assert np.array_equal(fast.rates, standard().rates)
    assert abs(fast.total_events - STANDARD_EVENTS / 10) <= 5


def test_a_workload_file_round_trips(tmp_path):
    path = tmp_path / "w.json"
    skewed().dump(path)
    again = load(path)
    assert again.name == "skewed" and np.allclose(again.rates, skewed().rates, atol=1e-4)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"not json", "malformed"),
        (b'{"name": "w", "tick_s": 1, "partitions": 1}', "rates"),
        (b'{"name": "w", "tick_s": "1", "partitions": 1, "rates": [[1]]}', "$.tick_s"),
        (b'{"name": "w", "tick_s": 0, "partitions": 1, "rates": [[1]]}', "tick_s must be"),
        (b'{"name": "w", "tick_s": 1, "partitions": 2, "rates": [[1, 2], [3]]}', "rates[1] has 1 values"),
        (b'{"name": "w", "tick_s": 1, "partitions": 1, "rates": [[-1]]}', "rates[0] holds -1"),
        (b'{"name": "w", "tick_s": 1, "partitions": 1, "rates": []}', "rates is empty"),
        (b'{"name": "w", "tick_s": 1, "partitions": 1, "rates": [[0]]}', "no event at all"),
        (b'{"name": "w", "tick_s": 1, "partitions": 1, "rates": [[1]], "extra": 1}', "extra"),
    ],
)
def test_a_malformed_workload_is_refused_with_what_is_wrong(body, says):
    with pytest.raises(WorkloadError) as refused:
        parse(body, "w.json")
    assert str(refused.value).startswith("w.json: ") and says in str(refused.value)


def test_the_command_exits_2_with_the_message_on_a_malformed_file(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text('{"name": "w", "tick_s": 1, "partitions": 2, "rates": [[1]]}')
    assert main(["experiment", "workload", "--workload", str(path)]) == 2
    assert "rates[0] has 1 values" in capsys.readouterr().err
    assert main(["experiment", "workload", "--workload", str(tmp_path / "missing.json")]) == 2
    assert "neither a file nor one of standard, skewed, landau" in capsys.readouterr().err


def test_the_command_refuses_an_unknown_strategy_before_starting_anything(capsys):
    assert main(["experiment", "run", "--strategy", "kd_x", "--workload", "standard"]) == 2
    assert "kd_N needs a whole number" in capsys.readouterr().err
    assert main(["experiment", "run", "--strategy", "fastest", "--workload", "standard"]) == 2
    assert "unknown strategy 'fastest'" in capsys.readouterr().err
