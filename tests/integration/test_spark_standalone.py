"""The rates job on a Spark standalone cluster (a master and two workers from the installed PySpark), submitted
by deploy/spark/submit.sh as an operator would, reading real Apache Kafka through Spark's Kafka connector (the
jars deploy/kafka/pom.xml resolves, given with --jars) and writing to the live service; then the driver is
stopped mid-stream and started again on the same checkpoint."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from groupfit_client import GroupfitClient, GroupfitError

from app.local.servers import stop_groups
from app.local.spark import SparkStandalone
from app.pipeline.source import end_offsets
from tests.integration.test_pipeline import RATES, produce

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
WINDOW_S = 30


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    started = time.perf_counter()
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), workers=2).start()
    print(f"Spark standalone master and 2 workers up in {time.perf_counter() - started:.1f} s")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def kafka_connector_jars() -> str:
    """What an operator gives submit.sh as SPARK_KAFKA_JARS: `groupfit spark-kafka-jars`, Spark's Kafka connector
    for the installed PySpark and the jars it needs that Spark does not ship, resolved by Maven once."""
    import pyspark

    listed = subprocess.run(
        [str(Path(sys.executable).with_name("groupfit")), "spark-kafka-jars"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout.strip()
    jars = [Path(jar) for jar in listed.split(",")]
    assert all(jar.is_file() for jar in jars), listed
    connector = next(jar for jar in jars if jar.name.startswith("spark-sql-kafka-0-10_2.13-"))
    # Built for the installed Spark's minor (its x.y.0 when Maven Central lacks the patch): a minor's patch
    # releases are binary compatible, another minor's are not (hence pyproject's pyspark<4.3).
    built_for = re.fullmatch(r"spark-sql-kafka-0-10_2\.13-(\d+\.\d+)\.\d+\.jar", connector.name)
    assert built_for and built_for.group(1) == ".".join(pyspark.__version__.split(".")[:2]), (connector, pyspark)
    assert any(jar.name.startswith("kafka-clients-") for jar in jars)
    return listed


@pytest.fixture(scope="module")
def groupfit_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What submit.sh ships to the executors with --py-files: the `app` package, zipped as --py-files takes it."""
    folder = tmp_path_factory.mktemp("dist")
    return Path(shutil.make_archive(str(folder / "groupfit"), "zip", ROOT, "app"))


class Submitted:
    """deploy/spark/submit.sh in client mode (standalone clusters run Python drivers in client mode), with Spark's
    Kafka connector from `jars` (SPARK_KAFKA_JARS: spark-submit --jars puts them on the driver's and the
    executors' classpaths; nothing is fetched by Ivy)."""

    def __init__(self, cluster: SparkStandalone, wheel: Path, jars: str, log_path: Path, *job_args: str) -> None:
        env = {
            **cluster.env,
            "SPARK_MASTER": cluster.master_url,
            "SPARK_DEPLOY_MODE": "client",
            "GROUPFIT_WHEEL": str(wheel),
            "SPARK_KAFKA_JARS": jars,
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",  # the venv's spark-submit
        }
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                ["bash", str(ROOT / "deploy" / "spark" / "submit.sh"), *job_args],
                env=env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stop(self) -> None:
        """SIGTERM to the driver's process group (spark-submit's JVM and the job's Python), as a kill would."""
        stop_groups([self.process], 60)

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def records_read(self, topic: str, wait_s: float = 120) -> int:
        """The records the job's log says its micro-batches read through Spark's Kafka connector (KafkaV2), once
        it says so: a batch is logged when it has ended, after its rates were written (`wait_s` at most)."""
        pattern = rf"batch \d+: (\d+) records from KafkaV2\[Subscribe\[{re.escape(topic)}\]\]"
        deadline = time.monotonic() + wait_s
        while not (read := sum(map(int, re.findall(pattern, self.log_path.read_text(errors="replace"))))):
            if time.monotonic() > deadline or self.process.poll() is not None:
                break
            time.sleep(1)
        return read


def batches(checkpoint: Path) -> dict[int, dict[str, int]]:
    """The end offsets of every micro-batch the query planned, by batch id, from its checkpoint: one line per
    source after the version and the batch metadata, in the Kafka connector's form {"topic": {"partition": n}}."""
    planned = {}
    for path in (checkpoint / "offsets").iterdir():
        if path.name.isdigit():
            lines = path.read_text().splitlines()
            offsets: dict[str, int] = {}
            for source in lines[2:]:
                document = json.loads(source)
                assert isinstance(document, dict), f"not the Kafka connector's offsets: {source}"
                for topic, partitions in document.items():
                    offsets |= {f"{topic}/{p}": int(o) for p, o in partitions.items()}
            planned[int(path.name)] = offsets
    return planned


