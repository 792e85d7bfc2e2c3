"""`groupfit report`: the paper's experiments as a self-contained HTML page with PNG plots.

- a stream (`--stream`): the headline table (consumers, Rscore, CBS, latency percentiles), Kafka's
  equal-count assignment kd_N over a range of N against the algorithms (Fig. 5-8), consumers and Rscore
  over time as small multiples, the latency CDF (log axis), the Pareto front; first, which algorithm fits
  which goal on this data;
- the δ sweep (`--generate`): streams of Eq. 15 for δ ∈ {0, 5, …, 25}, CBS, average Rscore and average
  consumers per δ (Fig. 9-11) and the Pareto front per δ (Fig. 12).

With `repack` among the algorithms, the Pareto plots also show it at the consumer weights REPACK_WEIGHTS
(`repack@W`, a line through them): the frontier it traces against the paper's algorithms.

Both write index.html (figures inline), the PNGs and results.json (the figures behind the page) to --out.
The command's arguments are in app/sim/commands.py.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.sim.evaluate import evaluate, finite_or_null, optimum, replay_named, results_of
from app.sim.latency import LatencyModel, Segments
from app.sim.replay import Prepared, Run
from app.sim.stream import DELTAS, Measurement, generate_stream

NEGLIGIBLE_S = 0.5  # a kd_N tail at or below this counts as "latency falls to ~0" (§VI-C)
KAFKA_POINTS = 40  # kd_N curve: at most this many N between 1 and the partition count


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
            if value is None or (isinstance(value, float) and math.isinf(value)):
                return "∞"
            return f"{value:.3f}" if isinstance(value, float) else html.escape(str(value))

        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
        self.parts.append(f"<table><tr>{head}</tr>{body}</table>")

    def figure(self, name: str, figure: Any, caption: str) -> None:
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
        data = buffer.getvalue()
        (self.out / f"{name}.png").write_bytes(data)
        encoded = base64.b64encode(data).decode()
        self.parts.append(
            f'<figure><img alt="{name}" src="data:image/png;base64,{encoded}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )

    def write(self, results: Any) -> Path:
        (self.out / "results.json").write_text(json.dumps(finite_or_null(results), allow_nan=False))
        style = (
            "body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}img{max-width:100%}"
            "figcaption{color:#555;font-size:90%}"
        )
        page = (
            f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(self.title)}</title>"
            f"<style>{style}</style></head><body><h1>{html.escape(self.title)}</h1>{''.join(self.parts)}</body></html>"
        )
        path = self.out / "index.html"
        path.write_text(page, encoding="utf-8")
        return path


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _moving_average(values: Sequence[float], window: int) -> list[float]:
    sums, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - window] if i >= window else 0.0)
        sums.append(total / min(i + 1, window))
    return sums


REPACK_WEIGHTS = ("repack@0.25", "repack@0.5", "repack@0.75", "repack@1.5", "repack@3")
"""repack at other consumer weights W (the default W is `repack` itself): its frontier on the Pareto plots."""


def with_weight_sweep(algorithms: Sequence[str]) -> list[str]:
    """The algorithms, and repack at each of REPACK_WEIGHTS when repack is one of them."""
    extra = [name for name in REPACK_WEIGHTS if name not in algorithms] if "repack" in algorithms else []
    return [*algorithms, *extra]


def _sweep_weight(name: str) -> float:
    from app.core.algorithms.repack import DEFAULT_CONSUMER_WEIGHT

    return DEFAULT_CONSUMER_WEIGHT if name == "repack" else float(name.split("@", 1)[1])


def _pareto_figure(plt: Any, points: dict[str, tuple[float, float]], title: str) -> Any:
    """Each algorithm a dot (red on the front, joined by a red line); repack at each consumer weight W a
    green diamond labelled W, joined by a dotted green line in order of W."""
    front = pareto_front(points)
    weights = sorted((n for n in points if n == "repack" or n.startswith("repack@")), key=_sweep_weight)
    figure, axis = plt.subplots(figsize=(7.5, 4.8))
    for name, (x, y) in points.items():
        colour = "tab:red" if name in front else "tab:blue"
        if name in weights:
            axis.scatter([x], [y], marker="D", s=28, color="tab:green", edgecolors=colour, linewidths=1.2, zorder=4)
        else:
            axis.scatter([x], [y], color=colour, zorder=3)
    axis.plot([points[n][0] for n in front], [points[n][1] for n in front], color="tab:red", linewidth=1)
    if len(weights) > 1:  # repack's frontier over its consumer weight
        axis.plot(
            [points[n][0] for n in weights],
            [points[n][1] for n in weights],
            color="tab:green",
            linestyle=":",
            label="repack over its consumer weight W (repack@W)",
        )
        axis.legend(loc="upper center", fontsize=8, frameon=False)
    axis.set_xlabel("CBS (operational cost: excess consumers, share)")
    axis.set_ylabel("average Rscore (rebalance cost: moved rate / C)")
    axis.set_title(title)
    axis.grid(alpha=0.3)
    _label_apart(figure, axis, points)
    return figure


# -- for operators: small multiples, a latency CDF, labels that do not overlap, the paragraph up front ----------

LABEL_OFFSETS = [(5, 4), (5, -11), (-5, 4), (-5, -11), (5, 13), (-5, 13), (5, -20), (-5, -20), (14, -3), (-14, -3)]
"""Where a point's label may go (points from the marker), tried in order until it overlaps no other label."""


