"""The Java clients (clients/java): Maven builds them and runs their unit tests, then Java consumers use them on
a real Apache Kafka broker with the live service.

- classic groups (GroupfitAssignor, eager and cooperative): three consumers over 12 partitions with skewed
  rates; after a join and a leave the group holds what the service computed (GET /v1/groups/{group}), every
  record is read exactly once, and no partition is owned by two members at once; the member that joins
  advertises twice the others' capacity, and the service keeps each member within its own;
- KIP-848 groups (GroupfitBrokerAssignor on the broker's classpath): the broker computes the target with the Java
  core from the rates it read in the background and reports it to the service, which stores it; with the service
  stopped a member's leave is still assigned by rate; with skewed rates every member stays within its capacity
  after a scale-up and a scale-down, where a group of Kafka's uniform assignor on the same broker overloads one.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import threading
import time
import uuid
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Callable, Iterator

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from app.local.java_clients import PROJECT, JavaBuild
from app.local.kafka import ApacheKafka, java
from tests.conftest import LiveService
from tests.integration.conftest import broker_assignor

pytestmark = pytest.mark.integration

# Skewed: 230 in all, so two members of capacity 100 cannot hold them, and one of 100 with one of 200 can.
RATES = [60.0, 40.0, 30.0, 25.0, 20.0, 15.0, 10.0, 10.0, 8.0, 6.0, 4.0, 2.0]
RECORDS = 10  # per partition and phase


def test_maven_builds_the_jar_and_its_unit_tests_pass(java_build: JavaBuild):
    reports = list((PROJECT / "target" / "surefire-reports").glob("TEST-*.xml"))
    suites = [ElementTree.parse(report).getroot() for report in reports]
    totals = Counter()
    for suite in suites:
        for key in ("tests", "failures", "errors", "skipped"):
            totals[key] += int(suite.get(key, 0))
    names = {suite.get("name", "").rsplit(".", 1)[-1] for suite in suites}
    assert {"MemberDataTest", "BalanceTest", "GroupfitAssignorTest", "GroupfitBrokerAssignorTest"} <= names
    assert {"OpenApiContractTest", "CoreTest"} <= names
    assert totals["tests"] >= 15 and totals["failures"] == totals["errors"] == totals["skipped"] == 0, totals
    assert java_build.jar.stat().st_size > 10_000


class JavaConsumer:
    """A `TestConsumer` JVM: its events (JSON lines on stdout) collected by a thread; "close" on stdin stops it."""

    def __init__(
        self,
        build: JavaBuild,
        bootstrap: str,
        topic: str,
        group: str,
        identity: str,
        mode: str,
        url: str,
        capacity: float = 100,
        properties: dict[str, str] | None = None,
    ):
        """`properties`: groupfit.* settings for the assignor (system properties of the JVM)."""
        self.identity = identity
        self.events: list[dict] = []
        self.lock = threading.Lock()
        self.process = subprocess.Popen(
            [java(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", build.classpath]
            + [f"-D{key}={value}" for key, value in (properties or {}).items()]
            + ["io.groupfit.kafka.it.TestConsumer", bootstrap, topic, group, identity, mode, url, str(capacity)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.process.stderr), daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if line.startswith("{"):
                with self.lock:
                    self.events.append(json.loads(line))

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.events)

    @property
    def owned(self) -> set[int]:
        owned: set[int] = set()
        for event in self.snapshot():
            if event["event"] == "assigned":
                owned |= set(event["partitions"])
            elif event["event"] in ("revoked", "lost"):
                owned -= set(event["partitions"])
            elif event["event"] == "closed":
                owned = set()
        return owned

    @property
    def member_id(self) -> str | None:
        """The member id of the newest assignment; None before the first (a member still joining)."""
        return next((e["member"] for e in reversed(self.snapshot()) if e["event"] == "assigned"), None)

    def reads(self) -> Counter:
        return Counter((p, o) for e in self.snapshot() if e["event"] == "records" for p, o in e["records"])

    def intervals(self) -> dict[int, list[tuple[int, float]]]:
        """partition → [(owned from, owned until)] in CLOCK_MONOTONIC ns (inf while still owned)."""
        start: dict[int, int] = {}
        spans: dict[int, list[tuple[int, float]]] = {}
        for event in self.snapshot():
            if event["event"] == "assigned":
                start.update(dict.fromkeys(event["partitions"], event["t"]))
            elif event["event"] in ("revoked", "lost"):
                for p in event["partitions"]:
                    spans.setdefault(p, []).append((start.pop(p), event["t"]))
        for p, began in start.items():
            spans.setdefault(p, []).append((began, float("inf")))
        return spans

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write("close\n")
            self.process.stdin.flush()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self) -> str:
        return "".join(self.stderr)[-3000:]


@pytest.fixture
def consumers() -> Iterator[list[JavaConsumer]]:
    started: list[JavaConsumer] = []
    yield started
    for consumer in started:
        consumer.close()


def make_topic(bootstrap: str) -> str:
    topic = f"java-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, len(RATES), 1)])[topic].result(30)
    return topic


def produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition in range(len(RATES)):
        for i in range(RECORDS):
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def put_rates(url: str, group: str, topic: str, rates: list[float] = RATES) -> None:
    partitions = [{"topic": topic, "partition": p, "rate": rate} for p, rate in enumerate(rates)]
    body = {"partitions": partitions, "window_end": "2026-11-25T10:00:00Z"}
    httpx.put(f"{url}/v1/groups/{group}/rates", json=body, timeout=10).raise_for_status()


def stored(url: str, group: str) -> dict:
    answer = httpx.get(f"{url}/v1/groups/{group}", timeout=10)
    return answer.json() if answer.status_code == 200 else {"version": 0, "assignment": {}}


def wait_until(condition, seconds: float, what: str, members: list[JavaConsumer]):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.2)
    logs = "\n".join(f"--- {m.identity}: owned {sorted(m.owned)}\n{m.log()}" for m in members)
    raise AssertionError(f"{what} within {seconds} s\n{logs}")


def holds_the_services_assignment(
    url: str, group: str, members: list[JavaConsumer], key, after_version: int = 0
) -> dict | None:
    """The service's stored assignment, newer than `after_version`, when the live members hold exactly it (`key`
    names a member as the service does), every partition once; else None."""
    state = stored(url, group)
    if state["version"] <= after_version:
        return None
    service_view = {m: {p["partition"] for p in held} for m, held in state["assignment"].items()}
    owned = {key(m): m.owned for m in members}
    if None in owned:  # a member still joining: not settled yet
        return None
    if sorted(p for ps in owned.values() for p in ps) != list(range(len(RATES))):
        return None
    return (
        state if {m: ps for m, ps in owned.items() if ps} == {m: ps for m, ps in service_view.items() if ps} else None
    )


def assert_no_partition_owned_twice_at_once(members: list[JavaConsumer]) -> None:
    for partition in range(len(RATES)):
        spans = sorted((start, end, m.identity) for m in members for start, end in m.intervals().get(partition, []))
        for (_, end, before), (start, _, after) in itertools.pairwise(spans):
            assert start >= end, f"partition {partition}: {after} owned it before {before} gave it up"


def starter(
    java_build: JavaBuild, consumers: list[JavaConsumer], bootstrap: str, topic: str, group: str, mode: str, url: str
) -> Callable[..., JavaConsumer]:
    """Starts a member of `group` (its consumer process stopped by the `consumers` fixture at the end)."""

    def start(identity: str, capacity: float = 100) -> JavaConsumer:
        consumer = JavaConsumer(java_build, bootstrap, topic, group, identity, mode, url, capacity)
        consumers.append(consumer)
        return consumer

    return start


@pytest.mark.parametrize("mode", ["eager", "cooperative"])
def test_classic_group_holds_the_services_assignment_and_reads_every_record_once(
    mode, java_build, kafka_broker, live_service, consumers
):
    bootstrap, url = kafka_broker.bootstrap_servers, live_service.url
    topic, group = make_topic(bootstrap), f"java-{mode}-{uuid.uuid4().hex[:6]}"
    put_rates(url, group, topic)

    start = starter(java_build, consumers, bootstrap, topic, group, mode, url)

    def settled(members: list[JavaConsumer], what: str, after_version: int = 0) -> dict:
        """The stored assignment the members hold, computed for exactly them (not one from before a join, which
        they may hold for a moment when the newcomer was given nothing yet)."""

        def holds() -> dict | None:
            state = holds_the_services_assignment(url, group, members, lambda m: m.identity, after_version)
            return state if state and set(state["assignment"]) == {m.identity for m in members} else None

        return wait_until(holds, 90, what, members)

    m1, m2 = start("m1"), start("m2")
    first = settled([m1, m2], "two members did not settle on the service's assignment")
    produce(bootstrap, topic)
    m3 = start("m3", 200)  # a join, of a member twice the others' size: the leader asks the service again
    produce(bootstrap, topic)  # while the group rebalances
    joined = settled([m1, m2, m3], "after m3 joined, the group did not hold the service's assignment", first["version"])
    capacity = {"m1": 100, "m2": 100, "m3": 200}
    load = {m: sum(RATES[p["partition"]] for p in held) for m, held in joined["assignment"].items()}
    assert all(load[m] <= capacity[m] for m in load), load
    m2.close()  # a leave
    produce(bootstrap, topic)
    left = settled([m1, m3], "after m2 left, the group did not hold the service's assignment", joined["version"])
    # 230 fits m1 and m3 only because m3 was sent with its own 200: it holds at least 130, m1 at most 100.
    load = {m: sum(RATES[p["partition"]] for p in held) for m, held in left["assignment"].items()}
    assert load["m1"] <= 100 < 130 <= load["m3"] <= 200, load

    everyone = [m1, m2, m3]
    total = 3 * RECORDS * len(RATES)
    wait_until(
        lambda: sum(sum(m.reads().values()) for m in everyone) >= total, 60, "not every record was read", everyone
    )
    reads = sum((m.reads() for m in everyone), Counter())
    assert sorted(reads) == [(p, o) for p in range(len(RATES)) for o in range(3 * RECORDS)]
    assert set(reads.values()) == {1}, [key for key, n in reads.items() if n > 1]
    assert_no_partition_owned_twice_at_once(everyone)
    if mode == "cooperative":  # partitions that moved were revoked alone: their owners kept the rest
        revocations = [e for m in everyone for e in m.snapshot() if e["event"] == "revoked"]
        assert any(len(e["partitions"]) < len(RATES) // 3 for e in revocations), revocations


@pytest.fixture(scope="module")
def kip848(java_build, redis_server, tmp_path_factory) -> Iterator[tuple[ApacheKafka, LiveService]]:
    """A broker with GroupfitBrokerAssignor on its classpath, asking a service of its own (a test stops it)."""
    service = LiveService(redis_server.url, tmp_path_factory.mktemp("service") / "service.log").start()
    broker = ApacheKafka(
        tmp_path_factory.mktemp("kafka-848"),
        extra_classpath=[java_build.jar],
        properties=broker_assignor(service.url),
    ).start()
    yield broker, service
    broker.stop()
    service.stop()


def assign_lines(broker: ApacheKafka, group: str) -> list[tuple[str, float]]:
    """(source, ms the coordinator was held) of every assign() for `group`, from the broker's log."""
    pattern = re.compile(
        rf"groupfit assignor: group {re.escape(group)}, .* via (\w+).*held the coordinator ([\d.]+) ms"
    )
    return [(m[1], float(m[2])) for m in pattern.finditer(broker.nodes[0].log_path.read_text(errors="replace"))]


