"""What one run measured, from what its processes recorded: every event's latency, the rebalances, the replicas.

Inputs, in the run's folder:
- `consumers/<id>.lat`: per event processed, (partition int32, offset int64, produced µs, processed µs),
  big-endian (the Java `ExperimentConsumer` and the Python controlled consumer write the same);
- `consumers/<id>.events.jsonl`: `start`, `assigned` / `revoked` / `lost` (time in µs, partitions,
  generation), `reass` (a rebalance this member triggered), `closed`;
- the producer's summary (events delivered per partition) and the replicas over time (the autoscaler's
  decisions, or the fixed count).

Latency is counted once per event, at its first processing (a duplicate, processed again after a rebalance,
is counted as a duplicate, not as a second latency). A partition's pause is the time from its revocation (or
loss) to its next assignment, to any member: consumption of it stops in between.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

LATENCY_RECORD = np.dtype([("partition", ">i4"), ("offset", ">i8"), ("produced", ">i8"), ("processed", ">i8")])
PERCENTILES = {"p50": 50, "p90": 90, "p99": 99}
REASS_WINDOW_S = 10.0
"""A pause starting within this long after a member triggered a rebalance (REASS) counts as that rebalance's."""


@dataclass
class Latencies:
    partition: np.ndarray
    offset: np.ndarray
    produced_us: np.ndarray
    processed_us: np.ndarray
    duplicates: int  # processings beyond each event's first

    @property
    def seconds(self) -> np.ndarray:
        return (self.processed_us - self.produced_us) / 1e6

    def __len__(self) -> int:
        return len(self.offset)


def read_latencies(files: Iterable[Path]) -> Latencies:
    """Every event's first processing, across the files; a torn last record (a killed process) is dropped."""
    parts = []
    for path in files:
        data = path.read_bytes()
        usable = len(data) - len(data) % LATENCY_RECORD.itemsize
        parts.append(np.frombuffer(data[:usable], dtype=LATENCY_RECORD))
    records = np.concatenate(parts) if parts else np.zeros(0, dtype=LATENCY_RECORD)
    order = np.lexsort((records["processed"], records["offset"], records["partition"]))
    records = records[order]
    first = np.ones(len(records), dtype=bool)
    if len(records):
        first[1:] = (records["partition"][1:] != records["partition"][:-1]) | (
            records["offset"][1:] != records["offset"][:-1]
        )
    kept = records[first]
    return Latencies(
        kept["partition"].astype(np.int64),
        kept["offset"].astype(np.int64),
        kept["produced"].astype(np.int64),
        kept["processed"].astype(np.int64),
        int(len(records) - len(kept)),
    )


def read_events(files: Iterable[Path]) -> list[dict[str, Any]]:
    """Every consumer's events, in time order (a torn last line is dropped)."""
    events = []
    for path in files:
        for line in path.read_text(errors="replace").splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return sorted(events, key=lambda e: (e["t"], e.get("id", "")))


def completeness(latencies: Latencies, delivered: dict[int, int]) -> dict[str, Any]:
    """Events produced = events processed: per partition, the offsets 0 … delivered − 1 each processed."""
    missing: dict[int, int] = {}
    unexpected = 0
    for partition, count in delivered.items():
        offsets = latencies.offset[latencies.partition == partition]
        within = offsets[(offsets >= 0) & (offsets < count)]
        if len(within) < count:
            missing[partition] = int(count - len(within))
        unexpected += int(len(offsets) - len(within))
    unexpected += int((~np.isin(latencies.partition, list(delivered))).sum())
    produced = sum(delivered.values())
    return {
        "produced": produced,
        "processed": len(latencies),
        "duplicates": latencies.duplicates,
        "missing": sum(missing.values()),
        "missing_by_partition": missing,
        "unexpected": unexpected,
        "complete": not missing and not unexpected,
    }


