"""A Spark standalone cluster from the installed PySpark: one master and N workers on loopback, started with
`spark-class` (org.apache.spark.deploy.master.Master and org.apache.spark.deploy.worker.Worker) as Spark's own
sbin scripts would, each with its log in `work_dir`. Ready when the master lists every worker ALIVE.

Memory stays modest: 256 MB per daemon, `worker_memory` per worker for its executors; `spark_defaults`
gives spark-submit the matching driver and executor sizes (through SPARK_CONF_DIR).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from app.local.servers import command_of, free_port, stop_groups

IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <resolvers><ibiblio name="central" m2compatible="true"/></resolvers>
</ivysettings>
"""


def spark_bin(program: str) -> str:
    """`spark-class` or `spark-submit` of the PySpark installed beside this interpreter."""
    beside = Path(sys.executable).with_name(program)
    found = str(beside) if beside.exists() else shutil.which(program)
    if found is None:
        raise FileNotFoundError(f"`{program}` not found: install PySpark (pip install 'groupfit[pipeline]')")
    return found


class SparkStandalone:
    def __init__(
        self, work_dir: str | Path, workers: int = 2, worker_cores: int = 1, worker_memory: str = "1g"
    ) -> None:
        self.work_dir = Path(work_dir)
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.port, self.ui_port = free_port(), free_port()
        self.conf_dir = self.work_dir / "conf"
        self.processes: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The environment for the daemons and for spark-submit against this cluster."""
        return {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_CONF_DIR": str(self.conf_dir),
            "SPARK_WORKER_DIR": str(self.work_dir / "work"),
            # executors and the driver's Python run this interpreter (its venv has groupfit and PySpark)
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }

    def _write_conf(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        executors = {
            "spark.driver.memory": "512m",
            "spark.executor.memory": "512m",
            "spark.executor.cores": str(self.worker_cores),
            "spark.cores.max": str(self.workers * self.worker_cores),
            "spark.ui.enabled": "false",
            "spark.jars.ivySettings": str(self.conf_dir / "ivysettings.xml"),
        }
        (self.conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in executors.items()))
        # --packages straight from Maven Central: Ivy's default chain also reads ~/.m2, where Maven may have left
        # a pom without its jar, and then fails the whole resolution.
        (self.conf_dir / "ivysettings.xml").write_text(IVY_SETTINGS)

    def _daemon(self, name: str, *arguments: str) -> None:
        log = open(self.work_dir / f"{name}.log", "ab")
        self.processes.append(
            subprocess.Popen(
                [spark_bin("spark-class"), *arguments],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # stopped as a group: spark-class execs a JVM
            )
        )
        log.close()

    def start(self, timeout: float = 120.0) -> SparkStandalone:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._write_conf()
        self._daemon(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port)),
        )
        for i in range(self.workers):
            self._daemon(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker",
                *("--host", "127.0.0.1", "--port", str(free_port()), "--webui-port", str(free_port())),
                *("--cores", str(self.worker_cores), "--memory", self.worker_memory),
                self.master_url,
            )
        try:
            self._wait_for_workers(timeout)
        except Exception:
            self.stop()
            raise
        return self

    def alive_workers(self) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as answer:
            return sum(worker["state"] == "ALIVE" for worker in json.load(answer)["workers"])

    def _wait_for_workers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError, ValueError):
                if self.alive_workers() == self.workers:
                    return
            dead = [command_of(p)[1] for p in self.processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the Spark standalone cluster did not come up ({'exited: ' + ', '.join(dead) if dead else 'timeout'});"
                    f" logs in {self.work_dir}:\n{self.logs_tail()}"
                )
            time.sleep(0.5)

    def logs_tail(self, chars: int = 2000) -> str:
        return "\n".join(
            f"== {log.name}\n{log.read_text(errors='replace')[-chars:]}" for log in sorted(self.work_dir.glob("*.log"))
        )

    def stop(self) -> None:
        """Workers first, then the master."""
        stop_groups(self.processes[1:], 20)
        stop_groups(self.processes[:1], 20)
        self.processes = []

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
