"""Time the consumer leader's call to groupfit adds to a rebalance: the assignor's assign() for a group of
1 000 partitions and 20 members, against a live service (p50/p99 over 50 rebalances; the group's stored rates,
which the service takes for the partitions sent without one, or rates given by a callable), and the local
fallback's time when the service is down (connection
refused) or hung (accepts, never answers: the deadline).

    .venv/bin/python bench/rebalance.py [--url http://127.0.0.1:8000] [--core native|python] [--gc-freeze]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import statistics
import time

from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from groupfit_client import GroupfitClient
from groupfit_client.assignor import groupfit_assignor
from live import service_at

first: list[float] = []
"""The first rebalance of each assignor measured with a warm-up (a new client: its connection, the service's first
answer for the group)."""


class Cluster:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.topics[topic]))


def timings(
    assignor: type, cluster: Cluster, members: dict, runs: int, source: str, warmup: int = 0
) -> list[tuple[float, float]]:
    """(wall, CPU of this process) seconds of each rebalance after `warmup` ones (the first of which opens the
    connection; `first` records it)."""
    for i in range(warmup):
        started = time.perf_counter()
        assignor.assign(cluster, members)
        if i == 0:
            first.append(time.perf_counter() - started)
    times = []
    for _ in range(runs):
        started, cpu = time.perf_counter(), time.process_time()
        assignor.assign(cluster, members)
        times.append((time.perf_counter() - started, time.process_time() - cpu))
        assert assignor.last_source == source, assignor.last_source
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--hung-runs", type=int, default=3, help="rebalances against a service that never answers")
    parser.add_argument(
        "--warmup", type=int, default=10, help="rebalances before the measured ones (the first is printed alone)"
    )
    parser.add_argument("--core", default="", help="GROUPFIT_CORE of the started service")
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() once set up, as a latency-minded consumer does after start-up (the collector's full "
        "passes over the imported modules' objects are the p99 otherwise)",
    )
    parser.add_argument(
        "--capacity",
        type=float,
        default=1200.0,
        help="per member: 1200 carries the group's ~21 500 (a steady group, few moves); 100 overloads it 10×",
    )
    args = parser.parse_args()
    cluster = Cluster({f"topic-{t}": 125 for t in range(8)})
    members = {
        f"member-{i}": ConsumerProtocolMemberMetadata(0, sorted(cluster.topics), json.dumps({"id": f"c{i}"}).encode())
        for i in range(20)
    }
    partitions = [(t, p) for t in sorted(cluster.topics) for p in range(cluster.topics[t])]

    def rates(partitions):
        return {(t, p): 2.0 + (p * 7) % 40 for t, p in partitions}

    group = f"bench-{int(time.time())}"
    figures = {}
    if args.gc_freeze:
        gc.collect()
        gc.freeze()
    with service_at(args.url, **({"GROUPFIT_CORE": args.core} if args.core else {})) as (url, _):
        GroupfitClient(url).put_rates(
            group,
            [{"topic": t, "partition": p, "rate": r} for (t, p), r in rates(partitions).items()],
            "2026-11-22T10:00:00Z",
        )
        figures["service, stored rates"] = timings(
            groupfit_assignor(url, group, "c0", capacity=args.capacity),
            cluster,
            members,
            args.runs,
            "service",
            args.warmup,
        )
        figures["service, rates callable"] = timings(
            groupfit_assignor(url, group, "c0", capacity=args.capacity, rates=rates),
            cluster,
            members,
            args.runs,
            "service",
            args.warmup,
        )
    down = groupfit_assignor("http://127.0.0.1:1", group, "c0", capacity=100, rates=rates)
    figures["fallback, service down"] = timings(down, cluster, members, args.runs, "fallback")
    if args.hung_runs:
        with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts connections, never answers
            hung = groupfit_assignor(
                f"http://127.0.0.1:{silent.getsockname()[1]}", group, "c0", capacity=100, deadline_s=2
            )
            figures["fallback, service hung (2 s deadline)"] = timings(
                hung, cluster, members, args.hung_runs, "fallback"
            )
    print(
        f"assignor.assign(): {len(partitions)} partitions, {len(members)} members, capacity {args.capacity:g} each"
        + (", gc.freeze() after start-up" if args.gc_freeze else "")
        + (f"; measured after {args.warmup} rebalances" if args.warmup else "")
    )
    if first:
        print(
            f"first rebalance of a new assignor (its connection, the group's first answer): {max(first) * 1e3:.1f} ms"
        )
    for name, values in figures.items():
        ordered = sorted(wall for wall, _ in values)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        cpu = statistics.median(c for _, c in values)
        print(
            f"{name:<38} p50 {statistics.median(ordered) * 1e3:7.1f} ms   p99 {p99 * 1e3:7.1f} ms   "
            f"leader CPU p50 {cpu * 1e3:5.2f} ms   ({len(values)} rebalances)"
        )
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
