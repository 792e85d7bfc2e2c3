"""The aiokafka assignor's reassignment check (REASS): asked only by the member that led the group with groupfit's
answer, in the background, and a rejoin at most once per minimum interval — against the live service where it asks
one, with aiokafka's own coordinator class where it rejoins."""

from __future__ import annotations

import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.consumer.group_coordinator import GroupCoordinator
from groupfit_client import GroupfitClient, PartitionRate
from groupfit_client.assignor import enforce_if_due, groupfit_assignor

from tests.clients.test_assignor import Cluster, member

BALANCED = [30.0] * 6
SKEWED = [60.0, 30.0, 20.0, 10.0, 10.0, 10.0]


class Rejoins:
    """Stands in for aiokafka's GroupCoordinator: only its request_rejoin(), counted."""

    def __init__(self) -> None:
        self.requested = 0

    def request_rejoin(self) -> None:
        self.requested += 1


class Consumer:
    """What enforce_if_due reads of an AIOKafkaConsumer (the same attribute names: see the test below)."""

    def __init__(self, assignor: type) -> None:
        self._partition_assignment_strategy = (assignor,)
        self._coordinator = Rejoins()


async def test_the_aiokafka_internals_the_check_relies_on_are_there():
    assignor = groupfit_assignor("http://127.0.0.1:1", "g", "a", capacity=100, reassign_interval_s=1)
    consumer = AIOKafkaConsumer(
        "t", bootstrap_servers="127.0.0.1:1", group_id="g", partition_assignment_strategy=(assignor,)
    )
    assert consumer._partition_assignment_strategy == (assignor,)
    assert hasattr(consumer, "_coordinator") and callable(GroupCoordinator.request_rejoin)


def test_no_check_without_an_interval_or_the_lead_and_bad_settings_are_refused():
    assignor = groupfit_assignor("http://127.0.0.1:1", "g", "a", capacity=100)
    assert enforce_if_due(Consumer(assignor)) is None
    leading = groupfit_assignor("http://127.0.0.1:1", "g", "a", capacity=100, reassign_interval_s=0.001)
    assert enforce_if_due(Consumer(leading)) is None  # it led no generation
    assert enforce_if_due(object()) is None  # not an aiokafka consumer with this assignor
    with pytest.raises(ValueError, match="reassign_min_interval_s"):
        groupfit_assignor("http://127.0.0.1:1", "g", "a", capacity=100, reassign_min_interval_s=-1)


def poll(consumer: Consumer, calls: int) -> str | None:
    for _ in range(calls):
        reason = enforce_if_due(consumer)
        if reason is not None:
            return reason
        time.sleep(0.01)
    return None


def test_the_leader_rejoins_once_when_the_rates_drift(live_service):
    group = f"reass-{uuid.uuid4().hex[:6]}"
    service = GroupfitClient(live_service.url)
    service.put_rates(group, [PartitionRate("t", p, r) for p, r in enumerate(BALANCED)], "2026-11-22T10:00:00Z")
    leader = groupfit_assignor(
        live_service.url, group, "a", capacity=100, reassign_interval_s=0.001, reassign_min_interval_s=5
    )
    follower = groupfit_assignor(live_service.url, group, "b", capacity=100, reassign_interval_s=0.001)
    result = leader.assign(Cluster({"t": 6}), {"m-a": member("a"), "m-b": member("b")})
    assert leader.last_source == "service"
    for assignor, member_id in ((leader, "m-a"), (follower, "m-b")):
        assignor.on_assignment(result[member_id])
    stored = service.group(group).assignment
    # mwf gave each 90 of 180; now a's partitions become hot, b's cool, the members stay
    hot = {tp.partition for tp in stored["a"]}
    rates = [60.0 if p == min(hot) else 30.0 if p in hot else 10.0 for p in range(6)]  # a: 120, b: 30
    service.put_rates(group, [PartitionRate("t", p, r) for p, r in enumerate(rates)], "2026-11-22T10:00:30Z")
    assert service.scale(group).action == "reass"
    young = service.scale(group, min_interval_s=5)  # what the leader asks: no rebalance 5 s after the last
    assert young.action == "none" and "min_interval_s 5" in young.reason

    leading, following = Consumer(leader), Consumer(follower)
    reason = poll(leading, 1000)
    assert reason is not None and "rebalance" in reason and leading._coordinator.requested == 1
    assert poll(following, 20) is None and following._coordinator.requested == 0
    assert poll(leading, 50) is None and leading._coordinator.requested == 1  # within the minimum interval
    # the rebalance that follows: the leader's assign keeps every member within its capacity
    again = leader.assign(Cluster({"t": 6}), {"m-a": member("a"), "m-b": member("b")})
    loads = {m: sum(rates[p] for _, ps in a.assignment for p in ps) for m, a in again.items()}
    assert max(loads.values()) <= 100 and service.scale(group).action == "none"