# Two spark-submits, each given up to 8 min from submit to accurate rates: 277 s and over 300 s were seen at load
# average 20-25 on 2 cores (quiet: about a minute).
SUBMIT_TO_RATES_S = 480


@pytest.mark.timeout(2 * SUBMIT_TO_RATES_S + 600)
def test_rates_job_on_a_standalone_cluster_and_a_driver_restart(
    spark_cluster, groupfit_wheel, kafka_connector_jars, kafka_broker, live_service, tmp_path
):
    topic, group = f"sa-{uuid.uuid4().hex[:6]}", f"sa-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, 4, 1)]).values():
        future.result(30)
    checkpoint = tmp_path / "checkpoint"
    job_args = [
        *("--bootstrap-servers", kafka_broker.bootstrap_servers, "--topics", topic),
        *("--service-url", live_service.url, "--service-group", group),
        *("--window-s", str(WINDOW_S), "--slide-s", "3", "--trigger-s", "3"),
        *("--checkpoint-dir", str(checkpoint), "--starting-offsets", "earliest"),
    ]
    stop, counts = threading.Event(), dict.fromkeys(RATES, 0)
    producer = threading.Thread(target=produce, args=(kafka_broker.bootstrap_servers, topic, 600, stop, counts))
    producer.start()
    service = GroupfitClient(live_service.url)
    observed: list[tuple[float, object, dict[int, float]]] = []  # (when, window_end, rate by partition)

    def watch_until(accurate_after: float | None, deadline_s: float, job: Submitted) -> dict[int, float] | None:
        """Poll the stored rates; the first set within 10% of the produced rates whose window ends after
        `accurate_after` (a wall-clock time), or None by the deadline."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline and job.process.poll() is None:
            time.sleep(1)
            try:
                stored = service.rates(group)
            except GroupfitError as error:
                assert error.code == "group_not_found"
                continue
            rates = {p.partition: p.rate for p in stored.partitions}
            if not observed or observed[-1][1] != stored.window_end:
                observed.append((time.time(), stored.window_end, rates))
            ends_after = accurate_after is None or stored.window_end.timestamp() > accurate_after
            if ends_after and len(rates) == 4 and all(abs(rates[p] - RATES[p]) <= 0.1 * RATES[p] for p in RATES):
                return rates
        return None

    first = second = None
    try:
        time.sleep(WINDOW_S / 2)  # records for the first window to be complete
        started = time.perf_counter()
        first = Submitted(spark_cluster, groupfit_wheel, kafka_connector_jars, tmp_path / "driver-1.log", *job_args)
        rates = watch_until(None, SUBMIT_TO_RATES_S, first)
        assert rates is not None, f"no accurate rates from the cluster: {observed[-3:]}\n{first.log_tail()}"
        print(f"first accurate rates {time.perf_counter() - started:.0f} s after spark-submit: {rates}")
        assert first.records_read(topic) > 0, f"no batch read through the connector:\n{first.log_tail()}"
        time.sleep(6)  # mid-stream: more batches planned and committed
        stopped_at, seen_before = time.time(), len(observed)
        first.stop()
        before = batches(checkpoint)
        assert before, "the first run planned no batch"
        started = time.perf_counter()
        second = Submitted(spark_cluster, groupfit_wheel, kafka_connector_jars, tmp_path / "driver-2.log", *job_args)
        rates = watch_until(stopped_at, SUBMIT_TO_RATES_S, second)
        restart_s = time.perf_counter() - started
        assert rates is not None, f"rates did not continue after the restart: {observed[-3:]}\n{second.log_tail()}"
        print(f"accurate rates again {restart_s:.0f} s after the restart: {rates}")
        assert second.records_read(topic) > 0, f"no batch read through the connector:\n{second.log_tail()}"
        # Every window stored since the stop, from the batch replayed from the checkpoint on: one that lost the
        # records of the downtime (a gap) would be too low, one that read records again (a double count) too high.
        for _, window_end, stored in observed[seen_before:]:
            assert all(abs(stored[p] - RATES[p]) <= 0.1 * RATES[p] for p in RATES), (window_end, stored)
        after = batches(checkpoint)
        ids = sorted(after)
        assert ids == list(range(ids[0], ids[-1] + 1)) and ids[-1] > max(before), "batch ids continue, no gap"
        for earlier, later in itertools.pairwise(ids):
            assert all(after[later][key] >= offset for key, offset in after[earlier].items()), "offsets never go back"
    finally:
        stop.set()
        producer.join()
        service.close()
        for job in (first, second):
            if job is not None:
                job.stop()
    ends = end_offsets(kafka_broker.bootstrap_servers, [topic], "latest")
    assert sum(ends.values()) == sum(counts.values())
