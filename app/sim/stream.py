"""Rate streams (Landau et al. §VI-B): a list of measurements, each topic → {partition: rate}."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path

import msgspec

from app.codec.evaluate import Measurement, Stream
from app.codec.wire import decode
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import PartitionKey

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
                    ErrorCode.INVALID_REQUEST,
                    f"a measurement maps topic → {{partition: rate}} with non-empty topics and partitions "
                    f"written as integers; got topic {topic!r}, partition {partition!r}.",
                )
            keys.append((topic, int(partition)))
            rates.append(rate)
    return keys, rates


_STREAM = msgspec.json.Decoder(Stream)


def load_stream(path: str | Path) -> list[Measurement]:
    try:
        body = Path(path).read_bytes()
    except OSError as exc:
        raise AssignmentError(ErrorCode.INVALID_REQUEST, f"cannot read the stream {path}: {exc.strerror}.") from None
    return decode(_STREAM, body)


def dump_stream(stream: Iterable[Measurement], path: str | Path) -> None:
    Path(path).write_text(json.dumps(list(stream)))
