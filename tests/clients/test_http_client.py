"""The HTTP client against the live service, and its field names against openapi/openapi.json."""

from __future__ import annotations

import ast
import json
import uuid
from pathlib import Path

import httpx
import pytest
from groupfit_client import AsyncGroupfitClient, GroupfitClient, GroupfitError

ROOT = Path(__file__).resolve().parents[2]
REQUEST = {
    "algorithm": "bfd",
    "capacity": 10,
    "partitions": [{"topic": "t", "partition": p, "rate": 4} for p in range(5)],
}


def test_sync_client_round_trip(live_service):
    group = f"client-{uuid.uuid4().hex[:6]}"
    with GroupfitClient(live_service.url) as client:
        assert client.healthy()
        assert "mwf" in {a["name"] for a in client.algorithms()}
        answer = client.assign_idempotent({**REQUEST, "group": group})
        assert answer["version"] == 1 and answer["consumer_count"] == 3
        assert client.group(group)["version"] == 1
        assert client.history(group)[0]["version"] == 1
        client.put_rates(group, [{"topic": "t", "partition": 0, "rate": 3.0}], "2026-11-22T10:00:00Z")
        assert client.rates(group)["partitions"][0]["rate"] == 3.0
        with pytest.raises(GroupfitError) as error:
            client.assign({**REQUEST, "group": group, "expected_version": 0})
        assert error.value.code == "version_conflict" and error.value.status == 409
        assert error.value.details["current_version"] == 1
        client.delete_group(group)
        with pytest.raises(GroupfitError) as error:
            client.group(group)
        assert error.value.code == "group_not_found"


async def test_async_client(live_service):
    group = f"async-{uuid.uuid4().hex[:6]}"
    async with AsyncGroupfitClient(live_service.url) as client:
        answer = await client.assign(REQUEST)
        assert answer["lower_bound"] == 2
        assert "bfd" in {a["name"] for a in await client.algorithms()}
        assert (await client.assign_idempotent({**REQUEST, "group": group}))["version"] == 1
        assert (await client.history(group))[0]["version"] == 1
        await client.put_rates(group, [{"topic": "t", "partition": 0, "rate": 1.0}], "2026-11-22T10:00:00Z")
        assert (await client.rates(group))["partitions"][0]["rate"] == 1.0
        await client.delete_group(group)
        with pytest.raises(GroupfitError) as error:
            await client.assign({**REQUEST, "algorithm": "nope"})
        assert error.value.code == "unknown_algorithm"


def test_retries_503_only_when_safe():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) < 3:
            return httpx.Response(
                503, json={"error": {"code": "store_unavailable", "message": "down.", "details": None}}
            )
        return httpx.Response(200, json={"ok": True})

    client = GroupfitClient("http://x", backoff_s=0, transport=httpx.MockTransport(handler))
    assert client.assign({**REQUEST, "group": "g"}, idempotency_key="k") == {"ok": True}
    assert len(calls) == 3 and calls[0].headers["idempotency-key"] == "k"
    calls.clear()
    with pytest.raises(GroupfitError) as error:
        client.assign({**REQUEST, "group": "g"})  # a stateful write without a key is never repeated
    assert error.value.code == "store_unavailable" and len(calls) == 1


def test_retries_connection_errors_then_raises():
    client = GroupfitClient("http://127.0.0.1:1", retries=2, backoff_s=0, timeout=0.5)
    with pytest.raises(httpx.TransportError):
        client.algorithms()
    assert not client.healthy()


def test_client_paths_and_fields_exist_in_the_contract():
    """Every path the client calls and every body field it sends is in openapi/openapi.json."""
    spec = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    paths = {path.replace("{group}", "{}") for path in spec["paths"]}
    source = (ROOT / "clients" / "python" / "groupfit_client" / "http.py").read_text()
    used = set()
    tree = ast.parse(source)
    pieces = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if id(node) in pieces:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            if text.startswith("/v1/"):
                used.add(text)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith(("/v1/", "/readyz"))
        ):
            used.add(node.value)
    assert used and used <= paths, used - paths
    schemas = spec["components"]["schemas"]
    assert {"partitions", "window_end"} <= set(schemas["RatesUpdate"]["properties"])
    assert {"stream", "capacity", "algorithms", "latency"} <= set(schemas["EvaluateRequest"]["properties"])
    assign_fields = set(schemas["AssignRequest"]["properties"])
    assert {"algorithm", "capacity", "group", "members", "partitions", "dry_run"} <= assign_fields