def _label_apart(figure: Any, axis: Any, points: dict[str, tuple[float, float]]) -> None:
    """Each point's name beside it, at the first offset where it overlaps no label placed before (the last
    offset when none is free)."""
    figure.canvas.draw()  # settles the axes' limits, so the labels' boxes are where they will be drawn
    renderer = figure.canvas.get_renderer()
    placed: list[Any] = []
    for name, (x, y) in sorted(points.items(), key=lambda item: (item[1][0], item[1][1], item[0])):
        for dx, dy in LABEL_OFFSETS:
            label = axis.annotate(
                name,
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                fontsize=8,
                ha="left" if dx > 0 else "right",
            )
            box = label.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed) or (dx, dy) == LABEL_OFFSETS[-1]:
                placed.append(box)
                break
            label.remove()


def _small_multiples(
    plt: Any, x: Sequence[float], series: Mapping[str, Sequence[float]], xlabel: str, ylabel: str, title: str
) -> Any:
    """One panel per name, its line highlighted over the others in grey: comparable without twelve lines
    crossing on one axis."""
    names = list(series)
    columns = min(4, len(names))
    rows = math.ceil(len(names) / columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(3.1 * columns, 2.3 * rows + 0.6), sharex=True, sharey=True, squeeze=False
    )
    for index, axis in enumerate(axes.flat):
        if index >= len(names):
            axis.set_visible(False)
            continue
        name = names[index]
        for other in names:
            if other != name:
                axis.plot(x, series[other], color="0.82", linewidth=0.7)
        values = [v for v in series[name] if v is not None and math.isfinite(v)]
        mean = sum(values) / len(values) if values else float("nan")
        axis.plot(x, series[name], color="tab:blue", linewidth=1.4)
        axis.set_title(f"{name} (mean {mean:.3g})", fontsize=9)
        axis.grid(alpha=0.3)
    for axis in axes[-1]:
        axis.set_xlabel(xlabel, fontsize=8)
    for axis in axes[:, 0]:
        axis.set_ylabel(ylabel, fontsize=8)
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    return figure


