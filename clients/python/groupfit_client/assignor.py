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

Zones: a member configured with its rack (the `client_rack` its consumer is given) advertises it, and the leader
sends each member's rack and each partition's racks from the cluster metadata: the leader's rack, or with
`fetch_from_follower` every replica's. aiokafka's assignor sees neither the consumer's `client_rack` (hence the
`rack` argument) nor, publicly, a partition's replicas (`partition_racks` says how they are read); its group
protocol (subscription v0) carries no rack, so the rack travels in the user data.

aiokafka's assignors are classes with classmethods, so `groupfit_assignor(...)` makes one per member.

REASS (Ezzeddine et al., Algorithm 1 line 12): with `reassign_interval_s`, the member that led the group's last
rebalance with groupfit's answer asks `GET /v1/groups/{group}/scale` every interval (on a thread: the event loop
never waits on it) and, when the answer is `reass` and the last rebalance it triggered is at least
`reassign_min_interval_s` ago, asks its group coordinator to rejoin, which rebalances the group with the same
members. The application calls `enforce_if_due(consumer)` after each `getmany()`/`getone()`. The rejoin request
is aiokafka-internal API (`AIOKafkaConsumer._partition_assignment_strategy`, `AIOKafkaConsumer._coordinator`,
`GroupCoordinator.request_rejoin()`; aiokafka has no public KIP-568 call): the `kafka` extra pins aiokafka below
the next minor version, and tests/clients/test_assignor_reassign.py checks that these are there.
"""

from __future__ import annotations

import heapq
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from typing import Any, ClassVar, NamedTuple, TypeVar

import httpx
import msgspec
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from groupfit_client import _core
from groupfit_client.client import GroupfitClient
from groupfit_client.results import ScaleSignal, TopicPartition

log = logging.getLogger("groupfit.assignor")

RatesFn = Callable[[list[TopicPartition]], Mapping[TopicPartition, float]]
T = TypeVar("T")
Held = dict[str, dict[str, list[int]]]
"""identity → topic → its partitions: what the group protocol's assignment is made of."""


class Subscribed(NamedTuple):
    """The partitions the group subscribes to, as the leader's request needs them."""

    numbers: dict[str, list[int]]
    """topic → its partition numbers, ascending"""
    partitions: list[TopicPartition]
    """in (topic, partition) order"""
    listed: bytes
    """their JSON without rates: the service takes the group's stored ones"""


class UnusableAnswer(Exception):
    """The service could not give an assignment this group can use; the leader assigns locally."""


