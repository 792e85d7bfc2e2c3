"""Workloads: arrival rates per partition over time, as a JSON file, and the events they schedule.

A workload file is one JSON object:

    {"name": "standard", "description": "…", "tick_s": 1.0, "partitions": 5,
     "rates": [[36.2, 36.2, 36.2, 36.2, 36.2], …]}     # one row per tick: events/s into each partition

The producer sends, in tick k, round(Σ_{i≤k} rate·tick_s) − round(Σ_{i<k} rate·tick_s) events into each
partition (so fractions carry over and the total is exact), evenly spaced within the tick.

The three workloads of the experiment (docs/experiment.md):

- `standard`: a stand-in for Ezzeddine et al.'s first workload (seed 001 §5, Fig. 2), whose arrival curve is
  published only as a figure: 10 minutes, 109 000 events, rising to a peak and falling (`STANDARD_KNOTS`, with
  a seeded ±`NOISE` wobble per second), spread evenly over 5 partitions;
- `skewed`: the same arrivals over 9 partitions, half into the first two (seed 001's Fig. 7 set-up);
- `landau`: Landau et al.'s published stream (32 partitions, rates in % of a consumer's capacity C, one
  measurement per 30 s), time-scaled, rates turned into events/s (`landau`).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

MU = 200.0
"""μ: events/s one consumer processes at 5 ms per event (seed 001 §5)."""

STANDARD_DURATION_S = 600
STANDARD_EVENTS = 109_000
STANDARD_KNOTS = ((0, 30), (60, 45), (150, 140), (210, 260), (255, 470), (300, 520), (345, 470), (390, 260),
                  (450, 120), (520, 60), (600, 30))  # fmt: skip
"""(second, events/s): the stand-in's shape before it is scaled to STANDARD_EVENTS — a slow rise for four
minutes, a peak of about 500 events/s for a minute and a half (above 450, where each of 5 partitions needs a
consumer of its own at f_up = 0.9, as the seed's overprovisioning at 5 replicas implies), then the fall."""
NOISE = 0.08
"""Each second's rate is the curve's times a uniform factor in [1 − NOISE, 1 + NOISE] (seeded): a trace, not a
smooth line, so the autoscalers see the jitter a measured rate has."""
SKEW_HOT_PARTITIONS = 2
SKEW_HOT_SHARE = 0.5
SKEW_PARTITIONS = 9


class WorkloadError(ValueError):
    """A workload file that cannot be used; the message names the file and what is wrong with it."""


class _WorkloadFile(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    tick_s: float
    partitions: int
    rates: list[list[float]]
    description: str = ""


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    tick_s: float
    rates: np.ndarray  # ticks × partitions, events/s

    @property
    def partitions(self) -> int:
        return int(self.rates.shape[1])

    @property
    def ticks(self) -> int:
        return int(self.rates.shape[0])

    @property
    def duration_s(self) -> float:
        return self.ticks * self.tick_s

    def counts(self) -> np.ndarray:
        """Events per tick and partition (ticks × partitions, integers): the rates with their fractions
        carried over, so each partition's total is its rates' integral rounded."""
        cumulative = np.rint(np.cumsum(self.rates * self.tick_s, axis=0)).astype(np.int64)
        return np.diff(cumulative, axis=0, prepend=np.zeros((1, self.partitions), dtype=np.int64))

    @property
    def total_events(self) -> int:
        return int(self.counts().sum())

    def total_rate(self) -> np.ndarray:
        """events/s over all partitions, per tick."""
        return self.rates.sum(axis=1)

    def schedule(self) -> tuple[np.ndarray, np.ndarray]:
        """Every event's send time (seconds from the start) and partition, in time order: partition p's n
        events of a tick at (i + (p + ½)/P)/n of it (P partitions), evenly spaced and out of step with the
        other partitions'."""
        counts = self.counts()
        times: list[np.ndarray] = []
        partitions: list[np.ndarray] = []
        for tick in range(self.ticks):
            start = tick * self.tick_s
            for partition in range(self.partitions):
                n = int(counts[tick, partition])
                if n:
                    phase = (partition + 0.5) / self.partitions
                    times.append(start + (np.arange(n) + phase) / n * self.tick_s)
                    partitions.append(np.full(n, partition, dtype=np.int32))
        if not times:
            return np.zeros(0), np.zeros(0, dtype=np.int32)
        t, p = np.concatenate(times), np.concatenate(partitions)
        order = np.argsort(t, kind="stable")
        return t[order], p[order]

    def time_scaled(self, factor: float) -> Workload:
        """The same rates, each tick `factor` times shorter (so `factor` times fewer events)."""
        if factor == 1.0:
            return self
        if not (math.isfinite(factor) and factor > 0):
            raise WorkloadError(f"the time scale must be a number above 0; got {factor}")
        return Workload(
            f"{self.name}-x{factor:g}",
            f"{self.description} Replayed {factor:g}× faster: ticks of {self.tick_s / factor:g} s.",
            self.tick_s / factor,
            self.rates,
        )

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "tick_s": self.tick_s,
            "partitions": self.partitions,
            "rates": [[round(float(r), 4) for r in row] for row in self.rates],
        }

    def dump(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json()))


