"""`groupfit report`: the Pareto front and the pages it writes."""

from __future__ import annotations

import json
import re

from app.cli import main
from app.sim.report import REPACK_WEIGHTS, _label_apart, kafka_range, pareto_front
from app.sim.stream import generate_stream, load_stream


def test_pareto_front():
    points = {"a": (0.0, 5.0), "b": (1.0, 1.0), "c": (1.0, 2.0), "d": (0.5, 3.0), "e": (2.0, 1.0)}
    assert pareto_front(points) == ["a", "d", "b"]


def test_kafka_range_covers_one_to_the_partition_count():
    assert kafka_range([{"t": {str(p): 1.0 for p in range(32)}}]) == list(range(1, 33))
    wide = kafka_range(generate_stream(200, 2, 5, seed=1))
    assert wide[0] == 1 and wide[-1] == 200 and len(wide) <= 41


def test_stream_report_writes_a_page_with_plots_and_figures(reference_stream_path, tmp_path):
    short = tmp_path / "short.json"
    short.write_text(json.dumps(load_stream(reference_stream_path)[:12]))
    out = tmp_path / "r"
    assert main(["report", "--stream", str(short), "--out", str(out), "--algorithms", "mwf,bfd", "--kafka", "20"]) == 0
    page = (out / "index.html").read_text()
    for name in ("consumers_over_time", "rscore_over_time", "latency_cdf", "pareto_front", "kafka_by_consumers"):
        assert (out / f"{name}.png").stat().st_size > 1000
        assert f'alt="{name}"' in page
    figures = json.loads((out / "results.json").read_text())
    assert set(figures["kafka_curve"]) == {f"kd_{n}" for n in range(1, 33)}
    mwf_consumers = round(figures["results"]["mwf"]["avg_consumers"])
    assert {"mwf", "bfd", "kd_20", f"kd_{mwf_consumers}"} <= set(figures["results"])
    assert figures["reference"] == "mwf"
    assert "p95 s" in page and "kd_20" in page
    # the first paragraph says which algorithm fits which goal, from the figures below it
    first = re.search(r"<h2>(.*?)</h2><p>(.*?)</p>", page)
    assert first.group(1) == "Which algorithm for which goal"
    results = {n: figures["results"][n] for n in ("mwf", "bfd")}
    fewest = min(results, key=lambda n: (results[n]["avg_consumers"], n))
    calm = min(results, key=lambda n: (results[n]["avg_rscore"], n))
    value = f"{results[fewest]['avg_consumers']:.2f}"
    assert re.search(rf"Fewest consumers: {fewest}( \(tied with [^)]*\))? \({value} on average\)", first.group(2))
    assert f"Least data moved per rebalance: {calm}" in first.group(2)


def test_point_labels_do_not_overlap():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # the published stream's crowded corner: bfd, ffd and wfd within a few hundredths of each other
    points = {"bfd": (0.0, 3.68), "ffd": (0.003, 3.61), "wfd": (0.007, 3.57), "mwf": (0.06, 1.0), "far": (0.2, 5.0)}
    figure, axis = plt.subplots(figsize=(6.5, 4.2))
    axis.scatter(*zip(*points.values()))
    _label_apart(figure, axis, points)
    renderer = figure.canvas.get_renderer()
    boxes = [text.get_window_extent(renderer) for text in axis.texts]
    assert sorted(text.get_text() for text in axis.texts) == sorted(points)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    plt.close(figure)


def test_sweep_report(tmp_path):
    out = tmp_path / "g"
    assert (
        main(
            [
                "report",
                "--generate",
                "--partitions",
                "20",
                "--measurements",
                "15",
                "--deltas",
                "0,25",
                "--algorithms",
                "mwf,nfd,repack",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    for name in (
        "cbs_per_delta",
        "avg_rscore_per_delta",
        "avg_consumers_per_delta",
        "pareto_delta_0",
        "pareto_delta_25",
    ):
        assert (out / f"{name}.png").exists()
    figures = json.loads((out / "results.json").read_text())
    assert set(figures) == {"0", "25"} and set(figures["25"]) == {"mwf", "nfd", "repack", *REPACK_WEIGHTS}
    # repack's weight sweep is on the Pareto plots, not on the per-δ lines.
    page = (out / "index.html").read_text()
    assert re.search(r"<h2>Which algorithm for which goal</h2><p>Over δ = 0…25: fewest consumers: ", page)
    assert "repack@3" in page.split("Pareto front, δ = 0")[1]
    assert "repack@3" not in page.split("Pareto front, δ = 0")[0]
    heavy, light = figures["25"]["repack@3"], figures["25"]["repack@0.25"]
    assert heavy["avg_consumers"] <= light["avg_consumers"] and heavy["avg_rscore"] >= light["avg_rscore"]
    assert figures["0"]["nfd"]["avg_rscore"] == 0  # rates fixed at δ = 0: largest-first repacks the same way
    assert figures["25"]["nfd"]["avg_rscore"] > 0
