"""kd_N (Landau et al. §VI-C): Kafka's equal-count assignment with N consumers, as autoscalers like KEDA
use it. Partitions are dealt round-robin to c0..c{N-1} in the order they first appear in the stream, once,
and never moved again; consumers dealt nothing (N above the partition count) hold nothing and are not
counted.

The registered `roundrobin` assignor (app/core/algorithms/kafka_roundrobin.py) re-deals every partition in
(topic, partition) order at each call: on a stream whose partitions are fixed and first listed in that
order it gives the same assignment, but a partition appearing later would reshuffle the others, which
kd_N never does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.core.algorithm import Algorithm, Packing
from app.core.model import PartitionKey, Problem
from app.sim.replay import Prepared, Run, replay_with
from app.sim.stream import Measurement

KD = re.compile(r"^kd_([1-9][0-9]{0,5})$")  # N from 1 to 999 999


def is_kafka_default(name: str) -> bool:
    return KD.match(name) is not None


def kafka_default(consumers: int) -> Algorithm:
    owners: dict[PartitionKey, str] = {}  # every partition seen so far in this replay → its consumer

    def pack(problem: Problem, _params: object) -> Packing:
        assignment: dict[str, list[int]] = {}
        for j, key in enumerate(problem.keys):
            owner = owners.get(key)
            if owner is None:
                owner = owners[key] = f"c{len(owners) % consumers}"
            assignment.setdefault(owner, []).append(j)
        return Packing(assignment)

    return Algorithm(f"kd_{consumers}", f"Kafka's equal-count assignment over {consumers} consumers", pack)


def replay_kafka_default(
    stream: Sequence[Measurement] | Prepared, capacity: float, name: str, keep: bool = False
) -> Run:
    match = KD.match(name)
    if match is None:
        raise ValueError(f"{name!r} is not kd_<N> with 1 ≤ N < 10^6")
    return replay_with(stream, capacity, kafka_default(int(match.group(1))), None, keep)
