"""POST /v1/assign answered by the fast path (app/api/assign.py `AssignFastPath`, no FastAPI routing) exactly as
by the route: the same answers in every delta form, the same refusals with the same headers, the same metrics and
log fields. A query the fast path does not take (an extra parameter) sends the request through the route."""

from __future__ import annotations

import httpx
import pytest

from app.api import examples
from app.main import create_app
from app.settings import Settings, TokenGrant

BODY = {key: value for key, value in examples.ASSIGN_REQUEST.items()}
ROUTE = "via=route"  # a parameter the route ignores and the fast path does not take


@pytest.fixture
async def client(redis_server):
    settings = Settings(
        redis_url=redis_server.url,
        max_body_bytes=20_000,
        auth_tokens=[TokenGrant(token="w", write=True), TokenGrant(token="r", write=False)],
    )
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers={"Authorization": "Bearer w"}) as c:
        yield c
    await app.state.services.store.close()


async def both(client: httpx.AsyncClient, query: str, **kwargs) -> tuple[httpx.Response, httpx.Response]:
    fast = await client.post(f"/v1/assign?{query}", **kwargs)
    routed = await client.post(f"/v1/assign?{query + '&' if query else ''}{ROUTE}", **kwargs)
    return fast, routed


def same(fast: httpx.Response, routed: httpx.Response) -> None:
    assert (fast.status_code, fast.content) == (routed.status_code, routed.content)
    for header in ("content-type", "www-authenticate", "retry-after"):
        assert fast.headers.get(header) == routed.headers.get(header)


@pytest.mark.parametrize("query", ["", "delta=sparse", "delta=dense", "delta=none"])
@pytest.mark.parametrize("body", [BODY, {**BODY, "algorithm": "repack"}, {**BODY, "group": "g1", "dry_run": True}])
async def test_answers_alike(client, query, body):
    fast, routed = await both(client, query, json=body)
    assert fast.status_code == 200
    same(fast, routed)
    assert ("delta" in fast.json()) == (query != "delta=none")


@pytest.mark.parametrize(
    "change",
    [
        {"content": b"{not json", "headers": {"Content-Type": "application/json"}},
        {"json": {**BODY, "algorithm": "no-such"}},
        {"json": {**BODY, "capacity": -1}},
        {"content": b"{}", "headers": {"Content-Type": "text/plain"}},
        {"content": b" " * 30_000, "headers": {"Content-Type": "application/json"}},
        {"json": BODY, "headers": {"Authorization": "Bearer nobody"}},
        {"json": {**BODY, "group": "g1"}, "headers": {"Authorization": "Bearer r"}},
    ],
    ids=["bad json", "unknown algorithm", "bad capacity", "not json", "too large", "unknown token", "no write"],
)
async def test_refusals_alike(client, change):
    fast, routed = await both(client, "", **change)
    assert fast.status_code in (401, 403, 413, 415, 422)
    same(fast, routed)


async def test_what_the_route_validates_goes_to_the_route(client):
    response = await client.post("/v1/assign?delta=full", json=BODY)
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"
    response = await client.post("/v1/assign", json=BODY, headers={"Idempotency-Key": "k" * 201})
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"


async def test_counted_and_logged_as_the_route(client, caplog):
    before = (await client.get("/metrics")).text
    caplog.set_level("INFO", logger="groupfit")
    assert (await client.post("/v1/assign", json={**BODY, "group": "g2", "dry_run": True})).status_code == 200
    after = (await client.get("/metrics")).text
    line = 'groupfit_http_requests_total{method="POST",route="/v1/assign",status="200"}'

    def count(text: str) -> float:
        return next((float(x.split()[-1]) for x in text.splitlines() if x.startswith(line)), 0.0)

    assert count(after) == count(before) + 1
    logged = [record.fields for record in caplog.records if hasattr(record, "fields")]
    assert any(f.get("route") == "/v1/assign" and f.get("group") == "g2" and f.get("algorithm") for f in logged)