def _latency_cdf(plt: Any, names: list[str], latency: dict[str, Segments], reference: str) -> Any:
    """Left: the share of bytes delivered within x seconds (the CDF, x on a log axis); right: the share still
    waiting after x (1 − CDF, both axes log), where the tails part. A histogram of bytes flattens the tail."""
    import numpy as np

    top = max([latency[n].finite_max() for n in names] + [1.0])
    xs = np.logspace(-3, math.log10(top * 1.05), 240)
    figure, (body, tail) = plt.subplots(1, 2, figsize=(12, 4.6))
    lowest = 1.0
    for name in names:
        segments_, total = latency[name], latency[name].bytes
        if not total:
            continue
        shares = np.array([segments_.count_at_most(float(v)) / total for v in xs])
        lowest = min(lowest, float(shares[0]))
        width = 2.4 if name == reference else 1.3
        body.plot(xs, shares, linewidth=width, label=name)
        waiting = 1 - shares
        tail.plot(xs[waiting > 0], waiting[waiting > 0], linewidth=width, label=name)
    body.axhline(0.99, color="grey", linestyle=":", linewidth=1)
    body.set_ylim(max(0.0, lowest - 0.05), 1.005)
    body.set_ylabel("share of bytes with latency ≤ x")
    body.set_title("CDF: higher is better")
    tail.axhline(0.01, color="grey", linestyle=":", linewidth=1)
    tail.set_yscale("log")
    tail.set_ylabel("share of bytes with latency > x (log scale)")
    tail.set_title("Tail: lower is better; the dotted line is p99")
    for axis in (body, tail):
        axis.set_xscale("log")
        axis.set_xlabel("latency x (s, log scale)")
        axis.grid(alpha=0.3, which="both")
    tail.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.suptitle("Latency of every byte (§VI-C model), from the second iteration")
    figure.tight_layout()
    return figure


def goals_paragraph(results: dict[str, Any], algorithms: Sequence[str], kafka: Sequence[str]) -> str:
    """Which algorithm fits which goal on this data, read off the figures: fewest consumers, least moved,
    lowest tail latency, and the trade-off front."""
    named = [n for n in algorithms if n in results]

    def best(key: Any) -> str:
        return min(named, key=lambda n: (key(results[n]), n))

    fewest = best(lambda r: r["avg_consumers"])
    calm = best(lambda r: r["avg_rscore"])
    tied = [n for n in named if n != fewest and results[n]["avg_consumers"] - results[fewest]["avg_consumers"] < 1e-9]
    p99 = {n: results[n]["latency"]["p99"] for n in named if results[n].get("latency")}
    text = (
        f"Fewest consumers: {fewest}{' (tied with ' + ', '.join(tied) + ')' if tied else ''} "
        f"({results[fewest]['avg_consumers']:.2f} on average). "
        f"Least data moved per rebalance: {calm} (average Rscore {results[calm]['avg_rscore']:.3g}, "
        f"{results[calm]['avg_rscore'] / max(results[fewest]['avg_rscore'], 1e-12):.2f}× {fewest}'s, "
        f"for {results[calm]['avg_consumers']:.2f} consumers). "
    )
    finite = {n: v for n, v in p99.items() if v is not None and math.isfinite(v)}
    if finite:
        quick = min(finite, key=lambda n: (finite[n], n))
        text += f"Lowest tail latency: {quick} (p99 {finite[quick]:.2f} s). "
    front = pareto_front({n: (results[n]["cbs"], results[n]["avg_rscore"]) for n in named})
    text += f"Not dominated on consumers and moves together: {', '.join(front)}. "
    shown = [k for k in kafka if k in results and results[k].get("latency")]
    if shown:
        text += "Kafka's equal-count assignment for comparison: " + "; ".join(
            f"{k} p99 {_seconds(results[k]['latency']['p99'])} at {results[k]['avg_consumers']:.2f} consumers"
            for k in shown
        )
        text += "."
    return text


def sweep_goals_paragraph(results: dict[int, dict[str, Any]], algorithms: Sequence[str]) -> str:
    """The same reading over the δ sweep: means over δ, and how often each is on the trade-off front."""
    deltas = sorted(results)

    def mean(name: str, key: str) -> float:
        return sum(results[d]["results"][name][key] for d in deltas) / len(deltas)

    fewest = min(algorithms, key=lambda n: (mean(n, "avg_consumers"), n))
    calm = min(algorithms, key=lambda n: (mean(n, "avg_rscore"), n))
    on_front = {n: 0 for n in algorithms}
    for d in deltas:
        for n in pareto_front(
            {n: (results[d]["results"][n]["cbs"], results[d]["results"][n]["avg_rscore"]) for n in algorithms}
        ):
            on_front[n] += 1
    steady = sorted((n for n in algorithms if on_front[n]), key=lambda n: (-on_front[n], n))
    return (
        f"Over δ = {deltas[0]}…{deltas[-1]}: fewest consumers: {fewest} ({mean(fewest, 'avg_consumers'):.2f} on "
        f"average); least data moved per rebalance: {calm} (average Rscore {mean(calm, 'avg_rscore'):.3g}, "
        f"{mean(calm, 'avg_rscore') / max(mean(fewest, 'avg_rscore'), 1e-12):.2f}× {fewest}'s, for "
        f"{mean(calm, 'avg_consumers'):.2f} consumers). On the trade-off front (CBS against Rscore): "
        + ", ".join(f"{n} at {on_front[n]} of {len(deltas)} δ" for n in steady)
        + "."
    )


