"""Issue #13's reproducers, each answered as the issue wants: small requests that imply huge groups, input
that used to answer 500, computations that used to block every other client, colliding Redis keys, a
deleted group's idempotency records, unbounded metrics. In process, against a real Redis-protocol server
and real compute worker processes."""

from __future__ import annotations

import asyncio
import json
import random
import uuid

import httpx
import pytest

from app.main import create_app
from app.settings import Settings

SMALL = {"algorithm": "mwf", "capacity": 100, "partitions": [{"topic": "t", "partition": 0, "rate": 10}]}


def assign(algorithm: str, partitions: list[dict], capacity: float = 100, **params) -> dict:
    return {"algorithm": algorithm, "capacity": capacity, "partitions": partitions, "params": params}


def one(rate: float = 10, **extra) -> list[dict]:
    return [{"topic": "t", "partition": 0, "rate": rate, **extra}]


def slow_stream(measurements: int = 600, partitions: int = 200) -> list[dict]:
    """A stream whose replay through repack (the reference's, in Python) takes seconds: the paper algorithms'
    compiled replay takes a fraction of one."""
    rng = random.Random(1)
    return [{"t": {str(p): rng.uniform(1, 60) for p in range(partitions)}} for _ in range(measurements)]


SLOW_EVALUATE = {"stream": slow_stream(), "capacity": 100, "algorithms": ["repack"]}


def error(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    return body["error"]["code"]


@pytest.fixture
def settings(redis_server) -> Settings:
    return Settings(
        redis_url=redis_server.url,
        key_prefix=f"abuse-{uuid.uuid4().hex[:6]}",
        compute_workers=1,
        compute_queue=0,
        compute_timeout_s=30,
        metrics_max_groups=3,
    )


@pytest.fixture
async def app(settings):
    app = create_app(settings)  # its worker starts with the first request that needs one
    yield app
    await app.state.services.compute.close()
    await app.state.services.store.close()


@pytest.fixture
async def client(app):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=60) as c:
        yield c


@pytest.fixture
async def warm(client):
    """The client, once the worker has started and run a job: a test may then set a short deadline."""
    response = await client.post(
        "/v1/evaluate", json={"stream": [{"t": {"0": 1}}], "capacity": 1, "algorithms": ["mwf"]}
    )
    assert response.status_code == 200, response.text
    return client


# 1. One small request exhausts memory


@pytest.mark.parametrize(
    "body",
    [
        assign("least-loaded", one(), mu=1e-300),
        assign("linear", one(), mu=1e-300),
        assign("linear", one(1e9), capacity=1e-9),
        assign("roundrobin", one(1e9), capacity=1e-9),
        assign("range", one(1e9), capacity=1e-9),
        assign("linear", one(), mu=1e-300, f=1e-300),
        assign("mwf", one(10), capacity=1e-320),
        assign("mwf", one(1e300), capacity=1e-300),
    ],
)
async def test_a_request_that_implies_too_many_consumers_is_refused_before_any_work(client, body):
    response = await client.post("/v1/assign", json=body)
    assert response.status_code == 422 and error(response) == "too_many_consumers"
    details = response.json()["error"]["details"]
    assert details["max_consumers"] == 100_000
    assert details["implied_consumers"] is None or details["implied_consumers"] > 100_000


async def test_the_consumer_limit_is_a_setting_and_holds_inside_evaluate(redis_server):
    app = create_app(Settings(redis_url=redis_server.url, max_consumers=10))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        eleven = [{"topic": "t", "partition": p, "rate": 100} for p in range(11)]
        refused = await client.post("/v1/assign", json=assign("ffd", eleven))
        assert refused.status_code == 422 and refused.json()["error"]["details"]["implied_consumers"] == 11
        assert (await client.post("/v1/assign", json=assign("ffd", eleven[:10]))).status_code == 200
        members = await client.post(
            "/v1/assign", json={**assign("ffd", one()), "members": [f"m{i}" for i in range(11)]}
        )
        assert members.status_code == 422 and error(members) == "too_many_consumers"
        for body in (
            {"stream": [{"t": {"0": 1e9}}], "capacity": 1e-9, "algorithms": ["mwf"]},
            {"stream": [{"t": {"0": 1}}], "capacity": 1, "algorithms": ["kd_11"]},
        ):
            response = await client.post("/v1/evaluate", json=body)
            assert response.status_code == 422 and error(response) == "too_many_consumers"
    await app.state.services.compute.close()
    await app.state.services.store.close()


# 2. One request blocks every other client


async def test_a_computation_past_its_deadline_is_answered_504_while_health_checks_are_answered(app, warm):
    client = warm
    app.state.services.compute.timeout_s = 1.0
    order: list[str] = []

    async def evaluate() -> httpx.Response:
        response = await client.post("/v1/evaluate", json=SLOW_EVALUATE)
        order.append("evaluate")
        return response

    async def health() -> None:
        await asyncio.sleep(0.2)
        for _ in range(5):
            assert (await client.get("/healthz")).status_code == 200
            small = await client.post("/v1/assign", json=SMALL)
            assert small.status_code == 200
        order.append("health")

    slow, _ = await asyncio.gather(evaluate(), health())
    assert slow.status_code == 504 and error(slow) == "compute_timeout"
    assert order == ["health", "evaluate"]  # answered while the evaluation ran, not after


