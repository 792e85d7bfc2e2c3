"""Apache Kafka without Docker: jars from Maven Central, KRaft nodes started as plain JVM processes.

    with ApacheKafka(work_dir) as kafka:            # one combined broker+controller node
        use(kafka.bootstrap_servers)
    ApacheKafka(work_dir, brokers=3, racks=("a", "b", "c"))   # three brokers and one controller

The jars come from `deploy/kafka/pom.xml` (profile "broker"), resolved once by `mvn` into a cache folder
(`$GROUPFIT_CACHE_DIR`, default `~/.cache/groupfit`) under a file lock, so parallel processes resolve them
once and later runs need no network. The same pom gives Spark's Kafka connector (`spark_kafka_jars`).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.local.servers import free_port, stop_groups

POM = Path(__file__).resolve().parents[2] / "deploy" / "kafka" / "pom.xml"
CONTROLLER_ID = 0  # with brokers > 1 a dedicated controller; brokers are 1..n

# Kafka's INFO log to stdout (kept in the node's log file), without the per-partition state-change chatter.
LOG4J2 = """\
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
"""


class KafkaSetupError(RuntimeError):
    """Java or Maven missing, the jars not resolvable, or a node that did not start: the message says which."""


def cache_dir() -> Path:
    return Path(os.environ.get("GROUPFIT_CACHE_DIR") or Path.home() / ".cache" / "groupfit")


def pom_property(name: str) -> str:
    namespace = {"m": "http://maven.apache.org/POM/4.0.0"}
    element = ElementTree.parse(POM).getroot().find(f"m:properties/m:{name}", namespace)
    if element is None or not element.text:
        raise KafkaSetupError(f"{POM} has no <{name}> property")
    return element.text.strip()


KAFKA_VERSION = pom_property("kafka.version")


def _require(program: str, why: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise KafkaSetupError(f"`{program}` is not on PATH; {why}")
    return path


def java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return _require("java", "Apache Kafka needs Java 17 or newer (Debian: apt-get install openjdk-17-jre-headless)")


def _target(profile: str, maven_properties: Mapping[str, str]) -> Path:
    settings = "-".join(f"{key}={value}" for key, value in sorted(maven_properties.items()))
    return cache_dir() / f"{profile}-{hashlib.sha256(POM.read_bytes() + settings.encode()).hexdigest()[:12]}"


def resolve_jars(profile: str, **maven_properties: str) -> Path:
    """The folder of jars that `profile` of deploy/kafka/pom.xml resolves to, running `mvn` only the first time.

    The folder's name carries the pom's hash and the properties, so editing the pom resolves again.
    """
    target = _target(profile, maven_properties)
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be resolving the same folder: wait for it
        if (target / ".complete").exists():
            return target
        mvn = _require("mvn", "Maven is needed once to fetch Apache Kafka's jars (Debian: apt-get install maven)")
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        command = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(POM),
            "-P",
            profile,
            *(f"-D{key}={value}" for key, value in maven_properties.items()),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise KafkaSetupError(
                f"`mvn` could not resolve profile {profile!r} of {POM} (exit {done.returncode}); "
                f"check that Maven Central is reachable. Maven said:\n{(done.stdout + done.stderr)[-3000:]}"
            )
        (staging / ".complete").touch()
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return target


def broker_jars() -> Path:
    return resolve_jars("broker")


def _cached(profile: str, **maven_properties: str) -> Path | None:
    target = _target(profile, maven_properties)
    return target if (target / ".complete").exists() else None


def _artifact(jar: Path) -> str:
    """A jar's artifact name without its version: hadoop-client-api-3.5.0.jar → hadoop-client-api."""
    return re.sub(r"-\d[^-]*\.jar$", "", jar.name)


def spark_kafka_jars(spark_version: str, spark_jars_dir: Path | None = None) -> list[Path]:
    """Spark's own Kafka source (spark-sql-kafka-0-10) for `spark_version` and the jars it needs that Spark does
    not ship (those in `spark_jars_dir` are left out, so no class is on the path twice), for `spark.jars`.

    Maven Central may not carry a patch release yet (PySpark 4.2.1 is on PyPI, its connector is not): then the
    minor's first release (x.y.0) is used, since Spark keeps a minor's patch releases binary compatible.
    """
    candidates = list(dict.fromkeys([spark_version, ".".join(spark_version.split(".")[:2]) + ".0"]))
    # A cached folder first: a second run needs no network, not even to learn that a patch is still missing.
    folder = next((f for v in candidates if (f := _cached("spark-connector", **{"spark.version": v}))), None)
    if folder is None:
        folder = _resolved_connector(candidates)
    shipped = {_artifact(jar) for jar in spark_jars_dir.glob("*.jar")} if spark_jars_dir else set()
    return sorted(jar for jar in folder.glob("*.jar") if _artifact(jar) not in shipped)


