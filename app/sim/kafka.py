"""kd_N (Landau et al. §VI-C): Kafka's equal-count assignment with N consumers, as autoscalers like KEDA
use it. Partitions are dealt round-robin to c0..c{N-1} in the order they first appear in the stream, once,
and never moved again."""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.core.algorithm import Algorithm, Placement
from app.core.model import Problem
from app.sim.replay import Run, replay_with
from app.sim.stream import Measurement

KD = re.compile(r"^kd_(\d+)$")


def is_kafka_default(name: str) -> bool:
    return KD.match(name) is not None


def kafka_default(consumers: int) -> Algorithm:
    dealt = [0]  # partitions dealt so far in this replay: the next one goes to c{dealt % N}

    def place(problem: Problem, _params: object) -> Placement:
        assignment: dict[str, list[int]] = {f"c{i}": [] for i in range(consumers)}
        for j, owner in enumerate(problem.previous_owner):
            if owner is None:
                owner = f"c{dealt[0] % consumers}"
                dealt[0] += 1
            assignment[owner].append(j)
        return Placement(assignment)

    return Algorithm(f"kd_{consumers}", f"Kafka's equal-count assignment over {consumers} consumers", place)


def replay_kafka_default(stream: Sequence[Measurement], capacity: float, name: str, keep: bool = False) -> Run:
    match = KD.match(name)
    if match is None or int(match.group(1)) < 1:
        raise ValueError(f"{name!r} is not kd_<N> with N ≥ 1")
    return replay_with(stream, capacity, kafka_default(int(match.group(1))), None, keep)
