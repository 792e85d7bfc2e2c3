"""Abuse (issues #13 and #27): while one token sends the worst request of each kind in a loop — replica placements
at the service's limits, replays through exact, what-ifs on a large stored group, listings over 30 000 groups,
the largest rates history, long evaluations, PUTs of 100 000 partitions (each followed by its scaling signal),
1 M-partition assigns with and without an Idempotency-Key, and issue #13's small hostile requests — another
token's 100-partition assigns and `/healthz` are measured from another process (and first, as a baseline on the
same machine, without abuse). Prints their p50/p99 and answers (the other token must never get a 503), the
answers of each kind, the service's peak RSS (the server process, and with its compute workers), the count of
answers 5xx other than 503/504, and the event loop's busy spells (groupfit_event_loop_busy_seconds: the CPU time
its thread spent between two probes 5 ms apart, so how long a request's work kept it busy, whatever the
machine's load; none should exceed 20 ms) and lag (how late the probes ran, waiting for a core included).

The service runs under an address-space limit (`--memory-limit-mb`, RLIMIT_AS, inherited by everything it
starts; each compute worker lowers its own to its baseline + GROUPFIT_COMPUTE_WORKER_MEMORY_MB), on its own
embedded Redis seeded first (30 000 small groups; one group of 100 000 partitions with a full rates history).
The abusive client runs at a lower CPU priority (it stands for a client on another machine). Traffic goes to
loopback only; the loop stops by itself.

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
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import httpx
from live import ROOT

from app.core.algorithm import paper_algorithms
from app.local.servers import EmbeddedRedis, free_port, wait_for_port
from app.store.groups import GroupStore

ABUSER, VICTIM = "abuser-token", "victim-token"
TOKENS = [{"token": ABUSER, "write": True, "name": "abuser"}, {"token": VICTIM, "name": "victim"}]
BIG = "abuse-big"
"""The group of 100 000 partitions, with a full rates history and a stored assignment."""
BIG_PARTITIONS = 100_000
LISTED_GROUPS = 30_000

Request = tuple[str, str, str, bytes, dict[str, str]]
"""(kind, method, path, body, headers)."""


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


def rates_body(n: int, seed: int, end: str = "2026-11-25T09:00:00Z") -> bytes:
    return json.dumps({"partitions": partitions(n, seed=seed), "window_end": end}).encode()


def placement(brokers: int, partitions_: int, solver: str, time_limit_ms: int = 1000) -> dict:
    return {
        "solver": solver,
        "brokers": [{"id": b, "disk": 10**13, "network": 10**10} for b in range(brokers)],
        "partitions": [
            {"topic": "t", "partition": p, "replicas": [p % brokers, (p + 1) % brokers], "size": 10**6 + p}
            for p in range(partitions_)
        ],
        "options": {"objective": "balance", "time_limit_ms": time_limit_ms},
    }


def worst_of_each_kind() -> list[Request]:
    """Issue #27's reproducers, at the service's limits."""
    json_ = {"content-type": "application/json"}

    def post(kind: str, path: str, body: dict | bytes, headers: dict[str, str] | None = None) -> Request:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return (kind, "POST", path, content, {**json_, **(headers or {})})

    rng = random.Random(3)
    stream = [{"t": {str(p): rng.uniform(1, 60) for p in range(200)}} for _ in range(600)]
    million = {"algorithm": "mwf", "capacity": 100, "partitions": partitions(1_000_000, 1)}
    return [
        post("placement heuristic 1000 × 10 000", "/v1/placements", placement(1000, 5000, "heuristic")),
        post("placement exact 2 s", "/v1/placements", placement(20, 400, "exact", 2000)),
        post("placement 100 000 brokers", "/v1/placements", placement(100_000, 10, "heuristic")),
        ("replay exact", "GET", f"/v1/groups/{BIG}/replay?algorithms=exact&windows=10", b"", {}),
        ("replay 12 algorithms", "GET", f"/v1/groups/{BIG}/replay?algorithms={','.join(paper_algorithms())}", b"", {}),
        post("what-if exact", "/v1/assign", {"algorithm": "exact", "group": BIG, "dry_run": True}),
        post("what-if repack", "/v1/assign", {"algorithm": "repack", "group": BIG, "dry_run": True}),
        ("listing", "GET", "/v1/groups?limit=1000", b"", {}),
        ("listing, rare filter", "GET", "/v1/groups?limit=1000&contains=zz", b"", {}),
        ("rates history", "GET", f"/v1/groups/{BIG}/rates/history", b"", {}),
        post("evaluate 600 × 200", "/v1/evaluate", {"stream": stream, "capacity": 100}),
        ("PUT rates 100 000", "PUT", f"/v1/groups/{BIG}/rates", rates_body(BIG_PARTITIONS, 7), json_),
        post("assign 1 M, Idempotency-Key", "/v1/assign", {**million, "group": "abuse-huge"}, {"Idempotency-Key": "k"}),
        post("assign 1 M, compiled", "/v1/assign", million),
        ("metrics", "GET", "/metrics", b"", {}),
    ]


