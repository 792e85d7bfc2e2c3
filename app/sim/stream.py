"""Rate streams (Landau et al. §VI-B): a list of measurements, each topic → {partition: rate}."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.core.errors import AssignmentError
from app.core.model import PartitionKey

Measurement = dict[str, dict[str, float]]
DELTAS = [0, 5, 10, 15, 20, 25]  # the δ of the paper's experiments (§VI-B)


def generate_stream(
    partitions: int,
    measurements: int,
    delta: float,
    seed: int,
    capacity: float = 100.0,
    topics: int = 1,
    ordered: bool = False,
) -> list[Measurement]:
    """Eq. 15 with integer steps: s_j(t_1) ~ U[0, 100]%·C, then s_j(t_k) = s_j(t_{k-1}) + φ(δ)%·C,
    clipped to [0, 100]%·C as the published generator does.

    After the first, each measurement lists its partitions in a random order, as the published stream
    does (data/reference): the algorithms that take partitions as given (nf ff bf wf) then see the
    order the published code gave them by shuffling, while groupfit stays deterministic in its input.
    `ordered` keeps every measurement in (topic, partition) order; the rates are the same either way."""
    rng = random.Random(seed)
    shuffler = random.Random(f"order:{seed}")
    step = capacity / 100.0
    keys = [(f"topic-{t}", p) for t in range(topics) for p in range(partitions // topics + (t < partitions % topics))]
    level = [rng.randint(0, 100) for _ in keys]
    stream: list[Measurement] = []
    for k in range(measurements):
        if k:
            level = [min(100, max(0, v + rng.randint(-int(delta), int(delta)))) for v in level]
        listed = list(zip(keys, level))
        if k and not ordered:
            shuffler.shuffle(listed)
        measurement: Measurement = {}
        for (topic, partition), v in listed:
            measurement.setdefault(topic, {})[str(partition)] = v * step
        stream.append(measurement)
    return stream


def flatten(measurement: Measurement) -> tuple[list[PartitionKey], list[float]]:
    """Partitions in the measurement's order (topics as listed, partitions as listed)."""
    keys: list[PartitionKey] = []
    rates: list[float] = []
    for topic, partitions in measurement.items():
        for partition, rate in partitions.items():
            if not topic or not partition.isdigit():
                raise AssignmentError(
                    "invalid_request",
                    f"a measurement maps topic → {{partition: rate}} with non-empty topics and partitions "
                    f"written as integers; got topic {topic!r}, partition {partition!r}.",
                )
            keys.append((topic, int(partition)))
            rates.append(rate)
    return keys, rates


def check_stream(data: Any) -> list[Measurement]:
    """A non-empty JSON list of measurements, each topic → {partition: rate} with numeric rates (the
    partitions and the rates themselves are checked when each measurement becomes a problem)."""
    if not isinstance(data, list) or not data:
        raise AssignmentError("invalid_request", "a stream is a non-empty JSON list of measurements.")
    for k, measurement in enumerate(data):
        if not isinstance(measurement, dict) or not all(isinstance(p, dict) for p in measurement.values()):
            raise AssignmentError("invalid_request", f"measurement {k} is not an object topic → {{partition: rate}}.")
        for topic, partitions in measurement.items():
            for partition, rate in partitions.items():
                if isinstance(rate, bool) or not isinstance(rate, (int, float)):
                    raise AssignmentError(
                        "invalid_rate",
                        f"measurement {k}: partition {topic}/{partition} has rate {rate!r}; rates are numbers.",
                    )
    return data


def load_stream(path: str | Path) -> list[Measurement]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise AssignmentError("invalid_request", f"{path}: cannot read a JSON stream ({exc}).") from None
    return check_stream(data)


def dump_stream(stream: Iterable[Measurement], path: str | Path) -> None:
    Path(path).write_text(json.dumps(list(stream)))