@dataclass(frozen=True)
class Member:
    """What a member says about itself in its subscription user data."""

    identity: str
    capacity: float | None
    owned: frozenset[TopicPartition]
    generation: int  # the assignor generation of `owned`; the newest claim wins a conflict
    rack: str | None = None  # its client rack, if configured

    @classmethod
    def decode(cls, member_id: str, meta: ConsumerProtocolMemberMetadata) -> Member:
        try:
            data = json.loads(meta.user_data)
            capacity, rack = data.get("capacity"), data.get("rack")
            return cls(
                str(data["id"]),
                float(capacity) if capacity else None,
                frozenset(TopicPartition(t, p) for t, p in data.get("owned", ())),
                int(data.get("generation", -1)),
                str(rack) if rack else None,
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
    params: Mapping[str, Any] | None = None,
    reassign_interval_s: float = 0.0,
    reassign_min_interval_s: float = 60.0,
    reassign_min_gain: float | None = None,
    reassign_max_rscore: float | None = None,
    reassign_max_moves: int | None = None,
    rack: str | None = None,
    fetch_from_follower: bool = False,
) -> type[AbstractPartitionAssignor]:
    """An assignor class for this member. `capacity` is C for the leader's request (same unit as the
    rates): the capacity of every member that does not advertise its own (`member_capacity`, sent in the
    subscription); `rates` maps partitions to their rates (default: the service's stored rates for `group`);
    `params`: the algorithm's parameters, sent with the assignment and the reassignment check. `reassign_*`:
    the leader's check for a rebalance without a membership change (0: off; see `enforce_if_due`).
    `rack`: this member's rack, the `client_rack` its consumer is given (aiokafka ≥ 0.14; the assignor cannot
    read it); when members have racks the leader sends them and the partitions' racks, and groupfit keeps the
    reads within their zones where capacity allows. `fetch_from_follower`: the consumers read from a replica in
    their rack (KIP-392: `client_rack` on aiokafka ≥ 0.14 and a rack-aware replica.selector.class on the
    brokers), so a partition's racks are all its replicas'; else its leader's."""

    # One client for every rebalance: making one costs tens of milliseconds, and its connection is kept.
    client = GroupfitClient(service_url, timeout=deadline_s, retries=0)
    reassigner = Reassigner(
        service_url,
        group,
        deadline_s,
        reassign_interval_s,
        reassign_min_interval_s,
        {
            "algorithm": algorithm,
            "params": dict(params) if params is not None else None,
            "min_gain": reassign_min_gain,
            "max_rscore": reassign_max_rscore,
            "max_moves": reassign_max_moves,
            "min_interval_s": reassign_min_interval_s,
        },
    )

    class GroupfitAssignor(AbstractPartitionAssignor):
        name = "groupfit"
        version = 0
        owned: ClassVar[list[TopicPartition]] = []  # this member's partitions in the last generation
        generation: ClassVar[int] = -1
        last_source: ClassVar[str] = ""  # "service" or "fallback": how this member, as leader, last assigned
        reassignment: ClassVar[Reassigner] = reassigner
        subscribed: ClassVar[Subscribed] = Subscribed({}, [], b"[]")

        @classmethod
        def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
            user_data: dict[str, Any] = {"id": identity, "owned": cls.owned, "generation": cls.generation}
            if member_capacity:
                user_data["capacity"] = member_capacity
            if rack:
                user_data["rack"] = rack
            return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), json.dumps(user_data).encode())

        @classmethod
        def subscribed_of(cls, numbers: dict[str, list[int]]) -> Subscribed:
            """The last rebalance's while the topics and their partitions are the same (no 10^3 new objects, nor
            the collector's passes they bring)."""
            if cls.subscribed.numbers != numbers:
                listed = [TopicPartition(t, p) for t, ps in numbers.items() for p in ps]
                cls.subscribed = Subscribed(numbers, listed, _PARTITIONS.encode([_Ref(t, p) for t, p in listed]))
            return cls.subscribed

        @classmethod
        def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
            cls.owned = sorted(TopicPartition(t, p) for t, ps in assignment.assignment for p in ps)
            try:
                cls.generation = int(json.loads(assignment.user_data)["generation"])
            except (ValueError, KeyError, TypeError):
                cls.generation = -1

        @classmethod
        def assign(
            cls, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
        ) -> dict[str, ConsumerProtocolMemberAssignment]:
            decoded = _distinct({member_id: Member.decode(member_id, meta) for member_id, meta in members.items()})
            identities = sorted(m.identity for m in decoded.values())
            sizes = {m.identity: m.capacity for m in decoded.values() if m.capacity}
            topics = sorted({t for meta in members.values() for t in meta.subscription})
            subscribed = cls.subscribed_of({t: sorted(cluster.partitions_for_topic(t) or ()) for t in topics})
            partitions = subscribed.partitions
            started = time.perf_counter()
            try:
                zoned = any(m.rack for m in decoded.values())
                racks = partition_racks(cluster, partitions, fetch_from_follower) if zoned else {}
                held = _ask_service(
                    client,
                    group,
                    algorithm,
                    capacity,
                    deadline_s,
                    rates,
                    list(decoded.values()),
                    subscribed,
                    racks,
                    params,
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
            generation = max((m.generation for m in decoded.values()), default=-1) + 1
            reassigner.led(generation if cls.last_source == "service" else -1, sizes)
            user_data = json.dumps({"generation": generation}).encode()
            return {
                member_id: ConsumerProtocolMemberAssignment(
                    cls.version, sorted((t, sorted(ps)) for t, ps in held[member.identity].items()), user_data
                )
                for member_id, member in decoded.items()
            }

    return GroupfitAssignor


class Reassigner:
    """The leader's check of one member's assignor (see the module's REASS paragraph). `led` is told, in the
    leader's assign(), the assignor generation it wrote; `enforce_if_due` runs in the application's loop."""

    def __init__(
        self,
        service_url: str,
        group: str,
        deadline_s: float,
        interval_s: float,
        min_interval_s: float,
        query: Mapping[str, Any],
    ) -> None:
        for name, value in (("reassign_interval_s", interval_s), ("reassign_min_interval_s", min_interval_s)):
            if not 0 <= value < float("inf"):
                raise ValueError(f"{name} must be a number of seconds, at least 0; got {value!r}")
        self.service_url, self.group, self.deadline_s = service_url, group, deadline_s
        self.interval_s, self.min_interval_s = interval_s, min_interval_s
        self.query = {name: value for name, value in query.items() if value is not None}
        self.generation = -1  # the assignor generation this member led with groupfit's answer
        self.capacities: dict[str, float] = {}
        self.next_check = 0.0
        self.last_trigger: float | None = None
        self.pending: Future[ScaleSignal] | None = None
        self._worker: tuple[ThreadPoolExecutor, GroupfitClient] | None = None  # made at the first check

    def led(self, generation: int, capacities: Mapping[str, float]) -> None:
        self.generation, self.capacities = generation, dict(capacities)
        self.pending = None
        self.next_check = time.monotonic() + self.interval_s

    def rested(self, now: float) -> bool:
        return self.last_trigger is None or now - self.last_trigger >= self.min_interval_s

    def enforce_if_due(self, consumer: Any, generation: int) -> str | None:
        if self.interval_s <= 0 or self.generation < 0 or generation != self.generation:
            return None
        now = time.monotonic()
        if self.pending is not None:
            if not self.pending.done():
                return None
            done, self.pending = self.pending, None
            try:
                signal = done.result()
            except Exception as exc:  # the service unreachable or refusing: no decision this interval
                log.debug("group %r: no scaling decision (%s: %s)", self.group, type(exc).__name__, exc)
                return None
            if signal.action != "reass" or not self.rested(now):
                return None
            consumer._coordinator.request_rejoin()  # aiokafka-internal: see the module's documentation
            self.last_trigger = now
            log.info(
                "group %r: triggered a rebalance (gain %s, %s moves, Rscore %s): %s",
                self.group,
                signal.gain,
                signal.moves,
                signal.rscore,
                signal.reason,
            )
            return f"groupfit reass: {signal.reason}"
        if now >= self.next_check and self.rested(now):
            self.next_check = now + self.interval_s
            if self._worker is None:
                self._worker = (
                    ThreadPoolExecutor(1, thread_name_prefix="groupfit-reassign"),
                    GroupfitClient(self.service_url, timeout=self.deadline_s, retries=0),
                )
            executor, decisions = self._worker
            query = {**self.query, **({"member_capacities": self.capacities} if self.capacities else {})}
            self.pending = executor.submit(decisions.scale, self.group, **query)
        return None


def enforce_if_due(consumer: Any) -> str | None:
    """Call after each `getmany()`/`getone()` of an AIOKafkaConsumer whose assignor `groupfit_assignor` made:
    when this member leads the group and the interval has passed, it asks groupfit's decision in the background;
    when the decision is `reass` and the guards allow it, it asks the coordinator to rejoin (a rebalance with the
    same members) and returns the reason; else None, at once."""
    for assignor in getattr(consumer, "_partition_assignment_strategy", ()):  # aiokafka-internal
        reassigner = getattr(assignor, "reassignment", None)
        if isinstance(reassigner, Reassigner):
            return reassigner.enforce_if_due(consumer, assignor.generation)
    return None


def _distinct(members: dict[str, Member]) -> dict[str, Member]:
    """Two members configured with one identity would be given the same partitions: the first (by member
    id) keeps it, the others are known by their member ids."""
    seen: set[str] = set()
    result = {}
    for member_id in sorted(members):
        member = members[member_id]
        if member.identity in seen:
            log.warning("member %s repeats identity %r; known by its member id", member_id, member.identity)
            member = Member(member_id, member.capacity, member.owned, member.generation, member.rack)
        seen.add(member.identity)
        result[member_id] = member
    return result


class _Partition(msgspec.Struct, omit_defaults=True, gc=False):
    """A partition of the leader's request, as the wire has it (RequestPartition's JSON form); without a rate,
    the service takes the group's stored one."""

    topic: str
    partition: int
    rate: float | None = None
    lag: float | None = None
    racks: list[str] | None = None


class _Ref(msgspec.Struct, gc=False):
    topic: str
    partition: int


class _LeaderAnswer(msgspec.Struct):
    """What the leader reads of POST /v1/assign's answer (msgspec skips the rest without building it)."""

    assignment: dict[str, list[_Ref]]
    overloaded_members: list[str]
    recommended_consumers: int | None


_PARTITIONS = msgspec.json.Encoder()
_ANSWER = msgspec.json.Decoder(_LeaderAnswer)


def _leader_answer(response: httpx.Response) -> _LeaderAnswer:
    _core.raise_for_error(response)
    return _ANSWER.decode(response.content)


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
    members: list[Member],
    subscribed: Subscribed,
    racks: Mapping[TopicPartition, list[str]],
    params: Mapping[str, Any] | None = None,
) -> Held:
    """The service's assignment, identity → topic → partitions, within the deadline. Rates: the callable's, else
    the group's stored ones, which the service takes for partitions sent without a rate, so one round trip does it
    (it answers `no_rates` where it has none of them: the leader then assigns locally). A member that advertised its capacity or rack is sent as an object; `racks`: each partition's (none: a zone-free request).
    The leader asks for the answer without its delta and reads only the assignment (and what it logs) of it: the
    JSON of 10^3 partitions each way is most of its own work in a rebalance."""
    deadline = time.monotonic() + deadline_s
    identities = sorted(m.identity for m in members)
    partitions = subscribed.partitions
    if rates is None and not racks:
        encoded = subscribed.listed
    else:
        known = dict(rates(list(partitions))) if rates is not None else {}  # a copy: the list is kept
        if rates is not None and not any(tp in known for tp in partitions):
            # All rates zero would pack every partition onto one member; balanced counts serve better.
            raise UnusableAnswer(f"no rates known for group {group!r}'s partitions")
        rate_of, racks_of = known.get, racks.get
        encoded = _PARTITIONS.encode(
            [
                _Partition(tp[0], tp[1], rate_of(tp, None if rates is None else 0.0), None, racks_of(tp))
                for tp in partitions
            ]
        )
    request = {
        "algorithm": algorithm,
        "capacity": capacity,
        "group": group,
        "members": [_member_json(m) for m in sorted(members, key=lambda m: m.identity)],
        "partitions": msgspec.Raw(encoded),
        **({"params": dict(params)} if params is not None else {}),
    }
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("the deadline passed while the rates callable ran")
    answer = client._perform(_lean(_core.assign(request, delta="none", timeout=remaining), _leader_answer))
    if answer.overloaded_members:
        log.warning(
            "group %r: members %s are over capacity; groupfit recommends %s consumers (the group has %d)",
            group,
            answer.overloaded_members,
            answer.recommended_consumers,
            len(identities),
        )
    return _held(answer.assignment, identities, subscribed.numbers)


