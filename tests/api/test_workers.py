"""`groupfit serve` with two worker processes (app/workers.py): connections are handed to them in turn (each holds
half of 16 keep-alive connections), and /metrics, whichever worker answers it, counts every worker's requests and keeps the per-group series within their cap across them
(a group's series dropped or deleted in one process is gone from every answer)."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveService

ASSIGN = {"algorithm": "bfd", "capacity": 10, "partitions": [{"topic": "t", "partition": 0, "rate": 4}]}


@pytest.fixture(scope="module")
def two_workers(redis_server, tmp_path_factory):
    metrics = tmp_path_factory.mktemp("metrics")
    service = LiveService(
        redis_server.url,
        tmp_path_factory.mktemp("workers") / "service.log",
        GROUPFIT_WORKERS="2",
        GROUPFIT_METRICS_MAX_GROUPS="3",
        PROMETHEUS_MULTIPROC_DIR=str(metrics),
    ).start()
    yield service, metrics
    service.stop()


def fresh(url: str) -> httpx.Client:
    """A client whose every request opens a connection of its own (the kernel spreads them over the workers)."""
    return httpx.Client(base_url=url, timeout=10, headers={"Connection": "close"})


def scrape(url: str) -> str:
    with fresh(url) as client:
        return client.get("/metrics").text


def counted(text: str, route: str) -> float:
    pattern = rf'groupfit_http_requests_total\{{method="POST",route="{re.escape(route)}",status="200"\}} (\S+)'
    return sum(float(v) for v in re.findall(pattern, text))


def workers_of(service: LiveService) -> list[int]:
    """The worker processes: the service's children started by multiprocessing's spawn (its resource tracker
    is the other child)."""
    assert service.process is not None
    pid = service.process.pid
    found = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            if "spawn_main" in Path(f"/proc/{child}/cmdline").read_text():
                found.append(int(child))
        except FileNotFoundError:  # ended meanwhile
            pass
    return found


def test_every_answer_of_metrics_counts_every_workers_requests(two_workers):
    service, metrics = two_workers
    before = counted(scrape(service.url), "/v1/assign")
    with fresh(service.url) as client:
        for _ in range(40):
            assert client.post("/v1/assign", json=ASSIGN).status_code == 200
    answers = {counted(scrape(service.url), "/v1/assign") for _ in range(12)}
    assert answers == {before + 40}
    writers = {p.name for p in metrics.glob("counter_*.db")}
    assert len(writers) == 2, f"both workers served requests: {writers}"


def test_the_group_series_cap_holds_across_workers(two_workers):
    service, _ = two_workers
    groups = [f"cap-{time.monotonic_ns()}-{i}" for i in range(5)]
    with fresh(service.url) as client:
        for group in groups:
            assert client.post("/v1/assign", json={**ASSIGN, "group": group}).status_code == 200
    for _ in range(8):
        text = scrape(service.url)
        assert [g for g in groups if f'groupfit_group_rscore{{group="{g}"}}' in text] == groups[2:]
    with fresh(service.url) as client:
        assert client.delete(f"/v1/groups/{groups[3]}").status_code == 204
    for _ in range(8):
        text = scrape(service.url)
        assert [g for g in groups if f'group="{g}"' in text] == [groups[2], groups[4]]


def connections_of(pid: int) -> int:
    """How many TCP sockets a process holds (its connections to clients, and to Redis)."""
    inodes = {
        line.split()[9]
        for table in ("tcp", "tcp6")
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
    }
    held = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed meanwhile
            continue
        held += target.startswith("socket:[") and target[8:-1] in inodes
    return held


def test_keep_alive_connections_are_shared_evenly(two_workers):
    """16 connections opened at once, each kept: 8 on each worker (the kernel's SO_REUSEPORT hash splits them
    unevenly, so one worker would queue while the other idles)."""
    service, _ = two_workers
    workers = workers_of(service)
    before = {pid: connections_of(pid) for pid in workers}
    clients = [httpx.Client(base_url=service.url, timeout=10) for _ in range(16)]
    try:
        for client in clients:
            assert client.post("/v1/assign", json=ASSIGN).status_code == 200
        gained = {pid: connections_of(pid) - before[pid] for pid in workers}
        assert sorted(gained.values()) == [8, 8], gained
        for client in clients:  # every connection still answers
            assert client.post("/v1/assign", json=ASSIGN).status_code == 200
    finally:
        for client in clients:
            client.close()


def test_a_worker_that_dies_is_started_again(two_workers):
    service, _ = two_workers
    killed = workers_of(service)[0]
    os.kill(killed, signal.SIGKILL)
    with fresh(service.url) as client:
        for _ in range(20):  # the living worker takes them until the dead one's successor runs
            assert client.post("/v1/assign", json=ASSIGN).status_code == 200
    deadline = time.monotonic() + 20
    while killed in workers_of(service) or len(workers_of(service)) < 2:
        assert time.monotonic() < deadline, "no worker replaced the killed one"
        time.sleep(0.2)
