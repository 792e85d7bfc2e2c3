"""Shared fixtures: real servers started by the project's own code (app/local/servers.py: Valkey; app/local/kafka.py:
Apache Kafka)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.local.kafka import ApacheKafka
from app.local.servers import EmbeddedRedis, EmbeddedRedisCluster, free_port, wait_for_port

REFERENCE_STREAM = Path(__file__).resolve().parents[1] / "data" / "reference" / "paper_stream_delta5.json"


SERVER_FIXTURES = {"redis_server", "redis_cluster", "redis_backend", "kafka_broker", "live_service", "spark"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts a real server is an integration test, marked or not: `make check` skips them."""
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def reference_stream_path() -> Path:
    if not REFERENCE_STREAM.exists():
        pytest.fail(f"the reference stream is missing: {REFERENCE_STREAM} (it ships with the repository)")
    return REFERENCE_STREAM


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """A real Redis-protocol server (Valkey) with persistence; tests may stop and start it."""
    server = EmbeddedRedis(data_dir=tmp_path_factory.mktemp("valkey")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedisCluster]:
    """A real Redis Cluster: three Valkey primaries with the slots split between them; tests may stop a node."""
    cluster = EmbeddedRedisCluster(3, tmp_path_factory.mktemp("valkey-cluster")).start()
    yield cluster
    cluster.stop()


@pytest.fixture(params=["single", "cluster"])
def redis_backend(request: pytest.FixtureRequest) -> EmbeddedRedis | EmbeddedRedisCluster:
    """The store's tests run on one server and on a cluster: the `url` says which (redis+cluster:// for a cluster)."""
    return request.getfixturevalue("redis_server" if request.param == "single" else "redis_cluster")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """A real Apache Kafka broker (KRaft, one combined broker and controller node) from Maven Central's jars."""
    broker = ApacheKafka(tmp_path_factory.mktemp("kafka")).start()
    yield broker
    broker.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A failing test that used the broker shows the end of the broker's log beside its own output."""
    outcome = yield
    report = outcome.get_result()
    broker = getattr(item, "funcargs", {}).get("kafka_broker")
    if report.failed and isinstance(broker, ApacheKafka):
        report.sections.append(("Apache Kafka log", broker.logs_tail()))


class LiveService:
    """`groupfit serve` in a subprocess on a free port, against the `redis_server` fixture."""

    def __init__(self, redis_url: str, log_path: Path, **settings: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "REDIS_URL": redis_url, "GROUPFIT_PORT": str(self.port), **settings}
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> LiveService:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "serve"], env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 30
        while True:  # fail at once, with the service's own words, when it dies while starting
            try:
                wait_for_port("127.0.0.1", self.port, 0)
                break
            except TimeoutError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    log_tail = self.log_path.read_text(errors="replace")[-3000:]
                    pytest.fail(f"`groupfit serve` did not start on port {self.port}; its log ends with:\n{log_tail}")
                time.sleep(0.05)
        httpx.get(f"{self.url}/healthz", timeout=10).raise_for_status()
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=15)
        self.process = None


@pytest.fixture(scope="session")
def live_service(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    service = LiveService(redis_server.url, tmp_path_factory.mktemp("service") / "service.log").start()
    yield service
    service.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    """A real Spark session on local[2], as the rates job starts it."""
    from app.pipeline.job import JobOptions, spark_session

    options = JobOptions(
        bootstrap_servers="",
        topics=[],
        service_url="",
        service_group="",
        master="local[2]",
        extra_spark_conf={"spark.sql.streaming.checkpointLocation": str(tmp_path_factory.mktemp("ckpt"))},
    )
    session = spark_session(options)
    yield session
    session.stop()
