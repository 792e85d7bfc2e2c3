"""Controller mode (Landau et al. §V): groupfit decides how many consumers a group has and which partitions
each reads, and the controller moves partitions so that no two consumers ever read one partition at once.

- `ControlledConsumer` wraps a confluent-kafka Consumer with manual, incremental assignment. Between batches
  it applies commands from the control topic and acknowledges them: `stop` (commit, then unassign), `start`
  (assign from the committed offset), `sync` (report what it reads; sent to one consumer or to all, "*"),
  `quit` (exit, once it reads nothing).
- `Controller` runs sentinel → reassign → group management (§V-C): it reads the group's rates, asks
  POST /v1/assign when a consumer is over capacity, a partition is unowned or the period has passed, and
  applies the answer: for each moved partition, stop on the old consumer, wait for its acknowledgement, then
  start on the new one. Consumers the answer needs are created, empty ones deleted, through a
  `ConsumerProcesses` implementation (`LocalProcesses` here; Kubernetes at deploy time).
- After a restart the controller first rebuilds the group's real state by asking every consumer (the
  Synchronize state) before it acts. Consumers an earlier controller started answer too and are kept: their
  partitions move with the same protocol, and once empty they are told to quit.

    python -m groupfit_client.controller controller --service URL --bootstrap … --topic … --group … \
        --control-topic … --capacity C
    python -m groupfit_client.controller consumer --id c0 --bootstrap … --topic … --group … --control-topic …
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import subprocess
import sys
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from groupfit_client.http import GroupfitClient

log = logging.getLogger("groupfit.controller")

TopicPartition = tuple[str, int]


def _control_consumer(bootstrap: str, control_topic: str) -> Any:
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


def _producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    # One record per request: the embedded test broker miscounts multi-record batches.
    return Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0})


COMMANDS = ("stop", "start", "sync", "quit")
EVERY_CONSUMER = "*"


def _publish(producer: Any, control_topic: str, body: dict[str, Any]) -> None:
    producer.produce(control_topic, value=json.dumps(body).encode(), partition=0)
    producer.flush(10)


class ControlledConsumer:
    def __init__(
        self,
        consumer_id: str,
        bootstrap: str,
        topic: str,
        group: str,
        control_topic: str,
        handle: Callable[[Any], None],
    ) -> None:
        from confluent_kafka import Consumer

        self.id, self.topic, self.control_topic, self.handle = consumer_id, topic, control_topic, handle
        self.data = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.control = _control_consumer(bootstrap, control_topic)
        self.producer = _producer(bootstrap)
        self.owned: set[TopicPartition] = set()
        self.quitting = False

    def run(self, seconds: float | None = None) -> None:
        self._send({"type": "hello", "consumer": self.id})
        deadline = None if seconds is None else time.monotonic() + seconds
        while not self.quitting and (deadline is None or time.monotonic() < deadline):
            handled = 0
            for message in self.data.consume(num_messages=100, timeout=0.2) if self.owned else []:
                if message.error() is None:
                    self.handle(message)
                    handled += 1
            if handled:
                self.data.commit(asynchronous=False)
            else:
                time.sleep(0.05 if self.owned else 0.2)
            self._apply_commands()

    def _kafka_partitions(self, partitions: set[TopicPartition]) -> list[Any]:
        from confluent_kafka import TopicPartition as KafkaTP

        return [KafkaTP(t, p) for t, p in sorted(partitions)]

    def _apply_commands(self) -> None:
        for message in self.control.consume(num_messages=50, timeout=0.05):
            if message.error() is not None:
                continue
            command = json.loads(message.value())
            if command.get("consumer") not in (self.id, EVERY_CONSUMER) or command.get("type") not in COMMANDS:
                continue
            if command["consumer"] == EVERY_CONSUMER and command["type"] != "sync":
                continue  # only a question may go to everyone
            partitions = {(t, p) for t, p in command.get("partitions", [])}
            if command["type"] == "stop" and partitions & self.owned:
                stopping = partitions & self.owned
                positions = self.data.position(self._kafka_partitions(stopping))
                committable = [tp for tp in positions if tp.offset >= 0]
                if committable:
                    self.data.commit(offsets=committable, asynchronous=False)  # the next owner starts here
                self.data.incremental_unassign(self._kafka_partitions(stopping))
                self.owned -= stopping
            elif command["type"] == "start" and partitions - self.owned:
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
            elif command["type"] == "quit" and not self.owned:
                self.quitting = True
            self._send(
                {
                    "type": "ack" if command["type"] != "sync" else "state",
                    "consumer": self.id,
                    "command_id": command.get("command_id"),
                    "partitions": sorted(self.owned),
                }
            )

    def _send(self, body: dict[str, Any]) -> None:
        _publish(self.producer, self.control_topic, body)

    def close(self) -> None:
        self.data.close()
        self.control.close()


class ConsumerProcesses(ABC):
    """Creates and deletes the group's consumers (a local process each here; pods in Kubernetes)."""

    @abstractmethod
    def create(self, consumer_id: str) -> None: ...

    @abstractmethod
    def delete(self, consumer_id: str) -> None: ...

    @abstractmethod
    def running(self) -> list[str]: ...