def latency_figures(seconds: np.ndarray, w_sla: float) -> dict[str, float | None]:
    if not len(seconds):
        return {"within_sla": None, **dict.fromkeys(PERCENTILES), "max": None, "mean": None}
    return {
        "within_sla": float((seconds <= w_sla).mean()),
        **{name: float(np.percentile(seconds, q)) for name, q in PERCENTILES.items()},
        "max": float(seconds.max()),
        "mean": float(seconds.mean()),
    }


@dataclass
class Pause:
    partition: int
    revoked_us: int
    assigned_us: int
    from_member: str
    to_member: str

    @property
    def seconds(self) -> float:
        return (self.assigned_us - self.revoked_us) / 1e6

    @property
    def moved(self) -> bool:
        return self.from_member != self.to_member


@dataclass
class Rebalances:
    pauses: list[Pause] = field(default_factory=list)
    generations: int = 0
    triggered: list[int] = field(default_factory=list)  # µs of each REASS a member triggered
    trigger_failures: int = 0
    commit_failures: int = 0


def rebalances(events: Sequence[dict[str, Any]], since_us: float = 0, until_us: float = math.inf) -> Rebalances:
    """Pauses per partition (revoked or lost → next assigned), generations seen, REASS triggered: those that
    begin within [since_us, until_us] (ownership is followed from the first event on)."""
    found = Rebalances()
    owner: dict[int, str] = {}
    stopped: dict[int, tuple[int, str]] = {}  # partition → (µs it stopped, member that held it)
    generations: set[int] = set()
    for event in events:
        kind, member, at = event["event"], event.get("id", ""), event["t"]
        counted = since_us <= at <= until_us
        if kind in ("revoked", "lost"):
            for p in event["partitions"]:
                if owner.get(p) == member:
                    stopped[p] = (at, member)
                    del owner[p]
        elif kind == "assigned":
            if counted:
                generations.add(event.get("generation", -1))
            for p in event["partitions"]:
                if p in stopped:
                    began, before = stopped.pop(p)
                    if since_us <= began <= until_us:
                        found.pauses.append(Pause(p, began, at, before, member))
                owner[p] = member
        elif not counted:
            continue
        elif kind == "reass":
            found.triggered.append(at)
        elif kind == "reass_failed":
            found.trigger_failures += 1
        elif kind == "commit_failed":
            found.commit_failures += 1
    found.generations = len(generations - {-1})
    return found


def owners(events: Sequence[dict[str, Any]]) -> dict[int, str]:
    """partition → the member holding it after these events."""
    held: dict[int, str] = {}
    for event in events:
        if event["event"] == "assigned":
            held.update(dict.fromkeys(event["partitions"], event["id"]))
        elif event["event"] in ("revoked", "lost"):
            for p in event["partitions"]:
                if held.get(p) == event["id"]:
                    del held[p]
        elif event["event"] == "closed":
            held = {p: m for p, m in held.items() if m != event["id"]}
    return held


def replica_minutes(timeline: Sequence[tuple[float, int]], start: float, end: float) -> float:
    """∫ replicas dt over [start, end] in replica-minutes; `timeline`: (time s, replicas from then on)."""
    total = 0.0
    steps = sorted(timeline)
    for i, (t, count) in enumerate(steps):
        until = steps[i + 1][0] if i + 1 < len(steps) else end
        lo, hi = max(t, start), min(until, end)
        if hi > lo:
            total += count * (hi - lo)
    return total / 60.0


def scale_actions(replicas: Sequence[int]) -> tuple[int, int]:
    """Scale-ups and scale-downs in a sequence of replica counts."""
    ups = sum(after > before for before, after in itertools.pairwise(replicas))
    downs = sum(after < before for before, after in itertools.pairwise(replicas))
    return ups, downs


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"count": 0, "p50": None, "p99": None, "max": None, "total": 0.0}
    array = np.array(values)
    return {
        "count": len(values),
        "p50": float(np.percentile(array, 50)),
        "p99": float(np.percentile(array, 99)),
        "max": float(array.max()),
        "total": float(array.sum()),
    }


