"""One run of the experiment: a workload replayed onto a new topic while a consumer group, sized by one
strategy, reads it; then what every process recorded, measured (app/experiment/measure.py).

    topic and group created → the group started (autoscaler, fixed consumers or Landau's controller) and
    holding every partition → the producer replays the workload from t0 → drain until every event is
    processed (or the drain deadline) → everything started is stopped → measured → result.json

An interrupted run (Ctrl-C, SIGTERM, an error) stops every process it started and deletes its topic, and says
so; a topic it cannot delete is named in the message.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.experiment import measure
from app.experiment.producer import ProducerSummary
from app.experiment.workload import MU, Workload
from app.local.kafka import _die_with_parent

GROUPFIT_STRATEGIES = ("least-loaded", "mwf", "repack")
AUTOSCALED = (*GROUPFIT_STRATEGIES, "linear")
STRATEGIES = (*AUTOSCALED, "overprovisioning", "kd_<N>", "controller")
KIP848_ALGORITHM = "mwf"
"""groupfit's algorithm on the broker for KIP-848 groups (the broker-side assignor takes no parameters)."""


class ExperimentError(RuntimeError):
    """A run that cannot start or went wrong; the message says what and what was left behind."""


@dataclass(frozen=True)
class Settings:
    """The seed's set-up (§5) and the knobs of a run."""

    mu: float = MU
    w_sla: float = 0.5
    f_up: float = 0.9
    f_down: float = 0.4
    rebalance_s: float = 0.05
    interval_s: float = 1.0
    process_ms: float = 1000.0 / MU
    heartbeat_ms: int = 3000
    session_ms: int = 45_000
    protocol: str = "classic"  # or "consumer" (KIP-848)
    kafka_assignor: str = "cooperative-sticky"  # Kafka's own, for linear, kd_N and overprovisioning
    min_consumers: int = 1
    max_consumers: int = 20
    ready_timeout_s: float = 180.0
    drain_timeout_s: float = 300.0
    linger_s: float = 0.0  # after the drain, keep an autoscaled group up to this long, until it scaled down
    reassign_min_interval_ms: int = 10_000  # the least time between two triggered REASS rebalances

    def capacity(self, algorithm: str) -> float:
        """C of the group in groupfit: μ for least-loaded (it packs to μ·f_up itself); μ·f_up for the others
        (mwf, repack fill a consumer up to C), so every groupfit strategy gives a consumer at most μ·f_up."""
        return self.mu if algorithm == "least-loaded" else self.mu * self.f_up

    def decision_fill(self, algorithm: str) -> tuple[float, float]:
        """(f_up, f_down) of the scale decision, against the group's C: the seed's (0.9, 0.4) of μ for every
        strategy (least-loaded and linear take them as they are; for mwf and repack, whose C is already μ·f_up,
        they become 1 and f_down / f_up)."""
        if algorithm in ("least-loaded", "linear"):
            return self.f_up, self.f_down
        return 1.0, self.f_down / self.f_up


def parse_strategy(name: str) -> tuple[str, int | None]:
    """(kind, fixed count): "kd_3" → ("kd", 3); others → (name, None). An unknown name is an ExperimentError."""
    if name.startswith("kd_"):
        count = name[3:]
        if not count.isdigit() or int(count) < 1:
            raise ExperimentError(f"strategy {name!r}: kd_N needs a whole number of consumers N ≥ 1 (e.g. kd_3)")
        return "kd", int(count)
    if name not in (*AUTOSCALED, "overprovisioning", "controller"):
        raise ExperimentError(f"unknown strategy {name!r}; the strategies are {', '.join(STRATEGIES)}")
    return name, None


@dataclass
class Environment:
    """Where runs happen: a broker, the service (for groupfit's strategies), the Java consumer's classpath."""

    bootstrap: str
    service_url: str | None
    java_classpath: str | None
    out: Path


def start_process(command: Sequence[str], log_path: Path) -> subprocess.Popen:
    """A process in its own session (so it and its children stop together), dying with this one."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )


def stop_processes(processes: Sequence[subprocess.Popen], timeout: float = 40.0) -> list[str]:
    """SIGTERM to each process's group, SIGKILL to what outlives `timeout`; what had to be killed."""
    killed = []
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            killed.append(f"pid {process.pid}")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return killed


