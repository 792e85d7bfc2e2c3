"""GET /v1/groups/{group}/scale as a decision (up, down, reass, none) with what its caller sets, in process
against a real Redis-protocol server."""

from __future__ import annotations

import json
import uuid
from urllib.parse import quote

import httpx
import pytest

from app.main import create_app
from app.settings import Settings

BALANCED = [30, 30, 30, 30, 30, 30]
SKEWED = [60, 30, 20, 10, 10, 10]  # what a held at 30 + 30 + 30 becomes 110


@pytest.fixture
async def client(redis_server):
    app = create_app(Settings(redis_url=redis_server.url, key_prefix=f"scale-{uuid.uuid4().hex[:6]}"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        yield c
    await app.state.services.store.close()


def partitions(rates: list[float]) -> list[dict]:
    return [{"topic": "t", "partition": p, "rate": r} for p, r in enumerate(rates)]


async def group_of(client: httpx.AsyncClient, algorithm: str = "mwf", params: dict | None = None) -> str:
    """Members a and b, a holding partitions 0-2 at the balanced rates, then the skewed rates stored."""
    group = f"g-{uuid.uuid4().hex[:6]}"
    previous = {"a": [{"topic": "t", "partition": p} for p in (0, 1, 2)]}
    previous["b"] = [{"topic": "t", "partition": p} for p in (3, 4, 5)]
    body = {"algorithm": algorithm, "group": group, "capacity": 100, "members": ["a", "b"], "previous": previous}
    body |= {"partitions": partitions(BALANCED), "params": params or {}}
    stored = await client.post("/v1/assign", json=body)
    assert stored.status_code == 200, stored.text
    assert sorted(p["partition"] for p in stored.json()["assignment"]["a"]) == [0, 1, 2]
    rates = {"partitions": partitions(SKEWED), "window_end": "2026-11-25T10:00:00Z"}
    assert (await client.put(f"/v1/groups/{group}/rates", json=rates)).status_code == 200
    return group


async def scale(client: httpx.AsyncClient, group: str, **query) -> httpx.Response:
    return await client.get(f"/v1/groups/{quote(group, safe='')}/scale", params=query)


async def test_a_skew_without_a_membership_change_is_a_reassignment(client):
    group = await group_of(client)
    signal = (await scale(client, group)).json()
    assert (signal["action"], signal["needed"], signal["current"], signal["overloaded"]) == ("reass", 2, 2, ["a"])
    assert signal["gain"] == pytest.approx(0.1) and signal["moves"] >= 1 and signal["rscore"] > 0
    assert signal["unowned"] == 0 and signal["remove"] == [] and "rebalance" in signal["reason"]
    # the leader's rebalance computes what the decision proposed: every member within its capacity
    again = (await client.post("/v1/assign", json={"algorithm": "mwf", "group": group, "members": ["a", "b"]})).json()
    assert again["rscore"] == pytest.approx(signal["rscore"]) and again["overloaded_members"] == []
    assert (await scale(client, group)).json()["action"] == "none"


async def test_the_guards_are_set_by_the_caller(client):
    group = await group_of(client)
    young = (await scale(client, group, min_interval_s=60)).json()
    assert young["action"] == "none" and "min_interval_s 60" in young["reason"]
    assert (await scale(client, group, min_gain=0.5)).json()["action"] == "none"
    assert (await scale(client, group, max_moves=0)).json()["action"] == "none"
    assert (await scale(client, group, max_rscore=0.01)).json()["action"] == "none"
    sized = (await scale(client, group, member_capacities=json.dumps({"a": 120}))).json()
    assert sized["action"] == "none" and sized["overloaded"] == []
    headroom = (await scale(client, group, f_up=0.5, f_down=0.2)).json()
    assert headroom["action"] == "up" and headroom["needed"] == 3


async def test_any_registered_algorithm_decides_and_least_loaded_by_its_own_rules(client):
    group = await group_of(client)
    params = json.dumps({"mu": 100, "w_sla": 5, "rebalance_s": 0})
    least = (await scale(client, group, algorithm="least-loaded", params=params)).json()
    assert (least["action"], least["algorithm"]) == ("reass", "least-loaded") and "least-loaded" in least["reason"]
    up = (await scale(client, group, algorithm="least-loaded", params=params, f_up=0.5, f_down=0.2)).json()
    assert up["action"] == "up"
    for name in ("bfd", "repack"):
        assert (await scale(client, group, algorithm=name)).json()["action"] == "reass", name


@pytest.mark.parametrize(
    ("query", "code", "words"),
    [
        ({"params": "[1]"}, "invalid_parameter", "params must be a JSON object"),
        ({"params": "{"}, "invalid_parameter", "params must be a JSON object"),
        ({"params": '{"max_moves": -1}'}, "invalid_parameter", "max_moves"),
        ({"member_capacities": '{"a": "big"}'}, "invalid_parameter", "member_capacities"),
        ({"member_capacities": '{"z": 200}'}, "invalid_members", "'z'"),
        ({"member_capacities": '{"a": 0}'}, "invalid_capacity", "'a'"),
        ({"f_up": 0.5, "f_down": 0.6}, "invalid_parameter", "f_down"),
        ({"f_up": 2}, "invalid_request", "f_up"),
        ({"min_gain": "nan"}, "invalid_request", "min_gain"),
        ({"max_moves": -1}, "invalid_request", "max_moves"),
        ({"algorithm": "nope"}, "unknown_algorithm", "nope"),
    ],
)
async def test_bad_queries_are_refused_and_change_nothing(client, query, code, words):
    group = await group_of(client)
    before = (await client.get(f"/v1/groups/{group}")).json()
    answer = await scale(client, group, **query)
    assert answer.status_code == 422 and answer.json()["error"]["code"] == code, answer.text
    assert words in answer.text
    assert (await client.get(f"/v1/groups/{group}")).json() == before
