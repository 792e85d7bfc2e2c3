"""Scale-out benchmark: stored assigns (1 000 partitions, MWF, a group each) through one replica and through two,
on a Redis Cluster of three Valkey primaries started here, and the Redis commands each stored assign costs.

    .venv/bin/python bench/scaleout.py                      # 10 s per run, 8 connections
    .venv/bin/python bench/scaleout.py --seconds 20 --connections 16

Every connection owns its groups and sends one request after the other, so no request loses a
compare-and-set: each answer is a stored version. The Redis round trips per assign are counted with MONITOR
on every node during a fixed number of assigns (commands a script runs are not round trips).
The load generator shares the 2-core machine with the replicas and the cluster: the ratio, not the
absolute rate, is the figure that carries over.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack
from urllib.parse import urlparse

import redis
from live import service_at
from service_http import assign_body, percentile, post

from app.local.servers import EmbeddedRedis, EmbeddedRedisCluster


def group_bodies(partitions: int, groups: list[str]) -> dict[str, bytes]:
    document = json.loads(assign_body(partitions))
    return {group: json.dumps({**document, "group": group}).encode() for group in groups}


async def stored_load(
    urls: list[str], partitions: int, connections: int, seconds: float, tag: str
) -> tuple[list[float], int]:
    """`connections` keep-alive connections spread over `urls`, each assigning its own two groups in turn."""
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def worker(index: int) -> None:
        nonlocal errors
        url = urlparse(urls[index % len(urls)])
        bodies = list(group_bodies(partitions, [f"{tag}-{index}-{k}" for k in range(2)]).values())
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        turn = 0
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            status = await post(reader, writer, url.netloc, "/v1/assign", bodies[turn % 2])
            latencies.append(time.perf_counter() - start)
            errors += status != 200
            turn += 1
        writer.close()

    await asyncio.gather(*(worker(i) for i in range(connections)))
    return latencies, errors


class Monitor:
    """Every command clients send to the nodes, from MONITOR (commands run inside a script are told apart
    by their client type `lua`, so a script call counts as one round trip)."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.commands: Counter[str] = Counter()
        self.threads = [threading.Thread(target=self._listen, args=(port,)) for port in ports]
        self.ready = threading.Barrier(len(ports) + 1)

    def _listen(self, port: int) -> None:
        with redis.Redis(host="127.0.0.1", port=port, socket_timeout=60) as node, node.monitor() as monitor:
            self.ready.wait()
            for command in monitor.listen():
                if command["command"] == f"ECHO {DONE}":
                    return
                if command.get("client_type") != "lua":
                    self.commands[command["command"].split()[0].lower()] += 1

    def __enter__(self) -> Monitor:
        for thread in self.threads:
            thread.start()
        self.ready.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        for port in self.ports:
            with redis.Redis(host="127.0.0.1", port=port) as node:
                node.echo(DONE)
        for thread in self.threads:
            thread.join(10)


DONE = "groupfit-bench-done"


def commands_per_assign(url: str, ports: list[int], partitions: int, assigns: int) -> dict[str, float]:
    body = group_bodies(partitions, ["round-trips"])["round-trips"]
    parsed = urlparse(url)

    async def send() -> None:
        reader, writer = await asyncio.open_connection(parsed.hostname, parsed.port)
        for _ in range(assigns):
            assert await post(reader, writer, parsed.netloc, "/v1/assign", body) == 200
        writer.close()

    asyncio.run(send())  # the first assigns load the script and the slot map
    with Monitor(ports) as monitor:
        asyncio.run(send())
    return {name: calls / assigns for name, calls in sorted(monitor.commands.items())}


def report(label: str, latencies: list[float], errors: int, seconds: float) -> float:
    rate = len(latencies) / seconds
    print(
        f"{label:<34}{rate:>11.0f}{statistics.median(latencies) * 1e3:>9.1f}"
        f"{percentile(latencies, 0.99) * 1e3:>9.1f}{errors:>8}",
        flush=True,
    )
    return rate


def timed_service(stack: ExitStack, redis_url: str) -> tuple[str, float]:
    started = time.perf_counter()
    url, _ = stack.enter_context(service_at(None, REDIS_URL=redis_url))  # returns once it listens
    return url, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="per run")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--assigns", type=int, default=200, help="stored assigns counted for the commands")
    args = parser.parse_args()
    with ExitStack() as stack:
        started = time.perf_counter()
        cluster = stack.enter_context(EmbeddedRedisCluster(3, tempfile.mkdtemp(prefix="groupfit-bench-cluster-")))
        cluster_start = time.perf_counter() - started
        single = stack.enter_context(EmbeddedRedis(data_dir=tempfile.mkdtemp(prefix="groupfit-bench-valkey-")))
        one_server, _ = timed_service(stack, single.url)
        first, first_start = timed_service(stack, cluster.url)
        second, _ = timed_service(stack, cluster.url)
        print(f"start-up: 3-node cluster {cluster_start:.2f} s, one replica on it {first_start:.2f} s (to listening)")
        for url in (one_server, first, second):  # warm-up: script loaded, slot map read, code paths hot
            asyncio.run(stored_load([url], args.partitions, 2, 1.0, "warm"))
        print(f"stored POST /v1/assign, {args.partitions} partitions (MWF), {args.connections} connections")
        print(f"{'':<34}{'requests/s':>11}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}")
        runs = [
            ("1 replica, single Valkey", "single", [one_server]),
            ("1 replica, 3-node cluster", "one", [first]),
            ("2 replicas, 3-node cluster", "two", [first, second]),
        ]
        rates = {}
        for label, tag, urls in runs:
            latencies, errors = asyncio.run(stored_load(urls, args.partitions, args.connections, args.seconds, tag))
            rates[label] = report(label, latencies, errors, args.seconds)
        ratio = rates["2 replicas, 3-node cluster"] / rates["1 replica, 3-node cluster"]
        print(f"two replicas / one replica on the cluster: {ratio:.2f}x")
        ports = [node.port for node in cluster.nodes]
        per_assign = commands_per_assign(first, ports, args.partitions, args.assigns)
        print(f"Redis round trips per stored assign (cluster, {args.assigns} assigns, MONITOR):")
        for name, calls in per_assign.items():
            print(f"  {name:<10}{calls:.2f}")
        scripts = per_assign.get("evalsha", 0) + per_assign.get("eval", 0)
        print(f"script calls per stored assign: {scripts:.2f}; round trips: {sum(per_assign.values()):.2f}")
    sys.exit(0 if scripts == 1 else 1)


if __name__ == "__main__":
    main()
