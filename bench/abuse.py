"""Abuse: while clients send issue #13's worst requests in a loop, another process measures `/healthz` and
a 100-partition assign (and first, as a baseline on the same machine, without abuse). Prints their p50/p99, the service's peak RSS (the server process, and with its
compute workers and embedded Redis) and the count of answers 5xx other than 503/504.

The service runs under an address-space limit (`--memory-limit-mb`, RLIMIT_AS, inherited by everything it
starts; each compute worker lowers its own to GROUPFIT_COMPUTE_WORKER_MEMORY_MB), so a regression fails
requests instead of taking the machine down. Traffic goes to loopback only; the loop stops by itself.

    .venv/bin/python bench/abuse.py --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import multiprocessing
import os
import random
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
from live import ROOT

from app.local.servers import free_port, wait_for_port


def partitions(n: int, rate: float = 10.0, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    return [{"topic": "t", "partition": p, "rate": round(rng.uniform(1, 2 * rate), 3)} for p in range(n)]


def worst_requests() -> list[tuple[str, str, bytes, dict[str, str]]]:
    """(method, path, body, headers): the issue's reproducers, each a few hundred bytes to a few hundred KB."""
    json_ = {"content-type": "application/json"}

    def post(body: dict | bytes, path: str = "/v1/assign", headers: dict[str, str] | None = None):
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return ("POST", path, content, {**json_, **(headers or {})})

    one = [{"topic": "t", "partition": 0, "rate": 10}]
    members = [f"member-{i}" for i in range(2000)]
    rng = random.Random(2)
    stream = [{"t": {str(p): rng.uniform(1, 60) for p in range(200)}} for _ in range(150)]
    return [
        # 1. memory: consumer counts implied by tiny μ or capacity
        post({"algorithm": "least-loaded", "capacity": 100, "partitions": one, "params": {"mu": 1e-300}}),
        post({"algorithm": "linear", "capacity": 100, "partitions": one, "params": {"mu": 1e-300}}),
        *(
            post({"algorithm": a, "capacity": 1e-9, "partitions": [{**one[0], "rate": 1e9}]})
            for a in ("linear", "roundrobin", "range")
        ),
        post({"stream": [{"t": {"0": 1e9}}], "capacity": 1e-9}, "/v1/evaluate"),
        # 2. long computations: exact at its largest budgets, kip441 300 × 2000, long evaluations
        post(
            {"algorithm": "exact", "capacity": 100, "partitions": partitions(120), "params": {"time_limit_ms": 60_000}}
        ),
        post({"algorithm": "exact", "capacity": 100, "partitions": partitions(120), "params": {"time_limit_ms": 2000}}),
        post(
            {
                "algorithm": "kip441",
                "capacity": 100,
                "partitions": partitions(300),
                "members": members,
                "params": {
                    "member_lags": {m: [{"topic": "t", "partition": i % 300, "lag": i}] for i, m in enumerate(members)}
                },
            }
        ),
        post({"stream": stream, "capacity": 100}, "/v1/evaluate"),
        post(
            {"stream": stream[:20], "capacity": 100, "algorithms": ["mwf"], "optimum": {"time_limit_ms": 2000}},
            "/v1/evaluate",
        ),
        post({"algorithm": "least-loaded", "capacity": 100, "partitions": partitions(3000, 0.5)}),
        # 3. input that used to answer 500
        post(b'{"algorithm":"\xff"}'),
        post(b'{"algorithm":"mwf","capacity":1,"params":{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"),
        post(
            {
                "algorithm": "mwf",
                "capacity": 100,
                "partitions": [{"topic": "t", "partition": p, "rate": 1e308} for p in range(2)],
            }
        ),
        post({"algorithm": "mwf", "capacity": 1e-320, "partitions": one}),
        post({"algorithm": "mwf", "capacity": 1e-300, "partitions": [{**one[0], "rate": 1e300}]}),
        post(
            {
                "algorithm": "least-loaded",
                "capacity": 100,
                "partitions": [{**one[0], "lag": 1e308}, {"topic": "t", "partition": 1, "rate": 1, "lag": 1e308}],
            }
        ),
        post({"algorithm": "least-loaded", "capacity": 100, "partitions": one, "params": {"rebalance_s": 1e308}}),
        post({"algorithm": "linear", "capacity": 100, "partitions": one, "params": {"mu": 1e-300, "f": 1e-300}}),
        (
            "PUT",
            "/v1/groups/abuse-rates/rates",
            json.dumps(
                {
                    "partitions": [{"topic": "t", "partition": p, "rate": 1e308} for p in range(2)],
                    "window_end": "2026-01-01T00:00:00Z",
                }
            ).encode(),
            json_,
        ),
        post(
            {"stream": [{"t": {"0": 1}}], "capacity": 1, "latency": {"iteration_s": 5, "rebalance_s": 5}},
            "/v1/evaluate",
        ),
        post(b'{"algorithm":"mwf","algorithm":"bfd","capacity":1,"partitions":[]}'),
        ("POST", "/v1/assign", b"algorithm=mwf", {"content-type": "application/x-www-form-urlencoded"}),
        # 4.-6. colliding keys, deleted groups, metrics and caches
        post(
            {"algorithm": "mwf", "capacity": 100, "partitions": one, "group": "g"},
            headers={"Idempotency-Key": "Y}:state"},
        ),
        post({"algorithm": "mwf", "capacity": 100, "partitions": one, "group": "g}:idempotency:Y"}),
        ("DELETE", "/v1/groups/g", b"", {}),
        ("GET", "/metrics", b"", {}),
    ]


def group_spam(i: int) -> tuple[str, str, bytes, dict[str, str]]:
    """A new group (two per-group series each) with long member ids (the sort-key cache)."""
    body = {
        "algorithm": "ffd",
        "capacity": 100,
        "group": f"spam-{i}",
        "members": [f"{'x' * 200}{i}-{k}" for k in range(20)],
        "partitions": partitions(20),
    }
    return ("POST", "/v1/assign", json.dumps(body).encode(), {"content-type": "application/json"})


async def abuse(url: str, seconds: float, senders: int) -> Counter:
    statuses: Counter = Counter()
    requests = worst_requests()
    counter = itertools.count()
    end = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=httpx.Limits(max_connections=senders)) as client:

        async def sender(offset: int) -> None:
            for i in itertools.count(offset):
                if time.monotonic() > end:
                    return
                n = next(counter)
                method, path, body, headers = group_spam(n) if n % 4 == 3 else requests[i % len(requests)]
                try:
                    response = await client.request(method, path, content=body, headers=headers)
                    statuses[response.status_code] += 1
                except httpx.HTTPError as exc:
                    statuses[type(exc).__name__] += 1

        await asyncio.gather(*(sender(k * 7) for k in range(senders)))
    return statuses


