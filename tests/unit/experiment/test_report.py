"""The experiment's report from runs' results: the page, its figures, the seed's table beside the runs, the
optimal autoscaler computed for the workload, and the issue's targets read off the runs."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

from app.experiment import report
from app.experiment.run import Settings
from app.experiment.workload import standard


def fake_result(out, strategy: str, share: float, minutes: float, p99: float, replicas: float, **settings) -> dict:
    """A result.json as a run writes it, with the figures the report reads."""
    workload = standard().time_scaled(20)
    chosen = replace(Settings(), **settings)
    name = f"{strategy}-{workload.name}-hb{chosen.heartbeat_ms}"
    (out / name).mkdir(parents=True)
    workload.dump(out / name / "workload.json")
    pause = {"count": 1, "p50": 0.4, "p99": 0.4, "max": 0.4, "total": 0.4}
    return {
        "name": name,
        "strategy": strategy,
        "workload": workload.name,
        "settings": asdict(chosen),
        "figures": {
            "latency": {"within_sla": share, "p50": 0.05, "p90": 0.2, "p99": p99, "max": 2 * p99, "mean": 0.1},
            "events": {"produced": 5450, "processed": 5450, "duplicates": 0, "missing": 0, "complete": True},
            "replica_minutes": minutes,
            "mean_replicas": replicas,
            "max_replicas": 5,
            "scale_ups": 2,
            "scale_downs": 2,
            "rebalances": 4,
            "reass_triggered": 1 if strategy == "least-loaded" else 0,
            "reass_min_gap_s": None,
            "reass_pause_s": pause,
            "pause_s": pause,
            "partitions_moved": 3,
            "reass_within_min_interval": True,
        },
        "model": {"rebalance_s": 0.4, "within_sla": 0.99, "p50": 0.0, "p90": 0.0, "p99": 0.3, "max": 0.6},
        "producer": {"late_events": 0, "lateness_ms": {"p50": 0.1, "p99": 2.0, "max": 9.0}},
        "load_average": [1.0, 1.0, 1.0],
        "wall_s": 70.0,
        "timeline": [[-5.0, 1], [10.0, 3], [22.0, 1]],
        "latency_series": {"t": [0.0, 1.0], "events": [100.0, 100.0], "p99": [0.1, 0.9], "max": [0.2, 1.0]},
        "cdf": {"latency_s": [0.01, 0.1, p99, 2 * p99], "share": [0.0, 0.5, 0.99, 1.0]},
    }


def test_the_report_shows_each_run_beside_the_seed_and_reads_the_targets(tmp_path):
    results = [
        fake_result(tmp_path, "least-loaded", 0.995, 1.0, 0.3, 2.0),
        fake_result(tmp_path, "linear", 0.95, 0.9, 0.8, 1.8),
        fake_result(tmp_path, "kd_2", 0.6, 1.0, 4.0, 2.0),
        fake_result(tmp_path, "kd_5", 1.0, 2.5, 0.2, 5.0),
    ]
    page = report.write(tmp_path, results)
    text = page.read_text()
    for expected in ("least-loaded-standard-x20-hb3000", "seed 001: Alg. 2", "optimal autoscaler (simulated",
                     "Landau et al.", "Machine load"):  # fmt: skip
        assert expected in text
    assert (tmp_path / "cdf-standard-x20.png").stat().st_size > 1000
    assert (tmp_path / "replicas-standard-x20.png").stat().st_size > 1000
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [r["name"] for r in saved["runs"]] == [r["name"] for r in results]
    assert saved["computed"]["standard-x20"]["within_sla"] == 1.0

    rows = {target: (measured, met) for target, measured, met in report.targets(results, saved["computed"])}
    assert rows["bin pack ≥ Linear in share within the SLA (standard, heartbeat 3000 ms)"][1] == "yes"
    smallest = rows[
        "the smallest kd_N with p99 within the SLA uses more consumers than groupfit on average "
        "(standard, heartbeat 3000 ms)"
    ]
    assert smallest == ("kd_5: 5.00 vs 2.00", "yes")  # kd_2's p99 (4 s) is above the SLA
    reass = [met for target, (_, met) in rows.items() if target.startswith("a triggered REASS")]
    assert reass == ["yes"]
