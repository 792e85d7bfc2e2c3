"""The autoscaler: every decision interval it reads a group's arrival rates and lags from the broker's offsets,
stores them in groupfit, decides how many consumers the group needs, and starts or stops consumer processes
(Ezzeddine et al.'s controller, §4-5; docs/autoscaling.md).

- Rates and lags come from the broker, as the seed's controller and KEDA read them: per partition, rate =
  Δ end offset / Δt between two intervals (events/s) and lag = end offset − the group's committed offset (from
  the log start where it never committed), by two admin requests (ListOffsets, OffsetFetch) per interval.
- Strategies: any registered groupfit algorithm (`least-loaded`, `mwf`, `repack`, …) asks the service
  (`GET /v1/groups/{group}/scale`) after storing the rates (`PUT /v1/groups/{group}/rates`), so the leaders'
  assignors use them; `linear` scales as KEDA does, ⌈Σ rate / (μ·f_up)⌉ up and ⌈Σ rate / (μ·f_down)⌉ down,
  with the consumers on Kafka's own assignor; `fixed` keeps N.
- It acts on a settled group only: after it starts or stops consumers it waits until the broker lists the group
  Stable with as many members as it runs (or `settle_timeout_s` passes), so one load change is one action.
- Consumers are processes of `--consumer-command` with `{id}` replaced by a stable identity (c0, c1, …, the
  lowest free first), stopped by SIGTERM (a graceful leave), SIGKILL after a timeout, newest first unless the
  decision names which (`remove`); `ConsumerProcesses` is the one interface (a StatefulSet in Kubernetes).
- Every interval writes one JSON line to the events log; SIGTERM or SIGINT stops every consumer it started.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import math
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import IO, Any, Protocol

from groupfit_client.client import GroupfitClient
from groupfit_client.controller.processes import CommandProcesses, ConsumerProcesses
from groupfit_client.errors import GroupfitError
from groupfit_client.results import PartitionRate, ScaleSignal

log = logging.getLogger("groupfit.autoscaler")

DESCRIPTION = "scale a consumer group's processes on its rates and lags, read from the broker's offsets"
LOCAL_STRATEGIES = ("linear", "fixed")
"""Strategies decided here; any other name is a groupfit algorithm, decided by the service."""


class AutoscaleError(Exception):
    """Bad input or a part that is not there (no broker, no topic, no service): said before anything starts."""


@dataclass(frozen=True)
class Settings:
    bootstrap_servers: str
    topic: str
    group: str
    strategy: str
    consumer_command: list[str]
    events_log: str
    service_url: str | None = None
    consumers: int | None = None
    mu: float = 200.0
    w_sla: float = 0.5
    f_up: float = 0.9
    f_down: float = 0.4
    rebalance_s: float = 0.05
    interval_s: float = 1.0
    min_consumers: int = 1
    max_consumers: int = 20
    duration_s: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    settle_timeout_s: float = 30.0
    stop_timeout_s: float = 15.0

    @property
    def asks_service(self) -> bool:
        return self.strategy not in LOCAL_STRATEGIES

    def check(self) -> None:
        """Every rule a setting must follow, said as a sentence a person can act on."""
        rules = [
            (self.mu > 0 and math.isfinite(self.mu), "--mu must be a number of events/s above 0"),
            (self.w_sla > 0 and math.isfinite(self.w_sla), "--w-sla must be a number of seconds above 0"),
            (0 < self.f_down < self.f_up <= 1, "--f-down and --f-up must satisfy 0 < f_down < f_up <= 1"),
            (0 <= self.rebalance_s < math.inf, "--rebalance-s must be at least 0"),
            (0 < self.interval_s < math.inf, "--interval-s must be above 0"),
            (
                1 <= self.min_consumers <= self.max_consumers,
                "--min-consumers must be at least 1 and at most --max-consumers",
            ),
            (self.duration_s is None or self.duration_s > 0, "--duration-s must be above 0"),
            (any("{id}" in part for part in self.consumer_command), "--consumer-command must contain {id}"),
            (self.strategy != "fixed" or (self.consumers or 0) >= 1, "--strategy fixed needs --consumers N (N >= 1)"),
            (self.consumers is None or self.consumers >= 1, "--consumers must be at least 1"),
            (
                not self.asks_service or bool(self.service_url),
                f"--strategy {self.strategy!r} is not linear or fixed, so it names a groupfit algorithm: give --service-url",
            ),
        ]
        for holds, rule in rules:
            if not holds:
                raise AutoscaleError(rule)

    def algorithm_params(self) -> dict[str, Any]:
        """The service's algorithm parameters: least-loaded's own from μ, w_sla, f and t_r, then --params."""
        mine = {"mu": self.mu, "w_sla": self.w_sla, "rebalance_s": self.rebalance_s}
        return {**(mine if self.strategy == "least-loaded" else {}), **self.params}


# -- what the loop reads and drives, each behind a small interface (fakes in the unit tests) -----------------


@dataclass(frozen=True)
class Sample:
    """The topic's end offsets and the group's committed offsets (None: never committed) at `t` (monotonic s)."""

    t: float
    end: dict[int, int]
    committed: dict[int, int | None]


class Offsets(Protocol):
    def sample(self) -> Sample: ...

    def start_offsets(self) -> dict[int, int]: ...

    def members(self) -> int | None:
        """The group's members when it is Stable, else None."""
        ...