def java_consumer_command(
    env: Environment, topic: str, group: str, out_dir: Path, settings: Settings, assignor: str, algorithm: str
) -> list[str]:
    """The Java ExperimentConsumer's command line, `{id}` standing for the consumer's id."""
    from app.local.kafka import java

    if env.java_classpath is None:
        raise ExperimentError("the Java consumer's classpath is missing (the clients were not built)")
    command = [
        java(),
        "-Xms32m",
        "-Xmx128m",
        "-XX:TieredStopAtLevel=1",  # a quick start on two shared cores; the consumer mostly sleeps
        "-XX:+UseSerialGC",
        "-cp",
        env.java_classpath,
        "io.groupfit.kafka.it.ExperimentConsumer",
        *("--bootstrap", env.bootstrap, "--topic", topic, "--group", group, "--id", "{id}"),
        *("--out-dir", str(out_dir), "--process-ms", f"{settings.process_ms:g}"),
        *("--protocol", settings.protocol, "--assignor", assignor),
        *("--heartbeat-ms", str(settings.heartbeat_ms), "--session-ms", str(settings.session_ms)),
    ]
    if assignor == "groupfit" and settings.protocol == "classic":
        if env.service_url is None:
            raise ExperimentError("groupfit's strategies need the service (--service-url)")
        command += ["--service-url", env.service_url, "--algorithm", algorithm]
        command += ["--capacity", f"{settings.capacity(algorithm):g}"]
        for key, value in groupfit_consumer_config(settings, algorithm).items():
            command += ["--config", f"{key}={value}"]
    return command


def groupfit_consumer_config(settings: Settings, algorithm: str) -> dict[str, str]:
    """The groupfit assignor's settings beyond URL, algorithm and capacity: least-loaded's parameters (the
    seed's μ, w_sla, f_up, f_down, t_r), and the REASS check every decision interval with its minimum gap."""
    config = {
        "groupfit.reassign.interval.ms": str(round(settings.interval_s * 1000)),
        "groupfit.reassign.min.interval.ms": str(settings.reassign_min_interval_ms),
    }
    if algorithm == "least-loaded":
        config["groupfit.params"] = json.dumps(least_loaded_params(settings), separators=(",", ":"))
    return config


def least_loaded_params(settings: Settings) -> dict[str, float]:
    return {
        "mu": settings.mu,
        "w_sla": settings.w_sla,
        "f_up": settings.f_up,
        "f_down": settings.f_down,
        "rebalance_s": settings.rebalance_s,
    }


class Group(ABC):
    """The consumer group of a run, however it is sized."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen] = []

    initial_members = 1
    """Members that must hold partitions before the workload starts."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def timeline(self, start_s: float) -> list[tuple[float, int]]:
        """(epoch s, replicas from then on)."""

    def stop(self) -> list[str]:
        return stop_processes(list(reversed(self.processes)))

    def rebalances(self, start_s: float, end_s: float) -> int | None:
        """Rebalances the group's own driver counted, where the members' generations do not tell them."""
        return None


class FixedGroup(Group):
    """N consumers started by the run itself, for the whole run (kd_N, overprovisioning)."""

    def __init__(self, command: list[str], count: int, logs: Path) -> None:
        super().__init__()
        self.command, self.count, self.logs = command, count, logs
        self.initial_members = count

    def start(self) -> None:
        for i in range(self.count):
            consumer = f"c{i}"
            argv = [part.replace("{id}", consumer) for part in self.command]
            self.processes.append(start_process(argv, self.logs / f"{consumer}.log"))

    def timeline(self, start_s: float) -> list[tuple[float, int]]:
        return [(start_s, self.count)]


class AutoscaledGroup(Group):
    """`groupfit autoscale`: it starts and stops the consumers and logs one JSON line per decision."""

    def __init__(self, command: list[str], events_log: Path, logs: Path) -> None:
        super().__init__()
        self.command, self.events_log, self.logs = command, events_log, logs

    def start(self) -> None:
        self.processes.append(start_process(self.command, self.logs / "autoscaler.log"))

    def decisions(self) -> list[dict[str, Any]]:
        if not self.events_log.exists():
            return []
        decisions = []
        for line in self.events_log.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                decisions.append(json.loads(line))
        return decisions

    def timeline(self, start_s: float) -> list[tuple[float, int]]:
        steps = [(float(d["t"]), int(d["consumers_after"])) for d in self.decisions()]
        return [(t, n) for i, (t, n) in enumerate(steps) if i == 0 or steps[i - 1][1] != n]

    def scaled_down(self) -> bool:
        """Whether it runs fewer consumers now than at its most."""
        counts = [n for _, n in self.timeline(0.0)]
        return bool(counts) and counts[-1] < max(counts)


