"""The assignor's leader logic against the live service, without a broker: members' user data in, the
group protocol's assignment out, and every way the service can fail leading to the local fallback."""

from __future__ import annotations

import json
import logging
import re
import uuid

import httpx
import pytest
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.protocol.metadata import MetadataResponse_v1
from groupfit_client import GroupfitClient, PartitionRate, TopicPartition
from groupfit_client.assignor import groupfit_assignor, partition_racks, sticky_fallback

RATES = {0: 70.0, 1: 50.0, 2: 30.0, 3: 20.0, 4: 10.0, 5: 10.0}


class Cluster:
    """The one thing assign() asks of aiokafka's cluster metadata."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.topics[topic]))


def member(
    identity: str, capacity: float | None = None, owned: list | None = None, generation: int = -1, rack: str = ""
) -> ConsumerProtocolMemberMetadata:
    data = {
        "id": identity,
        "owned": owned or [],
        "generation": generation,
        **({"capacity": capacity} if capacity else {}),
        **({"rack": rack} if rack else {}),
    }
    return ConsumerProtocolMemberMetadata(0, ["t"], json.dumps(data).encode())


def held(result: dict[str, ConsumerProtocolMemberAssignment]) -> dict[str, set[int]]:
    return {member_id: {p for _, ps in a.assignment for p in ps} for member_id, a in result.items()}


@pytest.fixture
def group(live_service) -> str:
    name = f"leader-{uuid.uuid4().hex[:6]}"
    GroupfitClient(live_service.url).put_rates(
        name, [PartitionRate("t", p, r) for p, r in RATES.items()], "2026-11-22T10:00:00Z"
    )
    return name


def test_leader_returns_the_services_assignment_keyed_by_member_id(live_service, group):
    assignor = groupfit_assignor(live_service.url, group, "a", capacity=100)
    members = {"member-1": member("a"), "member-2": member("b"), "member-3": member("c")}
    result = assignor.assign(Cluster({"t": 6}), members)
    assert assignor.last_source == "service"
    stored = GroupfitClient(live_service.url).group(group)
    by_identity = {m: {p.partition for p in ps} for m, ps in stored.assignment.items()}
    assert held(result) == {"member-1": by_identity["a"], "member-2": by_identity["b"], "member-3": by_identity["c"]}
    assert all(sum(RATES[p] for p in ps) <= 100 for ps in by_identity.values())
    assert {json.loads(a.user_data)["generation"] for a in result.values()} == {0}


def test_leader_on_stored_rates_asks_once_and_the_service_takes_them(live_service, group):
    """One round trip: the leader sends its partitions without rates and the service takes the stored ones (the
    stored loads are the stored rates'); it never reads GET /v1/groups/{group}/rates."""
    reads = re.compile(r'groupfit_http_requests_total\{[^}]*route="/v1/groups/\{group\}/rates"[^}]*\} (\S+)')

    def rate_reads() -> float:
        return sum(map(float, reads.findall(httpx.get(f"{live_service.url}/metrics").text)))

    GroupfitClient(live_service.url).rates(group)
    before = rate_reads()
    assert before >= 1  # the counter is there, and counts reads
    assignor = groupfit_assignor(live_service.url, group, "a", capacity=100)
    assignor.assign(Cluster({"t": 7}), {"m1": member("a"), "m2": member("b")})  # t/6 has no stored rate: 0
    assert assignor.last_source == "service" and rate_reads() == before
    stored = GroupfitClient(live_service.url).group(group)
    assert sum(len(ps) for ps in stored.assignment.values()) == 7
    assert sum(stored.loads.values()) == pytest.approx(sum(RATES.values()))


def test_leader_sends_each_members_advertised_capacity(live_service, group, caplog):
    # 190 of rates: "big" (200) carries them all; with the smallest advertised capacity (10) for everyone,
    # or the configured 100, no member could. "c" advertises nothing: it has the configured capacity.
    assignor = groupfit_assignor(live_service.url, group, "a", capacity=100, algorithm="bfd")
    members = {"m1": member("big", 200), "m2": member("small", 10), "m3": member("c")}
    with caplog.at_level(logging.WARNING, logger="groupfit.assignor"):
        result = held(assignor.assign(Cluster({"t": 6}), members))
    assert assignor.last_source == "service" and not caplog.records
    assert result == {"m1": set(RATES), "m2": set(), "m3": set()}
    stored = GroupfitClient(live_service.url).group(group)
    assert stored.capacity == 100 and {p.partition for p in stored.assignment["big"]} == set(RATES)


def test_members_repeating_an_identity_get_distinct_partitions(live_service, group):
    assignor = groupfit_assignor(live_service.url, group, "a", capacity=100)
    result = held(assignor.assign(Cluster({"t": 6}), {"m1": member("a"), "m2": member("a"), "m3": member("b")}))
    assert sorted(p for ps in result.values() for p in ps) == list(range(6))
    assert set(GroupfitClient(live_service.url).group(group).assignment) == {"a", "b", "m2"}


def test_too_few_members_is_logged_with_the_recommended_count(live_service, group, caplog):
    assignor = groupfit_assignor(live_service.url, group, "a", capacity=100)
    with caplog.at_level(logging.WARNING, logger="groupfit.assignor"):
        result = held(assignor.assign(Cluster({"t": 6}), {"m1": member("a")}))  # 190 of rates, one member
    assert assignor.last_source == "service" and result == {"m1": set(RATES)}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"group {group!r}: members ['a'] are over capacity; groupfit recommends 2 consumers (the group has 1)"
    ]


