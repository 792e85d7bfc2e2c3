"""Bearer-token authentication and CORS, off by default."""

from __future__ import annotations

import json

import httpx
import pytest

from app.main import create_app
from app.settings import Settings

REQUEST = {"algorithm": "bfd", "capacity": 10, "partitions": [{"topic": "t", "partition": 0, "rate": 4}]}
SECRET = "s3cret-token-value"


@pytest.fixture
async def client(redis_server, monkeypatch):
    monkeypatch.setenv(
        "GROUPFIT_AUTH_TOKENS",
        json.dumps(
            [
                {"token": SECRET, "write": True},
                {"token": "reader", "write": False},
                {"token": "orders-writer", "write": True, "groups": ["orders"]},
            ]
        ),
    )
    monkeypatch.setenv("GROUPFIT_CORS_ORIGINS", '["https://ops.example"]')
    app = create_app(Settings(redis_url=redis_server.url))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        yield c
    await app.state.services.store.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_tokens_are_required_and_never_echoed(client):
    missing = await client.post("/v1/assign", json=REQUEST)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "unauthorized"
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = await client.get("/v1/algorithms", headers=bearer("not-" + SECRET))
    assert wrong.status_code == 401 and SECRET not in wrong.text
    assert (await client.post("/v1/assign", json=REQUEST, headers=bearer(SECRET))).status_code == 200
    assert (await client.get("/healthz")).status_code == 200
    # /metrics names every group: with tokens configured it needs one (issue #13)
    assert (await client.get("/metrics")).status_code == 401
    assert (await client.get("/metrics", headers=bearer(SECRET))).status_code == 200


async def test_reads_and_writes_are_distinguished(client):
    stateful = {**REQUEST, "group": "payments"}
    assert (await client.post("/v1/assign", json=REQUEST, headers=bearer("reader"))).status_code == 200
    refused = await client.post("/v1/assign", json=stateful, headers=bearer("reader"))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    assert (await client.post("/v1/assign", json=stateful, headers=bearer(SECRET))).status_code == 200
    assert (await client.get("/v1/groups/payments", headers=bearer("reader"))).status_code == 200
    assert (await client.delete("/v1/groups/payments", headers=bearer("reader"))).status_code == 403


async def test_a_token_may_be_limited_to_groups(client):
    ok = await client.post("/v1/assign", json={**REQUEST, "group": "orders"}, headers=bearer("orders-writer"))
    assert ok.status_code == 200
    other = await client.post("/v1/assign", json={**REQUEST, "group": "payments"}, headers=bearer("orders-writer"))
    assert other.status_code == 403
    rates = {"partitions": [], "window_end": "2026-11-22T10:00:00Z"}
    assert (
        await client.put("/v1/groups/payments/rates", json=rates, headers=bearer("orders-writer"))
    ).status_code == 403


async def test_cors_only_for_configured_origins(client):
    allowed = await client.options(
        "/v1/algorithms", headers={"Origin": "https://ops.example", "Access-Control-Request-Method": "GET"}
    )
    assert allowed.headers.get("access-control-allow-origin") == "https://ops.example"
    other = await client.get("/healthz", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


async def test_off_by_default(redis_server):
    app = create_app(Settings(redis_url=redis_server.url))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        assert (await c.post("/v1/assign", json=REQUEST)).status_code == 200
        assert "access-control-allow-origin" not in (await c.get("/healthz", headers={"Origin": "https://x"})).headers
    await app.state.services.store.close()


async def test_unexpected_errors_hide_the_trace(redis_server, monkeypatch):
    app = create_app(Settings(redis_url=redis_server.url))

    def broken(*_args, **_kwargs):
        raise RuntimeError("secret internals /etc/passwd")

    monkeypatch.setattr("app.codec.assign_input.solve", broken)  # the reference core's way
    monkeypatch.setattr("app.core.native.solve_bulk", broken)  # the compiled core's way
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://t"
    ) as c:
        response = await c.post("/v1/assign", json=REQUEST)
    assert response.status_code == 500 and response.json()["error"]["code"] == "internal_error"
    assert "secret" not in response.text and "Traceback" not in response.text
    await app.state.services.store.close()
