"""The whole experiment as a list of runs, run one after another, and the summary table printed at the end."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.experiment.run import KIP848_ALGORITHM, Environment, ExperimentError, RunSpec, Settings, run, summary_row
from app.experiment.workload import Workload

HEARTBEATS_MS = (3000, 500)
STANDARD_STRATEGIES = ("least-loaded", "mwf", "repack", "linear", "overprovisioning", "kd_2", "kd_3", "kd_4", "kd_5")
SKEWED_STRATEGIES = ("least-loaded", "linear", "kd_3", "kd_5", "kd_9")


def plan(
    workloads: dict[str, Workload],
    settings: Settings,
    heartbeats: Sequence[int] = HEARTBEATS_MS,
    standard: Sequence[str] = STANDARD_STRATEGIES,
    skewed: Sequence[str] = SKEWED_STRATEGIES,
    kip848: bool = True,
) -> list[RunSpec]:
    """Every run of the suite, in the order they run: the standard workload (each strategy, each heartbeat),
    the skewed one, groupfit on a KIP-848 group (scaled by the autoscaler, assigned by the broker), then Landau's controller mode on the published stream."""
    runs = []
    for name, strategies in (("standard", standard), ("skewed", skewed)):
        if name in workloads:
            for heartbeat in heartbeats:
                runs += [RunSpec(s, workloads[name], replace(settings, heartbeat_ms=heartbeat)) for s in strategies]
    if kip848 and "standard" in workloads:
        # Two consumers from the start: the first assignment of a new KIP-848 group is the broker-side assignor's
        # fallback (it learns the group's name in the background) and is not stored in groupfit, so the decision
        # has nothing to decide on until a second member's join has the service compute and store one.
        kip848_settings = replace(settings, protocol="consumer", min_consumers=max(2, settings.min_consumers))
        runs.append(RunSpec(KIP848_ALGORITHM, workloads["standard"], kip848_settings))
    if "landau" in workloads:
        runs.append(RunSpec("controller", workloads["landau"], settings))
    return runs


def run_all(
    specs: Sequence[RunSpec], env: Environment, progress: Callable[[str], Any] = print, skip_done: bool = False
) -> list[dict[str, Any]]:
    """Each run in turn; one that fails is reported and the suite goes on (an interruption stops it)."""
    results = []
    for i, spec in enumerate(specs, 1):
        done = env.out / spec.name / "result.json"
        if skip_done and done.exists():
            progress(f"[{i}/{len(specs)}] {spec.name}: kept from an earlier suite ({done})")
            results.append(json.loads(done.read_text()))
            continue
        progress(f"[{i}/{len(specs)}] {spec.name}")
        try:
            results.append(run(spec, env, progress))
        except ExperimentError as exc:
            progress(f"[{i}/{len(specs)}] {spec.name} failed: {exc}")
    return results


def load_results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(out.glob("*/result.json"))]


def summary_table(results: Sequence[dict[str, Any]]) -> str:
    """The runs' headline figures as a fixed-width table."""
    rows = [summary_row(result) for result in results]
    if not rows:
        return "(no run finished)"
    header = list(rows[0])
    cells = [[_text(row[key]) for key in header] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def _text(value: Any) -> str:
    return "-" if value is None else str(value)
