"""Creating and deleting a group's consumers: the interface the controller and the autoscaler use, and local
processes (Kubernetes pods are the other implementation: docs/autoscaling.md describes it)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence


class ConsumerProcesses(ABC):
    """Creates and deletes the group's consumers (a local process each here; pods in Kubernetes)."""

    @abstractmethod
    def create(self, consumer_id: str) -> None: ...

    @abstractmethod
    def delete(self, consumer_id: str) -> None: ...

    @abstractmethod
    def running(self) -> list[str]: ...


class CommandProcesses(ConsumerProcesses):
    """Each consumer is `command` with every `{id}` replaced by its id, a process on this machine. Deleting one
    sends SIGTERM (a consumer closes and leaves its group on it) and SIGKILL after `stop_timeout_s`; with
    `wait` False, `delete` returns at once and `reap()` finishes what it started."""

    def __init__(self, command: Sequence[str], stop_timeout_s: float = 15.0, wait: bool = True) -> None:
        self.command = list(command)
        self.stop_timeout_s = stop_timeout_s
        self.wait = wait
        self.processes: dict[str, subprocess.Popen] = {}
        self.stopping: dict[str, tuple[subprocess.Popen, float]] = {}  # id → (process, SIGKILL deadline)

    def create(self, consumer_id: str) -> None:
        self.delete(consumer_id)  # one process per id, even if an earlier one died
        self._finish(consumer_id)
        self.processes[consumer_id] = subprocess.Popen([part.replace("{id}", consumer_id) for part in self.command])

    def delete(self, consumer_id: str) -> None:
        process = self.processes.pop(consumer_id, None)
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            self.stopping[consumer_id] = (process, time.monotonic() + self.stop_timeout_s)
        if self.wait:
            self._finish(consumer_id)

    def _finish(self, consumer_id: str) -> None:
        """Wait for a stopping process to exit, killing it at its deadline."""
        entry = self.stopping.pop(consumer_id, None)
        if entry is None:
            return
        process, deadline = entry
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def reap(self) -> list[str]:
        """Forget the stopped processes that exited and kill those past their deadline; the ids still stopping."""
        now = time.monotonic()
        for consumer_id, (process, deadline) in list(self.stopping.items()):
            if process.poll() is not None or now >= deadline:
                self._finish(consumer_id)
        return sorted(self.stopping)

    def running(self) -> list[str]:
        return sorted(c for c, p in self.processes.items() if p.poll() is None)

    def close(self) -> None:
        """Stop every process: SIGTERM to all at once, then wait for each (SIGKILL at the deadline)."""
        for consumer_id in list(self.processes):
            process = self.processes.pop(consumer_id)
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                self.stopping[consumer_id] = (process, time.monotonic() + self.stop_timeout_s)
        for consumer_id in list(self.stopping):
            self._finish(consumer_id)


class LocalProcesses(CommandProcesses):
    """Each consumer as `python -m groupfit_client.controller consumer` on this machine."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, control_topic: str, record_log: str | None = None
    ) -> None:
        args = ["--bootstrap", bootstrap, "--topic", topic, "--group", group, "--control-topic", control_topic]
        if record_log:
            args += ["--record-log", record_log]
        super().__init__([sys.executable, "-m", "groupfit_client.controller", "consumer", "--id", "{id}", *args])
