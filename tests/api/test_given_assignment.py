"""POST /v1/assign with `assignment`: an assignment computed elsewhere (a broker-side assignor, a leader's local
fallback) is checked and recorded as the group's next version, with its moves, delta, Rscore and loads, against a
real Redis-protocol server."""

from __future__ import annotations

import uuid

import httpx
import pytest

from app.main import create_app
from app.settings import Settings


def ref(partition: int) -> dict:
    return {"topic": "t", "partition": partition}


RATES = [60, 50, 30, 10]
PARTITIONS = [{"topic": "t", "partition": j, "rate": rate} for j, rate in enumerate(RATES)]


@pytest.fixture
async def client(redis_server):
    app = create_app(Settings(redis_url=redis_server.url))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        yield c
    await app.state.services.store.close()


@pytest.fixture
def group() -> str:
    return f"given-{uuid.uuid4().hex[:8]}"


def given(assignment: dict, **extra) -> dict:
    return {"algorithm": "mwf", "capacity": 100, "partitions": PARTITIONS, "assignment": assignment, **extra}


async def test_a_given_assignment_is_recorded_as_the_next_version(client, group):
    first = await client.post(
        "/v1/assign", json=given({"a": [ref(0), ref(1)], "b": [ref(2), ref(3)]}, group=group, members=["a", "b"])
    )
    assert first.status_code == 200, first.text
    assert first.json()["version"] == 1 and first.json()["outputs"] == {"given": True}

    # the broker moved t/1 from a to b and t/3 from b to a: its moves and Rscore are the service's to count
    second = await client.post(
        "/v1/assign", json=given({"a": [ref(0), ref(3)], "b": [ref(1), ref(2)]}, group=group, members=["a", "b"])
    )
    assert second.status_code == 200, second.text
    answer = second.json()
    assert answer["version"] == 2
    assert sorted((m["partition"], m["from"], m["to"]) for m in answer["moves"]) == [(1, "a", "b"), (3, "b", "a")]
    assert answer["rscore"] == pytest.approx((50 + 10) / 100)
    assert {c["id"]: c["load"] for c in answer["consumers"]} == {"a": 70, "b": 80}

    state = (await client.get(f"/v1/groups/{group}")).json()
    assert state["version"] == 2 and state["algorithm"] == "mwf"
    assert state["assignment"] == {"a": [ref(0), ref(3)], "b": [ref(1), ref(2)]}
    history = (await client.get(f"/v1/groups/{group}/history")).json()["versions"]
    assert [(v["version"], v["moves_count"]) for v in history] == [(2, 2), (1, 0)]


async def test_a_member_given_nothing_keeps_its_place(client):
    response = await client.post("/v1/assign", json=given({"a": [ref(0), ref(1), ref(2), ref(3)]}, members=["a", "b"]))
    assert response.status_code == 200, response.text
    assert response.json()["assignment"]["b"] == []
    assert response.json()["overloaded_members"] == ["a"]  # 150 on a member of 100: reported, not refused


@pytest.mark.parametrize(
    ("assignment", "members", "named"),
    [
        ({"a": [ref(0), ref(1), ref(2)]}, None, "t/3 has no consumer"),
        ({"a": [ref(0), ref(1)], "b": [ref(1), ref(2), ref(3)]}, None, "t/1 is also given to 'a'"),
        ({"a": [ref(0), ref(1), ref(2), ref(3), ref(9)]}, None, "t/9 is not among the partitions"),
        ({"a": [ref(0), ref(1)], "x": [ref(2), ref(3)]}, ["a", "b"], "'x', which is not a member"),
    ],
)
async def test_an_assignment_that_does_not_place_each_partition_once_is_refused(
    client, group, assignment, members, named
):
    body = given(assignment, group=group, **({"members": members} if members else {}))
    response = await client.post("/v1/assign", json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_assignment" and named in error["message"]
    assert (await client.get(f"/v1/groups/{group}")).status_code == 404  # nothing stored
