"""A partition assignor for aiokafka that asks groupfit at rebalance time (Ezzeddine et al.: the consumer
leader asks the controller for the assignment).

Every member sends, as subscription user data, its stable identity, optionally its capacity, and the
partitions it read in the last generation. The leader sends the members, the subscribed partitions with
their rates (the service's stored rates for the group, or a callable's) and the group to POST /v1/assign,
and turns the answer, keyed by identity, into the group protocol's assignment keyed by member id.
Identities are stable (group.instance.id or configured), so the service's stickiness survives restarts.
If the service does not answer within the deadline, errors, or gives an answer that does not fit the
group, the leader assigns locally (balanced counts, keeping the partitions members report reading) and
logs it: a rebalance never fails because groupfit is down.

Members may differ in size: a member that advertises its capacity is sent as `{"id", "capacity"}`, so the
service keeps each within its own; the others (and the request's C) have the configured capacity.

aiokafka's assignors are classes with classmethods, so `groupfit_assignor(...)` makes one per member.
"""

from __future__ import annotations

import heapq
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import httpx
import msgspec
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from groupfit_client import _core
from groupfit_client.client import GroupfitClient
from groupfit_client.errors import GroupfitError
from groupfit_client.results import TopicPartition

log = logging.getLogger("groupfit.assignor")

RatesFn = Callable[[list[TopicPartition]], Mapping[TopicPartition, float]]
T = TypeVar("T")
Held = dict[str, dict[str, list[int]]]
"""identity → topic → its partitions: what the group protocol's assignment is made of."""


class UnusableAnswer(Exception):
    """The service could not give an assignment this group can use; the leader assigns locally."""


@dataclass(frozen=True)
class Member:
    """What a member says about itself in its subscription user data."""

    identity: str
    capacity: float | None
    owned: frozenset[TopicPartition]
    generation: int  # the assignor generation of `owned`; the newest claim wins a conflict

    @classmethod
    def decode(cls, member_id: str, meta: ConsumerProtocolMemberMetadata) -> Member:
        try:
            data = json.loads(meta.user_data)
            capacity = data.get("capacity")
            return cls(
                str(data["id"]),
                float(capacity) if capacity else None,
                frozenset(TopicPartition(t, p) for t, p in data.get("owned", ())),
                int(data.get("generation", -1)),
            )
        except (ValueError, KeyError, TypeError):
            return cls(member_id, None, frozenset(), -1)  # no groupfit metadata: known by its member id


def groupfit_assignor(
    service_url: str,
    group: str,
    identity: str,
    capacity: float,
    algorithm: str = "mwf",
    deadline_s: float = 2.0,
    rates: RatesFn | None = None,
    member_capacity: float | None = None,
) -> type[AbstractPartitionAssignor]:
    """An assignor class for this member. `capacity` is C for the leader's request (same unit as the
    rates): the capacity of every member that does not advertise its own (`member_capacity`, sent in the
    subscription); `rates` maps partitions to their rates (default: the service's stored rates for `group`)."""

    # One client for every rebalance: making one costs tens of milliseconds, and its connection is kept.
    client = GroupfitClient(service_url, timeout=deadline_s, retries=0)

    class GroupfitAssignor(AbstractPartitionAssignor):
        name = "groupfit"
        version = 0
        owned: ClassVar[list[TopicPartition]] = []  # this member's partitions in the last generation
        generation: ClassVar[int] = -1
        last_source: ClassVar[str] = ""  # "service" or "fallback": how this member, as leader, last assigned
        partitions: ClassVar[tuple[dict[str, list[int]], list[TopicPartition]]] = ({}, [])

        @classmethod
        def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
            user_data: dict[str, Any] = {"id": identity, "owned": cls.owned, "generation": cls.generation}
            if member_capacity:
                user_data["capacity"] = member_capacity
            return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), json.dumps(user_data).encode())

        @classmethod
        def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
            cls.owned = sorted(TopicPartition(t, p) for t, ps in assignment.assignment for p in ps)
            try:
                cls.generation = int(json.loads(assignment.user_data)["generation"])
            except (ValueError, KeyError, TypeError):
                cls.generation = -1

        @classmethod
        def partitions_of(cls, numbers: dict[str, list[int]]) -> list[TopicPartition]:
            """The subscribed partitions in (topic, partition) order: the last rebalance's list while the topics
            and their partitions are the same (no 10^3 new objects, nor the collector's passes they bring)."""
            if cls.partitions[0] != numbers:
                cls.partitions = (numbers, [TopicPartition(t, p) for t, ps in numbers.items() for p in ps])
            return cls.partitions[1]

        @classmethod
        def assign(
            cls, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
        ) -> dict[str, ConsumerProtocolMemberAssignment]:
            decoded = _distinct({member_id: Member.decode(member_id, meta) for member_id, meta in members.items()})
            identities = sorted(m.identity for m in decoded.values())
            sizes = {m.identity: m.capacity for m in decoded.values() if m.capacity}
            topics = sorted({t for meta in members.values() for t in meta.subscription})
            partitions = cls.partitions_of({t: sorted(cluster.partitions_for_topic(t) or ()) for t in topics})
            started = time.perf_counter()
            try:
                held = _ask_service(
                    client, group, algorithm, capacity, deadline_s, rates, identities, sizes, partitions
                )
                cls.last_source = "service"
            except Exception as exc:
                log.warning("groupfit gave no usable assignment (%s: %s); assigning locally", type(exc).__name__, exc)
                held = {i: {} for i in identities}
                for (topic, partition), member in sticky_fallback(
                    identities, partitions, reported_owners(decoded.values())
                ).items():
                    held[member].setdefault(topic, []).append(partition)
                cls.last_source = "fallback"
            log.info(
                "assigned %d partitions to %d members via %s in %.1f ms",
                len(partitions),
                len(members),
                cls.last_source,
                (time.perf_counter() - started) * 1000,
            )
            user_data = json.dumps(
                {"generation": max((m.generation for m in decoded.values()), default=-1) + 1}
            ).encode()
            return {
                member_id: ConsumerProtocolMemberAssignment(
                    cls.version, sorted((t, sorted(ps)) for t, ps in held[member.identity].items()), user_data
                )
                for member_id, member in decoded.items()
            }

    return GroupfitAssignor