def _resolved_connector(versions: list[str]) -> Path:
    """The connector's jars for the first of `versions` Maven Central has."""
    for version in versions[:-1]:
        with contextlib.suppress(KafkaSetupError):
            return resolve_jars("spark-connector", **{"spark.version": version})
    return resolve_jars("spark-connector", **{"spark.version": versions[-1]})


def random_cluster_id() -> str:
    """Kafka's Uuid text form: 16 random bytes, URL-safe base64 without padding, drawn again while it starts
    with "-" as Kafka's own Uuid.randomUuid() does (the storage tool would read such an id as an option)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cluster_id


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the process that started it dies, so no broker is orphaned."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class KafkaNode:
    node_id: int
    roles: str  # "broker,controller", "broker" or "controller"
    directory: Path
    port: int | None  # the client listener; None on a controller-only node
    controller_port: int | None  # the controller listener; None on a broker-only node
    rack: str | None = None
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else "(no log)"


class ApacheKafka:
    """An Apache Kafka cluster in KRaft mode on 127.0.0.1, its data and logs under `work_dir`.

    brokers=1: one node that is both broker and controller. brokers>1: that many broker processes and one
    controller process. `racks` sets `broker.rack` per broker; `properties` go into every node's
    server.properties (over the defaults below); `extra_classpath` adds jars or folders (e.g. a broker-side
    assignor). `log_paths` keep each node's log after `stop()`.
    """

    def __init__(
        self,
        work_dir: str | Path,
        brokers: int = 1,
        extra_classpath: Iterable[str | Path] = (),
        properties: Mapping[str, object] | None = None,
        racks: Iterable[str] | None = None,
        heap: str = "512m",
    ) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be at least 1, got {brokers}")
        rack_of: list[str | None] = list(racks) if racks is not None else [None] * brokers
        if len(rack_of) != brokers:
            raise ValueError(f"racks names {len(rack_of)} racks for {brokers} brokers; give one per broker")
        self.work_dir = Path(work_dir)
        self.brokers = brokers
        self.extra_classpath = [Path(path) for path in extra_classpath]
        self.properties = {key: str(value) for key, value in (properties or {}).items()}
        self.heap = heap
        self.cluster_id = random_cluster_id()
        self.start_seconds: float | None = None
        if brokers == 1:
            self.nodes = [
                KafkaNode(1, "broker,controller", self.work_dir / "node-1", free_port(), free_port(), rack_of[0])
            ]
        else:
            controller = KafkaNode(CONTROLLER_ID, "controller", self.work_dir / "controller", None, free_port())
            self.nodes = [controller] + [
                KafkaNode(i, "broker", self.work_dir / f"broker-{i}", free_port(), None, rack_of[i - 1])
                for i in range(1, brokers + 1)
            ]

    @property
    def controller(self) -> KafkaNode:
        return next(node for node in self.nodes if "controller" in node.roles)

    @property
    def broker_nodes(self) -> list[KafkaNode]:
        return [node for node in self.nodes if node.port is not None]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.broker_nodes)

    @property
    def log_paths(self) -> list[Path]:
        return [node.log_path for node in self.nodes]

    def logs_tail(self, chars: int = 4000) -> str:
        """The end of every node's log, for a failing test to print."""
        return "\n".join(f"--- {node.log_path} ---\n{node.log_tail(chars)}" for node in self.nodes)

    def _config(self, node: KafkaNode) -> dict[str, str]:
        replicas = str(min(3, self.brokers))
        listeners = []
        if node.port is not None:
            listeners.append(f"PLAINTEXT://127.0.0.1:{node.port}")
        if node.controller_port is not None:
            listeners.append(f"CONTROLLER://127.0.0.1:{node.controller_port}")
        config = {
            "process.roles": node.roles,
            "node.id": str(node.node_id),
            "controller.quorum.voters": f"{self.controller.node_id}@127.0.0.1:{self.controller.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(listeners),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.directory / "data"),
            # Internal topics replicated as far as the cluster allows (Kafka's defaults assume 3 brokers).
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": replicas,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": replicas,
            "default.replication.factor": replicas,
            # A group's first rebalance at once: tests and the demo start members one after another.
            "group.initial.rebalance.delay.ms": "0",
            # Kafka's 50 offsets partitions take seconds to create on a fresh node; a local cluster needs few.
            "offsets.topic.num.partitions": "4",
            # The log cleaner's dedupe buffer is 128 MB by default, allocated in one piece at start: on a small
            # heap (256-512 MB) that allocation can fail and stop the node; a local cluster's compacted topics
            # are tiny.
            "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        }
        if node.port is not None:
            config["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{node.port}"
            config["inter.broker.listener.name"] = "PLAINTEXT"
            if node.rack is not None:
                config["broker.rack"] = node.rack
        return {**config, **self.properties}

    def _java(self, *jvm_options: str) -> list[str]:
        classpath = [str(broker_jars() / "*"), *(str(path) for path in self.extra_classpath)]
        log4j = self.work_dir / "log4j2.properties"
        return [
            java(),
            *jvm_options,
            f"-Dlog4j2.configurationFile={log4j}",
            "-Djava.awt.headless=true",
            "-cp",
            os.pathsep.join(classpath),
        ]

    def _popen(self, command: list[str], log_path: Path) -> subprocess.Popen:
        with open(log_path, "ab") as log:
            return subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it ourselves
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )

    def _format(self) -> None:
        """`kafka-storage.sh format` for every node at once (same cluster id), as the Kafka distribution does."""
        quick_jvm = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m")  # a short-lived tool
        formats = [
            (
                node,
                self._popen(
                    [*self._java(*quick_jvm), "kafka.tools.StorageTool", "format", "-t", self.cluster_id]
                    + ["-c", str(node.config_path), "--ignore-formatted"],
                    node.directory / "format.log",
                ),
            )
            for node in self.nodes
        ]
        for node, process in formats:
            if process.wait() != 0:
                log = (node.directory / "format.log").read_text(errors="replace")[-3000:]
                raise KafkaSetupError(f"formatting the storage of Kafka node {node.node_id} failed:\n{log}")

    def start(self, timeout: float = 180.0, attempts: int = 3) -> ApacheKafka:
        """Format and start every node; wait until clients can use the cluster. A free port taken by another
        process between choosing and binding it (a shared machine) is retried on new ports."""
        began = time.monotonic()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "log4j2.properties").write_text(LOG4J2)
        for attempt in range(1, attempts + 1):
            for node in self.nodes:
                node.directory.mkdir(parents=True, exist_ok=True)
                node.config_path.write_text("".join(f"{k}={v}\n" for k, v in self._config(node).items()))
            try:
                self._format()
                server_jvm = ("-Xms128m", f"-Xmx{self.heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")
                for node in self.nodes:
                    node.process = self._popen(
                        [*self._java(*server_jvm), "kafka.Kafka", str(node.config_path)], node.log_path
                    )
                self._wait_until_ready(began + timeout)
                break
            except KafkaSetupError as error:
                self.stop()
                if "Address already in use" not in str(error) or attempt == attempts:
                    raise
                for node in self.nodes:  # the formatted storage names the old controller address
                    shutil.rmtree(node.directory / "data", ignore_errors=True)
                    node.port = free_port() if node.port is not None else None
                    node.controller_port = free_port() if node.controller_port is not None else None
            except BaseException:
                self.stop()
                raise
        self.start_seconds = time.monotonic() - began
        return self

    def _wait_until_ready(self, deadline: float) -> None:
        """Until every broker is in the metadata a client gets, failing at once if a node exits."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition
        from confluent_kafka.admin import AdminClient

        # log_level 0: librdkafka's connection-refused lines while the broker starts are expected.
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        while True:
            for node in self.nodes:
                if node.process is not None and node.process.poll() is not None:
                    raise KafkaSetupError(
                        f"Kafka node {node.node_id} exited with status {node.process.returncode} while starting; "
                        f"its log ends with:\n{node.log_tail()}"
                    )
            with contextlib.suppress(KafkaException):
                metadata = admin.list_topics(timeout=2)
                if len(metadata.brokers) == self.brokers and metadata.cluster_id == self.cluster_id:
                    break
            if time.monotonic() > deadline:
                raise KafkaSetupError(f"Apache Kafka did not answer metadata in time.\n{self.logs_tail()}")
            time.sleep(0.2)
        # The group coordinator creates __consumer_offsets on the first group request and answers "not
        # coordinator" until it has loaded: ask now, so a caller's first commit or join never meets that. A
        # consumer asks (OffsetFetch through its group coordinator): librdkafka's admin OffsetFetch and
        # DescribeGroups crashed the process on a coordinator still loading.
        probe = Consumer({"bootstrap.servers": self.bootstrap_servers, "group.id": "groupfit-ready", "log_level": 0})
        try:
            while True:
                try:
                    probe.committed([TopicPartition("groupfit-ready", 0)], timeout=5)
                    return
                except KafkaException:
                    pass
                if time.monotonic() > deadline:
                    raise KafkaSetupError(
                        f"Apache Kafka's group coordinator did not start in time.\n{self.logs_tail()}"
                    )
                time.sleep(0.2)
        finally:
            probe.close()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a clean shutdown) to the brokers, then to the controller they report to; SIGKILL what outlives
        `timeout`."""
        brokers = [node for node in self.nodes if "controller" not in node.roles]
        for group in (brokers, [self.controller]):
            processes = [node.process for node in group if node.process is not None]
            for node in group:
                node.process = None
            stop_groups(processes, timeout)

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