def autoscale_command(
    env: Environment, strategy: str, topic: str, group: str, consumer: list[str], settings: Settings, run_dir: Path
) -> list[str]:
    f_up, f_down = settings.decision_fill(strategy)
    command = [
        sys.executable,
        "-m",
        "app.cli",
        "autoscale",
        *("--bootstrap-servers", env.bootstrap, "--topic", topic, "--group", group, "--strategy", strategy),
        *("--mu", f"{settings.mu:g}", "--w-sla", f"{settings.w_sla:g}"),
        *("--f-up", f"{f_up:g}", "--f-down", f"{f_down:g}"),
        *("--rebalance-s", f"{settings.rebalance_s:g}", "--interval-s", f"{settings.interval_s:g}"),
        *("--min-consumers", str(settings.min_consumers), "--max-consumers", str(settings.max_consumers)),
        *("--consumer-command", shlex.join(consumer), "--events-log", str(run_dir / "autoscaler.jsonl")),
    ]
    if env.service_url is not None:
        command += ["--service-url", env.service_url]
    return command


@dataclass
class RunSpec:
    strategy: str
    workload: Workload
    settings: Settings = field(default_factory=Settings)

    @property
    def name(self) -> str:
        protocol = "" if self.settings.protocol == "classic" else "-kip848"
        return f"{self.strategy}-{self.workload.name}-hb{self.settings.heartbeat_ms}{protocol}"


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> None:
    """Creates the topic and waits until every partition has a leader (right after creation a client may still
    be told "not leader" for some)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout_s)
    except Exception as exc:
        raise ExperimentError(f"cannot create topic {topic} on {bootstrap}: {exc}") from None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        described = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (
            described is not None
            and described.error is None
            and len(described.partitions) == partitions
            and all(p.leader >= 0 and p.error is None for p in described.partitions.values())
        ):
            return
        time.sleep(0.2)
    raise ExperimentError(f"topic {topic}'s partitions have no leader {timeout_s:g} s after its creation")


def set_group_heartbeat(bootstrap: str, group: str, heartbeat_ms: int) -> None:
    """A KIP-848 group's heartbeat interval is the broker's (consumers may not set it): set it for this group."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entry = ConfigEntry("consumer.heartbeat.interval.ms", str(heartbeat_ms),
                        incremental_operation=AlterConfigOpType.SET)  # fmt: skip
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    try:
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)
    except Exception as exc:
        raise ExperimentError(f"cannot set group {group}'s heartbeat interval to {heartbeat_ms} ms: {exc}") from None


