"""`groupfit serve` with GROUPFIT_WORKERS > 1: that many processes serving one port. This process accepts the
connections and hands them to the workers in turn (the socket itself, over a Unix socket pair: SCM_RIGHTS), so
every worker holds its share of them. (Measured on bench/service_http.py's 16 keep-alive connections: uvicorn's
own workers share one listening socket and the one that wakes first takes a burst, all 16 on one of two; sockets
of their own with SO_REUSEPORT let the kernel's hash split them unevenly, often 11 against 5, so one worker queues
while the other idles.) The processes share their metrics through a directory (app/api/observability.py
MULTIPROCESS_DIR); a worker that dies is started again on its socket pair, which this process keeps open, so the
connections handed to it meanwhile wait there.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import selectors
import shutil
import signal
import socket
import tempfile
import time
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import uvicorn

from app.api.observability import MULTIPROCESS_DIR

log = logging.getLogger("groupfit")

RESTART_PAUSE_S = 1.0
"""The least time between two starts of one worker (a worker that cannot start is not restarted in a loop)."""


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port), accepting without blocking (this process hands each connection out)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


class Dealer:
    """Hands accepted connections to the workers in turn, each over its socket pair. A worker not running (dead, its
    successor not started yet) is passed over while another runs, as is one whose pair is full (stuck); a connection
    no worker can take is closed."""

    def __init__(self, pairs: list[socket.socket]) -> None:
        self.pairs = pairs
        self.next = 0

    def deal(self, listener: socket.socket, running: list[bool]) -> None:
        order = [i for i in range(len(self.pairs)) if running[i]] or list(range(len(self.pairs)))
        while True:
            try:
                connection, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            with connection:
                for _ in order:
                    i = order[self.next % len(order)]
                    self.next += 1
                    try:
                        socket.send_fds(self.pairs[i], [b"c"], [connection.fileno()])
                        break
                    except (BlockingIOError, InterruptedError):
                        continue
                else:
                    log.warning("no worker can take a connection now; closed it")


def serve(workers: int, options: dict[str, Any]) -> None:
    """Run `workers` processes of the app (built from the environment) until SIGTERM or SIGINT."""
    shared = os.environ.get(MULTIPROCESS_DIR)
    made = shared is None
    directory = Path(shared) if shared else Path(tempfile.mkdtemp(prefix="groupfit-metrics-"))
    for stale in directory.iterdir():  # counts of an earlier run would be summed in
        if stale.is_file():
            stale.unlink()
    os.environ[MULTIPROCESS_DIR] = str(directory)  # read by each worker before it imports prometheus_client
    listener = listening_socket(options["host"], options["port"])
    pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(workers)]
    for mine, _ in pairs:
        mine.setblocking(False)
    dealer = Dealer([mine for mine, _ in pairs])
    context = multiprocessing.get_context("spawn")
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    processes: list[BaseProcess | None] = [None] * workers
    started = [0.0] * workers
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    try:
        while not stopping:
            for i, process in enumerate(processes):
                if process is not None and (process.is_alive() or time.monotonic() - started[i] < RESTART_PAUSE_S):
                    continue
                if process is not None:
                    log.warning("worker %d (pid %s) ended with %s; starting it again", i, process.pid, process.exitcode)
                process = context.Process(target=_worker, args=(pairs[i][1], options), name=f"groupfit-worker-{i}")
                process.start()
                processes[i], started[i] = process, time.monotonic()
            if selector.select(timeout=0.2):
                dealer.deal(listener, [process is not None and process.is_alive() for process in processes])
    finally:
        selector.close()
        listener.close()  # connections not yet accepted are refused, as when one process serves
        for process in processes:
            if process is not None and process.is_alive():
                process.terminate()  # uvicorn finishes the requests in flight
        for process in processes:
            if process is not None:
                process.join(30)
        for pair in pairs:
            for end in pair:
                end.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if made:
            shutil.rmtree(directory, ignore_errors=True)


def _worker(handed: socket.socket, options: dict[str, Any]) -> None:
    """One worker: the app from the environment's settings, serving the connections handed to it."""
    from app.api.factory import create_app

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the workers (SIGTERM) on Ctrl-C
    config = uvicorn.Config(create_app(), **{k: v for k, v in options.items() if k not in ("host", "port")})
    HandedServer(config, handed).run(sockets=[])


class HandedServer(uvicorn.Server):
    """uvicorn's Server listening on nothing: it serves the connections its socket pair brings, each with the
    protocol uvicorn gives a connection it accepts (as uvicorn.Server.startup makes it), and stops as uvicorn stops
    (gracefully: the connections it holds finish their requests)."""

    def __init__(self, config: uvicorn.Config, handed: socket.socket) -> None:
        super().__init__(config)
        self.handed = handed
        self.adopting: set[asyncio.Task[Any]] = set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])
        if not self.should_exit:
            self.handed.setblocking(False)
            asyncio.get_running_loop().add_reader(self.handed.fileno(), self.adopt)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().remove_reader(self.handed.fileno())
        await super().shutdown(sockets=[])

    def adopt(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                _, fds, _, _ = socket.recv_fds(self.handed, 1, 1)
            except (BlockingIOError, InterruptedError):
                return
            for fd in fds:
                connection = socket.socket(fileno=fd)
                connection.setblocking(False)
                task = loop.create_task(loop.connect_accepted_socket(self.protocol, connection))
                self.adopting.add(task)  # kept until done: the loop holds tasks weakly
                task.add_done_callback(self.adopting.discard)

    def protocol(self) -> asyncio.Protocol:
        config = self.config
        made: asyncio.Protocol = config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=self.server_state, app_state=self.lifespan.state
        )
        return made