def measure(url: str, seconds: float, connection: multiprocessing.connection.Connection) -> None:
    """Another process: /healthz and a 100-partition assign, alternately, 20 of each per second."""
    assign = {"algorithm": "mwf", "capacity": 100, "partitions": partitions(100, 5)}
    latency: dict[str, list[float]] = {"healthz": [], "assign": []}
    statuses: Counter = Counter()
    end = time.monotonic() + seconds
    with httpx.Client(base_url=url, timeout=30) as client:
        while time.monotonic() < end:
            for name in latency:
                started = time.perf_counter()
                try:
                    if name == "healthz":
                        response = client.get("/healthz")
                    else:
                        response = client.post("/v1/assign", json=assign)
                    statuses[response.status_code] += 1
                except httpx.HTTPError as exc:
                    statuses[type(exc).__name__] += 1
                latency[name].append(time.perf_counter() - started)
            time.sleep(0.05)
    connection.send((latency, statuses))


def tree_rss_mb(pid: int) -> tuple[float, float]:
    """(RSS of `pid`, RSS of `pid` and every descendant) in MB."""

    def rss(p: int) -> float:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def children(p: int) -> list[int]:
        found = []
        for task in Path(f"/proc/{p}/task").glob("*"):
            with contextlib.suppress(OSError):  # the task ended meanwhile
                found += [int(c) for c in (task / "children").read_text().split()]
        return found

    total, stack = 0.0, [pid]
    while stack:
        p = stack.pop()
        total += rss(p)
        stack += children(p)
    return rss(pid), total


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` (not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--senders", type=int, default=8, help="concurrent abusive clients")
    parser.add_argument("--baseline-seconds", type=float, default=15, help="measured first, without abuse")
    parser.add_argument("--memory-limit-mb", type=int, default=4096, help="RLIMIT_AS of the service")
    args = parser.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    environment = {
        **os.environ,
        "GROUPFIT_PORT": str(port),
        "GROUPFIT_LOG_LEVEL": "WARNING",
        "GROUPFIT_DATA_DIR": str(ROOT / ".groupfit" / "bench-abuse"),
    }
    limit = args.memory_limit_mb << 20

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    service = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve"], env=environment, cwd=ROOT, preexec_fn=limited
    )
    try:
        wait_for_port("127.0.0.1", port, 60)
        httpx.get(f"{url}/readyz", timeout=30).raise_for_status()
        peak = [0.0, 0.0]
        sampling = True

        def sample() -> None:
            while sampling:
                own, tree = tree_rss_mb(service.pid)
                peak[0], peak[1] = max(peak[0], own), max(peak[1], tree)
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        ours, theirs = multiprocessing.Pipe()
        quiet = multiprocessing.get_context("fork").Process(target=measure, args=(url, args.baseline_seconds, theirs))
        quiet.start()
        baseline, _ = ours.recv()
        quiet.join()
        measurer = multiprocessing.get_context("fork").Process(target=measure, args=(url, args.seconds, theirs))
        measurer.start()
        cpu_before = cpu_seconds(service.pid)
        statuses = asyncio.run(abuse(url, args.seconds, args.senders))
        server_cpu = cpu_seconds(service.pid) - cpu_before
        latency, measured = ours.recv()
        measurer.join()
        sampling = False
        sampler.join()
        alive = service.poll() is None
    finally:
        service.terminate()
        service.wait(timeout=30)

    other_5xx = sum(
        n for s, n in (statuses + measured).items() if isinstance(s, int) and s >= 500 and s not in (503, 504)
    )
    print(f"abuse for {args.seconds:g} s by {args.senders} clients, service under RLIMIT_AS {args.memory_limit_mb} MB")
    print(f"  abusive answers: {dict(sorted(statuses.items(), key=str))}")
    print(f"  measured answers: {dict(sorted(measured.items(), key=str))}")
    for name, values in latency.items():
        for phase, seconds in ((baseline[name], "without abuse"), (values, "under abuse")):
            ms = [v * 1000 for v in phase]
            print(
                f"  {name:8s} {seconds:14s} n={len(ms):5d} p50 {percentile(ms, 50):7.1f} ms  "
                f"p99 {percentile(ms, 99):7.1f} ms  max {max(ms):7.1f} ms"
            )
    print(f"  server process CPU under abuse: {server_cpu:.1f} s in {args.seconds:g} s (its event loop's share)")
    print(f"  peak RSS: server {peak[0]:.0f} MB, with workers and embedded Redis {peak[1]:.0f} MB")
    print(f"  5xx other than 503/504: {other_5xx}; service alive at the end: {alive}")


if __name__ == "__main__":
    main()