def running(service: LiveService) -> LiveService:
    """The module's service, started again if a test before stopped it (same port: the broker's groupfit.url)."""
    if service.process is None:
        service.start()
    return service


def owns_every_partition_once(members: list[JavaConsumer], count: int) -> bool:
    return sorted(p for m in members for p in m.owned) == list(range(count))


def last_source(broker: ApacheKafka, group: str) -> str | None:
    """Where the broker's last assignment of `group` came from ("core", "fallback"), None before the first."""
    lines = assign_lines(broker, group)
    return lines[-1][0] if lines else None


def learnt(broker: ApacheKafka, group: str) -> bool:
    """Whether the broker's assignor has read the group's rates (its next epoch change is assigned by rate)."""
    log = broker.nodes[0].log_path.read_text(errors="replace")
    return f"groupfit assignor: group {group} learnt" in log


def test_the_service_stores_the_kip848_groups_assignment_the_broker_reports(java_build, kip848, consumers):
    broker, service = kip848
    bootstrap, url = broker.bootstrap_servers, running(service).url
    topic, group = make_topic(bootstrap), f"java-848-{uuid.uuid4().hex[:6]}"
    put_rates(url, group, topic)

    start = starter(java_build, consumers, bootstrap, topic, group, "consumer", url)

    m1 = start("m1")
    wait_until(lambda: owns_every_partition_once([m1], len(RATES)), 60, "the first member did not get everything", [m1])
    wait_until(lambda: learnt(broker, group), 60, "the broker did not learn the group", [m1])
    m2, m3 = start("m2"), start("m3")
    members = [m1, m2, m3]
    # The broker computes the target and reports it (POST /v1/assign with the assignment given): the service stores
    # what the members hold as the group's version, keyed by member id (the members have no instance id).
    state = wait_until(
        lambda: (
            len(stored(url, group)["assignment"]) == 3
            and holds_the_services_assignment(url, group, members, lambda m: m.member_id)
        ),
        90,
        "the group's members did not hold an assignment the service stored",
        members,
    )
    assert state["algorithm"] == "mwf"
    assert last_source(broker, group) == "core"