async def test_a_full_pool_answers_503_with_retry_after_and_small_assigns_still_run(app, warm):
    client = warm
    app.state.services.compute.timeout_s = 1.5
    running = asyncio.ensure_future(client.post("/v1/evaluate", json=SLOW_EVALUATE))
    await asyncio.sleep(0.2)
    busy = await client.post("/v1/evaluate", json=SLOW_EVALUATE)
    assert busy.status_code == 503 and error(busy) == "compute_busy" and busy.headers["retry-after"] == "1"
    # exact always goes to the pool; a small mwf is computed at once
    exact = await client.post("/v1/assign", json={**SMALL, "algorithm": "exact"})
    assert exact.status_code == 503 and error(exact) == "compute_busy"
    assert (await client.post("/v1/assign", json=SMALL)).status_code == 200
    assert (await running).status_code == 504


async def test_budgets_above_the_settings_are_refused(client):
    exact = await client.post("/v1/assign", json={**SMALL, "algorithm": "exact", "params": {"time_limit_ms": 60_000}})
    assert exact.status_code == 422 and error(exact) == "invalid_parameter"
    optimum = await client.post("/v1/evaluate", json={**SLOW_EVALUATE, "optimum": {"time_limit_ms": 60_000}})
    assert optimum.status_code == 422 and error(optimum) == "invalid_parameter"
    long = await client.post("/v1/evaluate", json={"stream": [{"t": {"0": 1}}] * 1001, "capacity": 1})
    assert long.status_code == 422 and error(long) == "too_many_partitions"


async def test_pooled_algorithms_answer_as_before(client):
    partitions = [{"topic": "t", "partition": p, "rate": 10 + p % 37} for p in range(120)]
    for algorithm in ("exact", "repack", "least-loaded"):
        response = await client.post("/v1/assign", json=assign(algorithm, partitions))
        assert response.status_code == 200, response.text
        placed = sorted(ref["partition"] for held in response.json()["assignment"].values() for ref in held)
        assert placed == list(range(120))


# 3. 5xx on bad input

DEEP = '{"algorithm": "mwf", "capacity": 1, "params": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"
KIP441 = {
    "algorithm": "kip441",
    "capacity": 100,
    "members": ["a", "b"],
    "partitions": [{"topic": "t", "partition": p, "rate": 1} for p in range(2)],
}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"algorithm":"\xff"}', "invalid_json"),
        (DEEP.encode(), "invalid_json"),
        (assign("mwf", [{"topic": "t", "partition": p, "rate": 1e308} for p in range(2)]), "invalid_rate"),
        (
            assign("least-loaded", [{"topic": "t", "partition": p, "rate": 1, "lag": 1e308} for p in range(2)]),
            "invalid_rate",
        ),
        (assign("least-loaded", one(), rebalance_s=1e308), "invalid_parameter"),
        (assign("exact", one(), time_limit_ms="100"), "invalid_parameter"),
        ({**KIP441, "params": {"stateless": [{"topic": "t", "partition": 0}] * 2}}, "invalid_parameter"),
        (
            {**KIP441, "params": {"member_lags": {"a": [{"topic": "t", "partition": 0, "lag": 1}] * 2}}},
            "invalid_parameter",
        ),
        (b'{"algorithm": "mwf", "capacity": 100, "capacity": 1, "partitions": []}', "invalid_json"),
    ],
)
async def test_bad_assign_input_gets_a_4xx_error(client, body, code):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await client.post("/v1/assign", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422 and error(response) == code
    assert (await client.post("/v1/assign", json=SMALL)).status_code == 200


async def test_duplicate_keys_in_a_large_body_are_refused_too(client):
    # above 64 KiB the check runs in the compute worker, not on the event loop
    partitions = [{"topic": "t", "partition": p, "rate": 1} for p in range(1500)]
    body = json.dumps({"algorithm": "mwf", "capacity": 100, "partitions": partitions})
    assert len(body) > 64 * 1024
    duplicated = body[:-1] + ', "capacity": 1000}'
    response = await client.post("/v1/assign", content=duplicated, headers={"content-type": "application/json"})
    assert response.status_code == 422 and error(response) == "invalid_json"
    assert (
        await client.post("/v1/assign", content=body, headers={"content-type": "application/json"})
    ).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"stream": [{"t": {"0": 1}}], "capacity": 1, "latency": {"iteration_s": 30, "rebalance_s": 30}},
        {"stream": [{"t": {"0": 1}}], "capacity": 1, "optimum": {"time_limit_ms": "100"}},
        {"stream": [{"t": {"0": 1e308, "1": 1e308}}], "capacity": 1, "algorithms": ["mwf"]},
    ],
)
async def test_bad_evaluate_input_gets_a_422(client, body):
    response = await client.post("/v1/evaluate", json=body)
    assert response.status_code == 422, response.text
    error(response)