async def seed(redis_url: str, prefix: str) -> None:
    """LISTED_GROUPS small groups, straight into the store (the listing's worst case)."""
    store = GroupStore(redis_url, prefix, 5.0, 1000, 86400)
    document = {"partitions": [], "window_end": "2026-11-25T09:00:00Z", "updated_at": "2026-11-25T09:00:01Z"}
    for first in range(0, LISTED_GROUPS, 50):
        await asyncio.gather(
            *(store.put_rates(f"listed-{i:05d}", document, 1_764_000_000_000) for i in range(first, first + 50))
        )
    await store.close()


def seed_big(url: str) -> None:
    """BIG: rates windows up to the history's default bound (1 000 000 cells), a stored mwf assignment."""
    headers = {"Authorization": f"Bearer {ABUSER}", "content-type": "application/json"}
    with httpx.Client(base_url=url, timeout=300, headers=headers) as client:
        for i in range(10):
            end = f"2026-11-25T09:{i:02d}:00Z"
            client.put(f"/v1/groups/{BIG}/rates", content=rates_body(BIG_PARTITIONS, i, end)).raise_for_status()
        answer = client.post("/v1/assign", json={"algorithm": "mwf", "capacity": 100, "group": BIG})
        answer.raise_for_status()


def abuse(url: str, seconds: float, senders: int, connection: multiprocessing.connection.Connection) -> None:
    """Another process, at a lower CPU priority: the worst requests, `senders` at a time, for `seconds`."""
    os.nice(10)
    connection.send(asyncio.run(_abuse(url, seconds, senders)))


async def _abuse(url: str, seconds: float, senders: int) -> dict[str, Counter]:
    answers: dict[str, Counter] = defaultdict(Counter)
    small = [("issue #13: " + path, method, path, body, headers) for method, path, body, headers in worst_requests()]
    worst = worst_of_each_kind()
    counter = itertools.count()
    end = time.monotonic() + seconds
    headers = {"Authorization": f"Bearer {ABUSER}"}
    limits = httpx.Limits(max_connections=senders)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits, headers=headers) as client:

        async def sender(offset: int) -> None:
            for i in itertools.count(offset):
                if time.monotonic() > end:
                    return
                n = next(counter)
                if n % 4 == 3:
                    kind, method, path, body, extra = ("issue #13: group spam", *group_spam(n))
                elif n % 4 == 2:
                    kind, method, path, body, extra = small[i % len(small)]
                else:
                    kind, method, path, body, extra = worst[i % len(worst)]
                    if "Idempotency-Key" in extra:
                        extra = {**extra, "Idempotency-Key": uuid.uuid4().hex}
                try:
                    response = await client.request(method, path, content=body, headers=extra)
                    answers[kind][response.status_code] += 1
                except httpx.HTTPError as exc:
                    answers[kind][type(exc).__name__] += 1

        await asyncio.gather(*(sender(k * 7) for k in range(senders)))
    return dict(answers)