def _seconds(value: float | None) -> str:
    return "∞" if value is None or not math.isfinite(value) else f"{value:.2f} s"


# -- a stream ------------------------------------------------------------------------------------


def kafka_range(stream: Sequence[Measurement]) -> list[int]:
    """N for the kd_N curve: 1 to the number of partitions, at most KAFKA_POINTS values."""
    partitions = len({(t, p) for m in stream for t, ps in m.items() for p in ps})
    step = max(1, math.ceil(partitions / KAFKA_POINTS))
    return sorted(set(range(1, partitions + 1, step)) | {partitions})


def stream_report(
    stream: list[Measurement],
    capacity: float,
    algorithms: list[str],
    kafka: list[int],
    model: LatencyModel,
    out: Path,
    optimum_time_limit_ms: int | None = None,
) -> Path:
    from tqdm import tqdm

    plt = _pyplot()
    algorithms = with_weight_sweep(algorithms)
    curve = kafka_range(stream)
    progress = tqdm(
        total=len(algorithms) + len(curve) + bool(optimum_time_limit_ms is not None), desc="replaying", file=sys.stderr
    )
    runs: dict[str, Run] = {}
    latency: dict[str, Segments] = {}
    prepared = Prepared(stream)  # read into the compiled core's arrays once for every algorithm

    def add(name: str) -> None:
        (run,) = replay_named(prepared, capacity, [name], keep=True)
        runs[name], latency[name] = run, run.latency(model)
        run.owners = None  # the segments are all the report needs of them

    for name in [*algorithms, *(f"kd_{n}" for n in curve)]:
        add(name)
        progress.update()
    best = None
    if optimum_time_limit_ms is not None:
        best = optimum(stream, capacity, optimum_time_limit_ms)
        progress.update()
    progress.close()
    summaries = {name: seg.summary() for name, seg in latency.items()}
    reference = "mwf" if "mwf" in algorithms else min(algorithms, key=lambda n: summaries[n]["p99"])
    same_cost = max(1, round(runs[reference].avg_consumers))
    negligible = next((n for n in curve if summaries[f"kd_{n}"]["p99"] < NEGLIGIBLE_S), None)
    featured = list(dict.fromkeys([*kafka, same_cost] + ([negligible] if negligible else [])))
    for n in featured:
        if f"kd_{n}" not in runs:
            add(f"kd_{n}")
            summaries[f"kd_{n}"] = latency[f"kd_{n}"].summary()
    shown = [*algorithms, *(f"kd_{n}" for n in sorted(featured))]
    results = results_of([runs[n] for n in shown], {n: latency[n] for n in shown}, best)
    title = (
        f"groupfit report: {len(stream)} measurements, C = {capacity:g}, C̄ = {model.consumer_throughput:g}, "
        f"{model.iteration_s:g} s iterations, {model.rebalance_s:g} s rebalances"
    )
    page = Page(out, title)

    page.heading("Which algorithm for which goal")
    page.text(goals_paragraph(results, algorithms, [f"kd_{n}" for n in sorted(featured)]))
    page.heading("Headline")
    header = [
        "algorithm",
        "avg consumers",
        "avg Rscore",
        "CBS",
        *(["vs optimum"] if best else []),
        "p50 s",
        "p90 s",
        "p95 s",
        "p99 s",
        "max s",
        "bytes > 0 s",
    ]
    page.table(
        header,
        [
            [
                n,
                r["avg_consumers"],
                r["avg_rscore"],
                r["cbs"],
                *([r["optimum_excess"]] if best else []),
                *(r["latency"][p] for p in ("p50", "p90", "p95", "p99", "max")),
                f"{summaries[n]['above_zero'] / latency[n].bytes:.1%}" if latency[n].bytes else "-",
            ]
            for n, r in results.items()
        ],
    )
    page.text(
        "CBS (Eq. 28) is the mean excess over the fewest consumers of any assignment within C at each "
        "iteration; kd_N ignores rates, so it may use fewer by overloading (negative CBS). Latency: the §VI-C "
        "model over every byte from the second iteration on; ∞ marks bytes the model never reads."
    )
    if best:
        page.text(
            f"exact (CP-SAT, {optimum_time_limit_ms} ms per measurement): {best['avg_consumers']:.2f} consumers "
            f"on average, optimal proven in {best['proven']} of {len(best['consumers'])} measurements; "
            "'vs optimum' is CBS against its count."
        )

    page.heading("Kafka's equal-count assignment (kd_N) against the algorithms")
    _kafka_section(page, plt, curve, summaries, runs, reference, same_cost, negligible)

    plotted = [n for n in algorithms if n not in REPACK_WEIGHTS]
    window = 10 if len(stream) >= 50 else 1
    for metric, label, smooth in (("consumers", "consumers", 1), ("rscore", "Rscore (moved rate / C)", window)):
        series = {n: _moving_average(getattr(runs[n], metric), smooth) for n in plotted}
        shown_label = label if smooth == 1 else f"{label}, mean of {smooth}"
        heading = f"{label.split(' (')[0]} over time"
        figure = _small_multiples(
            plt, range(len(stream)), series, "iteration", shown_label, f"{heading}: each algorithm against the others"
        )
        page.heading(heading)
        page.figure(
            f"{metric}_over_time",
            figure,
            f"{label} per iteration"
            + (f" ({smooth}-iteration moving average)" if smooth > 1 else "")
            + "; one panel per algorithm, the others in grey",
        )
        plt.close(figure)

    page.heading("Latency (§VI-C): share of bytes within x seconds")
    compared = list(dict.fromkeys([reference, *(n for n in ("mwf", "bfd") if n in algorithms)]))
    figure = _latency_cdf(plt, [*compared, *(f"kd_{n}" for n in sorted(featured))], latency, reference)
    page.figure("latency_cdf", figure, "CDF of latency over every byte from the second iteration; log x axis")
    plt.close(figure)

    points = {n: (results[n]["cbs"], results[n]["avg_rscore"]) for n in algorithms}
    page.heading("Pareto front (CBS vs average Rscore)")
    page.text("on the front: " + ", ".join(pareto_front(points)))
    figure = _pareto_figure(plt, points, "this stream")
    page.figure(
        "pareto_front",
        figure,
        "operational cost against rebalance cost; red: not dominated (the front); green diamonds: repack at each consumer weight W",
    )
    plt.close(figure)
    kd_curve = {
        f"kd_{n}": {
            "avg_consumers": runs[f"kd_{n}"].avg_consumers,
            **{k: summaries[f"kd_{n}"][k] for k in ("p90", "p99", "max")},
        }
        for n in curve
    }
    return page.write(
        {
            "results": results,
            "kafka_curve": kd_curve,
            "smallest_kd_below_negligible": negligible,
            "reference": reference,
            **({"optimum": best} if best else {}),
        }
    )


