"""Rate streams (Landau et al. §VI-B): a list of measurements, each topic → {partition: rate}."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path

from app.core.errors import AssignmentError
from app.core.model import PartitionKey

Measurement = dict[str, dict[str, float]]


def generate_stream(
    partitions: int, measurements: int, delta: float, seed: int, capacity: float = 100.0, topics: int = 1
) -> list[Measurement]:
    """Eq. 15 with integer steps: s_j(t_1) ~ U[0, 100]%·C, then s_j(t_k) = s_j(t_{k-1}) + φ(δ)%·C,
    clipped to [0, 100]%·C as the published generator does."""
    rng = random.Random(seed)
    step = capacity / 100.0
    keys = [(f"topic-{t}", p) for t in range(topics) for p in range(partitions // topics + (t < partitions % topics))]
    level = [rng.randint(0, 100) for _ in keys]
    stream: list[Measurement] = []
    for k in range(measurements):
        if k:
            level = [min(100, max(0, v + rng.randint(-int(delta), int(delta)))) for v in level]
        measurement: Measurement = {}
        for (topic, partition), v in zip(keys, level):
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


def load_stream(path: str | Path) -> list[Measurement]:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise ValueError(f"{path}: a stream is a JSON list of measurements, each topic → {{partition: rate}}")
    return data


def dump_stream(stream: Iterable[Measurement], path: str | Path) -> None:
    Path(path).write_text(json.dumps(list(stream)))
