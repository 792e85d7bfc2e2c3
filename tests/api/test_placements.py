"""POST /v1/placements and `groupfit placement --input`: the same answer and the same error codes; a token with
write is needed when tokens are configured."""

from __future__ import annotations

import copy
import json

import httpx
import pytest

from app.api.examples import PLACEMENT_REQUEST
from app.cli import main
from app.main import create_app
from app.settings import Settings


@pytest.fixture
async def api(monkeypatch):
    monkeypatch.setenv(
        "GROUPFIT_AUTH_TOKENS", json.dumps([{"token": "writer", "write": True}, {"token": "reader", "write": False}])
    )
    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0"))  # placements store nothing: no Redis needed
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        yield client
    await app.state.services.store.close()


WRITER = {"Authorization": "Bearer writer"}


async def test_the_example_is_answered_alike_by_the_api_and_the_cli(api, tmp_path, capsys):
    response = await api.post("/v1/placements", json=PLACEMENT_REQUEST, headers=WRITER)
    assert response.status_code == 200
    answer = response.json()
    # broker 1 holds 1 100 of 1 000; its 300-byte orders/2 fits nowhere else (broker 3 holds it, broker 2 would
    # hold 1 100), so a 400-byte replica moves to broker 3, and orders/0's leader goes to broker 2
    assert answer["moves"] == [{"topic": "orders", "partition": 0, "from": 1, "to": 3, "bytes": 400.0}]
    assert answer["optimal"] is True and answer["peak_after"]["disk"] == pytest.approx(0.8)
    assert answer["reassignment"] == {
        "version": 1,
        "partitions": [{"topic": "orders", "partition": 0, "replicas": [2, 3]}],
    }
    path = tmp_path / "request.json"
    path.write_text(json.dumps(PLACEMENT_REQUEST))
    assert main(["placement", "--input", str(path), "--reassignment-out", str(tmp_path / "plan.json")]) == 0
    assert json.loads(capsys.readouterr().out) == answer
    assert json.loads((tmp_path / "plan.json").read_text()) == answer["reassignment"]


async def test_a_placement_needs_a_token_with_write(api):
    assert (await api.post("/v1/placements", json=PLACEMENT_REQUEST)).status_code == 401
    refused = await api.post("/v1/placements", json=PLACEMENT_REQUEST, headers={"Authorization": "Bearer reader"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"


def _with(change) -> dict:
    request = copy.deepcopy(PLACEMENT_REQUEST)
    change(request)
    return request


BAD = [
    (_with(lambda r: r["brokers"][0].update(disk=0)), "invalid_capacity"),
    (_with(lambda r: r["brokers"][0].update(id="one")), "invalid_broker"),
    (_with(lambda r: r["brokers"].append(dict(r["brokers"][0]))), "invalid_broker"),
    (_with(lambda r: r["partitions"][0].update(replicas=[])), "invalid_replicas"),
    (_with(lambda r: r["partitions"][0].update(replicas=[1, 1])), "invalid_replicas"),
    (_with(lambda r: r["partitions"][0].update(size=-1)), "invalid_rate"),
    (_with(lambda r: r.update(topics=[])), "invalid_rate"),  # no throughput and no retention
    (_with(lambda r: r["topics"].append({"name": "orders", "retention_ms": 1})), "invalid_parameter"),
    (_with(lambda r: r["partitions"][0].update(size=5000)), "replica_too_large"),
    (_with(lambda r: r["partitions"][0].update(replicas=[1, 2, 3, 4])), "too_many_replicas"),
    (_with(lambda r: r["partitions"].append(dict(r["partitions"][0]))), "duplicate_partition"),
    (_with(lambda r: r["options"].update(objective="fast")), "invalid_parameter"),
    (_with(lambda r: r.update(solver="simplex")), "unknown_algorithm"),
    (_with(lambda r: r["brokers"].__setitem__(slice(None), r["brokers"][:2])), "placement_infeasible"),
    # issue #27's reproducers (each answered 500 before, the CLI exiting 1 with a traceback)
    (_with(lambda r: [b.update(disk=1e308) for b in r["brokers"]]), "invalid_capacity"),  # Σ disk past 1.8e308
    (_with(lambda r: [b.update(network=1e308) for b in r["brokers"]]), "invalid_capacity"),
    (_with(lambda r: [p.update(size=1e308) for p in r["partitions"]]), "invalid_rate"),  # Σ demand past 1.8e308
    (_with(lambda r: r["partitions"][0].update(size=2**53 + 1)), "invalid_rate"),
    (_with(lambda r: r["partitions"][0].update(size=0.5)), "invalid_rate"),  # bytes are whole
    (_with(lambda r: r["partitions"][0].update(throughput=1e300)), "replica_too_large"),
    (_with(lambda r: r["topics"][0].update(retention_ms=5e-324)), "invalid_parameter"),  # was a ZeroDivisionError
    (_with(lambda r: r["topics"][0].update(retention_ms=1)), "replica_too_large"),  # 400 kB/ms on a 10 B/s broker
    (_with(lambda r: r["brokers"][0].update(network=1e-4)), "invalid_capacity"),  # below the model's 0.001 B/s
    (_with(lambda r: r["options"].update(max_bytes_moved=1e308)), "invalid_parameter"),
    (_with(lambda r: r["options"].update(max_utilization=5e-324)), "replica_too_large"),  # capacities round to 0
    (_with(lambda r: r["options"].update(time_limit_ms=600_000)), "invalid_parameter"),  # above the service's 2 000
]


@pytest.mark.parametrize(("body", "code"), BAD)
async def test_bad_input_gets_the_same_code_from_the_api_and_the_cli(body, code, api, tmp_path, capsys):
    response = await api.post("/v1/placements", json=body, headers=WRITER)
    assert response.status_code == 422 and response.json()["error"]["code"] == code, response.text
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body))
    assert main(["placement", "--input", str(path)]) == 2
    assert json.loads(capsys.readouterr().err)["error"]["code"] == code


def test_live_cluster_options_are_refused_with_a_request_file(tmp_path, capsys):
    path = tmp_path / "request.json"
    path.write_text(json.dumps(PLACEMENT_REQUEST))
    assert main(["placement", "--input", str(path), "--solver", "heuristic", "--execute"]) == 2
    assert "--solver, --execute go with --bootstrap-servers" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("limit", "change", "code"),
    [
        ({"max_placement_brokers": 2}, lambda r: None, "invalid_broker"),
        ({"max_placement_replicas": 5}, lambda r: None, "too_many_partitions"),  # 6 replicas
        ({"max_placement_cells": 17}, lambda r: None, "too_many_partitions"),  # 6 replicas × 3 brokers
        ({"max_exact_time_limit_ms": 500}, lambda r: r["options"].update(time_limit_ms=501), "invalid_parameter"),
    ],
)
async def test_sizes_beyond_the_settings_are_refused_before_any_work(limit, change, code):
    request = _with(change)
    for settings, expected in ((limit, 422), ({}, 200)):  # refused with the limit, served without it
        app = create_app(Settings(redis_url="redis://127.0.0.1:1/0", **settings))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            response = await client.post("/v1/placements", json=request)
        await app.state.services.store.close()
        assert response.status_code == expected, response.text
        if expected == 422:
            assert response.json()["error"]["code"] == code and response.json()["error"]["details"]