async def test_a_body_that_is_not_json_by_its_content_type_gets_415(client):
    for path in ("/v1/assign", "/v1/evaluate", "/v1/groups/g/rates"):
        method = client.put if path.endswith("rates") else client.post
        response = await method(path, content=json.dumps(SMALL), headers={"content-type": "text/plain"})
        assert response.status_code == 415 and error(response) == "unsupported_media_type"
    charset = await client.post(
        "/v1/assign", content=json.dumps(SMALL), headers={"content-type": "application/json; charset=utf-8"}
    )
    assert charset.status_code == 200


async def test_rates_that_could_not_be_assigned_are_not_stored(client):
    group = f"g-{uuid.uuid4().hex[:8]}"
    good = {"partitions": one(5), "window_end": "2026-01-01T00:00:00Z"}
    assert (await client.put(f"/v1/groups/{group}/rates", json=good)).status_code == 200
    huge = {
        "partitions": [{"topic": "t", "partition": p, "rate": 1e308} for p in range(2)],
        "window_end": "2026-01-01T00:00:00Z",
    }
    refused = await client.put(f"/v1/groups/{group}/rates", json=huge)
    assert refused.status_code == 422 and error(refused) == "invalid_rate"
    assert (await client.get(f"/v1/groups/{group}/rates")).json()["partitions"][0]["rate"] == 5
    answer = await client.post("/v1/assign", json={"algorithm": "mwf", "capacity": 100, "group": group})
    assert answer.status_code == 200 and answer.json()["version"] == 1


# 4. and 5. Redis keys of different groups; deleting a group


async def test_an_idempotency_key_cannot_reach_another_groups_state(client):
    # the issue's pair: the record of group g under key "Y}:state" was the state key of group "g}:idempotency:Y"
    attack = await client.post("/v1/assign", json={**SMALL, "group": "g"}, headers={"Idempotency-Key": "Y}:state"})
    assert attack.status_code == 200
    victim = await client.post("/v1/assign", json={**SMALL, "group": "g}:idempotency:Y"})
    assert victim.status_code == 200 and victim.json()["version"] == 1
    state = await client.get("/v1/groups/g%7D:idempotency:Y")
    assert state.status_code == 200 and state.json()["version"] == 1
    retry = await client.post("/v1/assign", json={**SMALL, "group": "g"}, headers={"Idempotency-Key": "Y}:state"})
    assert retry.json() == attack.json()


async def test_deleting_a_group_deletes_its_idempotency_records(client):
    group = f"g-{uuid.uuid4().hex[:8]}"
    key = {"Idempotency-Key": "retry-1"}
    first = await client.post("/v1/assign", json={**SMALL, "group": group}, headers=key)
    assert first.json()["version"] == 1
    assert (await client.post("/v1/assign", json={**SMALL, "group": group})).json()["version"] == 2
    assert (await client.delete(f"/v1/groups/{group}")).status_code == 204
    retry = await client.post("/v1/assign", json={**SMALL, "group": group}, headers=key)
    assert retry.status_code == 200 and retry.json()["version"] == 1  # computed anew, not the deleted answer
    assert (await client.get(f"/v1/groups/{group}")).json()["version"] == 1


# 6. Metrics


async def test_per_group_series_are_capped_oldest_first(client):
    groups = [f"m-{uuid.uuid4().hex[:8]}" for _ in range(5)]
    for group in groups:
        assert (await client.post("/v1/assign", json={**SMALL, "group": group})).status_code == 200
    metrics = (await client.get("/metrics")).text
    assert [g for g in groups if f'group="{g}"' in metrics] == groups[2:]  # metrics_max_groups=3
    await client.delete(f"/v1/groups/{groups[-1]}")
    assert f'group="{groups[-1]}"' not in (await client.get("/metrics")).text


async def test_metric_labels_stay_bounded_whatever_the_method(client):
    for i in range(5):
        await client.request(f"X{i}", "/healthz")
    metrics = (await client.get("/metrics")).text
    assert 'method="X0"' not in metrics and 'method="other"' in metrics


# 7. Auth before work


async def test_without_a_token_the_body_is_not_read(redis_server):
    app = create_app(Settings(redis_url=redis_server.url, auth_tokens=[{"token": "s3cret", "write": True}]))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        read = False

        async def body():
            nonlocal read
            read = True
            yield b"{not json"

        response = await client.post("/v1/assign", content=body(), headers={"content-type": "application/json"})
        assert response.status_code == 401 and error(response) == "unauthorized" and not read
        evaluate = await client.post("/v1/evaluate", content=b"{not json")
        assert evaluate.status_code == 401
    await app.state.services.store.close()