def test_a_group_without_rates_is_balanced_locally(live_service):
    assignor = groupfit_assignor(live_service.url, f"norates-{uuid.uuid4().hex[:6]}", "a", capacity=100)
    result = held(assignor.assign(Cluster({"t": 6}), {"m1": member("a"), "m2": member("b")}))
    assert assignor.last_source == "fallback" and sorted(map(len, result.values())) == [3, 3]


def test_service_errors_and_failing_rates_fall_back(live_service, group):
    members = {"m1": member("a"), "m2": member("b")}
    unknown = groupfit_assignor(live_service.url, group, "a", capacity=100, algorithm="no-such-algorithm")
    assert len(unknown.assign(Cluster({"t": 6}), members)) == 2 and unknown.last_source == "fallback"

    def broken_rates(partitions):
        raise OSError("metrics backend down")

    broken = groupfit_assignor(live_service.url, group, "a", capacity=100, rates=broken_rates)
    assert sorted(map(len, held(broken.assign(Cluster({"t": 6}), members)).values())) == [3, 3]
    assert broken.last_source == "fallback"


def test_fallback_keeps_the_partitions_members_report_reading():
    down = groupfit_assignor("http://127.0.0.1:1", "g", "a", capacity=100, deadline_s=0.5)
    members = {
        "m1": member("a", owned=[["t", 0], ["t", 4]], generation=3),
        "m2": member("b", owned=[["t", 1], ["t", 4]], generation=2),  # a stale claim on t/4
        "m3": member("c"),
    }
    result = held(down.assign(Cluster({"t": 6}), members))
    assert down.last_source == "fallback"
    assert {0, 4} <= result["m1"] and 1 in result["m2"]
    assert sorted(map(len, result.values())) == [2, 2, 2]


def test_a_member_reports_what_it_was_given_at_the_next_join():
    assignor = groupfit_assignor("http://127.0.0.1:1", "g", "a", capacity=100, member_capacity=50)
    assignor.on_assignment(ConsumerProtocolMemberAssignment(0, [("t", [2, 0])], json.dumps({"generation": 7}).encode()))
    data = json.loads(assignor.metadata({"t"}).user_data)
    assert data == {"id": "a", "owned": [["t", 0], ["t", 2]], "generation": 7, "capacity": 50}


def test_sticky_fallback_keeps_last_owners_and_balances():
    partitions = [("t", p) for p in range(5)]
    last = {("t", 0): "a", ("t", 1): "a", ("t", 2): "a", ("t", 3): "b", ("t", 4): "gone"}
    owner = sticky_fallback(["a", "b"], partitions, last)
    assert sorted(list(owner.values()).count(m) for m in "ab") == [2, 3]
    assert owner["t", 0] == "a" and owner["t", 3] == "b"


