"""Random valid requests through the HTTP layer: the answers' invariants hold."""

from __future__ import annotations

import math

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.main import create_app
from app.settings import Settings

ALGORITHMS = ["nf", "ffd", "bfd", "wf", "mwf", "mbf", "mwfp", "mbfp", "least-loaded"]


@st.composite
def requests(draw):
    n = draw(st.integers(1, 30))
    capacity = draw(st.sampled_from([10.0, 100.0]))
    keys = [(draw(st.sampled_from(["a", "b"])), j) for j in range(n)]
    rates = draw(st.lists(st.floats(0, capacity * 1.2, allow_nan=False), min_size=n, max_size=n))
    previous: dict[str, list[dict]] = {}
    for topic, partition in keys + [("gone", 0)]:
        if draw(st.booleans()):
            previous.setdefault(draw(st.sampled_from(["x", "y", "c0", "c3"])), []).append(
                {"topic": topic, "partition": partition}
            )
    return {
        "algorithm": draw(st.sampled_from(ALGORITHMS)),
        "capacity": capacity,
        "partitions": [{"topic": t, "partition": p, "rate": r} for (t, p), r in zip(keys, rates)],
        "previous": previous,
    }


@pytest.fixture(scope="module")
def app():
    return create_app(Settings(redis_url="redis://127.0.0.1:1/0", log_level="WARNING"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=requests())
async def test_answers_keep_their_invariants(app, request):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.post("/v1/assign?delta=dense", json=request)
    assert response.status_code == 200, response.text
    answer = response.json()
    rate = {(p["topic"], p["partition"]): p["rate"] for p in request["partitions"]}
    placed = [(p["topic"], p["partition"]) for held in answer["assignment"].values() for p in held]
    assert sorted(placed) == sorted(rate)  # each partition exactly once
    for held in answer["assignment"].values():
        load = math.fsum(rate[p["topic"], p["partition"]] for p in held)
        assert load <= request["capacity"] * (1 + 1e-9) or len(held) == 1
    before = {(c, p["topic"], p["partition"]) for c, held in request["previous"].items() for p in held}
    after = {(c, p["topic"], p["partition"]) for c, held in answer["assignment"].items() for p in held}
    delta = answer["delta"]
    cells = {
        (delta["rows"][r], delta["columns"][c]["topic"], delta["columns"][c]["partition"]): v
        for r, c, v in delta["cells"]
    }
    assert cells == {**{k: -1 for k in before - after}, **{k: 1 for k in after - before}}
    moved = {(m["topic"], m["partition"]) for m in answer["moves"]}
    assert moved == {(t, p) for c, t, p in after - before if any((o, t, p) in before for o in request["previous"])}
    assert answer["rscore"] == pytest.approx(math.fsum(m["rate"] for m in answer["moves"]) / request["capacity"])
