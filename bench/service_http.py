"""HTTP benchmark of a live service on loopback.

1. Throughput and latency of POST /v1/assign with 1 000 partitions (MWF, previous assignment given,
   no group) at several concurrent keep-alive connections, for a bounded time each: closed loop (each
   connection sends its next request when the answer arrives, so latency = connections / throughput), and
   open loop at fixed offered rates over 16 connections (each request due on a schedule; its latency counts
   from when it was due, so a server that falls behind shows it).
2. End-to-end time of one request with 100 000 partitions (send, compute, receive the whole answer).

    .venv/bin/python bench/service_http.py                 # starts `groupfit serve` (embedded Redis) itself
    .venv/bin/python bench/service_http.py --url http://127.0.0.1:8000 --seconds 10 --connections 1,4,16
    .venv/bin/python bench/service_http.py --workers 1,2 --core native,python    # one service per combination
    .venv/bin/python bench/service_http.py --delta none         # the answer without its delta (?delta=none)

The load generator is a minimal asyncio HTTP/1.1 client on uvloop (httpx's own overhead would be measured
otherwise); it runs on the same 2-core machine as the service, so the figures are a lower bound. The load
average is printed before and after: other processes share the cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
from collections.abc import Coroutine
from typing import Any
from urllib.parse import urlparse

import uvloop
from live import cpu_seconds, service_at


def run(work: Coroutine[Any, Any, Any]) -> Any:
    """On uvloop, as the service: the load generator takes less of the cores it shares with the service."""
    return uvloop.run(work)


def load_average() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def assign_body(partitions: int, seed: int = 3) -> bytes:
    """MWF with a previous assignment of about partitions/2 consumers, rates U[0, C]."""
    rng = random.Random(seed)
    keys = [(f"topic-{j % 8}", j // 8) for j in range(partitions)]
    previous: dict[str, list[dict]] = {}
    for j, (topic, partition) in enumerate(keys):
        previous.setdefault(f"c{j // 2}", []).append({"topic": topic, "partition": partition})
    return json.dumps(
        {
            "algorithm": "mwf",
            "capacity": 100,
            "partitions": [{"topic": t, "partition": p, "rate": round(rng.uniform(0, 60), 2)} for t, p in keys],
            "previous": previous,
        }
    ).encode()


async def post(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, path: str, body: bytes) -> int:
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    status_line = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return int(status_line.split()[1])


async def load(
    url: str, body: bytes, connections: int, seconds: float, path: str = "/v1/assign"
) -> tuple[list[float], int]:
    parsed = urlparse(url)
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection(parsed.hostname, parsed.port)
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            status = await post(reader, writer, parsed.netloc, path, body)
            latencies.append(time.perf_counter() - start)
            errors += status != 200
        writer.close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    return latencies, errors


async def paced(
    url: str, body: bytes, connections: int, rate: float, seconds: float, path: str
) -> tuple[list[float], int, int]:
    """Open loop: `rate` requests per second spread over `connections`; latency from each one's due time;
    and how many were answered within the `seconds` (a server that cannot keep up answers fewer)."""
    parsed = urlparse(url)
    latencies: list[float] = []
    errors = 0
    interval = connections / rate
    start = time.perf_counter() + 0.1

    async def worker(i: int) -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection(parsed.hostname, parsed.port)
        due = start + i * interval / connections
        while due < start + seconds:
            if (delay := due - time.perf_counter()) > 0:
                await asyncio.sleep(delay)
            status = await post(reader, writer, parsed.netloc, path, body)
            done = time.perf_counter()
            latencies.append(done - due)
            in_time.append(done <= start + seconds)
            errors += status != 200
            due += interval
        writer.close()

    in_time: list[bool] = []
    await asyncio.gather(*(worker(i) for i in range(connections)))
    return latencies, errors, sum(in_time)


async def one(url: str, body: bytes, path: str) -> tuple[float, int]:
    parsed = urlparse(url)
    reader, writer = await asyncio.open_connection(parsed.hostname, parsed.port, limit=2**26)
    start = time.perf_counter()
    status = await post(reader, writer, parsed.netloc, path, body)
    elapsed = time.perf_counter() - start
    writer.close()
    return elapsed, status


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running service; default: start one")
    parser.add_argument("--seconds", type=float, default=10.0, help="per concurrency level")
    parser.add_argument("--connections", default="1,4,16")
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument(
        "--rates", default="1000,1500", help="offered requests/s of the open-loop runs (16 connections)"
    )
    parser.add_argument("--large", type=int, default=100_000, help="partitions of the end-to-end request (0: skip)")
    parser.add_argument("--workers", default="", help="GROUPFIT_WORKERS of the started service, comma-separated")
    parser.add_argument("--core", default="", help="GROUPFIT_CORE of the started service, comma-separated")
    parser.add_argument("--delta", default="", choices=["", "sparse", "dense", "none"], help="?delta= of the requests")
    args = parser.parse_args()
    print(f"load average {load_average()} on {os.cpu_count()} cores")
    for workers in args.workers.split(","):
        for core in args.core.split(","):
            env = {k: v for k, v in (("GROUPFIT_WORKERS", workers), ("GROUPFIT_CORE", core)) if v}
            if env:
                print(f"\n{' '.join(f'{k}={v}' for k, v in env.items())}")
            measure(args, env)
    print(f"load average {load_average()}")


def measure(args: argparse.Namespace, env: dict[str, str]) -> None:
    path = f"/v1/assign?delta={args.delta}" if args.delta else "/v1/assign"
    with service_at(args.url, **env) as (url, pid):
        body = assign_body(args.partitions)
        run(load(url, body, 1, 1.0, path))  # warm-up
        print(f"POST {path}, {args.partitions} partitions (MWF), {len(body) / 1e3:.0f} kB per request")
        print(
            f"{'connections':>12}{'requests/s':>12}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'errors':>8}"
            f"{'server CPU ms/req':>19}{'client CPU ms/req':>19}"
        )
        for connections in (int(c) for c in args.connections.split(",")):
            server, client = cpu_seconds(pid) if pid else float("nan"), time.process_time()
            latencies, errors = run(load(url, body, connections, args.seconds, path))
            server = (cpu_seconds(pid) if pid else float("nan")) - server
            client = time.process_time() - client
            print(
                f"{connections:>12}{len(latencies) / args.seconds:>12.0f}"
                f"{statistics.median(latencies) * 1e3:>9.1f}{percentile(latencies, 0.99) * 1e3:>9.1f}"
                f"{max(latencies) * 1e3:>9.1f}{errors:>8}"
                f"{server * 1e3 / len(latencies):>19.2f}{client * 1e3 / len(latencies):>19.2f}",
                flush=True,
            )
        for rate in (float(r) for r in args.rates.split(",") if r):
            latencies, errors, answered = run(paced(url, body, 16, rate, args.seconds, path))
            print(
                f"open loop, {rate:.0f} req/s offered on 16 connections: {answered / args.seconds:.0f} answered/s, "
                f"p50 {statistics.median(latencies) * 1e3:.1f} ms, p99 {percentile(latencies, 0.99) * 1e3:.1f} ms, "
                f"max {max(latencies) * 1e3:.1f} ms, {errors} errors",
                flush=True,
            )
        if args.large:
            large = assign_body(args.large)
            times = []
            for _ in range(3):
                elapsed, status = run(one(url, large, path))
                assert status == 200, status
                times.append(elapsed)
            print(
                f"one request of {args.large} partitions ({len(large) / 1e6:.1f} MB): "
                f"median {statistics.median(times) * 1e3:.0f} ms end to end (of {[round(t * 1e3) for t in times]})"
            )


if __name__ == "__main__":
    main()
