"""Every endpoint and every error code, in process, against a real Redis-protocol server."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import httpx
import msgspec
import pytest

from app import codec
from app.api import examples
from app.core import native
from app.main import create_app, openapi_json
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def request_body(**extra):
    """The contract's example request without its previous assignment, changed by `extra`."""
    body = {key: value for key, value in examples.ASSIGN_REQUEST.items() if key != "previous"}
    body.update(extra)
    return body


@pytest.fixture
def settings(redis_backend) -> Settings:
    return Settings(
        redis_url=redis_backend.url,
        history_limit=3,
        max_partitions=1000,
        max_dense_cells=50,
        max_body_bytes=200_000,
        max_evaluate_cells=50_000,
    )


@pytest.fixture
async def client(settings):
    app = create_app(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        yield c
    await app.state.services.store.close()


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def error_code(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["message"].endswith(".")
    return body["error"]["code"]


async def test_assign_answers_the_documented_shape(client):
    response = await client.post("/v1/assign", json=examples.ASSIGN_REQUEST)
    assert response.status_code == 200
    assert response.headers["x-request-id"]
    answer = msgspec.json.decode(response.content, type=codec.AssignResponse)
    assert answer.group is None and answer.version is None
    assert answer.consumer_count == 4 and answer.lower_bound == 5
    assert [(m.topic, m.partition, m.from_, m.to) for m in answer.moves] == [("t", 2, "b", "c1")]
    assert answer.rscore == pytest.approx(1.0)
    assert [(p.topic, p.partition, p.consumer) for p in answer.overloaded_partitions] == [("t", 3, "c0")]
    placed = sorted((p.topic, p.partition) for held in answer.assignment.values() for p in held)
    assert placed == [("t", 0), ("t", 1), ("t", 2), ("t", 3)]


async def test_request_id_is_echoed(client):
    response = await client.get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"


async def test_dense_delta_and_its_limit(client):
    response = await client.post("/v1/assign?delta=dense", json=request_body())
    assert response.status_code == 200
    delta = response.json()["delta"]
    assert len(delta["matrix"]) == len(delta["rows"]) and len(delta["matrix"][0]) == len(delta["columns"])
    many = request_body(partitions=[{"topic": "t", "partition": j, "rate": 60} for j in range(40)])
    response = await client.post("/v1/assign?delta=dense", json=many)
    assert response.status_code == 422 and error_code(response) == "delta_too_large"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"algorithm": "nope"}, "unknown_algorithm"),
        ({"partitions": [{"topic": "t", "partition": 0, "rate": -1}]}, "invalid_rate"),
        ({"partitions": [{"topic": "t", "partition": 0, "rate": 1, "lag": -5}]}, "invalid_rate"),
        ({"capacity": 0}, "invalid_capacity"),
        ({"capacity": None}, "invalid_capacity"),
        ({"consumer_throughput": 100, "capacity": None, "rebalance_s": 40}, "invalid_capacity"),
        (
            {"partitions": [{"topic": "t", "partition": 0, "rate": 1}, {"topic": "t", "partition": 0, "rate": 2}]},
            "duplicate_partition",
        ),
        (
            {"previous": {"a": [{"topic": "t", "partition": 0}], "b": [{"topic": "t", "partition": 0}]}},
            "invalid_previous",
        ),
        ({"members": []}, "invalid_members"),
        ({"members": ["a", "a"]}, "invalid_members"),
        ({"members": [{"id": "a", "capacity": -1}]}, "invalid_capacity"),
        ({"members": [{"id": "a", "size": 1}]}, "invalid_members"),
        ({"params": {"unknown": 1}}, "invalid_parameter"),
        ({"partitions": [{"topic": "t", "partition": "zero", "rate": 1}]}, "invalid_request"),
        ({"partitions": [{"topic": "t", "partition": j, "rate": 1} for j in range(1001)]}, "too_many_partitions"),
        ({"partitions": None}, "invalid_request"),
        ({"surprise": True}, "invalid_request"),
    ],
)
async def test_bad_input_gets_a_stable_code(client, change, code):
    response = await client.post("/v1/assign", json=request_body(**change))
    assert response.status_code == 422
    assert error_code(response) == code


async def test_malformed_json_and_empty_body(client):
    for content, code in ((b"{not json", "invalid_json"), (b"", "invalid_request")):
        response = await client.post("/v1/assign", content=content)
        assert response.status_code == 422 and error_code(response) == code


