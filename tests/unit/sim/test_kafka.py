"""kd_N: Kafka's equal-count assignment, dealt once in order of first appearance and never moved."""

from __future__ import annotations

import pytest

from app.core.errors import AssignmentError
from app.sim.evaluate import check_names, run_named
from app.sim.latency import LatencyModel
from app.sim.replay import replay
from app.sim.stream import flatten, load_stream


def held(stream, run, k):
    """Consumer → its partitions at measurement k, from the run's owners."""
    owners = run.owners
    start = int(owners.counts[:k].sum())
    keys, _ = flatten(stream[k])
    partitions: dict[str, list] = {}
    for j, key in enumerate(keys):
        partitions.setdefault(owners.consumers[owners.owner[start + j]], []).append(key)
    return {c: sorted(keys) for c, keys in partitions.items()}


def test_kd_n_deals_in_order_of_first_appearance_and_never_moves():
    stream = [{"t": {"2": 1.0, "0": 1.0, "1": 1.0}}, {"t": {"1": 9.0, "3": 1.0, "2": 1.0, "0": 5.0}}]
    run = run_named(stream, 100, "kd_2", keep=True)
    assert held(stream, run, 0) == {"c0": [("t", 1), ("t", 2)], "c1": [("t", 0)]}  # 2 → c0, 0 → c1, 1 → c0
    assert run.moves[1] == 0 and held(stream, run, 1)["c1"] == [("t", 0), ("t", 3)]  # 3 is the 4th partition seen


def test_a_partition_that_leaves_and_returns_goes_back_to_its_consumer():
    stream = [{"t": {"0": 1.0, "1": 1.0}}, {"t": {"0": 1.0}}, {"t": {"0": 1.0, "1": 1.0, "2": 1.0}}]
    run = run_named(stream, 100, "kd_2", keep=True)
    assert held(stream, run, 2) == {"c0": [("t", 0), ("t", 2)], "c1": [("t", 1)]}


def test_consumers_dealt_nothing_are_not_counted():
    run = run_named([{"t": {"0": 1.0, "1": 1.0}}], 100, "kd_5")
    assert run.consumers == [2]


@pytest.mark.parametrize("name", ["kd_0", "kd_x", "kd_-1", "kd_1000000"])
def test_names_that_are_not_kd_n_are_unknown(name):
    with pytest.raises(AssignmentError) as error:
        check_names([name])
    assert error.value.code == "unknown_algorithm" and "kd_<N>" in error.value.message


def test_kd_n_equals_the_registered_roundrobin_on_a_stream_first_listed_in_order(reference_stream_path):
    # The published stream's first measurement lists every partition in (topic, partition) order, so
    # dealing once in order of appearance is what `roundrobin` over N consumers does at every step.
    stream = load_stream(reference_stream_path)
    kd = run_named(stream, 100, "kd_15", keep=True)
    roundrobin = replay(stream, 100, "roundrobin", {"consumers": 15}, keep=True)
    last = len(stream) - 1
    assert sorted(map(tuple, held(stream, kd, last).values())) == sorted(
        map(tuple, held(stream, roundrobin, last).values())
    )
    assert roundrobin.rscore == kd.rscore == [0.0] * len(stream)
    model = LatencyModel(133, 30, 5)
    assert roundrobin.latency(model).quantile(0.99) == pytest.approx(kd.latency(model).quantile(0.99))