def measure(url: str, seconds: float, connection: multiprocessing.connection.Connection) -> None:
    """Another process, the other token: /healthz and a 100-partition assign, alternately, 20 of each per second."""
    assign = {"algorithm": "mwf", "capacity": 100, "partitions": partitions(100, 5)}
    latency: dict[str, list[float]] = {"healthz": [], "assign": []}
    statuses: Counter = Counter()
    end = time.monotonic() + seconds
    with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {VICTIM}"}) as client:
        while time.monotonic() < end:
            for name in latency:
                started = time.perf_counter()
                try:
                    if name == "healthz":
                        response = client.get("/healthz")
                    else:
                        response = client.post("/v1/assign", json=assign)
                    statuses[f"{name} {response.status_code}"] += 1
                except httpx.HTTPError as exc:
                    statuses[f"{name} {type(exc).__name__}"] += 1
                latency[name].append(time.perf_counter() - started)
            time.sleep(0.05)
    connection.send((latency, statuses))


def loop_lag(url: str, metric: str = "busy") -> dict[float, float]:
    """groupfit_event_loop_<metric>_seconds (busy: the loop's own CPU time between probes; lag: how late a probe
    ran, waiting for a core included): the count of probes at most each bucket's bound (+Inf: all)."""
    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {ABUSER}"}, timeout=30).text
    buckets = {}
    for line in text.splitlines():
        if line.startswith(f"groupfit_event_loop_{metric}_seconds_bucket"):
            bound = line.split('le="')[1].split('"')[0]
            buckets[float(bound)] = float(line.rsplit(" ", 1)[1])
    return buckets


def loop_figures(before: dict[float, float], after: dict[float, float]) -> tuple[float, float, float]:
    """(probes, probes over 20 ms, the smallest bucket bound every probe is within) between two readings."""
    counts = {bound: after[bound] - before.get(bound, 0) for bound in after}
    total = counts[float("inf")]
    return total, total - counts[0.02], min(bound for bound in counts if counts[bound] == total)


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