def load(path: str | Path) -> Workload:
    """The workload in `path`, checked: a WorkloadError saying what is wrong otherwise."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise WorkloadError(f"workload {path}: cannot read it ({exc.strerror})") from None
    return parse(data, str(path))


def parse(data: bytes, where: str = "workload") -> Workload:
    try:
        raw = msgspec.json.decode(data, type=_WorkloadFile)
    except msgspec.DecodeError as exc:
        raise WorkloadError(f"{where}: {exc} (expected {{name, tick_s, partitions, rates, description?}})") from None
    return _checked(raw, where)


def _checked(raw: _WorkloadFile, where: str) -> Workload:
    def fail(message: str) -> WorkloadError:
        return WorkloadError(f"{where}: {message}")

    if not (math.isfinite(raw.tick_s) and raw.tick_s > 0):
        raise fail(f"tick_s must be a number of seconds above 0; got {raw.tick_s}")
    if raw.partitions < 1:
        raise fail(f"partitions must be at least 1; got {raw.partitions}")
    if not raw.rates:
        raise fail("rates is empty; give one row of events/s per partition for each tick")
    for tick, row in enumerate(raw.rates):
        if len(row) != raw.partitions:
            raise fail(f"rates[{tick}] has {len(row)} values; every row needs one per partition ({raw.partitions})")
        bad = next((r for r in row if not (math.isfinite(r) and r >= 0)), None)
        if bad is not None:
            raise fail(f"rates[{tick}] holds {bad}; rates are events/s, finite and ≥ 0")
    rates = np.array(raw.rates, dtype=float)
    if rates.sum() * raw.tick_s < 1:
        raise fail("the rates add up to no event at all")
    return Workload(raw.name, raw.description, raw.tick_s, rates)


# -- the experiment's workloads ------------------------------------------------------------------------------


def standard_curve(seed: int = 1) -> np.ndarray:
    """Events/s per second of the stand-in (all partitions together), STANDARD_EVENTS in all."""
    seconds = np.arange(STANDARD_DURATION_S) + 0.5
    knots_t, knots_r = zip(*STANDARD_KNOTS)
    curve = np.interp(seconds, knots_t, knots_r)
    wobble = random.Random(seed)
    curve = curve * np.array([1 + wobble.uniform(-NOISE, NOISE) for _ in seconds])
    return curve * (STANDARD_EVENTS / curve.sum())


def standard(partitions: int = 5, seed: int = 1) -> Workload:
    curve = standard_curve(seed)
    rates = np.repeat((curve / partitions)[:, None], partitions, axis=1)
    return Workload(
        "standard",
        f"Stand-in for Ezzeddine et al.'s first workload (seed 001 Fig. 2, published only as a figure): "
        f"{STANDARD_DURATION_S} s, {STANDARD_EVENTS} events, piecewise-linear through {list(STANDARD_KNOTS)} "
        f"(s, events/s) scaled to the total, ±{NOISE:.0%} seeded noise per second (seed {seed}), "
        f"spread evenly over {partitions} partitions.",
        1.0,
        rates,
    )


def skewed(
    partitions: int = SKEW_PARTITIONS, hot: int = SKEW_HOT_PARTITIONS, hot_share: float = SKEW_HOT_SHARE, seed: int = 1
) -> Workload:
    if not 0 < hot < partitions:
        raise WorkloadError(f"skewed: the hot partitions ({hot}) must be at least 1 and fewer than all ({partitions})")
    curve = standard_curve(seed)
    shares = np.array([hot_share / hot] * hot + [(1 - hot_share) / (partitions - hot)] * (partitions - hot))
    return Workload(
        "skewed",
        f"The standard stand-in's arrivals with {hot_share:.0%} of each second's events into the first {hot} of "
        f"{partitions} partitions and the rest spread evenly over the others (seed 001 Fig. 7's set-up).",
        1.0,
        curve[:, None] * shares[None, :],
    )


def landau(
    stream_path: str | Path,
    mu: float = MU,
    consumer_throughput: float = 133.0,
    iteration_s: float = 30.0,
    time_scale: float = 5.0,
    measurements: int | None = None,
) -> Workload:
    """Landau et al.'s stream: measurement k's rate r (in the stream's unit, a consumer reading
    `consumer_throughput` of it: C̄ = 133 against C = 100) becomes r·μ/C̄ events/s, so a consumer's real
    capacity C̄ is μ; each measurement holds for iteration_s / time_scale seconds. Partitions are numbered in
    the order of the stream's first measurement (topic by topic)."""
    from app.sim.stream import load_stream

    stream = load_stream(stream_path)[:measurements]
    if not stream:
        raise WorkloadError(f"{stream_path}: the stream has no measurement")
    keys = [(topic, partition) for topic, rates in stream[0].items() for partition in rates]
    rows = []
    for k, measurement in enumerate(stream):
        row = []
        for topic, partition in keys:
            try:
                row.append(float(measurement[topic][partition]) * mu / consumer_throughput)
            except KeyError:
                raise WorkloadError(f"{stream_path}: measurement {k} has no rate for {topic}/{partition}") from None
        rows.append(row)
    return Workload(
        "landau",
        f"Landau et al.'s published stream ({Path(stream_path).name}: {len(stream)} measurements, {len(keys)} "
        f"partitions), a rate r becoming r·{mu:g}/{consumer_throughput:g} events/s, each measurement held "
        f"{iteration_s / time_scale:g} s ({iteration_s:g} s / {time_scale:g}).",
        iteration_s / time_scale,
        np.array(rows),
    )