class BrokerOffsets:
    """The broker's view through one admin client: ListOffsets, OffsetFetch, DescribeGroups."""

    def __init__(self, bootstrap: str, topic: str, group: str, timeout_s: float = 5.0) -> None:
        from confluent_kafka.admin import AdminClient

        self.topic, self.group, self.timeout_s = topic, group, timeout_s
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        try:
            metadata = self.admin.list_topics(topic, timeout=timeout_s)
        except Exception as exc:  # librdkafka's KafkaException: no broker answered
            raise AutoscaleError(f"no Kafka broker answered at {bootstrap} within {timeout_s:g} s ({exc})") from None
        described = metadata.topics.get(topic)
        if described is None or described.error is not None or not described.partitions:
            raise AutoscaleError(f"topic {topic!r} does not exist on {bootstrap}; create it first")
        self.partitions = sorted(described.partitions)

    def _offsets(self, which: str) -> dict[int, int]:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        spec = OffsetSpec.latest() if which == "latest" else OffsetSpec.earliest()
        wanted = {TopicPartition(self.topic, p): spec for p in self.partitions}
        futures = self.admin.list_offsets(wanted, request_timeout=self.timeout_s)
        return {tp.partition: future.result().offset for tp, future in futures.items()}

    def start_offsets(self) -> dict[int, int]:
        return self._offsets("earliest")

    def sample(self) -> Sample:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        before = time.monotonic()
        end = self._offsets("latest")
        taken = (before + time.monotonic()) / 2
        request = [ConsumerGroupTopicPartitions(self.group, [TopicPartition(self.topic, p) for p in self.partitions])]
        answer = self.admin.list_consumer_group_offsets(request, request_timeout=self.timeout_s)[self.group].result()
        committed = {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in answer.topic_partitions}
        return Sample(taken, end, committed)

    def members(self) -> int | None:
        from confluent_kafka import ConsumerGroupState

        future = self.admin.describe_consumer_groups([self.group], request_timeout=self.timeout_s)[self.group]
        description = future.result()
        return len(description.members) if description.state == ConsumerGroupState.STABLE else None


class Service(Protocol):
    """What the loop asks of groupfit (GroupfitClient's methods of the same names)."""

    put_rates: Callable[..., Any]
    scale: Callable[..., ScaleSignal]


