"""The HTTP client against the live service (typed results, quoted paths, the sync and async clients alike) and
its retry and timeout rules against recording transports; test_contract.py checks it against openapi/openapi.json."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from groupfit_client import (
    AlgorithmInfo,
    Assignment,
    AsyncGroupfitClient,
    Evaluation,
    GroupfitClient,
    GroupfitError,
    GroupList,
    GroupState,
    HistoryEntry,
    LatencyFigures,
    Move,
    OverloadedPartition,
    PartitionRate,
    Placement,
    RatesAck,
    RatesWindow,
    Reassignment,
    ReassignmentPartition,
    Replay,
    ReplayRun,
    ReplicaMove,
    ScaleSignal,
    StoredRates,
    TopicPartition,
    _core,
)
from groupfit_client.client import _ClientBase, _Method

from app.api.examples import PLACEMENT_REQUEST

ROOT = Path(__file__).resolve().parents[2]
REQUEST = {
    "algorithm": "bfd",
    "capacity": 10,
    "partitions": [{"topic": "t", "partition": p, "rate": 4} for p in range(5)],
}
RATES = [PartitionRate("t", p, 4.0, lag=p * 10) for p in range(5)]
WINDOW_END = "2026-11-22T10:00:00Z"
STREAM = [{"t": {"0": 4.0, "1": 6.0, "2": 3.0}}, {"t": {"0": 7.0, "1": 2.0, "2": 5.0}}]
# The example for the heuristic (the exact solver's answer may depend on its time budget), with the room it needs
HEURISTIC_PLACEMENT = {
    **PLACEMENT_REQUEST,
    "solver": "heuristic",
    "brokers": [{**broker, "disk": 2000, "network": 20} for broker in PLACEMENT_REQUEST["brokers"]],
    "options": {"objective": "balance"},
}


def fresh_group(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def stored_group(client: GroupfitClient, name: str) -> str:
    """A group with rates and one stored assignment."""
    client.put_rates(name, RATES, WINDOW_END)
    client.assign_idempotent({"algorithm": "bfd", "capacity": 10, "group": name})
    return name


def test_sync_client_round_trip(live_service):
    group = fresh_group("client")
    with GroupfitClient(live_service.url) as client:
        assert client.healthy()
        assert "mwf" in {a.name for a in client.algorithms()}
        ack = client.put_rates(group, RATES, dt.datetime(2026, 11, 22, 10, tzinfo=dt.UTC))
        assert (ack.group, ack.partition_count, ack.window_end) == (
            group,
            5,
            dt.datetime(2026, 11, 22, 10, tzinfo=dt.UTC),
        )
        answer = client.assign_idempotent({"algorithm": "bfd", "capacity": 10, "group": group})
        assert isinstance(answer, Assignment) and answer.version == 1 and answer.consumer_count == 3
        assert answer.raw["version"] == 1  # the JSON document stays reachable
        assert sorted(answer.owner) == [TopicPartition("t", p) for p in range(5)]
        assert all(isinstance(tp, TopicPartition) for held in answer.assignment.values() for tp in held)
        assert {c.id for c in answer.consumers} == set(answer.assignment)
        stored = client.group(group)
        assert (stored.version, stored.assignment) == (1, answer.assignment)
        assert [entry.version for entry in client.history(group)] == [1]
        rates = client.rates(group)
        assert rates.rates == {TopicPartition("t", p): 4.0 for p in range(5)}
        assert rates.lags[TopicPartition("t", 3)] == 30
        with pytest.raises(GroupfitError) as error:
            client.assign({"algorithm": "bfd", "capacity": 10, "group": group, "expected_version": 0})
        assert error.value.code == "version_conflict" and error.value.status == 409
        assert error.value.details["current_version"] == 1
        client.delete_group(group)
        with pytest.raises(GroupfitError) as error:
            client.group(group)
        assert error.value.code == "group_not_found"


def test_moves_and_delta_are_typed(live_service):
    group = fresh_group("moves")
    with GroupfitClient(live_service.url) as client:
        client.assign_idempotent({**REQUEST, "group": group})
        heavier = [PartitionRate("t", p, 9.0 if p == 0 else 4.0) for p in range(5)]  # t/0 no longer fits beside one
        answer = client.assign_idempotent({**REQUEST, "partitions": heavier, "group": group}, delta="dense")
    assert answer.moves and all(isinstance(m, Move) and m.from_ != m.to for m in answer.moves)
    moved = {m.partition for m in answer.moves}
    assert all(answer.owner[m.partition] == m.to for m in answer.moves)
    stops = {answer.delta.columns[cell.column] for cell in answer.delta.cells if cell.change == -1}
    assert stops == moved
    assert answer.delta.matrix is not None and len(answer.delta.matrix) == len(answer.delta.rows)


def test_an_answer_without_its_delta(live_service):
    with GroupfitClient(live_service.url) as client:
        full = client.assign({**REQUEST, "previous": {"a": [TopicPartition("t", p) for p in range(5)]}})
        lean = client.assign({**REQUEST, "previous": {"a": [TopicPartition("t", p) for p in range(5)]}}, delta="none")
    assert lean.delta is None and "delta" not in lean.raw and full.delta is not None
    assert (lean.assignment, lean.moves, lean.rscore) == (full.assignment, full.moves, full.rscore) and lean.moves


def test_dense_true_is_deprecated_for_delta_dense():
    with pytest.warns(DeprecationWarning, match='delta="dense"'):
        call = _core.assign(REQUEST, dense=True)
    assert call.params == {"delta": "dense"} and _core.assign(REQUEST).params == {}


def test_an_overloaded_member_is_reported(live_service):
    with GroupfitClient(live_service.url) as client:
        answer = client.assign({**REQUEST, "members": ["only"]})
    assert answer.overloaded_members == ["only"] and answer.recommended_consumers == 3  # two rates of 4 per 10


def test_a_partition_over_capacity_is_reported(live_service):
    with GroupfitClient(live_service.url) as client:
        answer = client.assign({**REQUEST, "partitions": [PartitionRate("t", 0, 12.0)]})
    assert answer.overloaded_partitions == [
        OverloadedPartition(TopicPartition("t", 0), 12.0, answer.owner[TopicPartition("t", 0)])
    ]


def test_operator_calls_round_trip(live_service):
    """The listing, the rates history, its replay and the scaling signal of one group, as the rates change."""
    group = fresh_group("operator")
    ends = [dt.datetime(2026, 11, 22, 10, 0, s, tzinfo=dt.UTC) for s in (0, 30)]
    with GroupfitClient(live_service.url) as client:
        client.put_rates(group, RATES, ends[0])
        client.assign_idempotent({"algorithm": "bfd", "capacity": 10, "group": group})
        client.put_rates(group, [PartitionRate("t", p, 9.0) for p in range(5)], ends[1])  # one per consumer now
        [summary] = client.groups(contains=group).groups
        assert (summary.group, summary.version, summary.algorithm, summary.capacity) == (group, 1, "bfd", 10)
        assert (summary.consumers, summary.partition_count, summary.rates_window_end) == (3, 5, ends[1])
        assert summary.rates_age_s is not None and summary.rates_age_s >= 0
        windows = client.rates_history(group)
        assert [w.window_end for w in windows] == ends  # oldest first
        assert windows[0].rates[TopicPartition("t", 3)] == 4.0 and windows[1].rates[TopicPartition("t", 3)] == 9.0
        assert [w.window_end for w in client.rates_history(group, limit=1)] == ends[1:]
        signal = client.scale(group)
        assert (signal.needed, signal.current, signal.lower_bound, signal.action) == (5, 3, 5, "up")
        assert signal.total_rate == 45 and signal.rates_window_end == ends[1] and len(signal.overloaded) == 2
        replay = client.replay(group, ["bfd", "mwf"], latency=False)
        assert (replay.windows, replay.window_ends, replay.iteration_s, replay.capacity) == (2, ends, 30, 10)
        assert all(run.consumers == [3, 5] and run.latency is None for run in replay.results.values())
        assert client.replay(group, ["bfd"], windows=1).results["bfd"].consumers == [5]
        client.put_rates(group + "-2", RATES, ends[0])
        first = client.groups(contains=group, limit=1)
        assert [g.group for g in first.groups] == [group] and first.truncated and first.next == group
        second = client.groups(contains=group, limit=1, after=first.next)
        assert [g.group for g in second.groups] == [group + "-2"]
        client.delete_group(group)
        client.delete_group(group + "-2")
        assert client.groups(contains=group).groups == []


def test_a_replica_placement_is_typed(live_service):
    with GroupfitClient(live_service.url) as client:
        plan = client.place_replicas(PLACEMENT_REQUEST, timeout=30)
    # broker 1 holds 1 100 of its 1 000: a 400-byte replica of orders/0 leaves it for broker 3 (as in the example)
    assert plan.moves == [ReplicaMove(TopicPartition("orders", 0), 1, 3, 400.0)] and plan.bytes_moved == 400
    assert plan.replicas[TopicPartition("orders", 0)] == [2, 3] and plan.optimal and plan.solver == "exact"
    assert plan.reassignment.partitions == [ReassignmentPartition(TopicPartition("orders", 0), [2, 3])]
    assert plan.reassignment.raw == {
        "version": 1,
        "partitions": [{"topic": "orders", "partition": 0, "replicas": [2, 3]}],
    }
    assert plan.peak_after.disk == pytest.approx(0.8) and plan.peak_before.disk == pytest.approx(1.1)
    assert {b.id: (b.replicas_before, b.replicas_after) for b in plan.brokers} == {1: (3, 2), 2: (2, 2), 3: (1, 2)}


# Each new call with arguments the service refuses (a group made by `stored_group`), the stable code and status.
REFUSED: dict[str, tuple[Callable[[str], tuple[tuple, dict]], str, int]] = {
    "groups": (lambda g: ((), {"limit": 0}), "invalid_request", 422),
    "scale": (lambda g: ((f"{g}-none",), {}), "group_not_found", 404),
    "rates_history": (lambda g: ((f"{g}-none",), {}), "group_not_found", 404),
    "replay": (lambda g: ((g, ["mwf", "nope"]), {}), "unknown_algorithm", 422),
    "place_replicas": (
        lambda g: (({**PLACEMENT_REQUEST, "brokers": PLACEMENT_REQUEST["brokers"][:2]},), {}),
        "placement_infeasible",
        422,
    ),
}


@pytest.mark.parametrize("method", sorted(REFUSED))
def test_refusals_arrive_as_the_typed_error_in_both_clients(live_service, method):
    arguments, code, status = REFUSED[method]
    with GroupfitClient(live_service.url) as client:
        args, kwargs = arguments(stored_group(client, fresh_group("refused")))
        with pytest.raises(GroupfitError) as blocking:
            getattr(client, method)(*args, **kwargs)

    async def awaited() -> GroupfitError:
        async with AsyncGroupfitClient(live_service.url) as async_client:
            with pytest.raises(GroupfitError) as error:
                await getattr(async_client, method)(*args, **kwargs)
            return error.value

    for error in (blocking.value, asyncio.run(awaited())):
        assert (error.code, error.status) == (code, status) and error.message


def test_scale_without_rates_is_no_rates(live_service):
    group = fresh_group("no-rates")
    with GroupfitClient(live_service.url) as client:
        client.assign_idempotent({**REQUEST, "group": group})  # rates in the request only: none stored
        with pytest.raises(GroupfitError) as error:
            client.scale(group)
    assert (error.value.code, error.value.status) == ("no_rates", 422)


# -- group names are one path segment, whatever they hold ------------------------------------------

# The group name pattern allows every printable ASCII character but space and '/': these would, unquoted,
# end the path ('#', '?'), be decoded into another name ('%2F') or be dropped by URL normalisation ('.').
AWKWARD_NAMES = ["a#b", "a?b=c", "a%2Fb", "a%b", "..", ".", "a&b+c", "~a!b"]


@pytest.mark.parametrize("name", AWKWARD_NAMES)
def test_group_names_reach_the_service_whole(live_service, name):
    name = f"{name}-{uuid.uuid4().hex[:4]}" if name not in (".", "..") else name
    with GroupfitClient(live_service.url) as client:
        try:
            assert client.put_rates(name, RATES, WINDOW_END).group == name
            assert client.assign_idempotent({"algorithm": "bfd", "capacity": 10, "group": name}).group == name
            assert client.group(name).group == name
            assert client.rates(name).group == name
            assert [entry.version for entry in client.history(name)] == [1]
            prefix = re.split(r"[#?%]", name)[0]
            if prefix != name:  # what an unquoted path would have named: never touched
                with pytest.raises(GroupfitError) as error:
                    client.group(prefix)
                assert error.value.code == "group_not_found"
        finally:
            client.delete_group(name)
        with pytest.raises(GroupfitError):
            client.rates(name)


def test_every_path_segment_is_quoted():
    assert _core.path("v1", "groups", "a#b") == "/v1/groups/a%23b"
    assert _core.path("v1", "groups", "a/b", "rates") == "/v1/groups/a%2Fb/rates"
    assert _core.path("v1", "groups", "..") == "/v1/groups/%2E%2E"
    seen: list[bytes] = []
    transport = httpx.MockTransport(lambda request: seen.append(request.url.raw_path) or httpx.Response(204))
    with GroupfitClient("http://groupfit", transport=transport) as client:
        client.delete_group("a#b?c")
    assert seen == [b"/v1/groups/a%23b%3Fc"]


# -- the sync and async clients: the same calls, the same typed results ---------------------------

# Each public method: its arguments for a group that holds rates and one assignment, and its result type.
CALLS: dict[str, tuple[Callable[[str], tuple[tuple, dict]], Any]] = {
    "assign": (lambda g: ((REQUEST,), {"delta": "dense"}), Assignment),
    "assign_idempotent": (lambda g: (({**REQUEST, "group": g, "dry_run": True},), {}), Assignment),
    "algorithms": (lambda g: ((), {}), AlgorithmInfo),
    "group": (lambda g: ((g,), {}), GroupState),
    "history": (lambda g: ((g,), {"limit": 5}), HistoryEntry),
    "delete_group": (lambda g: ((g,), {}), type(None)),
    "put_rates": (lambda g: ((g, RATES, WINDOW_END), {}), RatesAck),
    "rates": (lambda g: ((g,), {}), StoredRates),
    "evaluate": (lambda g: ((STREAM, 10.0, ["bfd", "mwf"]), {"latency": {"consumer_throughput": 12.0}}), Evaluation),
    "healthy": (lambda g: ((), {"timeout": 2.0}), bool),
    "groups": (lambda g: ((), {"contains": g, "limit": 5}), GroupList),
    "scale": (lambda g: ((g,), {"algorithm": "bfd", "params": {}, "f_up": 0.9, "min_gain": 0.1}), ScaleSignal),
    "rates_history": (lambda g: ((g,), {"limit": 5}), RatesWindow),
    "replay": (lambda g: ((g, ["bfd", "mwf"], 10), {"consumer_throughput": 12.0, "rebalance_s": 1.0}), Replay),
    "place_replicas": (lambda g: ((HEURISTIC_PLACEMENT,), {}), Placement),
}
MUTATING = {"delete_group", "put_rates"}  # each client gets its own group


def test_every_method_is_in_the_comparison():
    methods = {name for name, value in vars(_ClientBase).items() if isinstance(value, _Method)}
    assert methods == set(CALLS)
    assert all(hasattr(GroupfitClient, m) and hasattr(AsyncGroupfitClient, m) for m in methods)


def without_times(result: Any) -> Any:
    """A put_rates acknowledgement without what differs between two writes (when, and to which group); a
    listing without the age of the rates, which grows between two reads."""
    if isinstance(result, RatesAck):
        return dataclasses.replace(result, group="", updated_at=None)
    if isinstance(result, GroupList):
        return dataclasses.replace(result, groups=[dataclasses.replace(g, rates_age_s=None) for g in result.groups])
    return result


@pytest.mark.parametrize("method", sorted(CALLS))
def test_sync_and_async_clients_give_the_same_typed_results(live_service, method):
    arguments, result_type = CALLS[method]
    with GroupfitClient(live_service.url) as client:
        sync_group = stored_group(client, fresh_group("same"))
        async_group = stored_group(client, fresh_group("same")) if method in MUTATING else sync_group
        args, kwargs = arguments(sync_group)
        blocking = getattr(client, method)(*args, **kwargs)

    async def awaited() -> Any:
        async with AsyncGroupfitClient(live_service.url) as async_client:
            args, kwargs = arguments(async_group)
            return await getattr(async_client, method)(*args, **kwargs)

    result = asyncio.run(awaited())
    items = result if isinstance(result, list) else [result]
    assert items and all(isinstance(item, result_type) for item in items)
    assert without_times(result) == without_times(blocking)
    if isinstance(result, Evaluation):
        assert set(result.results) == {"bfd", "mwf"}
        assert all(isinstance(run.latency, LatencyFigures) and run.iterations == 2 for run in result.results.values())
    if isinstance(result, Replay):
        assert (result.group, result.windows, set(result.results)) == (sync_group, 1, {"bfd", "mwf"})
        assert all(isinstance(run, ReplayRun) and run.consumers == [3] for run in result.results.values())
    if isinstance(result, GroupList):
        assert [(g.group, g.version, g.partition_count) for g in result.groups] == [(sync_group, 1, 5)]
    if isinstance(result, Placement):
        assert all(isinstance(m, ReplicaMove) for m in result.moves) and isinstance(result.reassignment, Reassignment)
        assert set(result.replicas) == {TopicPartition("orders", p) for p in range(3)}


# -- per-call timeout, retry safety ---------------------------------------------------------------


def recording_transport(requests: list[httpx.Request], answers: list[tuple[int, dict]]) -> httpx.MockTransport:
    """Records every request; answers (status, JSON body) with `answers` in turn, the last for ever after."""

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        status, body = answers[min(len(requests), len(answers)) - 1]
        return httpx.Response(status, json=body)

    return httpx.MockTransport(handle)


def test_per_call_timeout_reaches_the_transport_and_leaves_the_client_alone():
    requests: list[httpx.Request] = []
    algorithms = (200, {"algorithms": []})
    with GroupfitClient("http://groupfit", timeout=5.0, transport=recording_transport(requests, [algorithms])) as c:
        c.algorithms(timeout=0.25)
        c.algorithms()
        assert c.http.timeout == httpx.Timeout(5.0)

    async def awaited() -> None:
        transport = recording_transport(requests, [algorithms])
        async with AsyncGroupfitClient("http://groupfit", timeout=5.0, transport=transport) as client:
            await client.algorithms(timeout=0.25)

    asyncio.run(awaited())
    reads = [request.extensions["timeout"]["read"] for request in requests]
    assert reads == [0.25, 5.0, 0.25]


UNAVAILABLE = (503, {"error": {"code": "store_unavailable", "message": "down.", "details": None}})
OK = (200, {"algorithms": []})


@pytest.mark.parametrize(
    ("call", "attempts"),
    [
        (lambda c: c.assign({**REQUEST, "group": "g"}), 1),  # stores a version: never sent twice
        (lambda c: c.assign({**REQUEST, "group": "g"}, idempotency_key="k"), 3),
        (lambda c: c.assign_idempotent({**REQUEST, "group": "g"}), 3),
        (lambda c: c.assign({**REQUEST, "group": "g", "dry_run": True}), 3),
        (lambda c: c.assign(REQUEST), 3),  # stores nothing
        (lambda c: c.put_rates("g", RATES, WINDOW_END), 3),
        (lambda c: c.healthy(), 1),  # a probe answers for now
    ],
    ids=["stateful-assign", "keyed-assign", "idempotent-assign", "dry-run", "stateless-assign", "put-rates", "healthy"],
)
def test_503_is_retried_only_when_repeating_is_safe(call, attempts):
    requests: list[httpx.Request] = []
    transport = recording_transport(requests, [UNAVAILABLE])
    with GroupfitClient("http://groupfit", retries=2, backoff_s=0, transport=transport) as client:
        try:
            outcome = call(client)
        except GroupfitError as error:
            outcome = error
    assert len(requests) == attempts
    if isinstance(outcome, GroupfitError):
        assert outcome.code == "store_unavailable" and outcome.status == 503
    else:
        assert outcome is False  # healthy() answers, never raises
    keys = {request.headers.get("idempotency-key") for request in requests}
    assert len(keys) == 1  # a retry repeats the same key


def test_a_retry_that_succeeds_gives_the_answer():
    requests: list[httpx.Request] = []
    transport = recording_transport(requests, [UNAVAILABLE, OK])
    with GroupfitClient("http://groupfit", backoff_s=0, transport=transport) as client:
        assert client.algorithms() == []
    assert len(requests) == 2


def test_connection_errors_are_retried_then_raised():
    client = GroupfitClient("http://127.0.0.1:1", retries=2, backoff_s=0, timeout=0.5)
    with pytest.raises(httpx.TransportError):
        client.algorithms()
    assert not client.healthy()


def test_a_naive_window_end_is_refused_before_sending():
    with pytest.raises(ValueError, match="time zone"):
        _core.put_rates("g", RATES, dt.datetime(2026, 11, 22, 10))


def test_the_package_imports_with_httpx_alone():
    """The assignor (aiokafka) and the controller (confluent-kafka) load on first use only."""
    code = (
        "import sys; sys.modules['aiokafka'] = None; sys.modules['confluent_kafka'] = None\n"
        "import groupfit_client as g\n"
        "assert {'GroupfitClient', 'groupfit_assignor', 'Controller'} <= set(g.__all__)\n"
        "try:\n    g.groupfit_assignor\nexcept ImportError:\n    print('lazy')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "lazy", done.stderr
    import groupfit_client

    assert all(hasattr(groupfit_client, name) for name in groupfit_client.__all__)
    assert (ROOT / "clients" / "python" / "groupfit_client" / "py.typed").exists()