def _kafka_section(
    page: Page,
    plt: Any,
    curve: list[int],
    summaries: dict[str, dict[str, float]],
    runs: dict[str, Run],
    reference: str,
    same_cost: int,
    negligible: int | None,
) -> None:
    figure, axis = plt.subplots(figsize=(10, 4.2))
    for p, marker in (("p99", "o"), ("p90", "s")):
        axis.plot(curve, [summaries[f"kd_{n}"][p] for n in curve], marker=marker, markersize=3, label=f"kd_N {p}")
        axis.axhline(
            summaries[reference][p],
            linestyle="--",
            linewidth=1,
            color="tab:blue" if p == "p99" else "tab:orange",
            label=f"{reference} {p}",
        )
    axis.axvline(runs[reference].avg_consumers, color="grey", linestyle=":", label=f"{reference} average consumers")
    axis.set_yscale("symlog", linthresh=1)  # 0 s and hours on one axis
    axis.set_ylim(bottom=0)
    axis.set_xlabel("N (consumers)")
    axis.set_ylabel("latency (s, symmetric log scale)")
    axis.set_title(f"Kafka's equal-count assignment kd_N: tail latency by N, against {reference}")
    axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside: no line hidden
    axis.legend(fontsize=8)
    axis.grid(alpha=0.3)
    page.figure("kafka_by_consumers", figure, "kd_N tail latency by N, beside the reference algorithm")
    plt.close(figure)
    ref = summaries[reference]
    text = (
        f"{reference}: {runs[reference].avg_consumers:.2f} consumers on average, p90 {ref['p90']:.2f} s, "
        f"p99 {ref['p99']:.2f} s. At the same cost kd_{same_cost} has p90 {summaries[f'kd_{same_cost}']['p90']:.2f} s, "
        f"p99 {summaries[f'kd_{same_cost}']['p99']:.2f} s. "
    )
    if negligible is None:
        text += f"No kd_N up to N = {curve[-1]} brings p99 below {NEGLIGIBLE_S} s."
    else:
        text += (
            f"The smallest N with p99 below {NEGLIGIBLE_S} s is kd_{negligible}: "
            f"{negligible / runs[reference].avg_consumers:.2f}× {reference}'s consumers."
        )
    page.text(text)


