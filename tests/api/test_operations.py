"""For operators: the groups listing, the bounded rates history and its replay, the scaling signal, and the
pages served beside the API (console, docs), in process against a real Redis-protocol server."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from html.parser import HTMLParser
from urllib.parse import quote

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from app.sim.evaluate import evaluate

RATES = [[40, 30, 20, 50, 60, 10], [45, 35, 25, 50, 60, 30], [90, 35, 25, 70, 60, 30], [20, 20, 20, 20, 20, 20]]


def window_end(i: int) -> str:
    return f"2026-11-25T08:{i // 2:02d}:{30 * (i % 2):02d}Z"


def rates_body(rates: list[float], i: int) -> dict:
    return {
        "partitions": [{"topic": "t", "partition": p, "rate": r, "lag": 1} for p, r in enumerate(rates)],
        "window_end": window_end(i),
    }


@pytest.fixture
def settings(redis_server) -> Settings:
    return Settings(redis_url=redis_server.url, rates_history_limit=3, key_prefix=f"ops-{uuid.uuid4().hex[:6]}")


async def client_of(settings: Settings):
    app = create_app(settings)
    return app, httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


@pytest.fixture
async def client(settings):
    app, c = await client_of(settings)
    async with c:
        yield c
    await app.state.services.store.close()


async def seed(client: httpx.AsyncClient, group: str, windows: int = 3, algorithm: str = "mwf") -> None:
    """Rates windows 30 s apart, an assignment after the first and the second."""
    path = f"/v1/groups/{quote(group, safe='')}"
    for i in range(windows):
        assert (await client.put(f"{path}/rates", json=rates_body(RATES[i], i))).status_code == 200
        if i < 2:
            body = {"algorithm": algorithm, "group": group, **({"capacity": 100} if i == 0 else {})}
            assert (await client.post("/v1/assign", json=body)).status_code == 200


async def test_listing_filters_by_name_and_by_the_tokens_groups(settings, redis_server):
    tokens = [{"token": "all", "write": True}, {"token": "one", "groups": ["orders-eu"]}]
    app, client = await client_of(Settings(**{**settings.model_dump(), "auth_tokens": tokens}))
    admin = {"Authorization": "Bearer all"}
    async with client:
        for group in ("orders-eu", "orders-us", "payments"):
            await seed(httpx.AsyncClient(transport=client._transport, base_url="http://test", headers=admin), group)
        listing = (await client.get("/v1/groups", headers=admin)).json()
        assert [g["group"] for g in listing["groups"]] == ["orders-eu", "orders-us", "payments"]
        first = listing["groups"][0]
        assert (first["version"], first["algorithm"], first["capacity"], first["partition_count"]) == (2, "mwf", 100, 6)
        assert first["consumers"] >= 3 and first["rscore"] == 0  # the second version kept the first's assignment
        assert first["rates_window_end"] == window_end(2) and 0 <= first["rates_age_s"] < 60
        named = (await client.get("/v1/groups?contains=orders", headers=admin)).json()["groups"]
        assert [g["group"] for g in named] == ["orders-eu", "orders-us"]
        limited = (await client.get("/v1/groups?limit=1", headers=admin)).json()
        assert len(limited["groups"]) == 1 and limited["truncated"] is True
        scoped = (await client.get("/v1/groups", headers={"Authorization": "Bearer one"})).json()["groups"]
        assert [g["group"] for g in scoped] == ["orders-eu"]
        assert (await client.get("/v1/groups")).status_code == 401
    await app.state.services.store.close()


async def test_rates_history_is_bounded_by_count_and_age(client, settings):
    group = f"g-{uuid.uuid4().hex[:6]}"
    for i in range(4):
        await client.put(f"/v1/groups/{group}/rates", json=rates_body(RATES[i], i))
    windows = (await client.get(f"/v1/groups/{group}/rates/history")).json()["windows"]
    assert [w["window_end"] for w in windows] == [window_end(i) for i in (1, 2, 3)]  # limit 3, oldest first
    assert [p["rate"] for p in windows[-1]["partitions"]] == RATES[3]
    assert (await client.get(f"/v1/groups/{group}/rates")).json()["window_end"] == window_end(3)

    app, aging = await client_of(settings.model_copy(update={"rates_history_max_age_s": 0.3}))
    async with aging:
        await aging.put(f"/v1/groups/{group}/rates", json=rates_body(RATES[0], 4))
        await asyncio.sleep(0.4)
        await aging.put(f"/v1/groups/{group}/rates", json=rates_body(RATES[1], 5))
        windows = (await aging.get(f"/v1/groups/{group}/rates/history")).json()["windows"]
    await app.state.services.store.close()
    assert [w["window_end"] for w in windows] == [window_end(5)]  # every older window was dropped by age

    assert (await client.delete(f"/v1/groups/{group}")).status_code == 204
    missing = await client.get(f"/v1/groups/{group}/rates/history")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "group_not_found"


async def test_replay_is_the_evaluation_on_the_groups_own_windows(client, settings):
    group = f"g-{uuid.uuid4().hex[:6]}"
    await seed(client, group)
    answer = await client.get(f"/v1/groups/{group}/replay?algorithms=mwf,bfd,kd_3")
    assert answer.status_code == 200, answer.text
    replay = answer.json()
    assert replay["windows"] == 3 and replay["iteration_s"] == 30 and replay["capacity"] == 100
    stream = [{"t": {str(p): r for p, r in enumerate(RATES[i])}} for i in range(3)]
    expected = evaluate(stream, 100, ["mwf", "bfd", "kd_3"])["results"]
    for name in ("mwf", "bfd", "kd_3"):
        run = replay["results"][name]
        assert run["consumers"] == expected[name]["consumers"] and run["rscore"] == expected[name]["rscore"]
        assert run["moved_bytes"] == pytest.approx(sum(run["rscore"]) * 100 * 30)
        assert set(run["latency"]) == {"p50", "p90", "p95", "p99", "max"}
    assert replay["results"]["bfd"]["moved_bytes"] > 0
    assert replay["results"]["kd_3"]["overloaded_windows"] >= 1  # 310 of rate on 3 consumers of 100

    app, small = await client_of(settings.model_copy(update={"max_evaluate_cells": 30}))
    async with small:  # 3 windows × 6 partitions × 2 algorithms = 36 cells: refused before any is read
        refused = await small.get(f"/v1/groups/{group}/replay?algorithms=mwf,bfd")
        fitting = await small.get(f"/v1/groups/{group}/replay?algorithms=mwf,bfd&windows=2")
    await app.state.services.store.close()
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "too_many_partitions"
    assert refused.json()["error"]["details"] == {"windows_that_fit": 2}
    assert fitting.status_code == 200 and fitting.json()["windows"] == 2

    none = await client.get(f"/v1/groups/{group}/replay?algorithms=,")
    assert none.status_code == 422 and none.json()["error"]["code"] == "invalid_request"
    unknown = await client.get(f"/v1/groups/{group}/replay?algorithms=mwf,nope")
    assert unknown.status_code == 422 and unknown.json()["error"]["code"] == "unknown_algorithm"
    missing = await client.get("/v1/groups/nobody/replay")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "group_not_found"


async def test_scale_signal_and_its_gauge(client):
    group = f"g-{uuid.uuid4().hex[:6]}"
    await seed(client, group)
    refreshed = (await client.get("/metrics")).text  # storing the rates refreshed the gauge
    signal = (await client.get(f"/v1/groups/{group}/scale")).json()
    assert f'groupfit_group_recommended_consumers{{group="{group}"}} {signal["needed"]}.0' in refreshed
    dry = (await client.post("/v1/assign", json={"algorithm": "mwf", "group": group, "dry_run": True})).json()
    assert signal["needed"] == dry["consumer_count"] and signal["algorithm"] == "mwf"
    state = (await client.get(f"/v1/groups/{group}")).json()
    assert signal["current"] == sum(1 for held in state["assignment"].values() if held)
    assert signal["needed"] > signal["current"] and signal["action"] == "up"  # 310 of rate, 3 consumers of 100
    assert signal["overloaded"] and signal["lower_bound"] == 4 and signal["total_rate"] == 310
    assert str(signal["needed"]) in signal["reason"] and signal["rates_window_end"] == window_end(2)
    metrics = (await client.get("/metrics")).text
    assert f'groupfit_group_recommended_consumers{{group="{group}"}} {signal["needed"]}.0' in metrics
    assert f'groupfit_group_actual_consumers{{group="{group}"}} {signal["current"]}.0' in metrics
    await client.delete(f"/v1/groups/{group}")
    assert f'group="{group}"' not in (await client.get("/metrics")).text


async def test_scale_of_a_group_whose_algorithm_needs_members(client):
    group = f"g-{uuid.uuid4().hex[:6]}"
    members = {"members": ["a", "b"], "params": {"member_lags": {"a": [], "b": []}}}
    await client.put(f"/v1/groups/{group}/rates", json=rates_body(RATES[2], 0))
    stored = await client.post("/v1/assign", json={"algorithm": "kip441", "group": group, "capacity": 100, **members})
    assert stored.status_code == 200, stored.text
    signal = (await client.get(f"/v1/groups/{group}/scale")).json()
    assert signal["algorithm"] == "bfd" and "kip441" in signal["reason"] and signal["needed"] == 4

    nothing = await client.get("/v1/groups/nobody/scale")
    assert nothing.status_code == 404 and nothing.json()["error"]["code"] == "group_not_found"
    no_rates = f"g-{uuid.uuid4().hex[:6]}"
    partitions = rates_body(RATES[0], 0)["partitions"]
    body = {"algorithm": "mwf", "group": no_rates, "partitions": partitions, "capacity": 100}
    assert (await client.post("/v1/assign", json=body)).status_code == 200
    answer = await client.get(f"/v1/groups/{no_rates}/scale")
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "no_rates"


class _References(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


OUTSIDE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)


@pytest.mark.parametrize("page", ["/ui", "/docs", "/redoc"])
async def test_pages_reference_no_outside_host(client, page):
    answer = await client.get(page)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in answer.headers["content-security-policy"]
    parser = _References()
    parser.feed(answer.text)
    assert parser.urls, "the page loads its assets"
    assert [url for url in parser.urls if OUTSIDE.match(url) or url.startswith("http")] == []
    assert re.findall(r"https?://", answer.text) == []  # not in inline scripts either
    for url in parser.urls:
        if url.startswith("/"):
            asset = await client.get(url)
            assert asset.status_code == 200, url


async def test_shipped_assets_name_no_host_a_browser_would_load(client):
    redoc = (await client.get("/static/docs/redoc.standalone.js")).text
    assert "cdn.redoc.ly" not in redoc and "/static/docs/favicon.png" in redoc
    console = (await client.get("/ui/static/console.js")).text
    assert "innerHTML" not in console and "insertAdjacentHTML" not in console and "document.write" not in console
    assert re.findall(r"https?://", console) == []


async def test_docs_and_openapi_are_counted_under_their_own_routes(client):
    for path in ("/docs", "/redoc", "/openapi.json", "/ui"):
        assert (await client.get(path)).status_code == 200
    metrics = (await client.get("/metrics")).text
    for path in ("/docs", "/redoc", "/openapi.json", "/ui"):
        assert f'route="{path}",status="200"' in metrics, path


def sample(metrics: str, name: str, **labels: str) -> float | None:
    """The value of one sample of the Prometheus text, or None."""
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    match = re.search(rf"^{name}{{{re.escape(wanted)}}} (\S+)$", metrics, re.MULTILINE)
    return float(match.group(1)) if match else None


async def test_metrics_an_operator_acts_on(client):
    group = f"g-{uuid.uuid4().hex[:6]}"
    await seed(client, group)
    path = f"/v1/groups/{group}"
    moved = (await client.post("/v1/assign", json={"algorithm": "bfd", "group": group})).json()
    assert moved["moves"], "bfd re-packs: something moves"
    await client.post("/v1/assign", json={"algorithm": "bfd", "group": group, "dry_run": True})
    await client.put(f"{path}/rates", json=rates_body(RATES[2], 9))
    metrics = (await client.get("/metrics")).text
    assert sample(metrics, "groupfit_group_moves", group=group) == len(moved["moves"])
    assert sample(metrics, "groupfit_group_moved_rate", group=group) == sum(m["rate"] for m in moved["moves"])
    assert sample(metrics, "groupfit_rebalances_answered_total", algorithm="bfd", mode="stored") >= 1
    assert sample(metrics, "groupfit_rebalances_answered_total", algorithm="bfd", mode="dry_run") >= 1
    assert sample(metrics, "groupfit_rebalances_answered_total", algorithm="mwf", mode="stored") >= 2
    assert sample(metrics, "groupfit_rebalance_moves_count", algorithm="bfd") >= 1
    signal = (await client.get(f"{path}/scale")).json()
    metrics = (await client.get("/metrics")).text
    assert sample(metrics, "groupfit_group_overloaded_consumers", group=group) == len(signal["overloaded"])
    stored_at = sample(metrics, "groupfit_group_rates_updated_timestamp_seconds", group=group)
    assert stored_at is not None and abs(stored_at - time.time()) < 60


async def test_store_errors_are_counted_and_logs_name_group_algorithm_and_code(capsys):
    app, client = await client_of(Settings(redis_url="redis://127.0.0.1:1/0", redis_timeout_s=0.2))
    async with client:
        assert (await client.get("/v1/groups/somewhere")).status_code == 503
        body = {"algorithm": "mwf", "group": "orders", "capacity": 1, "partitions": []}
        assert (await client.post("/v1/assign", json=body)).status_code == 503
        metrics = (await client.get("/metrics")).text
    await app.state.services.store.close()
    assert sample(metrics, "groupfit_store_errors_total", reason="ConnectionError") == 2
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    failed = {line["route"]: line for line in lines if line.get("message") == "request" and line["status"] >= 400}
    assert failed["/v1/groups/{group}"]["group"] == "somewhere"
    assert failed["/v1/groups/{group}"]["error_code"] == "store_unavailable"
    assert (failed["/v1/assign"]["group"], failed["/v1/assign"]["algorithm"]) == ("orders", "mwf")
    assert failed["/v1/assign"]["error_code"] == "store_unavailable"