def each_kind(url: str, only: str) -> None:
    """Each kind (whose name contains `only`) alone, three times in a row: its answers and the event loop's longest
    busy spell meanwhile."""
    print("  each kind alone (3 in a row): answers; the event loop's busy spells over 20 ms, and the longest")
    with httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {ABUSER}"}) as client:
        for kind, method, path, body, extra in worst_of_each_kind():
            if only not in kind:
                continue
            before = loop_lag(url)
            statuses: Counter = Counter()
            for _ in range(3):
                if "Idempotency-Key" in extra:
                    extra = {**extra, "Idempotency-Key": uuid.uuid4().hex}
                statuses[client.request(method, path, content=body, headers=extra).status_code] += 1
            time.sleep(0.05)  # the probe's last lag observed
            _, over, worst = loop_figures(before, loop_lag(url))
            print(
                f"    {kind[:40]:40s} {dict(sorted(statuses.items()))!s:24s} busy over 20 ms: {over:3.0f}; ≤ {worst * 1000:g} ms"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--senders", type=int, default=8, help="concurrent abusive requests")
    parser.add_argument("--baseline-seconds", type=float, default=15, help="measured first, without abuse")
    parser.add_argument("--memory-limit-mb", type=int, default=8192, help="RLIMIT_AS of the service")
    parser.add_argument("--each", action="store_true", help="first, each kind alone: its lag on the event loop")
    parser.add_argument("--each-only", metavar="TEXT", help="only each kind whose name contains TEXT alone, no abuse")
    args = parser.parse_args()

    data = Path(tempfile.mkdtemp(prefix="groupfit-abuse-"))
    redis = EmbeddedRedis(data_dir=data / "redis").start()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    environment = {
        **os.environ,
        "REDIS_URL": redis.url,
        "GROUPFIT_PORT": str(port),
        "GROUPFIT_LOG_LEVEL": "WARNING",
        "GROUPFIT_AUTH_TOKENS": json.dumps(TOKENS),
    }
    limit = args.memory_limit_mb << 20

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    started = time.monotonic()
    asyncio.run(seed(redis.url, "groupfit"))
    service = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve"], env=environment, cwd=ROOT, preexec_fn=limited
    )
    try:
        wait_for_port("127.0.0.1", port, 600)  # (its compute workers start first: slow on a loaded machine)
        httpx.get(f"{url}/readyz", timeout=30).raise_for_status()
        seed_big(url)
        print(f"seeded {LISTED_GROUPS} groups and {BIG} in {time.monotonic() - started:.0f} s", flush=True)
        if args.each or args.each_only is not None:
            each_kind(url, args.each_only or "")
        if args.each_only is not None:
            return
        peak = [0.0, 0.0]
        sampling = True

        def sample() -> None:
            while sampling:
                own, tree = tree_rss_mb(service.pid)
                peak[0], peak[1] = max(peak[0], own), max(peak[1], tree)
                time.sleep(0.1)

        context = multiprocessing.get_context("fork")
        ours, theirs = multiprocessing.Pipe()
        quiet = context.Process(target=measure, args=(url, args.baseline_seconds, theirs))
        lags = {metric: [loop_lag(url, metric)] for metric in ("busy", "lag")}
        quiet.start()
        baseline, baseline_statuses = ours.recv()
        quiet.join()
        for metric, readings in lags.items():
            readings.append(loop_lag(url, metric))
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        abusers, abused = multiprocessing.Pipe()
        abuser = context.Process(target=abuse, args=(url, args.seconds, args.senders, abused))
        measurer = context.Process(target=measure, args=(url, args.seconds, theirs))
        cpu_before = cpu_seconds(service.pid)
        abuser.start()
        measurer.start()
        answers = abusers.recv()
        latency, measured = ours.recv()
        abuser.join()
        measurer.join()
        server_cpu = cpu_seconds(service.pid) - cpu_before
        sampling = False
        sampler.join()
        for metric, readings in lags.items():
            readings.append(loop_lag(url, metric))
        alive = service.poll() is None
    finally:
        service.terminate()
        service.wait(timeout=30)
        redis.stop()

    statuses = sum(answers.values(), Counter())
    other_5xx = sum(n for s, n in statuses.items() if isinstance(s, int) and s >= 500 and s not in (503, 504))
    other_5xx += sum(n for s, n in measured.items() if s.split()[1].startswith("5"))
    load = os.getloadavg()
    print(
        f"abuse for {args.seconds:g} s, {args.senders} requests at a time from one token; service under RLIMIT_AS "
        f"{args.memory_limit_mb} MB; machine load {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min) on "
        f"{os.cpu_count()} cores"
    )
    print("  answers of each kind (the abusing token):")
    for kind, counts in sorted(answers.items()):
        print(f"    {kind[:60]:60s} {dict(sorted(counts.items(), key=str))}")
    print(f"  the other token, without abuse: {dict(sorted(baseline_statuses.items()))}")
    print(f"  the other token, under abuse:   {dict(sorted(measured.items()))}")
    for name, values in latency.items():
        for phase, label in ((baseline[name], "without abuse"), (values, "under abuse")):
            ms = [v * 1000 for v in phase]
            print(
                f"  {name:8s} {label:14s} n={len(ms):5d} p50 {percentile(ms, 50):7.1f} ms  "
                f"p99 {percentile(ms, 99):7.1f} ms  max {max(ms):7.1f} ms"
            )
    for metric, readings in lags.items():
        what = "busy (its own CPU)" if metric == "busy" else "lag (waiting too)"
        for label, before, after in (("without abuse", *readings[:2]), ("under abuse", *readings[1:])):
            total, over, worst = loop_figures(before, after)
            print(
                f"  event loop {what:18s} {label:14s} {total:6.0f} probes, {over:4.0f} over 20 ms, all at most "
                f"{worst * 1000:g} ms"
            )
    print(f"  server process CPU under abuse: {server_cpu:.1f} s in {args.seconds:g} s (its event loop's share)")
    print(f"  peak RSS: server {peak[0]:.0f} MB, with its compute workers {peak[1]:.0f} MB")
    print(f"  5xx other than 503/504 (any 5xx for the other token): {other_5xx}; service alive at the end: {alive}")


if __name__ == "__main__":
    main()
