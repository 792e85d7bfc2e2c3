"""Time the consumer leader's call to groupfit adds to a rebalance: the assignor's assign() for a group of
1 000 partitions and 20 members, against a live service (p50/p99 over 50 rebalances), and the local
fallback's time when the service is down.

    .venv/bin/python bench/rebalance.py [--url http://127.0.0.1:8000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

from groupfit_client.assignor import groupfit_assignor
from live import service_at


class Cluster:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.topics[topic]))


def timings(assignor: type, cluster: Cluster, members: dict, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        assignor.assign(cluster, members)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with service_at(args.url) as (url, _):
        cluster = Cluster({f"topic-{t}": 125 for t in range(8)})
        members = {f"member-{i}": ConsumerProtocolMemberMetadata(0, sorted(cluster.topics), json.dumps({"id": f"c{i}"}).encode())
                   for i in range(20)}
        rates = lambda partitions: {(t, p): 2.0 + (p * 7) % 40 for t, p in partitions}  # noqa: E731
        group = f"bench-{int(time.time())}"
        leader = groupfit_assignor(url, group, "c0", capacity=100, rates=rates)
        service_times = timings(leader, cluster, members, args.runs)
        assert leader.last_source == "service"
        down = groupfit_assignor("http://127.0.0.1:1", group, "c0", capacity=100, rates=rates, deadline_s=2)
        fallback_times = timings(down, cluster, members, 10)
        assert down.last_source == "fallback"
        for name, values in (("service", service_times), ("fallback (service down)", fallback_times)):
            ordered = sorted(values)
            p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
            print(f"{name:<26} p50 {statistics.median(values) * 1e3:7.1f} ms   p99 {p99 * 1e3:7.1f} ms   ({len(values)} rebalances)")


if __name__ == "__main__":
    main()
