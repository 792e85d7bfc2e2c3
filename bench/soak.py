"""Soak: a steady mixed load on a live service for a configurable time at a configurable rate.

Mix per tick: assign without group (60%), assign with group (15%), rates write (10%), group read (10%),
history read (5%). Prints throughput, p50/p99/max latency, errors and the service's RSS at the start and
the end. Traffic goes to loopback only; the loop stops by itself.

    .venv/bin/python bench/soak.py --minutes 10 --rate 80        # starts `groupfit serve` itself
    .venv/bin/python bench/soak.py --url http://127.0.0.1:8000 --pid 1234 --minutes 1 --rate 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time

import httpx
from live import rss_mb, service_at


def partitions(rng: random.Random, n: int = 200) -> list[dict]:
    return [{"topic": f"t{j % 4}", "partition": j // 4, "rate": round(rng.uniform(0, 40), 2)} for j in range(n)]


async def soak(url: str, seconds: float, rate: float, groups: int) -> tuple[list[float], int, int]:
    rng = random.Random(5)
    latencies: list[float] = []
    errors = 0
    sent = 0
    in_flight = asyncio.Semaphore(64)  # open loop, but bounded: a lagging service shows up as latency
    async with httpx.AsyncClient(base_url=url, timeout=10, limits=httpx.Limits(max_connections=64)) as client:

        async def one() -> None:
            nonlocal errors
            async with in_flight:
                started = time.perf_counter()
                try:
                    status = await request(rng.random(), f"soak-{rng.randrange(groups)}")
                except httpx.HTTPError:
                    status = 599  # no answer in time counts as an error
                latencies.append(time.perf_counter() - started)
                if status >= 500 or (status >= 400 and status not in (404, 409)):
                    errors += 1

        async def request(kind: float, group: str) -> int:
            if kind < 0.60:
                response = await client.post(
                    "/v1/assign", json={"algorithm": "mwf", "capacity": 100, "partitions": partitions(rng)}
                )
            elif kind < 0.75:  # 409: another writer of the same group won the race, as designed
                response = await client.post(
                    "/v1/assign",
                    json={"algorithm": "mwf", "capacity": 100, "group": group, "partitions": partitions(rng)},
                )
            elif kind < 0.85:
                response = await client.put(
                    f"/v1/groups/{group}/rates",
                    json={"partitions": partitions(rng), "window_end": "2026-11-22T10:00:00Z"},
                )
            elif kind < 0.95:
                response = await client.get(f"/v1/groups/{group}")
            else:
                response = await client.get(f"/v1/groups/{group}/history", params={"limit": 10})
            return response.status_code

        tasks = set()
        began = time.perf_counter()
        while (elapsed := time.perf_counter() - began) < seconds:
            due = int(elapsed * rate) + 1 - sent
            for _ in range(max(0, due)):
                task = asyncio.create_task(one())
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                sent += 1
            await asyncio.sleep(0.005)
        await asyncio.gather(*tasks)
    return latencies, errors, sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url")
    parser.add_argument("--pid", type=int, help="the service's pid, to read its memory (with --url)")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=80.0, help="requests per second")
    parser.add_argument("--groups", type=int, default=20)
    args = parser.parse_args()
    with service_at(args.url, args.pid) as (url, pid):
        asyncio.run(soak(url, 5, args.rate, args.groups))  # warm-up, not counted
        start_rss = rss_mb(pid) if pid else float("nan")
        latencies, errors, sent = asyncio.run(soak(url, args.minutes * 60, args.rate, args.groups))
        end_rss = rss_mb(pid) if pid else float("nan")
        ordered = sorted(latencies)
        print(
            json.dumps(
                {
                    "seconds": args.minutes * 60,
                    "target_rate": args.rate,
                    "throughput": round(len(latencies) / (args.minutes * 60), 1),
                    "requests": sent,
                    "errors": errors,
                    "p50_ms": round(statistics.median(ordered) * 1e3, 2),
                    "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))] * 1e3, 2),
                    "max_ms": round(ordered[-1] * 1e3, 2),
                    "rss_start_mb": round(start_rss, 1),
                    "rss_end_mb": round(end_rss, 1),
                    "rss_growth_percent": round((end_rss / start_rss - 1) * 100, 1) if start_rss == start_rss else None,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
