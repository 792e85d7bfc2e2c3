"""Time the consumer leader's call to groupfit adds to a rebalance: the assignor's assign() for a group of
1 000 partitions and 20 members, against a live service (p50/p99 over 50 rebalances), and the local
fallback's time when the service is down.

    .venv/bin/python bench/rebalance.py [--url http://127.0.0.1:8000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.embedded import free_port, wait_for_port  # noqa: E402
from groupfit_client.assignor import groupfit_assignor  # noqa: E402


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
    service, url = None, args.url
    if url is None:
        port = free_port()
        env = {**os.environ, "GROUPFIT_PORT": str(port), "GROUPFIT_LOG_LEVEL": "WARNING",
               "GROUPFIT_DATA_DIR": str(ROOT / ".groupfit" / "bench")}
        service = subprocess.Popen([sys.executable, "-m", "app.cli", "serve"], env=env, cwd=ROOT)
        wait_for_port("127.0.0.1", port, 30)
        url = f"http://127.0.0.1:{port}"
    try:
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
    finally:
        if service is not None:
            service.terminate()
            service.wait(timeout=15)


if __name__ == "__main__":
    main()
