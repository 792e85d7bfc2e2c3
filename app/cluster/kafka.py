"""A live Kafka cluster as a placement request, and a plan applied to it.

Reading: brokers and racks (DescribeCluster), replica lists in order (DescribeTopics), retention.ms
(DescribeConfigs) through confluent-kafka's AdminClient; replica sizes and each log directory's total bytes
(DescribeLogDirs) through kafka-python's admin client, since librdkafka — and so confluent-kafka, 2.16 here —
has no DescribeLogDirs. Applying: AlterPartitionReassignments and ListPartitionReassignments (kafka-python:
confluent-kafka has neither), replication throttles as `kafka-reassign-partitions --throttle` sets them
(IncrementalAlterConfigs) and a preferred leader election (ElectLeaders) through confluent-kafka.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.codec.placement import (
    BrokerSpec,
    PartitionSpec,
    PlacementOptions,
    PlacementRequest,
    ReassignmentPartition,
    TopicSpec,
)

TIMEOUT_S = 30.0


class ClusterError(RuntimeError):
    """The cluster refused or failed a request; the message says which and what to do."""


@dataclass
class Snapshot:
    """What the cluster told: the request to plan, and the notes for the operator (assumptions made)."""

    request: PlacementRequest
    notes: list[str]


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _legacy_admin(bootstrap: str):
    """kafka-python's admin client: DescribeLogDirs and the partition reassignment requests."""
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="groupfit-placement")


def read_cluster(
    bootstrap: str,
    topics: Sequence[str] | None,
    disk_capacity: int | None,
    network_capacity: float,
    solver: str,
    options: PlacementOptions,
) -> Snapshot:
    """The placement request of the live cluster: every broker (disk capacity `disk_capacity`, else the total
    bytes of its log directories), the topics given (default: every topic but the internal ones)."""
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import ConfigResource, ResourceType

    admin, notes = _admin(bootstrap), []
    try:
        nodes = admin.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S).nodes
        names = list(topics) if topics else sorted(admin.list_topics(timeout=TIMEOUT_S).topics)
        described = [
            future.result(TIMEOUT_S)
            for future in admin.describe_topics(TopicCollection(names), request_timeout=TIMEOUT_S).values()
        ]
        if not topics:  # the internal topics only when asked for by name
            described = [d for d in described if not d.is_internal and not d.name.startswith("__")]
        configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, d.name) for d in described])
        retention = {
            resource.name: int(future.result(TIMEOUT_S)["retention.ms"].value) for resource, future in configs.items()
        }
    except KafkaException as exc:
        raise ClusterError(f"reading the cluster at {bootstrap} failed: {exc.args[0]}") from None
    sizes, totals = _log_dirs(bootstrap, [d.name for d in described])
    brokers = []
    for node in sorted(nodes, key=lambda n: n.id):
        disk = disk_capacity or totals.get(node.id)
        if not disk:
            raise ClusterError(f"broker {node.id} does not report its log directories' size; give --disk-capacity.")
        brokers.append(BrokerSpec(node.id, disk, network_capacity, node.rack))
    partitions = []
    for description in sorted(described, key=lambda d: d.name):
        forever = retention[description.name] <= 0
        if forever:
            notes.append(f"topic {description.name} keeps data forever (retention.ms=-1): its throughput counts as 0")
        for info in description.partitions:
            replicas = [node.id for node in info.replicas]
            size = max((sizes.get((description.name, info.id, b), 0) for b in replicas), default=0)
            partitions.append(PartitionSpec(description.name, info.id, replicas, size, 0.0 if forever else None))
    return Snapshot(
        PlacementRequest(
            solver=solver,
            brokers=brokers,
            topics=[TopicSpec(name, ms) for name, ms in sorted(retention.items())],
            partitions=partitions,
            options=options,
        ),
        notes,
    )


def _log_dirs(bootstrap: str, topics: list[str]) -> tuple[dict[tuple[str, int, int], int], dict[int, int]]:
    """(topic, partition, broker) → replica bytes (the current replica, not a future one being moved in), and
    broker → the total bytes of its log directories (0 when the broker does not say: DescribeLogDirs < v4)."""
    from kafka.errors import KafkaError

    sizes: dict[tuple[str, int, int], int] = {}
    totals: dict[int, int] = {}
    if not topics:
        return sizes, totals
    try:
        legacy = _legacy_admin(bootstrap)
    except KafkaError as exc:
        raise ClusterError(f"the cluster at {bootstrap} did not answer: {exc}") from None
    try:
        for broker in legacy.describe_log_dirs(topic_partitions=topics):
            for log_dir in broker["log_dirs"]:
                if log_dir["error_code"]:
                    continue  # an offline directory: its replicas are counted where they are online
                totals[broker["broker"]] = totals.get(broker["broker"], 0) + max(0, log_dir.get("total_bytes", 0))
                for topic in log_dir["topics"]:
                    for partition in topic["partitions"]:
                        if not partition["is_future_key"]:
                            sizes[topic["name"], partition["partition_index"], broker["broker"]] = partition[
                                "partition_size"
                            ]
    except KafkaError as exc:
        raise ClusterError(f"DescribeLogDirs failed: {exc}") from None
    finally:
        legacy.close()
    return sizes, totals


