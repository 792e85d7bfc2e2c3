"""Zone-aware assignment through the API, against a real Redis-protocol server (issue #29): the racks a sized
group's consumers are named in are stored with its version and stand for previous_racks next time, the history
and the metrics carry the cross-zone rate, stored rates may carry racks, and nothing of it changes a rack-free
group."""

from __future__ import annotations

import uuid

import httpx
import pytest

from app.main import create_app
from app.settings import Settings

RACKS = ("eu-1a", "eu-1b", "eu-1c")


@pytest.fixture
async def client(redis_backend):
    app = create_app(Settings(redis_url=redis_backend.url))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        yield c
    await app.state.services.store.close()


@pytest.fixture
def group() -> str:
    return f"z-{uuid.uuid4().hex[:8]}"


def partitions(rates: list[float], racks: bool = True) -> list[dict]:
    return [
        {"topic": "t", "partition": p, "rate": rate, **({"racks": [RACKS[p % 3]]} if racks else {})}
        for p, rate in enumerate(rates)
    ]


async def test_a_sized_groups_racks_are_stored_with_its_version_and_kept_by_its_consumers(client, group):
    first = await client.post(
        "/v1/assign", json={"algorithm": "mwf", "capacity": 100, "group": group, "partitions": partitions([50.0] * 6)}
    )
    assert first.status_code == 200
    answer = first.json()
    racks = {c["id"]: c["rack"] for c in answer["consumers"]}
    assert answer["cross_zone_rate"] == 0 and set(racks.values()) == set(RACKS)
    state = (await client.get(f"/v1/groups/{group}")).json()
    assert state["racks"] == racks
    history = (await client.get(f"/v1/groups/{group}/history")).json()["versions"]
    assert history[0]["cross_zone_rate"] == 0
    # The rates change (each zone's still fit one consumer); the stored racks stand for previous_racks: every
    # consumer keeps its rack, reads stay local.
    second = await client.post(
        "/v1/assign",
        json={"algorithm": "mwf", "capacity": 100, "group": group, "partitions": partitions([45.0, 30.0, 50.0, 55.0, 70.0, 50.0])},
    )
    again = second.json()
    assert again["cross_zone_rate"] == 0
    assert all(racks[c["id"]] == c["rack"] for c in again["consumers"] if c["id"] in racks)
    metrics = (await client.get("/metrics")).text
    assert f'groupfit_group_cross_zone_rate{{group="{group}"}} 0.0' in metrics


async def test_previous_racks_in_the_request_come_before_the_stored_ones(client, group):
    body = {"algorithm": "mwf", "capacity": 100, "group": group, "partitions": partitions([60.0] * 3)}
    first = (await client.post("/v1/assign", json=body)).json()
    consumer = next(c["id"] for c in first["consumers"] if c["rack"] == "eu-1a")
    # Told that this consumer runs in eu-1b after all, its eu-1a partition would be read across zones there: a
    # consumer started in eu-1a takes it, and the consumer, left with nothing, goes.
    moved = await client.post("/v1/assign", json={**body, "previous_racks": {consumer: "eu-1b"}})
    assert moved.status_code == 200
    doc = moved.json()
    by_id = {c["id"]: c for c in doc["consumers"]}
    assert doc["cross_zone_rate"] == 0
    assert consumer not in by_id or by_id[consumer]["rack"] == "eu-1b"
    assert (await client.get(f"/v1/groups/{group}")).json()["racks"].get(consumer, "eu-1b") == "eu-1b"


async def test_stored_rates_may_carry_racks_and_a_request_naming_no_partitions_uses_them(client, group):
    put = await client.put(
        f"/v1/groups/{group}/rates",
        json={"partitions": partitions([60.0, 60.0, 60.0]), "window_end": "2026-11-25T10:00:00Z"},
    )
    assert put.status_code == 200
    stored = (await client.get(f"/v1/groups/{group}/rates")).json()
    assert [p["racks"] for p in stored["partitions"]] == [["eu-1a"], ["eu-1b"], ["eu-1c"]]
    answer = (await client.post("/v1/assign", json={"algorithm": "bfd", "capacity": 100, "group": group})).json()
    assert answer["cross_zone_rate"] == 0 and sorted(c["rack"] for c in answer["consumers"]) == sorted(RACKS)
    bad = await client.put(
        f"/v1/groups/{group}/rates",
        json={
            "partitions": [{"topic": "t", "partition": p, "rate": 1.0, "racks": [f"r{p}"]} for p in range(1001)],
            "window_end": "2026-11-25T10:01:00Z",
        },
    )
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_racks"


async def test_a_bad_rack_is_a_422_and_stores_nothing(client, group):
    body = {"algorithm": "mwf", "capacity": 100, "group": group, "partitions": partitions([40.0] * 3)}
    body["partitions"][0]["racks"] = [""]
    response = await client.post("/v1/assign", json=body)
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_racks"
    assert (await client.get(f"/v1/groups/{group}")).status_code == 404


async def test_a_rack_free_group_has_no_zone_fields(client, group):
    body = {"algorithm": "mwf", "capacity": 100, "group": group, "partitions": partitions([40.0] * 3, racks=False)}
    answer = (await client.post("/v1/assign", json=body)).json()
    assert "cross_zone_rate" not in answer and all(
        set(c) == {"id", "load", "utilization", "partition_count"} for c in answer["consumers"]
    )
    assert "racks" not in (await client.get(f"/v1/groups/{group}")).json()
    assert "cross_zone_rate" not in (await client.get(f"/v1/groups/{group}/history")).json()["versions"][0]
    assert f'groupfit_group_cross_zone_rate{{group="{group}"}}' not in (await client.get("/metrics")).text