def _held(assignment: Mapping[str, list[_Ref]], identities: list[str], numbers: Mapping[str, list[int]]) -> Held:
    """The answer's assignment by identity and topic; UnusableAnswer unless it gives every partition of `numbers`
    (topic → its partitions, ascending) once, to members only. (Read and checked per topic, each member's run of
    one topic at once: no Python step per partition.)"""
    held: Held = {i: {} for i in identities}
    for member, refs in assignment.items():
        topics = held.get(member)
        if topics is None:
            raise UnusableAnswer(f"the answer names non-member {member!r}")
        for topic, run in groupby(refs, _TOPIC):
            topics.setdefault(topic, []).extend(map(_NUMBER, run))
    got: dict[str, list[int]] = {}
    for topics in held.values():
        for topic, given in topics.items():
            got.setdefault(topic, []).extend(given)
    if got.keys() - numbers.keys() or any(sorted(got.get(t, ())) != ps for t, ps in numbers.items()):
        raise UnusableAnswer("the answer misses partitions, gives one twice or names one the group does not have")
    return held


_TOPIC, _NUMBER = attrgetter("topic"), attrgetter("partition")


def _member_json(member: Member) -> str | dict[str, Any]:
    """A member as the request lists it: its bare identity, or an object with its capacity and rack."""
    if not member.capacity and not member.rack:
        return member.identity
    doc: dict[str, Any] = {"id": member.identity}
    if member.capacity:
        doc["capacity"] = member.capacity
    if member.rack:
        doc["rack"] = member.rack
    return doc


def partition_racks(cluster: Any, partitions: list[TopicPartition], replicas: bool) -> dict[TopicPartition, list[str]]:
    """Each partition's racks from aiokafka's cluster metadata: its leader's broker's rack (where a consumer
    fetches from), or with `replicas` (fetch-from-follower) the racks of all its replicas' brokers. aiokafka's
    ClusterMetadata has no public accessor for a partition's replicas: they are read from its `_partitions`
    table (aiokafka 0.11-0.14); where that is missing, the leader's rack stands (`leader_for_partition`,
    `broker_metadata`, both public). A partition whose brokers name no rack gets none."""
    table = getattr(cluster, "_partitions", None) or {}
    found: dict[TopicPartition, list[str]] = {}
    for tp in partitions:
        nodes: list[int] = []
        if replicas:
            metadata = table.get(tp.topic, {}).get(tp.partition)
            nodes = list(getattr(metadata, "replicas", None) or ())
        if not nodes:
            leader = cluster.leader_for_partition(tp)
            nodes = [leader] if leader is not None and leader >= 0 else []
        names = sorted({broker.rack for n in nodes if (broker := cluster.broker_metadata(n)) and broker.rack})
        if names:
            found[tp] = names
    return found


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