def delete_topic(bootstrap: str, topic: str) -> str | None:
    """Deletes the topic; None when done, else why not."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})  # kept until the answer is in
    try:
        admin.delete_topics([topic])[topic].result(60)
        return None
    except Exception as exc:
        return str(exc)


def check_broker(bootstrap: str, timeout_s: float = 15.0) -> None:
    """A clear error when nothing answers at `bootstrap`."""
    from confluent_kafka.admin import AdminClient

    try:
        AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=timeout_s)
    except Exception as exc:
        raise ExperimentError(f"no Kafka broker answers at {bootstrap} within {timeout_s:g} s ({exc})") from None


class Readiness:
    """The group is ready when `members` members have joined it (an assignment each, empty or not), every
    partition is held, and the holding has not changed for `settle_s` (a cooperative group's follow-up
    rebalance is over)."""

    def __init__(self, consumers_dir: Path, partitions: int, members: int, settle_s: float = 3.0) -> None:
        self.consumers_dir, self.partitions, self.members, self.settle_s = consumers_dir, partitions, members, settle_s
        self.last: dict[int, str] | None = None
        self.since = 0.0

    def __call__(self) -> bool:
        events = measure.read_events(self.consumers_dir.glob("*.events.jsonl"))
        held = measure.owners(events)
        now = time.monotonic()
        if held != self.last:
            self.last, self.since = held, now
        joined = {e["id"] for e in events if e["event"] == "assigned"} - {
            e["id"] for e in events if e["event"] == "closed"
        }
        complete = len(held) == self.partitions and len(joined) >= self.members
        return complete and now - self.since >= self.settle_s


def all_processed(consumers_dir: Path, produced: int) -> bool:
    """Whether every event produced has been processed: the records written (a cheap count, duplicates
    included) first, then the distinct events once there are enough records."""
    files = list(consumers_dir.glob("*.lat"))
    records = sum(path.stat().st_size for path in files) // measure.LATENCY_RECORD.itemsize
    return records >= produced and len(measure.read_latencies(files)) >= produced


def build_group(spec: RunSpec, env: Environment, topic: str, group: str, run_dir: Path) -> Group:
    kind, count = parse_strategy(spec.strategy)
    settings = spec.settings
    consumers_dir, logs = run_dir / "consumers", run_dir / "logs"
    if kind == "controller":
        from app.experiment.controller import ControllerGroup

        return ControllerGroup(env, topic, group, spec.workload, settings, consumers_dir, logs)
    if kind in GROUPFIT_STRATEGIES:
        consumer = java_consumer_command(env, topic, group, consumers_dir, settings, "groupfit", kind)
    else:
        consumer = java_consumer_command(env, topic, group, consumers_dir, settings, settings.kafka_assignor, "")
    if kind in AUTOSCALED:
        autoscaled = AutoscaledGroup(
            autoscale_command(env, kind, topic, group, consumer, settings, run_dir), run_dir / "autoscaler.jsonl", logs
        )
        autoscaled.initial_members = settings.min_consumers
        return autoscaled
    if kind == "overprovisioning":
        from app.experiment.optimal import overprovisioned_count

        count = overprovisioned_count(
            spec.workload, settings.mu, settings.w_sla, settings.f_up, settings.f_down, settings.rebalance_s
        )
    assert count is not None
    return FixedGroup(consumer, count, logs)


def run(spec: RunSpec, env: Environment, progress: Any = print) -> dict[str, Any]:
    """One run (module docstring); its result, also written to <out>/<name>/result.json."""
    run_dir = env.out / spec.name
    consumers_dir, logs = run_dir / "consumers", run_dir / "logs"
    for folder in (consumers_dir, logs):
        folder.mkdir(parents=True, exist_ok=True)
    for stale in [*consumers_dir.glob("*"), run_dir / "autoscaler.jsonl", run_dir / "producer.json"]:
        stale.unlink(missing_ok=True)
    workload_path = run_dir / "workload.json"
    spec.workload.dump(workload_path)
    suffix = uuid.uuid4().hex[:6]
    topic = group = f"exp-{spec.name}-{suffix}"
    settings = spec.settings
    check_broker(env.bootstrap)
    create_topic(env.bootstrap, topic, spec.workload.partitions)
    if settings.protocol == "consumer":
        set_group_heartbeat(env.bootstrap, group, settings.heartbeat_ms)
    consumer_group = build_group(spec, env, topic, group, run_dir)
    producer: subprocess.Popen | None = None
    started = time.time()
    try:
        progress(f"{spec.name}: topic {topic}, {spec.workload.partitions} partitions; starting the group")
        consumer_group.start()
        _wait(
            Readiness(consumers_dir, spec.workload.partitions, consumer_group.initial_members),
            settings.ready_timeout_s,
            f"the group did not hold all {spec.workload.partitions} partitions within {settings.ready_timeout_s:g} s "
            f"(logs in {logs})",
            consumer_group,
        )
        t0 = time.time() + 2.0
        progress(f"{spec.name}: group ready; replaying {spec.workload.total_events} events over "
                 f"{spec.workload.duration_s:g} s")  # fmt: skip
        producer = start_process(
            [
                sys.executable,
                "-m",
                "app.experiment.producer",
                *("--bootstrap-servers", env.bootstrap, "--topic", topic, "--workload", str(workload_path)),
                *("--summary", str(run_dir / "producer.json"), "--start-at", f"{t0:.6f}"),
            ],
            logs / "producer.log",
        )
        _wait(lambda: producer.poll() is not None, spec.workload.duration_s + 120, "the producer did not finish",
              consumer_group)  # fmt: skip
        if producer.returncode != 0 or not (run_dir / "producer.json").exists():
            raise ExperimentError(f"the producer failed (exit {producer.returncode}); see {logs / 'producer.log'}")
        summary = ProducerSummary.read(run_dir / "producer.json")
        progress(f"{spec.name}: produced {summary.delivered_total} events; draining")
        drained = _wait(
            lambda: all_processed(consumers_dir, summary.delivered_total),
            settings.drain_timeout_s,
            None,
            consumer_group,
        )
        if settings.linger_s and isinstance(consumer_group, AutoscaledGroup):
            _wait(consumer_group.scaled_down, settings.linger_s, None, consumer_group)
        ended = time.time()
        killed = consumer_group.stop()
    except BaseException as exc:
        stopped = stop_processes([producer] if producer else []) + consumer_group.stop()
        failure = delete_topic(env.bootstrap, topic)
        left = (
            f"topic {topic} deleted"
            if failure is None
            else f"topic {topic} left on {env.bootstrap} ({failure}; delete it by hand)"
        )
        what = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"failed: {exc}"
        message = (
            f"run {spec.name} {what}; every process it started was stopped"
            + (f" ({len(stopped)} had to be killed)" if stopped else "")
            + f"; {left}; its files are in {run_dir}"
        )
        if isinstance(exc, KeyboardInterrupt):
            progress(message)
            raise
        raise ExperimentError(message) from exc
    result = _measured(spec, run_dir, summary, consumer_group.timeline(t0), t0, started, ended, drained, killed)
    counted = consumer_group.rebalances(t0, ended)
    if counted is not None:
        result["figures"]["rebalances"] = counted
    result["topic"] = topic
    failure = delete_topic(env.bootstrap, topic)
    result["topic_deleted"] = failure is None
    if failure is not None:
        progress(f"{spec.name}: topic {topic} left on {env.bootstrap} ({failure})")
    (run_dir / "result.json").write_text(json.dumps(result, allow_nan=False))
    return result


def _wait(condition: Any, timeout_s: float, failure: str | None, group: Group) -> bool:
    """Until `condition()`, polling; on timeout an ExperimentError(failure), or False when failure is None.
    A group whose driver exits early is an error at once."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        driver = group.processes[0] if isinstance(group, AutoscaledGroup) and group.processes else None
        if driver is not None and driver.poll() is not None:
            raise ExperimentError(f"the autoscaler exited with status {driver.returncode}; see its log")
        time.sleep(1.0)
    if failure is None:
        return False
    raise ExperimentError(failure)