class Fleet:
    """The consumers the autoscaler runs, by stable identity c0, c1, …: the lowest free one for a new consumer
    (an id is free once its process has exited), the newest first to stop unless named."""

    def __init__(self, processes: ConsumerProcesses, prefix: str = "c") -> None:
        self.processes, self.prefix = processes, prefix
        self.order: list[str] = []  # start order of the running ones

    def reap(self) -> list[str]:
        """The ids still stopping (none for processes that stop at once)."""
        reap = getattr(self.processes, "reap", None)
        return reap() if reap is not None else []

    def running(self) -> list[str]:
        alive = set(self.processes.running())
        self.order = [c for c in self.order if c in alive]
        return list(self.order)

    def start(self, count: int, busy: Sequence[str]) -> list[str]:
        taken = set(self.order) | set(busy)
        started: list[str] = []
        k = 0
        while len(started) < count:
            candidate = f"{self.prefix}{k}"
            if candidate not in taken:
                self.processes.create(candidate)
                self.order.append(candidate)
                started.append(candidate)
            k += 1
        return started

    def stop(self, count: int, named: Sequence[str] = ()) -> list[str]:
        chosen = [c for c in named if c in self.order][:count]
        chosen += [c for c in reversed(self.order) if c not in chosen][: count - len(chosen)]
        for consumer in chosen:
            self.processes.delete(consumer)
            self.order.remove(consumer)
        return chosen


# -- the decisions -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    action: str  # up, down, reass or none
    reason: str
    target: int  # consumers to run
    remove: list[str] = field(default_factory=list)


def linear(total_rate: float, current: int, mu: float, f_up: float, f_down: float) -> Decision:
    """KEDA's rule with the seed's thresholds: ⌈Σ rate / (μ·f_up)⌉ when that is more than the group has, down
    to ⌈Σ rate / (μ·f_down)⌉ when that is fewer."""
    up = max(1, math.ceil(total_rate / (mu * f_up) - 1e-9))
    if up > current:
        return Decision("up", f"⌈Σ rate {total_rate:.4g} / (μ·f_up = {mu * f_up:g})⌉ = {up} > {current}", up)
    down = max(1, math.ceil(total_rate / (mu * f_down) - 1e-9))
    if down < current:
        return Decision("down", f"⌈Σ rate {total_rate:.4g} / (μ·f_down = {mu * f_down:g})⌉ = {down} < {current}", down)
    return Decision("none", f"Σ rate {total_rate:.4g} keeps {current} (up at {up}, down at {down})", current)


def rates_between(before: Sample, after: Sample) -> dict[int, float]:
    """Events per second per partition between two samples (Δ end offset / Δt)."""
    elapsed = max(after.t - before.t, 1e-6)
    return {p: max(0, end - before.end.get(p, end)) / elapsed for p, end in sorted(after.end.items())}


def lags_of(sample: Sample, start: Mapping[int, int]) -> dict[int, int]:
    """End − committed per partition; from the log start where the group never committed."""
    lags = {}
    for p, end in sorted(sample.end.items()):
        position = sample.committed.get(p)
        lags[p] = max(0, end - (position if position is not None else start.get(p, 0)))
    return lags


