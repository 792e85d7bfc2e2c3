"""A partition assignor for aiokafka that asks groupfit at rebalance time (Ezzeddine et al.: the consumer
leader asks the controller for the assignment).

Every member sends its stable identity (and optionally its capacity) as subscription user data. The
leader sends the members, the subscribed partitions with their rates (the service's stored rates for the
group, or a callable's) and the group to POST /v1/assign, and turns the answer, keyed by identity, into the
group protocol's assignment keyed by member id. Identities are stable (group.instance.id or configured),
so the service's stickiness survives restarts. If the service does not answer within the deadline or
errors, the leader assigns locally (balanced counts, keeping last owners) and logs it: a rebalance never
fails because groupfit is down.

aiokafka's assignors are classes with classmethods, so `groupfit_assignor(...)` makes one per
configuration.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

log = logging.getLogger("groupfit.assignor")

TopicPartition = tuple[str, int]
RatesFn = Callable[[list[TopicPartition]], Mapping[TopicPartition, float]]


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
    rates); `rates` maps partitions to their rates (default: the service's stored rates for `group`)."""

    class GroupfitAssignor(AbstractPartitionAssignor):
        name = "groupfit"
        version = 0
        last_owner: dict[TopicPartition, str] = {}  # the leader's last answer, for the local fallback
        last_source = ""  # "service" or "fallback": how the last assignment was made

        @classmethod
        def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
            user_data = {"id": identity, **({"capacity": member_capacity} if member_capacity else {})}
            return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), json.dumps(user_data).encode())

        @classmethod
        def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
            pass

        @classmethod
        def assign(cls, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]) -> dict[str, ConsumerProtocolMemberAssignment]:
            identities = {member_id: _identity(member_id, meta) for member_id, meta in members.items()}
            topics = sorted({t for meta in members.values() for t in meta.subscription})
            partitions = [(t, p) for t in topics for p in sorted(cluster.partitions_for_topic(t) or ())]
            started = time.perf_counter()
            try:
                owner = cls._ask_service(identities, partitions)
                cls.last_source = "service"
            except Exception as exc:  # noqa: BLE001 - any failure falls back; the rebalance must go on
                log.warning("groupfit did not answer (%s: %s); assigning locally", type(exc).__name__, exc)
                owner = sticky_fallback(sorted(identities.values()), partitions, cls.last_owner)
                cls.last_source = "fallback"
            cls.last_owner = owner
            log.info("assigned %d partitions to %d members via %s in %.1f ms", len(partitions), len(members),
                     cls.last_source, (time.perf_counter() - started) * 1000)
            by_identity: dict[str, dict[str, list[int]]] = {i: {} for i in identities.values()}
            for (topic, partition), member in owner.items():
                by_identity[member].setdefault(topic, []).append(partition)
            return {
                member_id: ConsumerProtocolMemberAssignment(
                    cls.version, sorted((t, sorted(ps)) for t, ps in by_identity[identity_].items()), b""
                )
                for member_id, identity_ in identities.items()
            }

        @classmethod
        def _ask_service(cls, identities: Mapping[str, str], partitions: list[TopicPartition]) -> dict[TopicPartition, str]:
            deadline = time.monotonic() + deadline_s
            with httpx.Client(base_url=service_url, timeout=deadline_s) as http:
                if rates is not None:
                    known = dict(rates(partitions))
                else:
                    response = http.get(f"/v1/groups/{group}/rates")
                    stored = response.json()["partitions"] if response.status_code == 200 else []
                    known = {(p["topic"], p["partition"]): p["rate"] for p in stored}
                request = {
                    "algorithm": algorithm,
                    "capacity": capacity,
                    "group": group,
                    "members": sorted(set(identities.values())),
                    "partitions": [{"topic": t, "partition": p, "rate": float(known.get((t, p), 0.0))} for t, p in partitions],
                }
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("the deadline passed while reading rates")
                response = http.post("/v1/assign", json=request, timeout=remaining)
            if response.status_code != 200:
                raise RuntimeError(f"POST /v1/assign answered {response.status_code}: {response.text[:200]}")
            answer = response.json()
            return {(p["topic"], p["partition"]): member for member, held in answer["assignment"].items() for p in held}

    return GroupfitAssignor


def _identity(member_id: str, meta: ConsumerProtocolMemberMetadata) -> str:
    try:
        return str(json.loads(meta.user_data)["id"])
    except (ValueError, KeyError, TypeError):
        return member_id  # a member without groupfit metadata is known by its member id


def sticky_fallback(members: list[str], partitions: list[TopicPartition], last_owner: Mapping[TopicPartition, str]) -> dict[TopicPartition, str]:
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
    for tp in partitions:
        if tp not in owner:
            member = min((m for m in members if count[m] < quota[m]), key=lambda m: (count[m], m))
            owner[tp] = member
            count[member] += 1
    return owner