def measure(
    latencies: Latencies,
    events: Sequence[dict[str, Any]],
    delivered: dict[int, int],
    timeline: Sequence[tuple[float, int]],
    start_s: float,
    duration_s: float,
    w_sla: float,
    stopped_s: float = math.inf,
    min_trigger_interval_s: float | None = None,
) -> dict[str, Any]:
    """The run's figures (module docstring); `start_s`: epoch seconds of the workload's time 0, `stopped_s`
    when the run began stopping its group (rebalances from then on are the shutdown's, not counted)."""
    found = rebalances(events, start_s * 1e6, stopped_s * 1e6)
    pauses = [p.seconds for p in found.pauses]
    triggered = sorted(found.triggered)
    reass_pauses = [
        p.seconds for p in found.pauses if any(0 <= p.revoked_us - t <= REASS_WINDOW_S * 1e6 for t in triggered)
    ]
    gaps = [(b - a) / 1e6 for a, b in itertools.pairwise(triggered)]
    replicas = [count for _, count in sorted(timeline)]
    ups, downs = scale_actions(replicas)
    end_s = start_s + duration_s
    figures: dict[str, Any] = {
        "latency": latency_figures(latencies.seconds, w_sla),
        "events": completeness(latencies, delivered),
        "replica_minutes": replica_minutes(timeline, start_s, end_s),
        "mean_replicas": replica_minutes(timeline, start_s, end_s) * 60 / duration_s,
        "max_replicas": max(replicas, default=0),
        "scale_ups": ups,
        "scale_downs": downs,
        "rebalances": found.generations,
        "reass_triggered": len(triggered),
        "reass_trigger_failures": found.trigger_failures,
        "reass_min_gap_s": min(gaps, default=None),
        "reass_pause_s": _stats(reass_pauses),
        "pause_s": _stats(pauses),
        "partitions_moved": sum(p.moved for p in found.pauses),
        "commit_failures": found.commit_failures,
    }
    if min_trigger_interval_s is not None:
        figures["reass_within_min_interval"] = all(gap >= min_trigger_interval_s for gap in gaps)
    return figures


def latency_series(latencies: Latencies, start_s: float, bucket_s: float = 1.0) -> dict[str, list[float]]:
    """Per `bucket_s` of production time: events, their p99 latency and share above w_sla (for the plots)."""
    if not len(latencies):
        return {"t": [], "events": [], "p99": [], "max": []}
    seconds = latencies.seconds
    bucket = ((latencies.produced_us / 1e6 - start_s) // bucket_s).astype(np.int64)
    order = np.argsort(bucket, kind="stable")
    bucket, seconds = bucket[order], seconds[order]
    edges = np.flatnonzero(np.diff(bucket)) + 1
    series: dict[str, list[float]] = {"t": [], "events": [], "p99": [], "max": []}
    for chunk_b, chunk_s in zip(np.split(bucket, edges), np.split(seconds, edges)):
        series["t"].append(float(chunk_b[0] * bucket_s))
        series["events"].append(float(len(chunk_s)))
        series["p99"].append(float(np.percentile(chunk_s, 99)))
        series["max"].append(float(chunk_s.max()))
    return series


def cdf_points(seconds: np.ndarray, points: int = 400) -> dict[str, list[float]]:
    """The latency CDF at `points` quantiles plus the tail's last ones (for the report's plot)."""
    if not len(seconds):
        return {"latency_s": [], "share": []}
    shares = np.unique(np.concatenate([np.linspace(0, 1, points), 1 - np.logspace(-5, -1, 40)]))
    return {"latency_s": [float(v) for v in np.quantile(seconds, shares)], "share": [float(s) for s in shares]}


def member_counts(events: Sequence[dict[str, Any]]) -> Counter:
    """Lives per consumer id (a `start` each), to say how many processes ran."""
    return Counter(e["id"] for e in events if e["event"] == "start")