def test_kip848_group_is_assigned_by_rate_in_the_broker_and_still_with_the_service_stopped(
    java_build, kip848, consumers
):
    broker, service = kip848
    bootstrap, url = broker.bootstrap_servers, running(service).url
    topic, group = make_topic(bootstrap), f"java-848-{uuid.uuid4().hex[:6]}"
    put_rates(url, group, topic)

    start = starter(java_build, consumers, bootstrap, topic, group, "consumer", url)

    def by_rate(members: list[JavaConsumer], what: str, capacity: float = float("inf")) -> dict[str, float]:
        """Each member's load once they own every partition once, the broker's core made the target and (while
        partitions move a member may hold a mix of two targets) every member is within `capacity`."""

        def loads() -> dict[str, float] | None:
            if not owns_every_partition_once(members, len(RATES)) or last_source(broker, group) != "core":
                return None
            load = {m.identity: sum(RATES[p] for p in m.owned) for m in members}
            return load if max(load.values()) <= capacity else None

        return wait_until(loads, 90, what, members)

    m1 = start("m1")
    wait_until(lambda: owns_every_partition_once([m1], len(RATES)), 60, "the first member did not get everything", [m1])
    wait_until(lambda: learnt(broker, group), 60, "the broker did not learn the group", [m1])
    m2 = start("m2")
    wait_until(lambda: m2.owned, 60, "the second member got nothing", [m1, m2])
    m3 = start("m3")
    # 230 on three members of 100: within capacity only by rate (a member of 60 + 40 is full)
    three = by_rate([m1, m2, m3], "after m3 joined, the core did not assign within capacity", 100)
    service.stop()
    m2.close()
    # The broker still assigns by rate from what it knows; only the report to the stopped service fails.
    two = by_rate([m1, m3], "with the service stopped, the group was not reassigned by the core")
    print(f"{group}: loads with three members {three}, with two and the service stopped {two}")
    print(f"assign() for {group}: (source, ms the coordinator was held) {assign_lines(broker, group)}")