def racked_cluster() -> ClusterMetadata:
    """aiokafka's own cluster metadata, as a broker's MetadataResponse (v1: brokers with racks) fills it: three
    brokers in three racks; t/p led by broker p % 3, its followers the next two (t/5: one follower only)."""
    brokers = [(b, "localhost", 9092 + b, ("eu-1a", "eu-1b", "eu-1c")[b]) for b in range(3)]
    replicas = {p: [p % 3, (p + 1) % 3, (p + 2) % 3][: 2 if p == 5 else 3] for p in range(6)}
    topic = (0, "t", False, [(0, p, held[0], held, held) for p, held in replicas.items()])
    cluster = ClusterMetadata()
    cluster.update_metadata(MetadataResponse_v1(brokers, 0, [topic]))
    return cluster


def test_partition_racks_are_the_leaders_or_every_replicas():
    cluster, partitions = racked_cluster(), [TopicPartition("t", p) for p in range(6)]
    leaders = partition_racks(cluster, partitions, replicas=False)
    assert leaders == {TopicPartition("t", p): [("eu-1a", "eu-1b", "eu-1c")[p % 3]] for p in range(6)}
    followers = partition_racks(cluster, partitions, replicas=True)
    assert followers[TopicPartition("t", 0)] == ["eu-1a", "eu-1b", "eu-1c"]
    assert followers[TopicPartition("t", 5)] == ["eu-1a", "eu-1c"]  # led by broker 2, followed by broker 0


def test_the_leader_sends_members_racks_and_each_partitions_leader_rack(live_service, group):
    """Members in the three racks, partitions led in each, 90 of rate per rack (three members are needed):
    groupfit keeps every read in its zone, and the racks are stored with the group's version."""
    zoned = {0: 70.0, 1: 50.0, 2: 60.0, 3: 20.0, 4: 40.0, 5: 30.0}
    rates = lambda partitions: {tp: zoned[tp.partition] for tp in partitions}  # noqa: E731
    assignor = groupfit_assignor(live_service.url, group, "a", capacity=100, rates=rates, rack="eu-1a")
    assert json.loads(assignor.metadata({"t"}).user_data)["rack"] == "eu-1a"
    members = {"m1": member("a", rack="eu-1a"), "m2": member("b", rack="eu-1b"), "m3": member("c", rack="eu-1c")}
    result = held(assignor.assign(racked_cluster(), members))
    assert assignor.last_source == "service"
    assert result == {"m1": {0, 3}, "m2": {1, 4}, "m3": {2, 5}}
    stored = GroupfitClient(live_service.url).group(group)
    assert stored.racks == {"a": "eu-1a", "b": "eu-1b", "c": "eu-1c"}
    assert GroupfitClient(live_service.url).history(group)[0].cross_zone_rate == 0


def test_without_member_racks_the_request_names_none(live_service, group):
    assignor = groupfit_assignor(live_service.url, group, "a", capacity=100)
    assignor.assign(racked_cluster(), {"m1": member("a"), "m2": member("b"), "m3": member("c")})
    assert assignor.last_source == "service"
    assert GroupfitClient(live_service.url).group(group).racks is None


def test_an_answer_the_group_cannot_use_is_refused():
    """The leader reads the assignment alone: it must give every partition asked for, once, to members only."""
    from groupfit_client.assignor import UnusableAnswer, _held, _Ref

    partitions = {"t": [0, 1, 2]}
    good = {"a": [_Ref("t", 0), _Ref("t", 2)], "b": [_Ref("t", 1)]}
    assert _held(good, ["a", "b", "c"], partitions) == {"a": {"t": [0, 2]}, "b": {"t": [1]}, "c": {}}
    # a member's partitions of one topic apart from each other in its list are all kept
    mixed = {"a": [_Ref("t", 0), _Ref("u", 0), _Ref("t", 2)], "b": [_Ref("t", 1)]}
    assert _held(mixed, ["a", "b"], {"t": [0, 1, 2], "u": [0]}) == {"a": {"t": [0, 2], "u": [0]}, "b": {"t": [1]}}
    for answer in (
        {**good, "x": []},  # a non-member
        {"a": [_Ref("t", 0)], "b": [_Ref("t", 1)]},  # t/2 missing
        {**good, "c": [_Ref("t", 0)]},  # t/0 twice
        {"a": [_Ref("t", 0), _Ref("t", 2)], "b": [_Ref("u", 1)]},  # u/1 not asked for, t/1 missing
        {**good, "b": [_Ref("t", 1), _Ref("u", 1)]},  # u/1 not asked for
    ):
        with pytest.raises(UnusableAnswer):
            _held(answer, ["a", "b", "c"], partitions)
