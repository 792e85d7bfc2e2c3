"""The experiment's own servers when none are given: Apache Kafka (with groupfit's KIP-848 broker-side assignor on
its classpath), a Redis-protocol server and `groupfit serve`, all on loopback, and the Java consumer built."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from app.experiment.run import KIP848_ALGORITHM, Environment, ExperimentError, Settings, check_broker


def java_build() -> tuple[str, Path]:
    """The Java clients built (`mvn package`, tests skipped): the consumer's classpath and the jar."""
    from app.local.java_clients import build
    from app.local.kafka import KafkaSetupError

    try:
        built = build("package -DskipTests")
    except KafkaSetupError as exc:
        raise ExperimentError(str(exc)) from None
    return built.classpath, built.jar


def broker_properties(service_url: str, settings: Settings) -> dict[str, object]:
    """KIP-848 groups on groupfit's broker-side assignor, and heartbeats down to 500 ms allowed (the broker's
    minimum is 5 s by default; a run sets its group's own interval, `run.set_group_heartbeat`)."""
    return {
        "group.consumer.assignors": "uniform,range,io.groupfit.kafka.GroupfitBrokerAssignor",
        "groupfit.url": service_url,
        # mwf at C = μ·f_up: the broker-side assignor takes no algorithm parameters (least-loaded's w_sla)
        "groupfit.capacity": settings.capacity(KIP848_ALGORITHM),
        "groupfit.algorithm": KIP848_ALGORITHM,
        "group.consumer.assignor.offload.enable": "false",
        "group.consumer.min.heartbeat.interval.ms": 500,
        "group.consumer.heartbeat.interval.ms": settings.heartbeat_ms,
        "group.consumer.min.session.timeout.ms": 6000,
    }


@contextlib.contextmanager
def local_stack(
    work: Path, settings: Settings, bootstrap: str | None = None, service_url: str | None = None
) -> Iterator[Environment]:
    """An Environment on the given broker and service, or on ones started here (stopped on leaving)."""
    from app.local.kafka import ApacheKafka, KafkaSetupError
    from app.local.servers import EmbeddedRedis, free_port, wait_for_port

    classpath, jar = java_build()
    with contextlib.ExitStack() as stack:
        if service_url is None:
            redis = stack.enter_context(EmbeddedRedis(data_dir=work / "redis"))
            port = free_port()
            service_url = f"http://127.0.0.1:{port}"
            env = {**os.environ, "REDIS_URL": redis.url, "GROUPFIT_PORT": str(port), "GROUPFIT_LOG_LEVEL": "WARNING"}
            log = stack.enter_context(open(work / "service.log", "ab"))
            service = subprocess.Popen([sys.executable, "-m", "app.cli", "serve"], env=env, stdout=log, stderr=log)
            stack.callback(_stop, service)
            try:
                wait_for_port("127.0.0.1", port, 60)
            except TimeoutError:
                raise ExperimentError(f"`groupfit serve` did not start; see {work / 'service.log'}") from None
        if bootstrap is None:
            try:
                kafka = ApacheKafka(
                    work / "kafka", extra_classpath=[jar], properties=broker_properties(service_url, settings)
                )
                stack.enter_context(kafka)
            except KafkaSetupError as exc:
                raise ExperimentError(f"Apache Kafka did not start: {exc}") from None
            bootstrap = kafka.bootstrap_servers
        check_broker(bootstrap)
        yield Environment(bootstrap, service_url, classpath, work)


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