async def test_body_too_large(client):
    big = request_body(partitions=[{"topic": "t" * 200, "partition": j, "rate": 1} for j in range(900)])
    response = await client.post("/v1/assign", json=big)
    assert response.status_code == 413 and error_code(response) == "body_too_large"


async def test_body_too_large_while_streaming(client):
    """No Content-Length (chunked): the limit is enforced on the bytes as they arrive."""

    async def chunks():
        for _ in range(300):
            yield b" " * 1000

    response = await client.post("/v1/assign", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and error_code(response) == "body_too_large"


async def test_throughput_form_of_capacity(client):
    body = request_body(capacity=None, consumer_throughput=120, iteration_s=30, rebalance_s=5)
    response = await client.post("/v1/assign", json=body)
    assert response.status_code == 200 and response.json()["capacity"] == pytest.approx(100)


async def test_group_versions_history_and_stored_previous(client, group):
    first = await client.post("/v1/assign", json=request_body(group=group))
    assert first.status_code == 200 and first.json()["version"] == 1
    state = (await client.get(f"/v1/groups/{group}")).json()
    assert state["version"] == 1 and state["algorithm"] == "mwf" and state["capacity"] == 100
    assert state["assignment"] == first.json()["assignment"]
    # No previous in the body: the stored assignment is the previous one, so nothing moves.
    second = await client.post("/v1/assign", json=request_body(group=group))
    assert second.json()["version"] == 2 and second.json()["moves"] == [] and second.json()["rscore"] == 0
    history = (await client.get(f"/v1/groups/{group}/history")).json()["versions"]
    assert [v["version"] for v in history] == [2, 1]
    assert set(history[0]) == {
        *("version", "algorithm", "rscore", "consumer_count", "moves_count", "updated_at", "moved_rate", "moves")
    }
    assert history[0]["moves"] == [] and history[0]["moved_rate"] == 0
    limited = (await client.get(f"/v1/groups/{group}/history?limit=1")).json()["versions"]
    assert [v["version"] for v in limited] == [2]


async def test_history_is_capped(client, group):
    for _ in range(5):
        assert (await client.post("/v1/assign", json=request_body(group=group))).status_code == 200
    history = (await client.get(f"/v1/groups/{group}/history")).json()["versions"]
    assert [v["version"] for v in history] == [5, 4, 3]


async def test_stale_expected_version_conflicts_and_writes_nothing(client, group):
    await client.post("/v1/assign", json=request_body(group=group))
    await client.post("/v1/assign", json=request_body(group=group, expected_version=1))
    stale = await client.post("/v1/assign", json=request_body(group=group, expected_version=1, algorithm="bfd"))
    assert stale.status_code == 409 and error_code(stale) == "version_conflict"
    assert stale.json()["error"]["details"]["current_version"] == 2
    state = (await client.get(f"/v1/groups/{group}")).json()
    assert state["version"] == 2 and state["algorithm"] == "mwf"
    assert len((await client.get(f"/v1/groups/{group}/history")).json()["versions"]) == 2


async def test_dry_run_stores_nothing(client, group):
    response = await client.post("/v1/assign", json=request_body(group=group, dry_run=True))
    assert response.status_code == 200 and response.json()["version"] is None
    assert (await client.get(f"/v1/groups/{group}")).status_code == 404


async def test_rejected_request_changes_nothing(client, group):
    await client.post("/v1/assign", json=request_body(group=group))
    bad = await client.post("/v1/assign", json=request_body(group=group, capacity=-1))
    assert bad.status_code == 422
    assert (await client.get(f"/v1/groups/{group}")).json()["version"] == 1


async def test_idempotent_retry_gets_the_same_answer_and_one_version(client, group):
    headers = {"Idempotency-Key": "key-1"}
    first = await client.post("/v1/assign", json=request_body(group=group), headers=headers)
    retry = await client.post("/v1/assign", json=request_body(group=group), headers=headers)
    assert retry.status_code == 200 and retry.json() == first.json()
    assert (await client.get(f"/v1/groups/{group}")).json()["version"] == 1
    reused = await client.post("/v1/assign", json=request_body(group=group, algorithm="bfd"), headers=headers)
    assert reused.status_code == 422 and error_code(reused) == "idempotency_key_reused"


async def test_concurrent_retries_with_one_key_get_one_version(client, group):
    """Retries racing each other (the first one's answer not yet stored) replay it instead of conflicting."""
    headers = {"Idempotency-Key": "racing"}
    answers = await asyncio.gather(
        *(client.post("/v1/assign", json=request_body(group=group), headers=headers) for _ in range(8))
    )
    assert [a.status_code for a in answers] == [200] * 8
    assert all(a.json() == answers[0].json() for a in answers) and answers[0].json()["version"] == 1
    assert [v["version"] for v in (await client.get(f"/v1/groups/{group}/history")).json()["versions"]] == [1]


async def test_rates_round_trip_and_assign_from_stored_rates(client, group):
    missing = await client.post("/v1/assign", json={"algorithm": "mwf", "capacity": 100, "group": group})
    assert missing.status_code == 422 and error_code(missing) == "no_rates"
    rates = {
        "partitions": [{"topic": "t", "partition": p, "rate": 40.0 * (p + 1), "lag": 5} for p in range(3)],
        "window_end": "2026-11-22T10:00:00Z",
    }
    ack = await client.put(f"/v1/groups/{group}/rates", json=rates)
    assert ack.status_code == 200 and ack.json()["partition_count"] == 3
    stored = (await client.get(f"/v1/groups/{group}/rates")).json()
    assert stored["partitions"] == rates["partitions"] and stored["window_end"] == rates["window_end"]
    answer = await client.post("/v1/assign", json={"algorithm": "bfd", "capacity": 100, "group": group})
    assert answer.status_code == 200 and answer.json()["lower_bound"] == 3
    bad = await client.put(f"/v1/groups/{group}/rates", json={**rates, "window_end": "yesterday"})
    assert bad.status_code == 422 and error_code(bad) == "invalid_request"
    negative = {**rates, "partitions": [{"topic": "t", "partition": 0, "rate": -3}]}
    assert error_code(await client.put(f"/v1/groups/{group}/rates", json=negative)) == "invalid_rate"
    assert (await client.get(f"/v1/groups/{group}/rates")).json()["partitions"] == rates["partitions"]


@pytest.mark.parametrize("core", ["auto", "python"])
async def test_partitions_without_a_rate_take_the_stored_ones(redis_backend, group, core):
    """A consumer leader's one round trip: it lists the partitions its group reads, without rates; each takes its
    stored rate and lag, a partition not measured 0; the answer and stored version are those of the same request
    with the rates written in."""
    app = create_app(Settings(redis_url=redis_backend.url, core=core))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        listed = [{"topic": "t", "partition": p} for p in range(4)]
        body = {"algorithm": "mwf", "capacity": 100, "group": group, "members": ["a", "b"], "partitions": listed}
        before = await http.post("/v1/assign", json=body)
        assert before.status_code == 422 and error_code(before) == "no_rates"
        stored = [{"topic": "t", "partition": p, "rate": 30.0 + 10 * p, "lag": 7.0} for p in range(3)]
        await http.put(f"/v1/groups/{group}/rates", json={"partitions": stored, "window_end": "2026-11-22T10:00:00Z"})
        answer = await http.post("/v1/assign", json=body)
        written = [*stored, {"topic": "t", "partition": 3, "rate": 0.0}]
        twin = await http.post("/v1/assign", json={**body, "group": f"{group}-twin", "partitions": written})
        assert answer.status_code == twin.status_code == 200
        mine, theirs = answer.json(), twin.json()
        assert {k: v for k, v in mine.items() if k != "group"} == {k: v for k, v in theirs.items() if k != "group"}
        assert sum(c["load"] for c in mine["consumers"]) == pytest.approx(30 + 40 + 50)
        unknown = await http.post("/v1/assign", json={**body, "partitions": [{"topic": "u", "partition": 0}]})
        assert unknown.status_code == 422 and error_code(unknown) == "no_rates"
        assert (await http.get(f"/v1/groups/{group}")).json()["version"] == 1  # the refusal stored nothing
        stateless = await http.post("/v1/assign", json={**body, "group": None})
        assert stateless.status_code == 422 and error_code(stateless) == "invalid_request"
    await app.state.services.store.close()


async def test_a_version_keeps_each_consumers_load_as_its_answer_gave_it(redis_backend, group):
    """With the rates in the request (nothing else keeps them), GET /v1/groups/{g} gives each consumer's load from
    the answer that stored the version: the same whichever core computed it; the next version replaces them."""
    rates = [[70.5, 20.25, 55, 30, 0.1], [10, 20.25, 95, 30, 44.4]]
    kept: dict[str, list[dict[str, float]]] = {}
    for core in ("auto", "python"):
        app = create_app(Settings(redis_url=redis_backend.url, core=core))
        name = f"{group}-{core}"
        kept[core] = []
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            for window in rates:
                partitions = [{"topic": "t", "partition": p, "rate": r} for p, r in enumerate(window)]
                body = {"algorithm": "bfd", "capacity": 100, "group": name, "partitions": partitions}
                answer = (await http.post("/v1/assign", json=body)).json()
                state = (await http.get(f"/v1/groups/{name}")).json()
                assert state["version"] == answer["version"]
                assert state["loads"] == {c["id"]: c["load"] for c in answer["consumers"]}
                kept[core].append(state["loads"])
        await app.state.services.store.close()
    assert kept["auto"] == kept["python"] and kept["auto"][0] != kept["auto"][1]
    assert sum(kept["auto"][1].values()) == pytest.approx(sum(rates[1]))


async def test_delete_group(client, group):
    await client.post("/v1/assign", json=request_body(group=group))
    assert (await client.delete(f"/v1/groups/{group}")).status_code == 204
    assert (await client.get(f"/v1/groups/{group}")).status_code == 404
    gone = await client.delete(f"/v1/groups/{group}")
    assert gone.status_code == 404 and error_code(gone) == "group_not_found"
    assert error_code(await client.get(f"/v1/groups/{group}/history")) == "group_not_found"
    assert error_code(await client.get(f"/v1/groups/{group}/rates")) == "group_not_found"


async def test_bad_group_name_and_unknown_route(client):
    response = await client.get("/v1/groups/has space")
    assert response.status_code == 422 and error_code(response) == "invalid_request"
    assert error_code(await client.get("/v2/nothing")) == "not_found"
    assert error_code(await client.delete("/v1/assign")) == "method_not_allowed"


async def test_algorithms_lists_the_registry_with_schemas(client):
    listing = msgspec.json.decode((await client.get("/v1/algorithms")).content, type=codec.AlgorithmList)
    names = {a.name for a in listing.algorithms}
    assert {"nf", "ff", "bf", "wf", "nfd", "ffd", "bfd", "wfd", "mwf", "mbf", "mwfp", "mbfp"} <= names
    assert all(a.params.get("type") == "object" for a in listing.algorithms)


PAPER_ORDER = ["nf", "ff", "bf", "wf", "nfd", "ffd", "bfd", "wfd", "mwf", "mbf", "mwfp", "mbfp"]
"""Landau et al. §VI-A's twelve, as the paper lists them."""


@pytest.mark.parametrize("core", ["auto", "python"])
async def test_algorithms_show_their_traits(redis_backend, core):
    """Each algorithm's place among the paper's twelve, whether it is cheap enough for the event loop, and
    whether this service computes it with the compiled core: the extension's own table, and GROUPFIT_CORE."""
    app = create_app(Settings(redis_url=redis_backend.url, core=core))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        listing = msgspec.json.decode((await c.get("/v1/algorithms")).content, type=codec.AlgorithmList).algorithms
    await app.state.services.store.close()
    paper = sorted((a for a in listing if a.paper is not None), key=lambda a: a.paper or 0)
    assert [a.name for a in paper] == PAPER_ORDER and [a.paper for a in paper] == list(range(1, 13))
    cheap = {a.name for a in listing if a.cheap}
    assert set(PAPER_ORDER) | {"range", "roundrobin", "sticky", "linear"} == cheap
    assert {"exact", "repack", "kip441", "least-loaded"}.isdisjoint(cheap)
    compiled = {a.name for a in listing if a.compiled}
    assert compiled == (set(native.ALGORITHMS) if core == "auto" else set())
    assert core == "python" or not native.AVAILABLE or {*PAPER_ORDER, "least-loaded"} <= compiled


async def test_evaluate(client, reference_stream_path):
    stream = json.loads(reference_stream_path.read_text())[:10]
    response = await client.post("/v1/evaluate", json={"stream": stream, "capacity": 100, "algorithms": ["mwf", "bfd"]})
    assert response.status_code == 200
    results = msgspec.json.decode(response.content, type=codec.EvaluateResponse).results
    assert set(results) == {"mwf", "bfd"} and results["mwf"].iterations == 10 and results["mwf"].rscore[0] == 0
    unknown = await client.post("/v1/evaluate", json={"stream": stream, "capacity": 100, "algorithms": ["x"]})
    assert error_code(unknown) == "unknown_algorithm"
    with_latency = await client.post(
        "/v1/evaluate",
        json={
            "stream": stream,
            "capacity": 100,
            "algorithms": ["mwf", "kd_15"],
            "latency": {"consumer_throughput": 133},
        },
    )
    results = msgspec.json.decode(with_latency.content, type=codec.EvaluateResponse).results
    assert results["kd_15"].latency.p99 >= results["mwf"].latency.p99 >= 0
    too_long = await client.post(
        "/v1/evaluate", json={"stream": stream * 20, "capacity": 100, "algorithms": ["mwf"] * 10}
    )
    assert too_long.status_code == 422 and error_code(too_long) == "too_many_partitions"


async def test_health_ready_and_metrics(client, group):
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/readyz")).json() == {"status": "ready"}
    await client.post("/v1/assign", json=request_body(group=group))
    text = (await client.get("/metrics")).text
    assert 'groupfit_http_requests_total{method="POST",route="/v1/assign",status="200"}' in text
    assert 'groupfit_http_request_duration_seconds_count{method="POST",route="/v1/assign",status="200"}' in text
    assert 'groupfit_assignment_compute_seconds_count{algorithm="mwf"}' in text
    assert f'groupfit_group_consumers{{group="{group}"}} 4.0' in text
    assert (await client.delete(f"/v1/groups/{group}")).status_code == 204
    assert f'group="{group}"' not in (await client.get("/metrics")).text


async def test_store_down_gives_503_but_assign_without_group_works():
    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0", redis_timeout_s=0.2))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        down = await client.get("/v1/groups/any")
        assert down.status_code == 503 and error_code(down) == "store_unavailable"
        assert down.headers["retry-after"] == "1"
        assert error_code(await client.get("/readyz")) == "store_unavailable"
        assert error_code(await client.post("/v1/assign", json=request_body(group="any"))) == "store_unavailable"
        assert (await client.post("/v1/assign", json=request_body())).status_code == 200


async def test_a_redis_that_does_not_answer_gives_503_within_the_timeout():
    """A server that accepts connections and never replies (a hung Redis): 503 after redis_timeout_s."""

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the service gives up and closes the connection
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    app = create_app(Settings(redis_url=f"redis://127.0.0.1:{port}/0", redis_timeout_s=0.3))
    async with server, httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        for method, path, body in (("GET", "/v1/groups/any", None), ("POST", "/v1/assign", request_body(group="g"))):
            started = time.perf_counter()
            response = await client.request(method, path, json=body)
            assert response.status_code == 503 and error_code(response) == "store_unavailable"
            assert 0.3 <= time.perf_counter() - started < 1.0
        await app.state.services.store.close()


async def test_the_contracts_examples_are_real_answers(client, group):
    assert (await client.post("/v1/assign", json=examples.ASSIGN_REQUEST)).json() == examples.ASSIGN_ANSWER
    duplicate = await client.post("/v1/assign", json=examples.DUPLICATE_PARTITION_REQUEST)
    assert duplicate.status_code == 422 and duplicate.json() == examples.DUPLICATE_PARTITION_ERROR
    for _ in range(3):
        await client.post("/v1/assign", json={**examples.ASSIGN_REQUEST, "group": group})
    stale = await client.post("/v1/assign", json={**examples.ASSIGN_REQUEST, "group": group, "expected_version": 2})
    assert stale.status_code == 409
    assert stale.json() == json.loads(json.dumps(examples.VERSION_CONFLICT_ERROR).replace("'orders'", repr(group)))
    assert (await client.put(f"/v1/groups/{group}/rates", json=examples.RATES_UPDATE)).status_code == 200
    assert (await client.get(f"/v1/groups/{group}/rates")).json()["partitions"] == [
        {"lag": None, **p} for p in examples.RATES_UPDATE["partitions"]
    ]


def test_openapi_file_matches_the_app():
    committed = (ROOT / "openapi" / "openapi.json").read_text()
    assert committed == openapi_json(), "openapi/openapi.json is stale: run `make openapi`"


# ---- Zones (issue #29): a sized group's racks are stored with its version and stand for previous_racks next
# time; the history and the metrics carry the cross-zone rate; stored rates may carry racks; a rack-free group
# has none of it.

RACKS = ("eu-1a", "eu-1b", "eu-1c")


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
        json={
            "algorithm": "mwf",
            "capacity": 100,
            "group": group,
            "partitions": partitions([45.0, 30.0, 50.0, 55.0, 70.0, 50.0]),
        },
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
            "partitions": [
                {"topic": "t", "partition": p, "rate": 1.0, "racks": [f"r{p}-{i}" for i in range(26)]}
                for p in range(40)
            ],
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