def _measured(
    spec: RunSpec,
    run_dir: Path,
    summary: ProducerSummary,
    timeline: list[tuple[float, int]],
    t0: float,
    started: float,
    ended: float,
    drained: bool,
    killed: list[str],
) -> dict[str, Any]:
    consumers_dir = run_dir / "consumers"
    latencies = measure.read_latencies(consumers_dir.glob("*.lat"))
    events = measure.read_events(consumers_dir.glob("*.events.jsonl"))
    settings = spec.settings
    min_interval = settings.reassign_min_interval_ms / 1000
    figures = measure.measure(
        latencies,
        events,
        summary.delivered,
        timeline,
        t0,
        spec.workload.duration_s,
        settings.w_sla,
        ended,
        min_interval,
    )
    return {
        "name": spec.name,
        "strategy": spec.strategy,
        "workload": spec.workload.name,
        "settings": asdict(settings),
        "figures": figures,
        "producer": asdict(summary),
        "drained": drained,
        "killed_at_stop": killed,
        "t0": t0,
        "wall_s": ended - started,
        "load_average": list(os.getloadavg()),
        "timeline": [[t - t0, n] for t, n in timeline],
        "latency_series": measure.latency_series(latencies, t0),
        "cdf": measure.cdf_points(latencies.seconds),
        "lives": dict(measure.member_counts(events)),
        "model": _model_or_none(spec, events, t0, ended),
    }


def _model_or_none(spec: RunSpec, events: list[dict[str, Any]], t0: float, stopped: float) -> dict[str, Any] | None:
    from app.experiment.model import predict

    try:
        return predict(spec.workload, events, t0, stopped, spec.settings)
    except ValueError as exc:  # nothing to model (no assignment observed)
        return {"error": str(exc)}


def summary_row(result: dict[str, Any]) -> dict[str, Any]:
    """The figures one line of the summary table shows."""
    figures = result["figures"]
    latency = figures["latency"]
    return {
        "run": result["name"],
        "within_sla_%": None if latency["within_sla"] is None else round(100 * latency["within_sla"], 2),
        "p50_ms": _ms(latency["p50"]),
        "p99_ms": _ms(latency["p99"]),
        "max_ms": _ms(latency["max"]),
        "replica_min": round(figures["replica_minutes"], 2),
        "ups/downs": f"{figures['scale_ups']}/{figures['scale_downs']}",
        "rebalances": figures["rebalances"],
        "reass": figures["reass_triggered"],
        "moved": figures["partitions_moved"],
        "pause_p99_ms": _ms(figures["pause_s"]["p99"]),
        "produced=processed": "yes"
        if figures["events"]["complete"]
        else f"no ({figures['events']['missing']} missing)",
        "dups": figures["events"]["duplicates"],
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None or not math.isfinite(seconds) else round(seconds * 1000, 1)
