"""The control loop (Landau et al. §V-C): Synchronize once, then sentinel → reassign → group management."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping

from groupfit_client.client import GroupfitClient
from groupfit_client.controller.processes import ConsumerProcesses
from groupfit_client.controller.protocol import (
    EVERY_CONSUMER,
    Message,
    control_consumer,
    members,
    producer,
    publish,
    received,
)
from groupfit_client.results import PartitionRate, TopicPartition

log = logging.getLogger("groupfit.controller")


class Controller:
    def __init__(
        self,
        service: GroupfitClient,
        bootstrap: str,
        topic: str,
        group: str,
        control_topic: str,
        processes: ConsumerProcesses,
        capacity: float,
        algorithm: str = "mwf",
        period_s: float = 60.0,
        ack_timeout_s: float = 30.0,
    ) -> None:
        self.service, self.topic, self.group, self.control_topic = service, topic, group, control_topic
        self.bootstrap = bootstrap
        self.processes, self.capacity, self.algorithm = processes, capacity, algorithm
        self.period_s, self.ack_timeout_s = period_s, ack_timeout_s
        self.control = control_consumer(bootstrap, control_topic)
        self.producer = producer(bootstrap)
        self.state: dict[str, set[TopicPartition]] = {}  # what each consumer really reads
        self.last_reassign = 0.0

    # -- Synchronize ----------------------------------------------------------------------
    def synchronize(self, grace_s: float = 3.0) -> None:
        """Ask every consumer what it reads (after a controller restart, before acting). Who exists comes from
        the broker: every controlled consumer is a member of the group's membership group (DescribeGroups),
        including those an earlier controller started. Those the process manager runs must answer; a member
        that does not answer within the ack timeout is taken as gone (the broker drops a dead one only after
        its session timeout). Others that answer within `grace_s` are kept too."""
        running = set(self.processes.running())
        try:
            listed = members(self.bootstrap, self.group)
        except Exception as exc:  # the broker cannot tell: only the grace period finds the others
            log.warning("could not describe the consumers' membership group: %s", exc)
            listed = set()
        expected = running | listed
        command_id = uuid.uuid4().hex
        self._send_command(Message("sync", EVERY_CONSUMER, command_id))
        answered: dict[str, set[TopicPartition]] = {}
        grace_end, deadline = time.monotonic() + grace_s, time.monotonic() + self.ack_timeout_s
        while (time.monotonic() < grace_end or expected - set(answered)) and time.monotonic() < deadline:
            for reply in self._replies():
                if reply.type == "state" and reply.command_id == command_id:
                    answered[reply.consumer] = set(reply.partitions or ())
        if running - set(answered):
            raise TimeoutError(f"no state from {sorted(running - set(answered))} within {self.ack_timeout_s} s")
        if listed - set(answered):
            log.warning("consumers %s are members but did not answer: taken as gone", sorted(listed - set(answered)))
        self.state = answered

    # -- Sentinel -------------------------------------------------------------------------
    def needs_reassign(self, rates: Mapping[TopicPartition, float]) -> bool:
        owned = {tp for held in self.state.values() for tp in held}
        overloaded = any(sum(rates.get(tp, 0.0) for tp in held) > self.capacity for held in self.state.values())
        return overloaded or bool(set(rates) - owned) or time.monotonic() - self.last_reassign > self.period_s

    # -- Reassign and group management ----------------------------------------------------
    def step(self) -> bool:
        """One sentinel → reassign → group management round; True if the assignment changed."""
        rates = self.service.rates(self.group).rates
        if not self.needs_reassign(rates):
            return False
        answer = self.service.assign_idempotent(
            {
                "algorithm": self.algorithm,
                "capacity": self.capacity,
                "group": self.group,
                "partitions": [PartitionRate(*tp, rate) for tp, rate in sorted(rates.items())],
                "previous": {c: sorted(held) for c, held in self.state.items() if held},
            }
        )
        self.last_reassign = time.monotonic()
        return self.apply({c: set(held) for c, held in answer.assignment.items()})

    def apply(self, target: Mapping[str, set[TopicPartition]]) -> bool:
        """Move to `target` with stop → acknowledge → start, creating and deleting consumers as needed."""
        for consumer in sorted(set(target) - set(self.processes.running()) - set(self.state)):
            self.processes.create(consumer)
            self._wait_for_hello(consumer)
            self.state.setdefault(consumer, set())
        owner = {tp: c for c, held in self.state.items() for tp in held}
        stops: dict[str, list[TopicPartition]] = {}
        starts: dict[str, list[TopicPartition]] = {}
        for consumer, held in target.items():
            for tp in held:
                if owner.get(tp) != consumer:
                    if tp in owner:
                        stops.setdefault(owner[tp], []).append(tp)
                    starts.setdefault(consumer, []).append(tp)
        if stops:
            self.state.update(self._command_all("stop", stops))
        if starts:
            self.state.update(self._command_all("start", starts))
        idle = sorted(c for c, held in self.state.items() if not held and c not in target)
        ours = set(self.processes.running())
        for consumer in idle:
            if consumer in ours:
                self.processes.delete(consumer)
            del self.state[consumer]
        adopted = [c for c in idle if c not in ours]
        if adopted:  # started by an earlier controller: no process handle, so it is asked to quit
            self._command_all("quit", {c: [] for c in adopted})
        return bool(stops or starts)

    def _command_all(
        self, kind: str, partitions: Mapping[str, Iterable[TopicPartition]]
    ) -> dict[str, set[TopicPartition]]:
        """Send `kind` to each consumer with its partitions; what each reads once it acknowledged."""
        pending = {}
        for consumer, parts in partitions.items():
            command_id = uuid.uuid4().hex
            pending[command_id] = consumer
            self._send_command(Message(kind, consumer, command_id, tuple(sorted(parts))))
        answered: dict[str, set[TopicPartition]] = {}
        deadline = time.monotonic() + self.ack_timeout_s
        while pending and time.monotonic() < deadline:
            for reply in self._replies():
                if reply.type == "ack" and reply.command_id in pending:
                    answered[pending.pop(reply.command_id)] = set(reply.partitions or ())
        if pending:
            raise TimeoutError(f"no ack from {sorted(pending.values())} within {self.ack_timeout_s} s")
        return answered

    def _send_command(self, message: Message) -> None:
        publish(self.producer, self.control_topic, message)

    def _replies(self) -> list[Message]:
        return received(self.control, timeout=0.2)

    def _wait_for_hello(self, consumer: str) -> None:
        deadline = time.monotonic() + self.ack_timeout_s
        while time.monotonic() < deadline:
            if any(reply.type == "hello" and reply.consumer == consumer for reply in self._replies()):
                return
        raise TimeoutError(f"consumer {consumer} did not start within {self.ack_timeout_s} s")

    def run(self, interval_s: float = 5.0) -> None:
        self.synchronize()
        while True:
            try:
                self.step()
            except Exception as exc:
                log.warning("controller round failed: %s", exc)
            time.sleep(interval_s)
