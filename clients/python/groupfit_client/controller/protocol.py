"""The control topic (one partition) through which the controller commands its consumers and they answer.

Commands: `stop` (commit, then stop reading the partitions), `start` (read them from the committed offset),
`sync` (say what you read; to one consumer or to all, "*"), `quit` (exit, once reading nothing). Replies:
`hello` (a consumer has started), `ack` (to stop, start and quit), `state` (to sync); a reply repeats its
command's id and carries what the consumer reads after applying it. Each record is one JSON object.
"""

from __future__ import annotations

import json
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
    _, end = consumer.get_watermark_offsets(KafkaTP(control_topic, 0), timeout=10)
    consumer.assign([KafkaTP(control_topic, 0, end)])
    return consumer


def producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    # One record per request: the embedded test broker miscounts multi-record batches.
    return Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0})


def publish(producer: Any, control_topic: str, message: Message) -> None:
    producer.produce(control_topic, value=message.encode(), partition=0)
    producer.flush(10)


def received(control: Any, timeout: float) -> list[Message]:
    """The messages `control` (a control_consumer) reads within `timeout` seconds, in order."""
    records = control.consume(num_messages=50, timeout=timeout)
    messages = (Message.decode(r.value()) for r in records if r.error() is None)
    return [m for m in messages if m is not None]