# One partition of 90 beside eleven of 4, members of 100: any assignment by counts puts at least three (of three
# members) or five (of two) partitions of 4 beside the 90, 102 or 110; by rate, 90 + 4 + 4 fits on one member.
SKEWED = [90.0, 30.0] + [4.0] * 10


def test_kip848_members_stay_within_capacity_after_scaling_where_the_uniform_assignor_overloads_one(
    java_build, kip848, consumers
):
    broker, service = kip848
    bootstrap, url = broker.bootstrap_servers, running(service).url
    topic = make_topic(bootstrap)

    def scale_up_and_down(assignor: str) -> list[dict[str, float]]:
        """Two members, a third joins, it leaves: each member's load after the join and after the leave."""
        group = f"java-848-{assignor}-{uuid.uuid4().hex[:6]}"
        put_rates(url, group, topic, SKEWED)

        start = starter(java_build, consumers, bootstrap, topic, group, f"consumer:{assignor}", url)

        def settled(members: list[JavaConsumer], what: str) -> dict[str, float]:
            """Each member's load once the members own every partition once, in the assignor's final state (while
            partitions move, a member may hold a mix of the old and the new target): for groupfit the broker's
            core assigned and every member is within its capacity (one may hold nothing: MWF moves nothing it need
            not), for uniform the counts are balanced."""

            def loads_now() -> dict[str, float] | None:
                owned = [m.owned for m in members]
                if not owns_every_partition_once(members, len(SKEWED)):
                    return None
                load = {m.identity: sum(SKEWED[p] for p in m.owned) for m in members}
                if assignor == "groupfit":
                    final = last_source(broker, group) == "core" and max(load.values()) <= 100
                else:
                    final = max(map(len, owned)) - min(map(len, owned)) <= 1
                return load if final else None

            return wait_until(loads_now, 90, what, members)

        m1, m2 = start("m1"), start("m2")
        first = [m1, m2]
        wait_until(lambda: owns_every_partition_once(first, len(SKEWED)), 60, "the first two got nothing", first)
        if assignor == "groupfit":  # the group's first assignments, before the broker knew it, were uniform
            wait_until(lambda: learnt(broker, group), 60, "the broker did not learn the group", first)
        m3 = start("m3")  # scale-up
        up = settled([m1, m2, m3], f"{assignor}: after the scale-up the group did not settle")
        m3.close()  # scale-down
        return [up, settled([m1, m2], f"{assignor}: after the scale-down the group did not settle")]

    loads = {assignor: scale_up_and_down(assignor) for assignor in ("groupfit", "uniform")}
    print(f"member loads (capacity 100) after the scale-up and the scale-down: {loads}")
    assert all(max(load.values()) <= 100 for load in loads["groupfit"]), loads
    assert all(max(load.values()) > 100 for load in loads["uniform"]), loads
