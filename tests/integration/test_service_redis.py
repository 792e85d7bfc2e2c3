"""The live service (`groupfit serve` in a subprocess) against a real Redis-protocol server."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

pytestmark = pytest.mark.integration


def body(group: str, **extra):
    return {
        "algorithm": "mwf",
        "capacity": 100,
        "group": group,
        "partitions": [{"topic": "t", "partition": p, "rate": 30 + 10 * p} for p in range(8)],
        **extra,
    }


async def test_racing_leaders_cannot_both_win(live_service):
    group = f"race-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=live_service.url, timeout=30) as client:
        assert (await client.post("/v1/assign", json=body(group))).json()["version"] == 1
        answers = await asyncio.gather(
            *(client.post("/v1/assign", json=body(group, expected_version=1)) for _ in range(50))
        )
        statuses = sorted(a.status_code for a in answers)
        assert statuses == [200] + [409] * 49
        assert all(a.json()["error"]["details"]["current_version"] == 2 for a in answers if a.status_code == 409)
        # Without expected_version each request is compare-and-set against the version it read.
        answers = await asyncio.gather(*(client.post("/v1/assign", json=body(group)) for _ in range(10)))
        won = sorted(a.json()["version"] for a in answers if a.status_code == 200)
        assert won and len(won) == len(set(won))
        history = (await client.get(f"/v1/groups/{group}/history")).json()["versions"]
        versions = [v["version"] for v in history]
        assert versions == list(range(versions[0], 0, -1)), "history must have no gap and no duplicate"


async def test_redis_down_then_back(live_service, redis_server):
    group = f"down-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=live_service.url, timeout=30) as client:
        acknowledged = [(await client.post("/v1/assign", json=body(group))).json()["version"] for _ in range(3)]
        assert acknowledged == [1, 2, 3]
        redis_server.stop()
        try:
            down = await client.get(f"/v1/groups/{group}")
            assert down.status_code == 503 and down.json()["error"]["code"] == "store_unavailable"
            assert (await client.post("/v1/assign", json=body(group))).status_code == 503
            assert (await client.get("/readyz")).status_code == 503
            standalone = {k: v for k, v in body(group).items() if k != "group"}
            assert (await client.post("/v1/assign", json=standalone)).status_code == 200
        finally:
            redis_server.start()
        recovered = await client.get(f"/v1/groups/{group}")
        assert recovered.status_code == 200 and recovered.json()["version"] == 3
        assert (await client.get("/readyz")).status_code == 200
        assert (await client.post("/v1/assign", json=body(group))).json()["version"] == 4
