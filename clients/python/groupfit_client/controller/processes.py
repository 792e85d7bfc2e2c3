"""Creating and deleting a group's consumers: the interface the controller uses, and local processes."""

from __future__ import annotations

import subprocess
import sys
from abc import ABC, abstractmethod


class ConsumerProcesses(ABC):
    """Creates and deletes the group's consumers (a local process each here; pods in Kubernetes)."""

    @abstractmethod
    def create(self, consumer_id: str) -> None: ...

    @abstractmethod
    def delete(self, consumer_id: str) -> None: ...

    @abstractmethod
    def running(self) -> list[str]: ...


class LocalProcesses(ConsumerProcesses):
    """Each consumer as `python -m groupfit_client.controller consumer` on this machine."""

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