class Autoscaler:
    def __init__(
        self,
        settings: Settings,
        offsets: Offsets,
        fleet: Fleet,
        service: Service | None,
        events: IO[str],
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings, self.offsets, self.fleet, self.service, self.events = settings, offsets, fleet, service, events
        self.clock, self.wall = clock, wall
        self.start = offsets.start_offsets()
        self.last: Sample | None = None
        self.acted_at: float | None = None  # when it last started or stopped consumers

    def step(self) -> dict[str, Any]:
        """One decision interval: read, store, decide, act, log. Returns the event it logged."""
        stopping = self.fleet.reap()
        before = self.fleet.running()
        rates: dict[int, float] = {}
        lags: dict[int, int] = {}
        members: int | None = None
        try:
            sample = self.offsets.sample()
            if self.last is not None:
                rates = rates_between(self.last, sample)
            lags = lags_of(sample, self.start)
            self.last = sample
            members = self.offsets.members()
            decision = self.decide(rates, lags, len(before), members)
        except AutoscaleError as exc:
            decision = Decision("none", str(exc), len(before))
        except Exception as exc:  # the broker or the service did not answer this interval: try again at the next
            decision = Decision("none", f"no decision this interval: {type(exc).__name__}: {exc}", len(before))
        started, stopped = self.act(decision, before, stopping)
        event = {
            "t": self.wall(),
            "strategy": self.settings.strategy,
            "rates": {str(p): r for p, r in rates.items()},
            "lags": {str(p): lag for p, lag in lags.items()},
            "total_rate": sum(rates.values()),
            "action": decision.action,
            "reason": decision.reason,
            "consumers_before": len(before),
            "consumers_after": len(before) + len(started) - len(stopped),
            "started": started,
            "stopped": stopped,
            "needed": decision.target,
            "members": members,
        }
        self.events.write(json.dumps(event) + "\n")
        self.events.flush()
        return event

    def decide(self, rates: dict[int, float], lags: dict[int, int], current: int, members: int | None) -> Decision:
        s = self.settings
        total = sum(rates.values())
        if s.asks_service and self.last is not None and rates:
            self._store(rates, lags)
        if s.strategy == "fixed":
            target = s.consumers or 1
            return Decision(
                "none" if current == target else ("up" if target > current else "down"), f"fixed at {target}", target
            )
        if current == 0:
            target = s.consumers or max(1, s.min_consumers)
            return Decision("up", f"bootstrap: no consumer runs; starting {target}", target)
        if members != current and self.acted_at is not None and self.clock() - self.acted_at < s.settle_timeout_s:
            seen = "rebalancing" if members is None else f"{members} members"
            return Decision("none", f"waiting for the group to settle ({seen}, {current} running)", current)
        if not rates:
            return Decision("none", "the first interval measures no rate yet", current)
        if s.strategy == "linear":
            return linear(total, current, s.mu, s.f_up, s.f_down)
        return self._ask(current)

    def _store(self, rates: dict[int, float], lags: dict[int, int]) -> None:
        assert self.service is not None
        partitions = [PartitionRate(self.settings.topic, p, rate, float(lags.get(p, 0))) for p, rate in rates.items()]
        self.service.put_rates(self.settings.group, partitions, dt.datetime.fromtimestamp(self.wall(), dt.UTC))

    def _ask(self, current: int) -> Decision:
        assert self.service is not None
        s = self.settings
        try:
            signal = self.service.scale(
                s.group, algorithm=s.strategy, params=s.algorithm_params(), f_up=s.f_up, f_down=s.f_down
            )
        except GroupfitError as exc:
            if exc.code != "group_not_found":
                raise
            return Decision(
                "none", "the group has no stored assignment yet (its leader's first assign stores it)", current
            )
        if signal.action in ("up", "down"):
            return Decision(signal.action, signal.reason, signal.needed, list(signal.remove))
        return Decision(signal.action, signal.reason, current)  # reass is the leader's to act on

    def act(self, decision: Decision, running: list[str], stopping: list[str]) -> tuple[list[str], list[str]]:
        s = self.settings
        lowest = 1 if s.strategy == "fixed" else s.min_consumers
        highest = max(s.max_consumers, s.consumers or 0) if s.strategy == "fixed" else s.max_consumers
        target = min(max(decision.target, lowest), highest)
        started = self.fleet.start(target - len(running), stopping) if target > len(running) else []
        stopped = self.fleet.stop(len(running) - target, decision.remove) if target < len(running) else []
        if started or stopped:
            self.acted_at = self.clock()
            log.info("%s: %d → %d consumers (%s)", decision.action, len(running), target, decision.reason)
        return started, stopped

    def run(self, stop: threading.Event) -> None:
        """Steps every interval until `stop` is set or the duration has passed."""
        began = self.clock()
        self.last = self.offsets.sample()
        k = 1
        while not stop.wait(max(0.0, began + k * self.settings.interval_s - self.clock())):
            if self.settings.duration_s is not None and self.clock() - began >= self.settings.duration_s:
                return
            self.step()
            k = max(k + 1, math.floor((self.clock() - began) / self.settings.interval_s) + 1)


# -- the command ---------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser, command: str = "autoscale") -> None:
    parser.add_argument("--bootstrap-servers", required=True, help="the Kafka cluster (host:port,…)")
    parser.add_argument("--topic", required=True, help="the topic the group reads")
    parser.add_argument("--group", required=True, help="the consumer group (its name in groupfit too)")
    parser.add_argument(
        "--strategy", required=True, help="linear, fixed, or a groupfit algorithm (least-loaded, mwf, …)"
    )
    parser.add_argument("--service-url", help="groupfit, for a groupfit strategy")
    parser.add_argument("--consumers", type=int, help="N for --strategy fixed; for the others, how many to start with")
    parser.add_argument("--mu", type=float, default=200.0, help="events/s one consumer processes (μ)")
    parser.add_argument("--w-sla", type=float, default=0.5, help="latency SLA in seconds (least-loaded's lag cap)")
    parser.add_argument("--f-up", type=float, default=0.9, help="scale up past this share of a consumer")
    parser.add_argument(
        "--f-down", type=float, default=0.4, help="scale down when the load fits consumers of this share"
    )
    parser.add_argument("--rebalance-s", type=float, default=0.05, help="t_r: the lag a rebalance adds (least-loaded)")
    parser.add_argument("--interval-s", type=float, default=1.0, help="the decision interval")
    parser.add_argument("--min-consumers", type=int, default=1)
    parser.add_argument("--max-consumers", type=int, default=20)
    parser.add_argument("--consumer-command", required=True, help='a consumer process; "{id}" becomes its identity')
    parser.add_argument("--events-log", required=True, help="one JSON line per decision interval")
    parser.add_argument("--duration-s", type=float, help="stop (every consumer too) after this long")
    parser.add_argument("--params", default="{}", help="the groupfit algorithm's parameters, a JSON object")
    parser.add_argument("--settle-timeout-s", type=float, default=30.0, help="act again at the latest after this")
    parser.add_argument("--stop-timeout-s", type=float, default=15.0, help="SIGKILL a stopped consumer after this")


def settings_of(args: argparse.Namespace) -> Settings:
    try:
        params = json.loads(args.params)
    except ValueError as exc:
        raise AutoscaleError(f"--params must be a JSON object: {exc}") from None
    if not isinstance(params, dict):
        raise AutoscaleError('--params must be a JSON object, e.g. {"max_moves": 2}')
    given = {f.name: getattr(args, f.name) for f in fields(Settings)}  # the flags have the fields' names
    settings = Settings(**{**given, "consumer_command": shlex.split(args.consumer_command), "params": params})
    settings.check()
    return settings


def check_service(settings: Settings, service: GroupfitClient) -> None:
    """The service answers and offers the strategy as an algorithm."""
    try:
        names = [a.name for a in service.algorithms(timeout=10)]
    except Exception as exc:
        raise AutoscaleError(f"no groupfit service answered at {settings.service_url} ({exc})") from None
    if settings.strategy not in names:
        choices = ", ".join([*LOCAL_STRATEGIES, *names])
        raise AutoscaleError(f"unknown strategy {settings.strategy!r}; choose one of: {choices}")


def run(args: argparse.Namespace) -> int:
    """`groupfit autoscale`: checks everything, then runs until SIGTERM/SIGINT or --duration-s; every consumer
    it started is stopped before it exits."""
    service: GroupfitClient | None = None
    try:
        settings = settings_of(args)
        if settings.asks_service:
            service = GroupfitClient(settings.service_url or "", timeout=5.0, retries=1)
            check_service(settings, service)
        offsets = BrokerOffsets(settings.bootstrap_servers, settings.topic, settings.group)
        events = open(settings.events_log, "w", buffering=1)  # closed after the loop
    except (AutoscaleError, OSError) as exc:
        print(f"groupfit autoscale: {exc}", file=sys.stderr)
        if service is not None:
            service.close()
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    processes = CommandProcesses(settings.consumer_command, settings.stop_timeout_s, wait=False)
    try:
        Autoscaler(settings, offsets, Fleet(processes), service, events).run(stop)
    finally:
        processes.close()
        events.close()
        if service is not None:
            service.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m groupfit_client.autoscaler", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
