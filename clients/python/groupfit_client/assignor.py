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
from typing import Any, ClassVar

from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from groupfit_client.client import GroupfitClient
from groupfit_client.errors import GroupfitError
from groupfit_client.results import PartitionRate, ScaleSignal, TopicPartition

log = logging.getLogger("groupfit.assignor")

RatesFn = Callable[[list[TopicPartition]], Mapping[TopicPartition, float]]


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
    params: Mapping[str, Any] | None = None,
    reassign_interval_s: float = 0.0,
    reassign_min_interval_s: float = 60.0,
    reassign_min_gain: float | None = None,
    reassign_max_rscore: float | None = None,
    reassign_max_moves: int | None = None,
) -> type[AbstractPartitionAssignor]:
    """An assignor class for this member. `capacity` is C for the leader's request (same unit as the
    rates): the capacity of every member that does not advertise its own (`member_capacity`, sent in the
    subscription); `rates` maps partitions to their rates (default: the service's stored rates for `group`);
    `params`: the algorithm's parameters, sent with the assignment and the reassignment check. `reassign_*`:
    the leader's check for a rebalance without a membership change (0: off; see `enforce_if_due`)."""

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
        def assign(
            cls, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
        ) -> dict[str, ConsumerProtocolMemberAssignment]:
            decoded = _distinct({member_id: Member.decode(member_id, meta) for member_id, meta in members.items()})
            identities = sorted(m.identity for m in decoded.values())
            sizes = {m.identity: m.capacity for m in decoded.values() if m.capacity}
            topics = sorted({t for meta in members.values() for t in meta.subscription})
            partitions = [TopicPartition(t, p) for t in topics for p in sorted(cluster.partitions_for_topic(t) or ())]
            started = time.perf_counter()
            try:
                owner = _ask_service(
                    client, group, algorithm, capacity, deadline_s, rates, identities, sizes, partitions, params
                )
                cls.last_source = "service"
            except Exception as exc:
                log.warning("groupfit gave no usable assignment (%s: %s); assigning locally", type(exc).__name__, exc)
                owner = sticky_fallback(identities, partitions, reported_owners(decoded.values()))
                cls.last_source = "fallback"
            log.info(
                "assigned %d partitions to %d members via %s in %.1f ms",
                len(partitions),
                len(members),
                cls.last_source,
                (time.perf_counter() - started) * 1000,
            )
            by_identity: dict[str, dict[str, list[int]]] = {i: {} for i in identities}
            for (topic, partition), member in owner.items():
                by_identity[member].setdefault(topic, []).append(partition)
            generation = max((m.generation for m in decoded.values()), default=-1) + 1
            reassigner.led(generation if cls.last_source == "service" else -1, sizes)
            user_data = json.dumps({"generation": generation}).encode()
            return {
                member_id: ConsumerProtocolMemberAssignment(
                    cls.version, sorted((t, sorted(ps)) for t, ps in by_identity[member.identity].items()), user_data
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
            member = Member(member_id, member.capacity, member.owned, member.generation)
        seen.add(member.identity)
        result[member_id] = member
    return result


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
    params: Mapping[str, Any] | None = None,
) -> dict[TopicPartition, str]:
    """The service's assignment, partition → identity, within the deadline (rates read included). `sizes`:
    the members that advertised their own capacity."""
    deadline = time.monotonic() + deadline_s
    lags: dict[TopicPartition, float] = {}
    if rates is not None:
        known = dict(rates(partitions))
    else:
        try:
            stored = client.rates(group, timeout=deadline_s)
            known, lags = stored.rates, stored.lags
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
    answer = client.assign(
        {
            "algorithm": algorithm,
            "capacity": capacity,
            "group": group,
            "members": [{"id": i, "capacity": sizes[i]} if i in sizes else i for i in identities],
            "partitions": [PartitionRate(*tp, float(known.get(tp, 0.0)), lags.get(tp)) for tp in partitions],
            **({"params": dict(params)} if params is not None else {}),
        },
        timeout=remaining,
    )
    if answer.overloaded_members:
        log.warning(
            "group %r: members %s are over capacity; groupfit recommends %s consumers (the group has %d)",
            group,
            answer.overloaded_members,
            answer.recommended_consumers,
            len(identities),
        )
    owner = answer.owner
    strangers = set(owner.values()) - set(identities)
    if strangers or sorted(owner) != partitions:
        raise UnusableAnswer(f"the answer names non-members {sorted(strangers)} or misses partitions")
    return owner


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