BUILT = ("standard", "skewed", "landau")


LANDAU_TIME_SCALE = 5.0
"""The published stream's 30 s measurements held 6 s each: its 100 measurements in 10 minutes."""


def resolve(name_or_path: str, stream_path: str | Path | None = None, time_scale: float = 1.0) -> Workload:
    """A built-in workload by name, or a workload file; replayed `time_scale` times faster (the landau one
    LANDAU_TIME_SCALE times faster to begin with)."""
    if name_or_path == "landau":
        if stream_path is None:
            raise WorkloadError("the landau workload needs the published stream (--stream)")
        return landau(stream_path, time_scale=LANDAU_TIME_SCALE).time_scaled(time_scale)
    if name_or_path == "standard":
        workload = standard()
    elif name_or_path == "skewed":
        workload = skewed()
    elif Path(name_or_path).exists():
        workload = load(name_or_path)
    else:
        raise WorkloadError(f"workload {name_or_path!r} is neither a file nor one of {', '.join(BUILT)}")
    return workload.time_scaled(time_scale)


def peak_total_rate(workload: Workload) -> float:
    return float(workload.total_rate().max())


def describe(workload: Workload) -> dict:
    """A workload's figures, for the report and `groupfit experiment workload`."""
    total = workload.total_rate()
    return {
        "name": workload.name,
        "description": workload.description,
        "partitions": workload.partitions,
        "duration_s": workload.duration_s,
        "tick_s": workload.tick_s,
        "events": workload.total_events,
        "mean_rate": float(total.mean()),
        "peak_rate": float(total.max()),
        "peak_partition_rate": float(workload.rates.max()),
    }