class LocalProcesses(ConsumerProcesses):
    def __init__(
        self, bootstrap: str, topic: str, group: str, control_topic: str, record_log: str | None = None
    ) -> None:
        self.args = ["--bootstrap", bootstrap, "--topic", topic, "--group", group, "--control-topic", control_topic]
        if record_log:
            self.args += ["--record-log", record_log]
        self.processes: dict[str, subprocess.Popen] = {}

    def create(self, consumer_id: str) -> None:
        self.delete(consumer_id)  # one process per id, even if an earlier one died
        self.processes[consumer_id] = subprocess.Popen(
            [sys.executable, "-m", "groupfit_client.controller", "consumer", "--id", consumer_id, *self.args]
        )

    def delete(self, consumer_id: str) -> None:
        process = self.processes.pop(consumer_id, None)
        if process is not None:
            process.terminate()
            process.wait(timeout=15)

    def running(self) -> list[str]:
        return sorted(c for c, p in self.processes.items() if p.poll() is None)

    def close(self) -> None:
        for consumer in list(self.processes):
            self.delete(consumer)


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
        self.processes, self.capacity, self.algorithm = processes, capacity, algorithm
        self.period_s, self.ack_timeout_s = period_s, ack_timeout_s
        self.control = _control_consumer(bootstrap, control_topic)
        self.producer = _producer(bootstrap)
        self.state: dict[str, set[TopicPartition]] = {}  # what each consumer really reads
        self.last_reassign = 0.0

    # -- Synchronize ----------------------------------------------------------------------
    def synchronize(self, grace_s: float = 3.0) -> None:
        """Ask every consumer what it reads (after a controller restart, before acting): the ones the process
        manager knows must answer; any other that answers within `grace_s` (started by an earlier
        controller) is kept too, since it may be reading partitions."""
        expected = set(self.processes.running())
        command_id = uuid.uuid4().hex
        self._send_command({"type": "sync", "consumer": EVERY_CONSUMER, "command_id": command_id})
        answered: dict[str, set[TopicPartition]] = {}
        grace_end, deadline = time.monotonic() + grace_s, time.monotonic() + self.ack_timeout_s
        while (time.monotonic() < grace_end or expected - set(answered)) and time.monotonic() < deadline:
            for body in self._replies():
                if body.get("type") == "state" and body.get("command_id") == command_id:
                    answered[body["consumer"]] = {(t, p) for t, p in body["partitions"]}
        if expected - set(answered):
            raise TimeoutError(f"no state from {sorted(expected - set(answered))} within {self.ack_timeout_s} s")
        self.state = answered

    # -- Sentinel -------------------------------------------------------------------------
    def needs_reassign(self, rates: dict[TopicPartition, float]) -> bool:
        owned = {tp for held in self.state.values() for tp in held}
        overloaded = any(sum(rates.get(tp, 0.0) for tp in held) > self.capacity for held in self.state.values())
        return overloaded or bool(set(rates) - owned) or time.monotonic() - self.last_reassign > self.period_s

    # -- Reassign and group management ----------------------------------------------------
    def step(self) -> bool:
        """One sentinel → reassign → group management round; True if the assignment changed."""
        stored = self.service.rates(self.group)
        rates = {(p["topic"], p["partition"]): p["rate"] for p in stored["partitions"]}
        if not self.needs_reassign(rates):
            return False
        answer = self.service.assign_idempotent(
            {
                "algorithm": self.algorithm,
                "capacity": self.capacity,
                "group": self.group,
                "partitions": [{"topic": t, "partition": p, "rate": r} for (t, p), r in sorted(rates.items())],
                "previous": {
                    c: [{"topic": t, "partition": p} for t, p in sorted(held)] for c, held in self.state.items() if held
                },
            }
        )
        self.last_reassign = time.monotonic()
        return self.apply({c: {(p["topic"], p["partition"]) for p in held} for c, held in answer["assignment"].items()})

    def apply(self, target: dict[str, set[TopicPartition]]) -> bool:
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
            for consumer, partitions in self._command_all("stop", stops, "ack").items():
                self.state[consumer] = {(t, p) for t, p in partitions}
        if starts:
            for consumer, partitions in self._command_all("start", starts, "ack").items():
                self.state[consumer] = {(t, p) for t, p in partitions}
        idle = sorted(c for c, held in self.state.items() if not held and c not in target)
        ours = set(self.processes.running())
        for consumer in idle:
            if consumer in ours:
                self.processes.delete(consumer)
            del self.state[consumer]
        adopted = [c for c in idle if c not in ours]
        if adopted:  # started by an earlier controller: no process handle, so it is asked to quit
            self._command_all("quit", {c: [] for c in adopted}, "ack")
        return bool(stops or starts)

    def _command_all(self, kind: str, partitions: dict[str, list], reply: str) -> dict[str, list]:
        pending = {}
        for consumer, parts in partitions.items():
            command_id = uuid.uuid4().hex
            pending[command_id] = consumer
            self._send_command(
                {"type": kind, "consumer": consumer, "command_id": command_id, "partitions": sorted(parts)}
            )
        answered: dict[str, list] = {}
        deadline = time.monotonic() + self.ack_timeout_s
        while pending and time.monotonic() < deadline:
            for body in self._replies():
                if body.get("type") == reply and body.get("command_id") in pending:
                    answered[pending.pop(body["command_id"])] = body["partitions"]
        if pending:
            raise TimeoutError(f"no {reply} from {sorted(pending.values())} within {self.ack_timeout_s} s")
        return answered

    def _send_command(self, body: dict[str, Any]) -> None:
        _publish(self.producer, self.control_topic, body)

    def _replies(self) -> list[dict[str, Any]]:
        return [json.loads(m.value()) for m in self.control.consume(num_messages=50, timeout=0.2) if m.error() is None]

    def _wait_for_hello(self, consumer: str) -> None:
        deadline = time.monotonic() + self.ack_timeout_s
        while time.monotonic() < deadline:
            if {"type": "hello", "consumer": consumer} in self._replies():
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


