"""`groupfit report`: the paper's experiments as a self-contained HTML page with PNG plots.

- a stream (`--stream`): consumers and Rscore over time per algorithm, latency histograms and
  percentiles next to Kafka's equal-count assignment kd_N (Fig. 5-8), the Pareto front, the headline table;
- the δ sweep (`--generate`): streams of Eq. 15 for δ ∈ {0, 5, …, 25}, CBS and average Rscore per δ
  (Fig. 9-11) and the Pareto front per δ (Fig. 12).
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.sim.latency import LatencyModel, segments
from app.sim.replay import Run, cbs
from app.sim.stream import Measurement, generate_stream, load_stream

PAPER_TWELVE = ["nf", "ff", "bf", "wf", "nfd", "ffd", "bfd", "wfd", "mwf", "mbf", "mwfp", "mbfp"]
DELTAS = [0, 5, 10, 15, 20, 25]


def pareto_front(points: dict[str, tuple[float, float]]) -> list[str]:
    """Names not dominated in (cost, rebalance): nothing else is at least as good in both and better in one."""
    front = []
    for name, (x, y) in points.items():
        dominated = any(
            (ox <= x and oy <= y) and (ox < x or oy < y) for other, (ox, oy) in points.items() if other != name
        )
        if not dominated:
            front.append(name)
    return sorted(front, key=lambda n: points[n])


class Page:
    """Figures (PNG files beside the page, and inline in it) and tables, in order."""

    def __init__(self, out: Path, title: str) -> None:
        self.out = out
        self.title = title
        self.parts: list[str] = []
        out.mkdir(parents=True, exist_ok=True)

    def heading(self, text: str) -> None:
        self.parts.append(f"<h2>{html.escape(text)}</h2>")

    def text(self, text: str) -> None:
        self.parts.append(f"<p>{html.escape(text)}</p>")

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        def cell(value: Any) -> str:
            return f"{value:.3f}" if isinstance(value, float) else html.escape(str(value))

        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
        self.parts.append(f"<table><tr>{head}</tr>{body}</table>")

    def figure(self, name: str, figure: Any) -> None:
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
        data = buffer.getvalue()
        (self.out / f"{name}.png").write_bytes(data)
        encoded = base64.b64encode(data).decode()
        self.parts.append(f'<figure><img alt="{name}" src="data:image/png;base64,{encoded}"><figcaption>{name}</figcaption></figure>')

    def write(self) -> Path:
        style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}"
                 "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}img{max-width:100%}")
        page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(self.title)}</title>"
                f"<style>{style}</style></head><body><h1>{html.escape(self.title)}</h1>{''.join(self.parts)}</body></html>")
        path = self.out / "index.html"
        path.write_text(page, encoding="utf-8")
        return path


def stream_report(stream: list[Measurement], capacity: float, algorithms: list[str], kafka: list[int],
                  model: LatencyModel, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from tqdm import tqdm

    from app.sim.evaluate import run_named

    names = algorithms + [f"kd_{n}" for n in kafka]
    runs: dict[str, Run] = {}
    for name in tqdm(names, desc="replaying", file=sys.stderr):
        runs[name] = run_named(stream, capacity, name, keep=True)
    figures = {name: segments(run.outcomes, model) for name, run in runs.items()}
    summaries = {name: seg.summary() for name, seg in figures.items()}
    scores = cbs([runs[n] for n in algorithms])
    page = Page(out, f"groupfit report: {len(stream)} measurements, C = {capacity:g}, C̄ = {model.consumer_throughput:g}")
    page.heading("Headline")
    page.table(
        ["algorithm", "avg consumers", "avg Rscore", "CBS", "p50 s", "p90 s", "p99 s", "max s"],
        [[n, runs[n].avg_consumers, runs[n].avg_rscore, scores.get(n, "-"), *(summaries[n][p] for p in ("p50", "p90", "p99", "max"))]
         for n in names],
    )
    for metric, label in (("consumers", "consumers"), ("rscore", "Rscore")):
        figure, axis = plt.subplots(figsize=(10, 4))
        for n in algorithms:
            axis.plot(getattr(runs[n], metric), label=n, linewidth=1)
        axis.set_xlabel("iteration")
        axis.set_ylabel(label)
        axis.legend(ncol=6, fontsize=8)
        page.heading(f"{label} over time")
        page.figure(f"{metric}_over_time", figure)
        plt.close(figure)
    page.heading("Latency (§VI-C): bytes by latency, above 0 s")
    featured = [n for n in ("mwf", "bfd") if n in names] + [n for n in names if n.startswith("kd_")]
    shown = [n for n in featured if summaries[n]["max"] > 0]
    if shown:
        figure, axes = plt.subplots(len(shown), 1, figsize=(10, 2.2 * len(shown)), squeeze=False)
        for axis, n in zip(axes[:, 0], shown):
            import numpy as np

            edges = np.linspace(1e-9, summaries[n]["max"], 41)
            axis.bar(edges[:-1], figures[n].histogram(edges), width=np.diff(edges), align="edge")
            axis.set_ylabel(f"{n}\nbytes")
            axis.set_title(f"{n}: p99 {summaries[n]['p99']:.2f} s, max {summaries[n]['max']:.2f} s", fontsize=9)
        axes[-1, 0].set_xlabel("latency (s)")
        figure.tight_layout()
        page.figure("latency_histograms", figure)
        plt.close(figure)
    points = {n: (scores[n], runs[n].avg_rscore) for n in algorithms}
    page.heading("Pareto front (CBS vs average Rscore)")
    page.text("on the front: " + ", ".join(pareto_front(points)))
    page.figure("pareto_front", _pareto_figure(plt, points, "this stream"))
    return page.write()


def _pareto_figure(plt: Any, points: dict[str, tuple[float, float]], title: str) -> Any:
    front = pareto_front(points)
    figure, axis = plt.subplots(figsize=(6, 4))
    for name, (x, y) in points.items():
        axis.scatter([x], [y], color="tab:red" if name in front else "tab:blue")
        axis.annotate(name, (x, y), fontsize=8)
    axis.plot([points[n][0] for n in front], [points[n][1] for n in front], color="tab:red", linewidth=1)
    axis.set_xlabel("CBS (operational cost)")
    axis.set_ylabel("average Rscore (rebalance cost)")
    axis.set_title(title)
    return figure


def sweep(partitions: int, measurements: int, capacity: float, seed: int, algorithms: list[str],
          deltas: Sequence[int] = DELTAS) -> dict[int, dict[str, dict[str, float]]]:
    """CBS and average Rscore of each algorithm on a generated stream per δ."""
    from tqdm import tqdm

    from app.sim.replay import replay

    results: dict[int, dict[str, dict[str, float]]] = {}
    for delta in tqdm(deltas, desc="δ sweep", file=sys.stderr):
        stream = generate_stream(partitions, measurements, delta, seed + delta, capacity)
        runs = [replay(stream, capacity, name) for name in algorithms]
        scores = cbs(runs)
        results[delta] = {
            r.algorithm: {"cbs": scores[r.algorithm], "avg_rscore": r.avg_rscore, "avg_consumers": r.avg_consumers}
            for r in runs
        }
    return results


def sweep_report(results: dict[int, dict[str, dict[str, float]]], out: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    page = Page(out, title)
    deltas = sorted(results)
    algorithms = list(results[deltas[0]])
    for metric, label in (("cbs", "CBS (Eq. 28)"), ("avg_rscore", "average Rscore (Eq. 29)")):
        figure, axis = plt.subplots(figsize=(10, 4))
        for name in algorithms:
            axis.plot(deltas, [results[d][name][metric] for d in deltas], marker="o", label=name, linewidth=1)
        axis.set_xlabel("δ")
        axis.set_ylabel(label)
        axis.legend(ncol=6, fontsize=8)
        page.heading(f"{label} per δ")
        page.figure(f"{metric}_per_delta", figure)
        plt.close(figure)
        page.table(["algorithm", *(f"δ={d}" for d in deltas)],
                   [[name, *(results[d][name][metric] for d in deltas)] for name in algorithms])
    for d in deltas:
        points = {n: (results[d][n]["cbs"], results[d][n]["avg_rscore"]) for n in algorithms}
        page.heading(f"Pareto front, δ = {d}")
        page.text("on the front: " + ", ".join(pareto_front(points)))
        figure = _pareto_figure(plt, points, f"δ = {d}")
        page.figure(f"pareto_delta_{d}", figure)
        plt.close(figure)
    return page.write()


# -- the command ---------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stream", help="JSON list of measurements, topic → {partition: rate}")
    source.add_argument("--generate", action="store_true", help="the paper's δ sweep on generated streams")
    parser.add_argument("--out", required=True, help="directory for index.html and the PNGs")
    parser.add_argument("--capacity", type=float, default=100.0)
    parser.add_argument("--algorithms", default=",".join(PAPER_TWELVE))
    parser.add_argument("--kafka", default="15,20,24,27", help="N of the kd_N to compare with (stream report)")
    parser.add_argument("--consumer-throughput", type=float, default=133.0)
    parser.add_argument("--iteration-s", type=float, default=30.0)
    parser.add_argument("--rebalance-s", type=float, default=5.0)
    parser.add_argument("--partitions", type=int, default=200, help="--generate: partitions per stream")
    parser.add_argument("--measurements", type=int, default=500, help="--generate: measurements per stream")
    parser.add_argument("--seed", type=int, default=1)


def run(args: argparse.Namespace) -> int:
    from app.sim.evaluate import check_names

    algorithms = [a for a in args.algorithms.split(",") if a]
    check_names(algorithms)
    started = time.perf_counter()
    out = Path(args.out)
    if args.generate:
        results = sweep(args.partitions, args.measurements, args.capacity, args.seed, algorithms)
        path = sweep_report(results, out, f"groupfit δ sweep: {args.partitions} partitions × {args.measurements} measurements")
    else:
        model = LatencyModel(args.consumer_throughput, args.iteration_s, args.rebalance_s)
        kafka = [int(n) for n in args.kafka.split(",") if n]
        path = stream_report(load_stream(args.stream), args.capacity, algorithms, kafka, model, out)
    print(f"{path} ({time.perf_counter() - started:.1f} s)")
    return 0