def execute(
    bootstrap: str,
    partitions: Iterable[ReassignmentPartition],
    current: dict[tuple[str, int], list[int]],
    throttle: float | None = None,
    timeout_s: float = 600.0,
    report: Callable[[str], None] = lambda _: None,
) -> None:
    """Apply a plan: throttle (if asked), reassign, wait until every reassignment completed, elect the preferred
    leaders, remove the throttles. Raises ClusterError when the cluster refuses or the time runs out."""
    from kafka import TopicPartition as LegacyPartition
    from kafka.errors import KafkaError

    target = {(p.topic, p.partition): list(p.replicas) for p in partitions}
    if not target:
        report("nothing to move")
        return
    admin = _admin(bootstrap)
    legacy = _legacy_admin(bootstrap)
    try:
        if throttle is not None:
            _throttle(admin, target, current, throttle)
        try:
            refused = {
                f"{tp.topic}/{tp.partition}": error.__name__ if isinstance(error, type) else str(error)
                for tp, error in legacy.alter_partition_reassignments(
                    {LegacyPartition(topic, partition): replicas for (topic, partition), replicas in target.items()}
                ).items()
                if error is not None
            }
            if refused:
                raise ClusterError(f"the cluster refused the reassignment of {refused}")
            report(f"reassigning {len(target)} partitions")
            deadline = time.monotonic() + timeout_s
            watched = [LegacyPartition(topic, partition) for topic, partition in target]
            while ongoing := legacy.list_partition_reassignments(watched):
                if time.monotonic() > deadline:
                    raise ClusterError(
                        f"{len(ongoing)} reassignments still run after {timeout_s:g} s; they go on in the cluster "
                        "(kafka-reassign-partitions --verify shows them)."
                    )
                time.sleep(0.5)
        except KafkaError as exc:
            raise ClusterError(f"the reassignment failed: {exc}") from None
        report("reassignments complete")
        _elect_preferred(admin, target, report)
    finally:
        legacy.close()
        if throttle is not None:
            _throttle(admin, target, current, None)


def _throttle(
    admin, target: dict[tuple[str, int], list[int]], current: dict[tuple[str, int], list[int]], rate: float | None
) -> None:
    """Set (rate) or remove (None) the replication throttle of a reassignment, as kafka-reassign-partitions does:
    a rate on every broker taking part, and on each topic the replicas it applies to — the current ones as
    leaders, the new ones as followers."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    op = AlterConfigOpType.SET if rate is not None else AlterConfigOpType.DELETE
    value = str(int(rate)) if rate is not None else None
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (topic, partition), replicas in target.items():
        before = current.get((topic, partition), [])
        leaders.setdefault(topic, []).extend(f"{partition}:{b}" for b in before)
        followers.setdefault(topic, []).extend(f"{partition}:{b}" for b in replicas if b not in before)
        brokers.update(before, replicas)
    resources = [
        ConfigResource(
            ResourceType.BROKER,
            str(broker),
            incremental_configs=[
                ConfigEntry(name, value, incremental_operation=op)
                for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
            ],
        )
        for broker in sorted(brokers)
    ] + [
        ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry(
                    "leader.replication.throttled.replicas",
                    ",".join(leaders[topic]) if rate is not None else None,
                    incremental_operation=op,
                ),
                ConfigEntry(
                    "follower.replication.throttled.replicas",
                    ",".join(followers[topic]) if rate is not None else None,
                    incremental_operation=op,
                ),
            ],
        )
        for topic in sorted(leaders)
    ]
    from confluent_kafka import KafkaException

    # librdkafka takes one broker resource per call
    batches = [[r] for r in resources if r.restype == ResourceType.BROKER]
    batches.append([r for r in resources if r.restype == ResourceType.TOPIC])
    try:
        for batch in batches:
            for future in admin.incremental_alter_configs(batch).values():
                future.result(TIMEOUT_S)
        if rate is None:
            _await_removed(admin, batches[-1])
    except KafkaException as exc:
        raise ClusterError(f"setting the replication throttle failed: {exc.args[0]}") from None


def _await_removed(admin, topics: list[Any]) -> None:
    """Until every topic (a ConfigResource of the removal) describes the throttles it removed as gone: the
    controller accepts a removal before the brokers' metadata shows it, and a caller reading the topics' configs
    when this returns must not find them."""
    from confluent_kafka.admin import ConfigResource

    names = {entry.name for topic in topics for entry in topic.incremental_configs}
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        futures = admin.describe_configs([ConfigResource(topic.restype, topic.name) for topic in topics]).values()
        described = [future.result(TIMEOUT_S) for future in futures]
        if all(entries[name].is_default or not entries[name].value for entries in described for name in names):
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"the topics still show replication throttles after {TIMEOUT_S:g} s")
        time.sleep(0.2)


def _elect_preferred(admin, target: dict[tuple[str, int], list[int]], report: Callable[[str], None]) -> None:
    """Make each moved partition's first replica its leader; a partition whose preferred leader leads already
    needs no election, one that cannot elect now is reported (the cluster's automatic rebalance will)."""
    from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition

    try:
        results = admin.elect_leaders(
            ElectionType.PREFERRED, [TopicPartition(topic, partition) for topic, partition in target]
        ).result(TIMEOUT_S)
    except KafkaException as exc:
        report(f"preferred leader election failed: {exc.args[0]}")
        return
    for partition, error in sorted(results.items(), key=lambda item: (item[0].topic, item[0].partition)):
        if error is not None and error.code() != KafkaError.ELECTION_NOT_NEEDED:
            report(f"the leader of {partition.topic}/{partition.partition} stays for now: {error.str()}")


def replicas_of(bootstrap: str, topics: Sequence[str]) -> dict[tuple[str, int], list[int]]:
    """(topic, partition) → its replica list as the cluster describes it now."""
    from confluent_kafka import TopicCollection

    admin = _admin(bootstrap)
    return {
        (description.name, info.id): [node.id for node in info.replicas]
        for future in admin.describe_topics(TopicCollection(list(topics)), request_timeout=TIMEOUT_S).values()
        for description in [future.result(TIMEOUT_S)]
        for info in description.partitions
    }
