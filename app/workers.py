"""`groupfit serve` with GROUPFIT_WORKERS > 1: that many processes serving one port, each on a listening socket
of its own bound with SO_REUSEPORT, so the kernel spreads the connections over them. (uvicorn's own workers
share one socket: the process that wakes first takes a burst of new connections — measured, all 16 keep-alive
connections of bench/service_http.py on one of two workers, the other idle.) The processes share their metrics
through a directory (app/api/observability.py MULTIPROCESS_DIR); a worker that dies is started again on its
socket, which this process keeps open, so connections the kernel sends it meanwhile wait in its backlog.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import time
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from app.api.observability import MULTIPROCESS_DIR

log = logging.getLogger("groupfit")

RESTART_PAUSE_S = 1.0
"""The least time between two starts of one worker (a worker that cannot start is not restarted in a loop)."""


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port) that other sockets with SO_REUSEPORT share."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(workers: int, options: dict[str, Any]) -> None:
    """Run `workers` processes of the app (built from the environment) until SIGTERM or SIGINT."""
    shared = os.environ.get(MULTIPROCESS_DIR)
    made = shared is None
    directory = Path(shared) if shared else Path(tempfile.mkdtemp(prefix="groupfit-metrics-"))
    for stale in directory.iterdir():  # counts of an earlier run would be summed in
        if stale.is_file():
            stale.unlink()
    os.environ[MULTIPROCESS_DIR] = str(directory)  # read by each worker before it imports prometheus_client
    sockets = [listening_socket(options["host"], options["port"]) for _ in range(workers)]
    context = multiprocessing.get_context("spawn")
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    processes: list[BaseProcess | None] = [None] * workers
    started = [0.0] * workers
    try:
        while not stopping:
            for i, process in enumerate(processes):
                if process is not None and (process.is_alive() or time.monotonic() - started[i] < RESTART_PAUSE_S):
                    continue
                if process is not None:
                    log.warning("worker %d (pid %s) ended with %s; starting it again", i, process.pid, process.exitcode)
                process = context.Process(target=_worker, args=(sockets[i], options), name=f"groupfit-worker-{i}")
                process.start()
                processes[i], started[i] = process, time.monotonic()
            time.sleep(0.2)
    finally:
        for process in processes:
            if process is not None and process.is_alive():
                process.terminate()  # uvicorn finishes the requests in flight
        for process in processes:
            if process is not None:
                process.join(30)
        for sock in sockets:
            sock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if made:
            shutil.rmtree(directory, ignore_errors=True)


def _worker(sock: socket.socket, options: dict[str, Any]) -> None:
    """One worker: the app from the environment's settings, served on its own socket."""
    import uvicorn

    from app.api.factory import create_app

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the workers (SIGTERM) on Ctrl-C
    config = uvicorn.Config(create_app(), **{k: v for k, v in options.items() if k not in ("host", "port")})
    uvicorn.Server(config).run(sockets=[sock])