# -- the δ sweep ---------------------------------------------------------------------------------


def sweep(
    partitions: int,
    measurements: int,
    capacity: float,
    seed: int,
    algorithms: list[str],
    deltas: Sequence[int] = DELTAS,
    optimum_time_limit_ms: int | None = None,
) -> dict[int, dict[str, Any]]:
    """`evaluate` of each algorithm (and repack's weight sweep, with repack) on a generated stream per δ
    (seed + δ)."""
    from tqdm import tqdm

    algorithms = with_weight_sweep(algorithms)
    return {
        delta: evaluate(
            generate_stream(partitions, measurements, delta, seed + delta, capacity),
            capacity,
            algorithms,
            None,
            optimum_time_limit_ms,
        )
        for delta in tqdm(deltas, desc="δ sweep", file=sys.stderr)
    }


def sweep_report(results: dict[int, dict[str, Any]], out: Path, title: str) -> Path:
    plt = _pyplot()
    page = Page(out, title)
    deltas = sorted(results)
    compared = list(results[deltas[0]]["results"])  # with repack's weight sweep: on the Pareto plots only
    algorithms = [n for n in compared if n not in REPACK_WEIGHTS]
    page.heading("Which algorithm for which goal")
    page.text(sweep_goals_paragraph(results, algorithms))
    metrics = [
        ("cbs", "CBS (Eq. 28)"),
        ("avg_rscore", "average Rscore (Eq. 29)"),
        ("avg_consumers", "average consumers"),
    ]
    if "optimum" in results[deltas[0]]:
        metrics.append(("optimum_excess", "CBS against the exact optimum"))
    for metric, label in metrics:
        series = {name: [results[d]["results"][name][metric] for d in deltas] for name in algorithms}
        figure = _small_multiples(
            plt, deltas, series, "δ (largest step, % of C)", label, f"{label} per δ: each algorithm against the others"
        )
        page.heading(f"{label} per δ")
        page.figure(f"{metric}_per_delta", figure, f"{label} of each algorithm per δ; the others in grey")
        plt.close(figure)
        page.table(
            ["algorithm", *(f"δ={d}" for d in deltas)],
            [[name, *(results[d]["results"][name][metric] for d in deltas)] for name in algorithms],
        )
    for d in deltas:
        points = {n: (results[d]["results"][n]["cbs"], results[d]["results"][n]["avg_rscore"]) for n in compared}
        page.heading(f"Pareto front, δ = {d}")
        page.text("on the front: " + ", ".join(pareto_front(points)))
        figure = _pareto_figure(plt, points, f"δ = {d}")
        page.figure(
            f"pareto_delta_{d}",
            figure,
            f"CBS against average Rscore at δ = {d}; red: not dominated; green diamonds: repack at each consumer weight W",
        )
        plt.close(figure)
    summary = {
        d: {
            n: {k: v for k, v in r.items() if k not in ("consumers", "rscore")}
            for n, r in results[d]["results"].items()
        }
        for d in deltas
    }
    return page.write(summary)
