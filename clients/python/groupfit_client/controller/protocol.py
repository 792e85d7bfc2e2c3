"""The control topic (one partition) through which the controller commands its consumers and they answer.

Commands: `stop` (commit, then stop reading the partitions), `start` (read them from the committed offset),
`sync` (say what you read; to one consumer or to all, "*"), `quit` (exit, once reading nothing). Replies:
`hello` (a consumer has started), `ack` (to stop, start and quit), `state` (to sync); a reply repeats its
command's id and carries what the consumer reads after applying it. Each record is one JSON object.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from groupfit_client.results import TopicPartition

COMMANDS = ("stop", "start", "sync", "quit")
EVERY_CONSUMER = "*"


@dataclass(frozen=True)
class Message:
    """A record of the control topic: a command to a consumer, or a consumer's reply."""

    type: str  # a command (COMMANDS) or a reply: hello, ack, state
    consumer: str  # a command's addressee (EVERY_CONSUMER: all, for sync only); a reply's sender
    command_id: str | None = None  # a command's id, repeated by its reply
    partitions: tuple[TopicPartition, ...] | None = None  # what to stop or start; in a reply, what it reads

    def encode(self) -> bytes:
        body: dict[str, Any] = {"type": self.type, "consumer": self.consumer}
        if self.command_id is not None:
            body["command_id"] = self.command_id
        if self.partitions is not None:
            body["partitions"] = [list(tp) for tp in self.partitions]
        return json.dumps(body).encode()

    @classmethod
    def decode(cls, value: bytes) -> Message | None:
        """The message in a record's value; None for a record that is not one (it is skipped)."""
        try:
            body = json.loads(value)
            partitions = body.get("partitions")
            return cls(
                str(body["type"]),
                str(body["consumer"]),
                body.get("command_id"),
                None if partitions is None else tuple(TopicPartition(str(t), int(p)) for t, p in partitions),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def control_consumer(bootstrap: str, control_topic: str) -> Any:
    """A reader of the control topic from its current end, resolved now: a command or reply sent after
    this call is never missed."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTP

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"control-{uuid.uuid4().hex}", "enable.auto.commit": False}
    )
    consumer.assign([KafkaTP(control_topic, 0, end_offset(consumer, KafkaTP(control_topic, 0), timeout=10))])
    return consumer


def end_offset(consumer: Any, partition: Any, timeout: float) -> int:
    """`partition`'s end offset. A topic created a moment ago may have no leader yet on the broker asked
    (NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PART until the metadata spreads):
    asked again until `timeout` seconds have passed, then the error is raised."""
    from confluent_kafka import KafkaError, KafkaException

    not_yet = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART}
    deadline = time.monotonic() + timeout
    while True:
        try:
            return int(consumer.get_watermark_offsets(partition, timeout=max(deadline - time.monotonic(), 0.1))[1])
        except KafkaException as error:
            if error.args[0].code() not in not_yet or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})  # commands wait for no batch


def publish(producer: Any, control_topic: str, message: Message) -> None:
    producer.produce(control_topic, value=message.encode(), partition=0)
    producer.flush(10)


def received(control: Any, timeout: float) -> list[Message]:
    """The messages `control` (a control_consumer) reads within `timeout` seconds, in order."""
    records = control.consume(num_messages=50, timeout=timeout)
    messages = (Message.decode(r.value()) for r in records if r.error() is None)
    return [m for m in messages if m is not None]


def membership_group(group: str) -> str:
    """The classic consumer group in which every controlled consumer of `group` is a member (its client.id is
    the consumer's id), so that the broker's DescribeGroups lists the consumers that exist."""
    return f"{group}.controlled"


def membership(bootstrap: str, group: str, control_topic: str, consumer_id: str) -> Any:
    """A member of `membership_group(group)` that reads nothing: it joins with the control topic as its
    subscription and pauses whatever it is given; `poll(0)` keeps it in the group."""
    from confluent_kafka import Consumer

    member = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": membership_group(group),
            "client.id": consumer_id,
            "enable.auto.commit": False,
            "session.timeout.ms": 10_000,  # a consumer that died leaves the list within 10 s
        }
    )
    member.subscribe([control_topic], on_assign=lambda consumer, partitions: consumer.pause(partitions))
    return member


def members(bootstrap: str, group: str, timeout: float = 10.0) -> set[str]:
    """The ids of the controlled consumers of `group` the broker knows (DescribeGroups)."""
    from confluent_kafka.admin import AdminClient

    name = membership_group(group)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([name], request_timeout=timeout)[name].result()
    return {member.client_id for member in description.members}
