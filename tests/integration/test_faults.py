"""Faults under load: Redis stopped and restarted, the service restarted; with real servers."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import httpx
import pytest
from groupfit_client import GroupfitClient, GroupfitError

pytestmark = pytest.mark.integration

PARTITIONS = [{"topic": "t", "partition": p, "rate": 20 + 7 * p} for p in range(12)]


async def test_redis_stopped_during_load(live_service, redis_server):
    group = f"load-{uuid.uuid4().hex[:6]}"
    stateless = {"algorithm": "mwf", "capacity": 100, "partitions": PARTITIONS}
    async with httpx.AsyncClient(base_url=live_service.url, timeout=10) as client:
        acknowledged = [
            (await client.post("/v1/assign", json={**stateless, "group": group})).json()["version"] for _ in range(5)
        ]
        stop = asyncio.Event()
        statuses: list[int] = []

        async def load() -> None:  # requests without a group never need Redis
            while not stop.is_set():
                statuses.append((await client.post("/v1/assign", json=stateless)).status_code)

        worker = asyncio.create_task(load())
        await asyncio.sleep(0.3)
        await asyncio.to_thread(redis_server.stop)
        try:
            for _ in range(5):
                started = time.perf_counter()
                down = await client.get(f"/v1/groups/{group}")
                assert down.status_code == 503 and down.json()["error"]["code"] == "store_unavailable"
                assert time.perf_counter() - started < 3, "a dead store must not hang a request"
        finally:
            await asyncio.to_thread(redis_server.start)
        await asyncio.sleep(0.3)
        stop.set()
        await worker
        assert statuses and set(statuses) == {200}
        stored = (await client.get(f"/v1/groups/{group}")).json()
        assert stored["version"] == acknowledged[-1] == 5
        history = [v["version"] for v in (await client.get(f"/v1/groups/{group}/history")).json()["versions"]]
        assert history == [5, 4, 3, 2, 1]


def test_service_restart_during_load_creates_no_duplicate_versions(live_service):
    group = f"restart-{uuid.uuid4().hex[:6]}"
    request = {"algorithm": "mwf", "capacity": 100, "partitions": PARTITIONS, "group": group}
    answered: list[int] = []
    failures: list[Exception] = []

    def leader() -> None:
        with GroupfitClient(live_service.url, timeout=5, retries=8, backoff_s=0.25) as client:
            for _ in range(30):
                try:
                    answered.append(client.assign_idempotent(request).version)
                except (GroupfitError, httpx.HTTPError) as exc:
                    failures.append(exc)

    thread = threading.Thread(target=leader)
    thread.start()
    time.sleep(0.5)
    live_service.stop()
    live_service.start()
    thread.join(timeout=120)
    assert not failures, failures
    assert len(answered) == 30 and len(set(answered)) == 30
    history = httpx.get(f"{live_service.url}/v1/groups/{group}/history", params={"limit": 100}, timeout=10).json()
    versions = [v["version"] for v in history["versions"]]
    assert sorted(versions) == sorted(answered) == list(range(1, 31))
