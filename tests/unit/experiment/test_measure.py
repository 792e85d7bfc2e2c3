"""What a run measures, from files written as the consumers write them: every event's first latency,
duplicates and missing events against the producer's count, pauses from the rebalance callbacks, replicas."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from app.experiment import measure
from app.experiment.model import observed_assignments, predict
from app.experiment.optimal import optimal_autoscaler, overprovisioned_count, pack_exact
from app.experiment.run import Settings
from app.experiment.workload import Workload, skewed, standard

RECORD = struct.Struct(">iqqq")  # what ExperimentConsumer.java and latency.py write


def write_latencies(path, rows):
    path.write_bytes(b"".join(RECORD.pack(*row) for row in rows))


def test_latencies_keep_each_events_first_processing_and_count_the_rest_as_duplicates(tmp_path):
    write_latencies(tmp_path / "c0.lat", [(0, 0, 1_000_000, 1_100_000), (0, 1, 1_000_000, 1_700_000)])
    # c1 processed offset 1 again after a rebalance, later; and a torn record from a killed process
    write_latencies(tmp_path / "c1.lat", [(0, 1, 1_000_000, 2_000_000), (1, 0, 2_000_000, 2_200_000)])
    with open(tmp_path / "c1.lat", "ab") as torn:
        torn.write(b"\x00" * 5)
    latencies = measure.read_latencies(sorted(tmp_path.glob("*.lat")))
    assert len(latencies) == 3 and latencies.duplicates == 1
    assert sorted(latencies.seconds.round(3).tolist()) == [0.1, 0.2, 0.7]
    check = measure.completeness(latencies, {0: 2, 1: 2})
    assert check == {
        "produced": 4, "processed": 3, "duplicates": 1, "missing": 1, "missing_by_partition": {1: 1},
        "unexpected": 0, "complete": False,
    }  # fmt: skip
    assert measure.completeness(latencies, {0: 2, 1: 1})["complete"]


def test_latency_figures_count_every_event():
    seconds = np.array([0.1] * 97 + [0.4, 0.6, 2.0])
    figures = measure.latency_figures(seconds, 0.5)
    assert figures["within_sla"] == pytest.approx(0.98)
    assert figures["max"] == 2.0 and figures["p50"] == pytest.approx(0.1)


def event(kind, t, member, partitions=(), generation=1):
    return {"event": kind, "t": t, "id": member, "partitions": list(partitions), "generation": generation}


def test_pauses_run_from_revocation_to_the_next_assignment_on_any_member():
    events = [
        event("assigned", 0, "c0", [0, 1, 2], 1),
        event("revoked", 10_000_000, "c0", [2], 2),  # cooperative: only the moving partition
        event("assigned", 10_000_100, "c0", [], 2),
        event("assigned", 13_000_000, "c1", [2], 3),  # the follow-up rebalance, 3 s later
        event("reass", 20_000_000, "c0"),
        event("revoked", 20_500_000, "c0", [1], 4),
        event("assigned", 20_900_000, "c1", [1], 5),
        event("revoked", 30_000_000, "c1", [1, 2], 6),  # c1 leaves while the run stops: not counted
        event("assigned", 30_200_000, "c0", [1, 2], 7),
    ]
    found = measure.rebalances(events, since_us=1_000_000, until_us=25_000_000)
    assert [(p.partition, p.seconds, p.moved) for p in found.pauses] == [(2, 3.0, True), (1, 0.4, True)]
    assert found.generations == 3  # 2, 3 and 5 began within the window
    assert found.triggered == [20_000_000]
    figures = measure.measure(
        measure.read_latencies([]), events, {}, [(0.0, 2)], 1.0, 24.0, 0.5, stopped_s=25.0, min_trigger_interval_s=10
    )
    assert figures["reass_pause_s"]["count"] == 1 and figures["reass_pause_s"]["max"] == pytest.approx(0.4)
    assert figures["partitions_moved"] == 2 and figures["reass_triggered"] == 1
    assert figures["reass_within_min_interval"]


def test_owners_follow_assignments_revocations_and_closes():
    events = [
        event("assigned", 0, "c0", [0, 1]),
        event("assigned", 1, "c1", [2]),
        event("revoked", 2, "c0", [1]),
        {"event": "closed", "t": 3, "id": "c1"},
    ]
    assert measure.owners(events) == {0: "c0"}


def test_replica_minutes_integrate_the_timeline_within_the_workload():
    timeline = [(100.0, 1), (130.0, 3), (190.0, 2)]
    # 1 × 30 s + 3 × 60 s + 2 × 10 s within [100, 200]
    assert measure.replica_minutes(timeline, 100.0, 200.0) == pytest.approx((30 + 180 + 20) / 60)
    assert measure.scale_actions([1, 3, 3, 2, 4]) == (2, 1)


def test_events_files_are_read_in_time_order_skipping_a_torn_line(tmp_path):
    (tmp_path / "c0.events.jsonl").write_text(json.dumps(event("assigned", 5, "c0", [0])) + '\n{"event": "rev')
    (tmp_path / "c1.events.jsonl").write_text(json.dumps(event("assigned", 2, "c1", [1])) + "\n")
    assert [e["id"] for e in measure.read_events(sorted(tmp_path.glob("*.jsonl")))] == ["c1", "c0"]


def test_exact_packing_finds_the_fewest_bins_first_fit_decreasing_misses():
    # FFD puts 5+4 and 3+3+3 … and needs 3 bins of 10 for {5,4,3,3,3,2}; 2 bins suffice: 5+3+2, 4+3+3.
    items = [5, 4, 3, 3, 3, 2]
    bins = pack_exact(items, 10)
    assert len(bins) == 2 and sorted(i for b in bins for i in b) == list(range(6))
    assert all(sum(items[i] for i in b) <= 10 for b in bins)
    assert pack_exact([12, 1], 10) == [[0], [1]]  # an item above the capacity sits alone


def test_the_optimal_autoscaler_provisions_a_replica_per_mu_w_sla_events_and_meets_the_sla():
    workload = Workload("w", "", 1.0, np.array([[40.0] * 5, [90.0] * 5, [10.0] * 5]))
    optimal = optimal_autoscaler(workload, mu=200, w_sla=0.5)
    # ≤ 100 events per replica per second: 5 × 40 → 3 replicas (2 + 2 + 1), 5 × 90 → 5, 5 × 10 → 1
    assert optimal["replicas"] == [3, 5, 1]
    assert optimal["replica_minutes"] == pytest.approx(9 / 60)
    assert (optimal["scale_ups"], optimal["scale_downs"]) == (1, 1)
    assert optimal["within_sla"] == 1.0


def test_overprovisioning_is_least_loaded_at_the_peak_spread_over_the_partitions():
    settings = Settings()
    args = (settings.mu, settings.w_sla, settings.f_up, settings.f_down, settings.rebalance_s)
    assert overprovisioned_count(standard(), *args) == 5  # peak ≈ 499 / 5 ≈ 100 > 90: a consumer each
    assert overprovisioned_count(skewed(), *args) == 3  # 9 × 55.4: three to a consumer of 180


def test_the_model_sees_the_assignment_the_members_held_and_queues_an_overloaded_one():
    workload = Workload("w", "", 1.0, np.array([[150.0, 150.0]] * 4))
    t0 = 100.0
    together = [event("assigned", 99_000_000, "c0", [0, 1])]
    apart = [event("assigned", 99_000_000, "c0", [0]), event("assigned", 99_000_000, "c1", [1])]
    assert observed_assignments(apart, t0, workload)[0] == {0: "c0", 1: "c1"}
    settings = Settings()
    overloaded = predict(workload, together, t0, 200.0, settings)
    assert overloaded["within_sla"] < 1 and overloaded["max"] > 0.5  # 300 events/s into μ = 200
    assert predict(workload, apart, t0, 200.0, settings)["max"] == 0.0
    with pytest.raises(ValueError):
        predict(workload, [], t0, 200.0, settings)
