"""Several replicas of the service on one Redis Cluster (three Valkey primaries), all real processes: racing
leaders split across replicas, idempotent retries that land on another replica, and a cluster node stopped
and restarted under load."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from app.store.groups import GroupStore
from tests.conftest import LiveService

pytestmark = pytest.mark.integration

PARTITIONS = [{"topic": "t", "partition": p, "rate": 20 + 7 * p} for p in range(12)]


def body(group: str, **extra) -> dict:
    return {"algorithm": "mwf", "capacity": 100, "partitions": PARTITIONS, "group": group, **extra}


@pytest.fixture(scope="module")
def replicas(redis_cluster, tmp_path_factory) -> Iterator[list[LiveService]]:
    """Two `groupfit serve` processes on separate ports, both on the cluster (REDIS_URL redis+cluster://…)."""
    folder = tmp_path_factory.mktemp("replicas")
    services = [LiveService(redis_cluster.url, folder / f"replica{i}.log").start() for i in range(2)]
    yield services
    for service in services:
        service.stop()


def groups_by_node(cluster, count: int) -> dict[int, list[str]]:
    """`count` fresh group names per node, found by the node that serves each one's state key."""
    keys = GroupStore(cluster.url, "groupfit", 1.0, 1, 1)  # the service's key function, default prefix
    found: dict[int, list[str]] = {i: [] for i in range(len(cluster.nodes))}
    while any(len(names) < count for names in found.values()):
        name = f"n-{uuid.uuid4().hex[:8]}"
        node = cluster.node_of(keys._key(name, "state"))
        if len(found[node]) < count:
            found[node].append(name)
    return found


async def history_of(client: httpx.AsyncClient, group: str) -> list[int]:
    answer = await client.get(f"/v1/groups/{group}/history", params={"limit": 1000})
    return [v["version"] for v in answer.json()["versions"]]


async def test_racing_leaders_across_two_replicas_store_one_version_per_expected_version(replicas):
    group = f"race-{uuid.uuid4().hex[:6]}"
    clients = [httpx.AsyncClient(base_url=s.url, timeout=30) for s in replicas]
    try:
        assert (await clients[0].post("/v1/assign", json=body(group))).json()["version"] == 1
        for expected in range(1, 6):
            answers = await asyncio.gather(
                *(clients[i % 2].post("/v1/assign", json=body(group, expected_version=expected)) for i in range(50))
            )
            winners = [a for a in answers if a.status_code == 200]
            assert len(winners) == 1 and winners[0].json()["version"] == expected + 1
            assert sorted(a.status_code for a in answers) == [200] + [409] * 49
            assert {a.json()["error"]["details"]["current_version"] for a in answers if a.status_code == 409} == {
                expected + 1
            }
        # One request retried with its Idempotency-Key on both replicas at once: stored once, one answer.
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        retries = await asyncio.gather(
            *(clients[i % 2].post("/v1/assign", json=body(group), headers=headers) for i in range(20))
        )
        assert {r.status_code for r in retries} == {200}
        assert len({r.content for r in retries}) == 1 and retries[0].json()["version"] == 7
        late = await clients[1].post("/v1/assign", json=body(group), headers=headers)
        assert late.content == retries[0].content
        for client in clients:
            assert await history_of(client, group) == list(range(7, 0, -1)), "history: no gap, no duplicate"
            assert (await client.get(f"/v1/groups/{group}")).json()["version"] == 7
    finally:
        for client in clients:
            await client.aclose()


async def test_a_cluster_node_stopped_under_load(replicas, redis_cluster):
    """Node 1 stops while both replicas are under load: groups on the other nodes keep being served, groups on
    node 1 get 503 store_unavailable quickly, and once the node is back they are served again without any
    restart of the replicas; every acknowledged version is still stored, with a contiguous history."""
    by_node = groups_by_node(redis_cluster, 3)
    down_node, groups = 1, [g for names in by_node.values() for g in names]
    acknowledged: dict[str, list[int]] = {g: [] for g in groups}
    refused: dict[str, list[float]] = {g: [] for g in groups}
    reasons: list[tuple[str, float, str]] = []  # (group, when, why): shown when an assertion fails
    other: list[tuple[str, int]] = []
    stop = asyncio.Event()
    clients = [httpx.AsyncClient(base_url=s.url, timeout=10) for s in replicas]

    async def leader(group: str, client: httpx.AsyncClient) -> None:
        while not stop.is_set():
            started = time.perf_counter()
            answer = await client.post("/v1/assign", json=body(group))
            if answer.status_code == 200:
                acknowledged[group].append(answer.json()["version"])
            elif answer.status_code == 503 and answer.json()["error"]["code"] == "store_unavailable":
                refused[group].append(time.perf_counter() - started)
                reasons.append((group, round(time.monotonic() - began, 2), answer.json()["error"]["details"]["reason"]))
            else:
                other.append((group, answer.status_code))
            await asyncio.sleep(0.02)

    began = time.monotonic()
    try:
        workers = [asyncio.create_task(leader(g, clients[i % 2])) for i, g in enumerate(groups)]
        await asyncio.sleep(1)
        events = {"stop": round(time.monotonic() - began, 2)}
        await asyncio.to_thread(redis_cluster.stop_node, down_node)
        try:
            await asyncio.sleep(4)  # past the cluster's node timeout (2 s): the others mark the node failed
            ready = [(await c.get("/readyz")).status_code for c in clients]
            assert ready == [200, 200], "the other nodes answer: the replicas stay ready"
        finally:
            events["start"] = round(time.monotonic() - began, 2)
            await asyncio.to_thread(redis_cluster.start_node, down_node)
            events["started"] = round(time.monotonic() - began, 2)
        since_restart = {g: len(acknowledged[g]) for g in groups}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(len(acknowledged[g]) == since_restart[g] for g in groups):
            await asyncio.sleep(0.1)
        stop.set()
        await asyncio.gather(*workers)
        assert not other, other
        for group in by_node[down_node]:
            assert refused[group], f"{group} lives on the stopped node: it must have been refused"
            assert max(refused[group]) < 3, "a stopped node must not hang a request"
            assert len(acknowledged[group]) > since_restart[group], f"{group} did not recover by itself"
        for node, names in by_node.items():
            if node != down_node:
                wrong = [r for r in reasons if r[0] in names]
                assert not wrong, f"groups on the other nodes must keep being served: {wrong[:10]}, {events}"
        for group in groups:
            versions = acknowledged[group]
            assert versions == sorted(set(versions)), "each acknowledged version once, in order"
            history = await history_of(clients[0], group)
            assert history == list(range(history[0], 0, -1)) and history[0] >= versions[-1]
            assert set(versions) <= set(history), "an acknowledged version was lost"
    finally:
        stop.set()
        for client in clients:
            await client.aclose()