def _consumer_main(args: argparse.Namespace) -> None:
    with contextlib.ExitStack() as stack:
        log_file = stack.enter_context(open(args.record_log, "a", buffering=1)) if args.record_log else None

        def handle(message: Any) -> None:
            if log_file is not None:
                log_file.write(f"{message.topic()} {message.partition()} {message.offset()} {args.id}\n")

        consumer = ControlledConsumer(args.id, args.bootstrap, args.topic, args.group, args.control_topic, handle)
        stack.callback(consumer.close)
        consumer.run()


def _controller_main(args: argparse.Namespace) -> None:
    # Consumers outlive the controller on purpose: a restarted controller finds them by Synchronize.
    processes = LocalProcesses(args.bootstrap, args.topic, args.group, args.control_topic)
    with GroupfitClient(args.service) as service:
        Controller(
            service,
            args.bootstrap,
            args.topic,
            args.group,
            args.control_topic,
            processes,
            args.capacity,
            args.algorithm,
            args.period_s,
        ).run(args.interval_s)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m groupfit_client.controller")
    sub = parser.add_subparsers(dest="role", required=True)
    roles = {
        "controller": sub.add_parser("controller", help="the controller loop, with consumers as local processes"),
        "consumer": sub.add_parser("consumer", help="a consumer the controller commands"),
    }
    for role in roles.values():
        role.add_argument("--bootstrap", required=True)
        role.add_argument("--topic", required=True)
        role.add_argument("--group", required=True)
        role.add_argument("--control-topic", required=True)
    controller = roles["controller"]
    controller.add_argument("--service", default="http://127.0.0.1:8000")
    controller.add_argument("--capacity", type=float, required=True, help="what one consumer can read (rates' unit)")
    controller.add_argument("--algorithm", default="mwf")
    controller.add_argument("--period-s", type=float, default=60.0, help="reassign at least this often")
    controller.add_argument("--interval-s", type=float, default=5.0, help="time between sentinel checks")
    consumer = roles["consumer"]
    consumer.add_argument("--id", required=True)
    consumer.add_argument("--record-log", help="append 'topic partition offset consumer' per record read")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    (_controller_main if args.role == "controller" else _consumer_main)(args)


if __name__ == "__main__":
    main()