def _distinct(members: dict[str, Member]) -> dict[str, Member]:
    """Two members configured with one identity would be given the same partitions: the first (by member
    id) keeps it, the others are known by their member ids."""
    seen: set[str] = set()
    result = {}
    for member_id in sorted(members):
        member = members[member_id]
        if member.identity in seen:
            log.warning("member %s repeats identity %r; known by its member id", member_id, member.identity)
            member = Member(member_id, member.capacity, member.owned, member.generation)
        seen.add(member.identity)
        result[member_id] = member
    return result


class _Partition(msgspec.Struct, omit_defaults=True, gc=False):
    """A partition of the leader's request, as the wire has it (PartitionRate's JSON form)."""

    topic: str
    partition: int
    rate: float
    lag: float | None = None


class _Ref(msgspec.Struct, gc=False):
    topic: str
    partition: int


class _StoredRates(msgspec.Struct):
    """What the leader reads of GET /v1/groups/{group}/rates: the partitions' rates and lags."""

    partitions: list[_Partition]


class _LeaderAnswer(msgspec.Struct):
    """What the leader reads of POST /v1/assign's answer (msgspec skips the rest without building it)."""

    assignment: dict[str, list[_Ref]]
    overloaded_members: list[str]
    recommended_consumers: int | None


_PARTITIONS = msgspec.json.Encoder()
_ANSWER = msgspec.json.Decoder(_LeaderAnswer)
_RATES = msgspec.json.Decoder(_StoredRates)


def _leader_answer(response: httpx.Response) -> _LeaderAnswer:
    _core.raise_for_error(response)
    return _ANSWER.decode(response.content)


def _stored_rates(response: httpx.Response) -> _StoredRates:
    _core.raise_for_error(response)
    return _RATES.decode(response.content)


def _lean(call: _core.Call[Any], read: Callable[[httpx.Response], T]) -> _core.Call[T]:
    """The same call, read by a lean reader of the leader's own."""
    return _core.Call(call.method, call.path, read, call.params, call.headers, call.json, call.repeatable, call.timeout)


