"""A bounded pool of worker processes for the computations that may take long, so the event loop (health
checks, small assignments, Redis round trips) never waits on one.

- At most `workers` processes, started with the server or when first needed (fresh interpreters: nothing
  of the server's threads or sockets is inherited) and kept; at most `queue` more requests wait for one;
  beyond that a request is refused at once: 503 `compute_busy`, with Retry-After. A worker's start is not
  counted in a request's deadline.
- Every computation has a deadline, its wait for a worker included. Past it the request gets 504
  `compute_timeout` and its worker is killed and replaced, so abandoned work stops taking a core; the same
  when the client goes away first.
- Each worker runs under an address-space limit, so a computation that would need more fails alone, and at
  a lower CPU priority than the server (NICE).

A job is a module-level function from bytes to bytes (named by module and name, so only bytes cross the
socket); an AssignmentError it raises (bad input) is raised again here, with its code; a refusal of the pool
itself is a ComputeUnavailable (compute_busy, compute_timeout).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import importlib
import logging
import os
import pickle
import resource
import signal
import socket
import struct
import subprocess
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from app.core.errors import AssignmentError, ComputeUnavailable, ErrorCode

log = logging.getLogger("groupfit")

Job = Callable[[bytes], bytes]
T = TypeVar("T")

_LENGTH = struct.Struct("!Q")
_OK, _REFUSED, _OUT_OF_MEMORY, _FAILED = range(4)
NICE = 10
"""Workers run at a lower CPU priority than the server (weight 110 against 1024), so on cores they fill the
server's event loop (health checks, small assignments) still gets one when it needs it; not the lowest, so
they are not starved by other programs on a shared machine."""
STARTUP_S = 60.0
"""How long a worker may take to start (a fresh interpreter importing the jobs' modules)."""


class ComputePool:
    def __init__(
        self, workers: int, queue: int, timeout_s: float, memory_mb: int, preload: tuple[str, ...] = ()
    ) -> None:
        self.workers = workers
        self.preload = preload  # modules a worker imports before it serves (the jobs' own imports)
        self.queue = queue
        self.timeout_s = timeout_s
        self.memory_bytes = memory_mb * 1024 * 1024
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._waiting: collections.deque[asyncio.Future[_Worker]] = collections.deque()
        self._alive = 0  # workers idle, busy or starting
        self._admitted = 0  # requests running or waiting
        self._replacing: set[asyncio.Task[None]] = set()
        self._closed = False
        self._threads = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="compute")

    def _admit(self) -> None:
        if self._admitted >= self.workers + self.queue:
            raise ComputeUnavailable(
                ErrorCode.COMPUTE_BUSY,
                f"all {self.workers} compute workers are busy and {self.queue} requests wait; retry shortly.",
                {"workers": self.workers, "queue": self.queue},
            )
        self._admitted += 1

    async def run_in_thread(self, call: Callable[..., T], *args: Any) -> T:
        """`call(*args)` on one of `workers` threads, admitted and refused as the workers' jobs are: for work
        that releases the GIL (the compiled core), so it needs no process of its own. A thread cannot be
        stopped: past the deadline the request gets 504 and the result is dropped when the work ends (the
        compiled algorithms' work is bounded by the request's size)."""
        self._admit()
        try:
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.get_running_loop().run_in_executor(self._threads, call, *args)
        except TimeoutError:
            raise self._timed_out() from None
        finally:
            self._admitted -= 1

    def _timed_out(self) -> ComputeUnavailable:
        return ComputeUnavailable(
            ErrorCode.COMPUTE_TIMEOUT,
            f"the computation did not finish within {self.timeout_s:g} s and was stopped; send a smaller "
            "request, a faster algorithm or a lower time_limit_ms.",
            {"timeout_s": self.timeout_s},
        )

    async def run(self, job: Job, payload: bytes, gone: Callable[[], Awaitable[Any]] | None = None) -> bytes:
        """`job(payload)` in a worker, within the deadline; `gone()` returns when the client has gone away."""
        self._admit()
        try:
            worker = await self._first_start()  # a worker's start is not the request's computation
            async with asyncio.timeout(self.timeout_s):
                if worker is None:
                    worker = await self._checkout()
                status, value = await self._call(worker, f"{job.__module__}:{job.__name__}", payload, gone)
        except TimeoutError:
            raise self._timed_out() from None
        finally:
            self._admitted -= 1
        if status == _OK:
            return value
        if status == _REFUSED:
            code, message, details = value
            raise AssignmentError(ErrorCode(code), message, details)
        if status == _OUT_OF_MEMORY:
            raise AssignmentError(
                ErrorCode.TOO_MANY_PARTITIONS,
                f"the computation needed more than the {self.memory_bytes >> 20} MB a worker may use; "
                "send fewer partitions or members.",
            )
        raise RuntimeError(f"compute job {job.__name__} failed in its worker:\n{value}")

    async def _call(
        self, worker: _Worker, name: str, payload: bytes, gone: Callable[[], Awaitable[Any]] | None
    ) -> tuple[int, Any]:
        call = asyncio.ensure_future(worker.call(name, payload))
        watch = asyncio.ensure_future(gone()) if gone is not None else None
        try:
            await asyncio.wait([call] if watch is None else [call, watch], return_when=asyncio.FIRST_COMPLETED)
            if not call.done():
                raise ComputeUnavailable(
                    ErrorCode.COMPUTE_TIMEOUT, "the client went away; the computation was stopped."
                )
            status, value = call.result()  # a worker that died raises here
        except BaseException:
            call.cancel()
            self._discard(worker)
            raise
        finally:
            if watch is not None:
                watch.cancel()
        if status in (_OK, _REFUSED):
            self._release(worker)
        else:  # after a MemoryError or a bug the worker's state is not trusted
            self._discard(worker)
        return status, value

    async def _first_start(self) -> _Worker | None:
        """A new worker when none is idle and the pool is not full yet (the first requests after startup)."""
        if self._idle or self._alive >= self.workers:
            return None
        self._alive += 1
        try:
            return await self._start()
        except BaseException:
            self._alive -= 1
            raise

    async def _checkout(self) -> _Worker:
        if self._idle:
            return self._idle.pop()
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release(waiter.result())  # handed a worker just as the deadline passed
            elif waiter in self._waiting:  # (a release may have dropped it already)
                self._waiting.remove(waiter)
            raise

    def _release(self, worker: _Worker) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(worker)
                return
        self._idle.append(worker)

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        self._all.discard(worker)
        self._alive -= 1
        if not self._closed:  # the replacement starts now, so the next request finds it ready
            self._alive += 1
            task = asyncio.ensure_future(self._replace())
            self._replacing.add(task)
            task.add_done_callback(self._replacing.discard)

    async def _replace(self) -> None:
        try:
            worker = await self._start()
        except Exception:
            self._alive -= 1
            log.exception("a compute worker could not be started")
            return
        self._release(worker)

    async def _start(self) -> _Worker:
        ours, theirs = socket.socketpair()
        with theirs:
            command = f"from app.service.compute import serve; serve({theirs.fileno()}, {self.memory_bytes}, {self.preload!r})"
            # started from a thread: forking a large server process takes tens of milliseconds
            process = await asyncio.to_thread(
                subprocess.Popen,
                [sys.executable, "-c", command],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        worker = _Worker(process, reader, writer)
        try:
            async with asyncio.timeout(STARTUP_S):
                await reader.readexactly(1)  # imported what it preloads: ready
        except BaseException:
            worker.kill()
            raise
        self._all.add(worker)
        return worker

    async def start(self) -> None:
        """Start every worker now (the server's startup), so the first requests do not wait for one."""
        while self._alive < self.workers:
            self._alive += 1
            try:
                worker = await self._start()
            except BaseException:
                self._alive -= 1
                raise
            self._release(worker)

    async def close(self) -> None:
        self._closed = True
        self._threads.shutdown(wait=False, cancel_futures=True)
        for task in list(self._replacing):
            task.cancel()
        for worker in self._all:
            worker.kill()
        for worker in self._all:
            await asyncio.to_thread(worker.process.wait)
        self._all.clear()
        self._idle.clear()


class _Worker:
    def __init__(
        self, process: subprocess.Popen[bytes], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.process = process
        self.reader = reader
        self.writer = writer

    async def call(self, name: str, payload: bytes) -> tuple[int, Any]:
        frame = pickle.dumps((name, payload), protocol=pickle.HIGHEST_PROTOCOL)
        self.writer.writelines((_LENGTH.pack(len(frame)), frame))
        await self.writer.drain()
        (length,) = _LENGTH.unpack(await self.reader.readexactly(_LENGTH.size))
        return pickle.loads(await self.reader.readexactly(length))

    def kill(self) -> None:
        self.writer.close()
        if self.process.poll() is None:
            self.process.kill()
            # reaped by a thread: a killed process exits at once, but not necessarily before this returns
            asyncio.get_running_loop().run_in_executor(None, self.process.wait)


def serve(fd: int, memory_bytes: int, preload: tuple[str, ...]) -> None:
    """A worker (a fresh interpreter started by the pool, the socket `fd` its line to the server): read (job
    name, payload), run it, write (status, result), until the server closes the socket."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the server, which then closes the socket
    os.nice(NICE)
    sock = socket.socket(fileno=fd)
    for module in preload:
        importlib.import_module(module)
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the server went away: so does this worker
        _serve(sock, memory_bytes)


def _serve(sock: socket.socket, memory_bytes: int) -> None:
    sock.sendall(b"R")
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    jobs: dict[str, Job] = {}
    with sock, sock.makefile("rb") as incoming:
        while header := incoming.read(_LENGTH.size):
            (length,) = _LENGTH.unpack(header)
            name, payload = pickle.loads(incoming.read(length))
            try:
                if name not in jobs:
                    module, _, function = name.partition(":")
                    jobs[name] = getattr(importlib.import_module(module), function)
                result: tuple[int, Any] = (_OK, jobs[name](payload))
            except AssignmentError as exc:
                result = (_REFUSED, (exc.code.value, exc.message, exc.details))
            except MemoryError:
                result = (_OUT_OF_MEMORY, None)
            except Exception:
                result = (_FAILED, traceback.format_exc())
            frame = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
            sock.sendall(_LENGTH.pack(len(frame)) + frame)
