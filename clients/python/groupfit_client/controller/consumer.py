"""A consumer the controller commands: a confluent-kafka Consumer with manual, incremental assignment that,
between batches, applies its commands from the control topic and acknowledges them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from groupfit_client.controller.protocol import (
    COMMANDS,
    EVERY_CONSUMER,
    Message,
    control_consumer,
    membership,
    producer,
    publish,
    received,
)
from groupfit_client.results import TopicPartition


class ControlledConsumer:
    def __init__(
        self,
        consumer_id: str,
        bootstrap: str,
        topic: str,
        group: str,
        control_topic: str,
        handle: Callable[[Any], None] | None = None,
        handle_batch: Callable[[list[Any]], None] | None = None,
        on_change: Callable[[str, set[TopicPartition]], None] | None = None,
    ) -> None:
        """`handle` gets each record read, or `handle_batch` each batch; `on_change` each `stop` or `start`
        applied, with the partitions it stopped or started."""
        from confluent_kafka import Consumer

        self.id, self.topic, self.control_topic = consumer_id, topic, control_topic
        self.handle, self.handle_batch, self.on_change = handle, handle_batch, on_change
        self.data = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.control = control_consumer(bootstrap, control_topic)
        self.member = membership(bootstrap, group, control_topic, consumer_id)
        self.producer = producer(bootstrap)
        self.owned: set[TopicPartition] = set()
        self.quitting = False

    def run(self, seconds: float | None = None) -> None:
        self._send(Message("hello", self.id))
        deadline = None if seconds is None else time.monotonic() + seconds
        while not self.quitting and (deadline is None or time.monotonic() < deadline):
            # A short wait for a batch: records are handled as they come, not held until 100 are there.
            batch = self.data.consume(num_messages=100, timeout=0.05) if self.owned else []
            messages = [message for message in batch if message.error() is None]
            if messages and self.handle_batch is not None:
                self.handle_batch(messages)
            if self.handle is not None:
                for message in messages:
                    self.handle(message)
            if messages:
                self.data.commit(asynchronous=False)
            elif not self.owned:
                time.sleep(0.2)
            # Commands are fetched in the background: a busy consumer takes what has come without waiting.
            self._apply_commands(0.0 if self.owned else 0.05)
            self.member.poll(0)  # stays a member, so a restarted controller finds it through DescribeGroups

    def _kafka_partitions(self, partitions: set[TopicPartition]) -> list[Any]:
        from confluent_kafka import TopicPartition as KafkaTP

        return [KafkaTP(t, p) for t, p in sorted(partitions)]

    def _apply_commands(self, wait_s: float) -> None:
        for command in received(self.control, timeout=wait_s):
            if command.consumer not in (self.id, EVERY_CONSUMER) or command.type not in COMMANDS:
                continue
            if command.consumer == EVERY_CONSUMER and command.type != "sync":
                continue  # only a question may go to everyone
            partitions = set(command.partitions or ())
            if command.type == "stop" and partitions & self.owned:
                stopping = partitions & self.owned
                positions = self.data.position(self._kafka_partitions(stopping))
                committable = [tp for tp in positions if tp.offset >= 0]
                if committable:
                    self.data.commit(offsets=committable, asynchronous=False)  # the next owner starts here
                self.data.incremental_unassign(self._kafka_partitions(stopping))
                self.owned -= stopping
                if self.on_change is not None:
                    self.on_change("stop", stopping)
            elif command.type == "start" and partitions - self.owned:
                starting = partitions - self.owned
                from confluent_kafka import OFFSET_BEGINNING
                from confluent_kafka import TopicPartition as KafkaTP

                committed = self.data.committed(self._kafka_partitions(starting), timeout=10)
                self.data.incremental_assign(
                    [
                        KafkaTP(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                        for tp in committed
                    ]
                )
                self.owned |= starting
                if self.on_change is not None:
                    self.on_change("start", starting)
            elif command.type == "quit" and not self.owned:
                self.quitting = True
            reply = "ack" if command.type != "sync" else "state"
            self._send(Message(reply, self.id, command.command_id, tuple(sorted(self.owned))))

    def _send(self, message: Message) -> None:
        publish(self.producer, self.control_topic, message)

    def close(self) -> None:
        self.data.close()
        self.control.close()
        self.member.close()