def _ask_service(
    client: GroupfitClient,
    group: str,
    algorithm: str,
    capacity: float,
    deadline_s: float,
    rates: RatesFn | None,
    identities: list[str],
    sizes: Mapping[str, float],
    partitions: list[TopicPartition],
) -> Held:
    """The service's assignment, identity → topic → partitions, within the deadline (rates read included).
    `sizes`: the members that advertised their own capacity. The leader asks for the answer without its delta
    and reads only the assignment (and what it logs) of it: the JSON of 10^3 partitions each way is most of its
    own work in a rebalance."""
    deadline = time.monotonic() + deadline_s
    lags: Mapping[Any, float] = {}  # by (topic, partition)
    known: Mapping[Any, float]
    if rates is not None:
        known = dict(rates(list(partitions)))  # a copy: the list is kept for the next rebalance
    else:
        try:
            stored = client._perform(_lean(_core.rates(group, timeout=deadline_s), _stored_rates)).partitions
            known = {(p.topic, p.partition): p.rate for p in stored}
            lags = {(p.topic, p.partition): p.lag for p in stored if p.lag is not None}
        except GroupfitError as error:
            if error.code != "group_not_found":
                raise
            known = {}
    if not any(tp in known for tp in partitions):
        # All rates zero would pack every partition onto one member; balanced counts serve better.
        raise UnusableAnswer(f"no rates known for group {group!r}'s partitions")
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("the deadline passed while reading rates")
    rate_of, lag_of = known.get, lags.get
    encoded = _PARTITIONS.encode([_Partition(tp[0], tp[1], float(rate_of(tp, 0.0)), lag_of(tp)) for tp in partitions])
    request = {
        "algorithm": algorithm,
        "capacity": capacity,
        "group": group,
        "members": [{"id": i, "capacity": sizes[i]} if i in sizes else i for i in identities],
        "partitions": msgspec.Raw(encoded),
    }
    answer = client._perform(_lean(_core.assign(request, delta="none", timeout=remaining), _leader_answer))
    if answer.overloaded_members:
        log.warning(
            "group %r: members %s are over capacity; groupfit recommends %s consumers (the group has %d)",
            group,
            answer.overloaded_members,
            answer.recommended_consumers,
            len(identities),
        )
    return _held(answer.assignment, identities, partitions)


def _held(assignment: Mapping[str, list[_Ref]], identities: list[str], partitions: list[TopicPartition]) -> Held:
    """The answer's assignment by identity and topic; UnusableAnswer unless it gives every partition asked for,
    once, to members only. (Checked per topic on sets of partition numbers: no object per partition.)"""
    held: Held = {i: {} for i in identities}
    given = 0
    for member, refs in assignment.items():
        topics = held.get(member)
        if topics is None:
            raise UnusableAnswer(f"the answer names non-member {member!r}")
        given += len(refs)
        for ref in refs:
            topic = ref.topic
            numbers = topics.get(topic)
            if numbers is None:
                numbers = topics[topic] = []
            numbers.append(ref.partition)
    asked: dict[str, set[int]] = {}
    for topic, partition in partitions:
        asked.setdefault(topic, set()).add(partition)
    got: dict[str, set[int]] = {}
    for topics in held.values():
        for topic, numbers in topics.items():
            got.setdefault(topic, set()).update(numbers)
    if given != len(partitions) or got != asked:
        raise UnusableAnswer("the answer misses partitions, gives one twice or names one the group does not have")
    return held


def reported_owners(members: Iterable[Member]) -> dict[TopicPartition, str]:
    """Who read each partition last, from the members' own reports; the newest generation wins a conflict."""
    owner: dict[TopicPartition, str] = {}
    for member in sorted(members, key=lambda m: (m.generation, m.identity)):
        for tp in member.owned:
            owner[tp] = member.identity
    return owner


def sticky_fallback(
    members: list[str], partitions: list[TopicPartition], last_owner: Mapping[TopicPartition, str]
) -> dict[TopicPartition, str]:
    """Counts differ by at most one; a partition stays with its last owner while that owner is under its
    share (a local stand-in for the service, used only when it cannot be reached)."""
    share, extra = divmod(len(partitions), len(members))
    quota = {m: share + (i < extra) for i, m in enumerate(members)}
    owner: dict[TopicPartition, str] = {}
    count = dict.fromkeys(members, 0)
    for tp in partitions:
        previous = last_owner.get(tp)
        if previous in count and count[previous] < quota[previous]:
            owner[tp] = previous
            count[previous] += 1
    open_members = [(count[m], m) for m in members if count[m] < quota[m]]  # the least loaded first
    heapq.heapify(open_members)
    for tp in partitions:
        if tp not in owner:
            _, member = heapq.heappop(open_members)
            owner[tp] = member
            count[member] += 1
            if count[member] < quota[member]:
                heapq.heappush(open_members, (count[member], member))
    return owner
