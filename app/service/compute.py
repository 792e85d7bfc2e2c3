"""One admission path and a bounded pool of worker processes for the requests that compute or read much, so the
event loop (health checks, small assignments, Redis round trips) never waits on one.

- Admission (`admit`): a request takes a `Ticket`, one of the pool's places (`workers` running + `queue`
  waiting), before its expensive reads and its computation; beyond them it is refused at once, 503
  `compute_busy` with Retry-After, having cost nothing but the check. Fair shares: a ticket names its tenants
  (the token, the group), and no tenant holds more than `share` places at once (GROUPFIT_COMPUTE_TENANT_SHARE
  of them), so one token or group flooding the service leaves room for the others; tenants waiting for a
  worker are served in turn (round robin), not first come first served.
- A ticket carries the request's deadline: its reads, its wait for a worker and its computation all within
  it. Past it the request gets 504 `compute_timeout` and its worker is killed and replaced, so abandoned work
  stops taking a core; the same when the client goes away first. A worker's start is not counted in it.
- At most `workers` processes, started with the server or when first needed (fresh interpreters: nothing of
  the server's threads or sockets is inherited) and kept, at a lower CPU priority than the server (NICE).
- Memory: each worker measures its own address space once it has imported what it preloads (its baseline:
  about 1.2 GB, mostly reserved and untouched) and limits itself (RLIMIT_AS) to that plus `memory_mb`, so a
  computation that would need more fails alone (422 `too_many_partitions`), while a small one never does.
- A worker that dies while computing (a segfault, the kernel's OOM killer) or a panic of the compiled core
  (pyo3's PanicException is a BaseException, not an Exception) answers 422 `compute_failed`, never a 500; the
  worker is replaced.

A job is a module-level function from bytes to bytes (named by module and name, so only bytes cross the
socket): a small payload (MessagePack) and large blobs beside it (a body, stored values), which the server
writes a slice at a time without copying them into the payload, and a result the server reads a slice at a
time. An AssignmentError it raises (bad input) is raised again here, with its code; a refusal of the pool
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
from collections.abc import Awaitable, Callable, Iterator, Sequence
from types import TracebackType
from typing import Any, TypeVar

import msgspec

from app.core.errors import AssignmentError, ComputeUnavailable, ErrorCode

log = logging.getLogger("groupfit")

Job = Callable[..., bytes]
"""A job: (payload, *blobs) → bytes."""
Gone = Callable[[], Awaitable[object]]
"""Returns when the client has gone away (its computation is then stopped)."""
ReadBody = Callable[[], Awaitable[bytes]]
"""Reads the request's body (called once the request is admitted)."""
T = TypeVar("T")

_LENGTH = struct.Struct("!Q")
CHUNK = 1 << 20
"""Large payloads and results cross the worker's socket a slice of this size at a time (the event loop copies at
most this much at once, and waits for the socket in between)."""
_OK, _REFUSED, _OUT_OF_MEMORY, _FAILED, _PANICKED = range(5)
NICE = 10
"""Workers run at a lower CPU priority than the server (weight 110 against 1024), so on cores they fill the
server's event loop (health checks, small assignments) still gets one when it needs it; not the lowest, so
they are not starved by other programs on a shared machine."""
STARTUP_S = 60.0
"""How long a worker may take to start (a fresh interpreter importing the jobs' modules)."""


async def concatenated(chunks: list[bytes]) -> bytes:
    """The chunks as one bytes, joined on a thread when large: CPython's bytes.join copies without the GIL from
    1 MiB on (its items exact bytes), so a 50 MB body or answer costs the event loop no copy (on it, ~20-50 ms)."""
    if sum(map(len, chunks)) <= CHUNK:
        return b"".join(chunks)
    return await asyncio.to_thread(b"".join, chunks)


def is_panic(exc: BaseException) -> bool:
    """A BaseException that is neither an Exception nor one of Python's own control flow: a panic of compiled
    code (pyo3 raises PanicException, derived from BaseException so that `except Exception` does not swallow
    it)."""
    return not isinstance(exc, Exception | asyncio.CancelledError | KeyboardInterrupt | SystemExit | GeneratorExit)


def compute_failed(what: str) -> AssignmentError:
    return AssignmentError(
        ErrorCode.COMPUTE_FAILED,
        f"the computation of this request failed ({what}) and was stopped; the service goes on. Send a smaller "
        "request or another algorithm, and report it if it happens again (it is logged).",
        {"failure": what},
    )


S = TypeVar("S", bound=msgspec.Struct)
Path = tuple[str, ...]


def parted(job: msgspec.Struct) -> tuple[bytes, list[bytes | memoryview]]:
    """A job's Struct as the pool sends it: the payload (MessagePack of the Struct without its bytes, and where
    they were) and its bytes fields, and lists of bytes, at any depth, as blobs beside it (`joined` puts them
    back), so a large body or stored value is never copied into the payload."""
    moved: list[tuple[Path, int]] = []
    blobs: list[bytes | memoryview] = []
    lean = _strip(job, (), moved, blobs)
    return msgspec.msgpack.encode((msgspec.msgpack.encode(lean), moved)), blobs


def joined(decoder: msgspec.msgpack.Decoder[S], payload: bytes, blobs: Sequence[bytes]) -> S:
    """The job's Struct again, in the worker: `parted` reversed."""
    lean, moved = msgspec.msgpack.decode(payload, type=tuple[bytes, list[tuple[Path, int]]])
    job = decoder.decode(lean)
    at = 0
    for path, count in moved:
        value: bytes | list[bytes] = blobs[at] if count < 0 else list(blobs[at : at + count])
        at += 1 if count < 0 else count
        job = _put(job, path, value)
    return job


def _strip(value: Any, path: Path, moved: list[tuple[Path, int]], blobs: list[bytes | memoryview]) -> Any:
    if isinstance(value, msgspec.Struct):
        changes = {}
        for name in value.__struct_fields__:
            field = getattr(value, name)
            stripped = _strip(field, (*path, name), moved, blobs)
            if stripped is not field:
                changes[name] = stripped
        return msgspec.structs.replace(value, **changes) if changes else value
    if isinstance(value, bytes | memoryview) and value:  # (a view: bytes decoded where they lie)
        moved.append((path, -1))
        blobs.append(value)
        return b""
    if isinstance(value, list) and value and all(isinstance(item, bytes) for item in value):
        moved.append((path, len(value)))
        blobs.extend(value)
        return []
    return value


def _put(value: Any, path: Path, blob: bytes | list[bytes]) -> Any:
    name, *rest = path
    field = _put(getattr(value, name), tuple(rest), blob) if rest else blob
    return msgspec.structs.replace(value, **{name: field})


class Ticket:
    """One admitted request's place in the pool, from its admission to its answer: counted against the pool's
    places and its tenants' shares until it is closed, with the request's deadline. `async with` applies the
    deadline to what it wraps (504 `compute_timeout` past it) and closes the ticket at the end."""

    def __init__(self, pool: ComputePool, tenants: tuple[str, ...]) -> None:
        self.pool = pool
        self.tenants = tenants
        self.lane = tenants[0] if tenants else ""  # whose turn it is when workers are handed out
        self.deadline = asyncio.get_running_loop().time() + pool.timeout_s
        self._timeout: asyncio.Timeout | None = None
        self._open = True

    async def __aenter__(self) -> Ticket:
        self._timeout = asyncio.timeout_at(self.deadline)
        await self._timeout.__aenter__()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
        assert self._timeout is not None
        try:
            await self._timeout.__aexit__(kind, exc, tb)
        except TimeoutError:
            raise self.pool.timed_out() from None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The deadline stopped meanwhile (a worker's start is not the request's computation)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        if self._timeout is not None:
            self._timeout.reschedule(None)
        try:
            yield
        finally:
            self.deadline += loop.time() - started
            if self._timeout is not None:
                self._timeout.reschedule(self.deadline)

    def close(self) -> None:
        """Gives its place back (at once, not when the answer has been sent)."""
        if self._open:
            self._open = False
            self.pool._leave(self)


class ComputePool:
    def __init__(
        self,
        workers: int,
        queue: int,
        timeout_s: float,
        memory_mb: int,
        preload: tuple[str, ...] = (),
        tenant_share: float = 1.0,
    ) -> None:
        self.workers = workers
        self.preload = preload  # modules a worker imports before it serves (the jobs' own imports)
        self.queue = queue
        self.timeout_s = timeout_s
        self.memory_bytes = memory_mb * 1024 * 1024  # a worker's allowance above its baseline
        self.tenant_share = tenant_share
        self.baseline_bytes = 0  # a worker's address space once started, as the last one measured it
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._waiting: dict[str, collections.deque[asyncio.Future[_Worker]]] = {}  # by lane
        self._turns: collections.deque[str] = collections.deque()  # lanes with a waiting request, in turn
        self._alive = 0  # workers idle, busy or starting
        self._admitted = 0  # tickets open: requests reading, running or waiting
        self._held: collections.Counter[str] = collections.Counter()  # tickets open per tenant
        self._replacing: set[asyncio.Task[None]] = set()
        self._closed = False
        self._threads = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="compute")

    @property
    def places(self) -> int:
        return self.workers + self.queue

    @property
    def share(self) -> int:
        """The most places one tenant may hold at once."""
        return max(1, int(self.places * self.tenant_share))

    def admit(self, tenants: Sequence[str] = ()) -> Ticket:
        """A place for a request of `tenants` (e.g. its token and its group), or 503 `compute_busy` at once."""
        if self._admitted >= self.places:
            raise ComputeUnavailable(
                ErrorCode.COMPUTE_BUSY,
                f"all {self.workers} compute workers are busy and {self.queue} requests wait; retry shortly.",
                {"workers": self.workers, "queue": self.queue},
            )
        for tenant in tenants:
            if self._held[tenant] >= self.share:
                raise ComputeUnavailable(
                    ErrorCode.COMPUTE_BUSY,
                    f"{tenant} already has {self._held[tenant]} requests computing or waiting, its share of the "
                    f"service's {self.places} places; retry when one is answered.",
                    {"tenant": tenant, "share": self.share, "places": self.places},
                )
        self._admitted += 1
        self._held.update(tenants)
        return Ticket(self, tuple(tenants))

    def _leave(self, ticket: Ticket) -> None:
        self._admitted -= 1
        self._held.subtract(ticket.tenants)
        for tenant in ticket.tenants:
            if self._held[tenant] <= 0:
                del self._held[tenant]

    def timed_out(self) -> ComputeUnavailable:
        return ComputeUnavailable(
            ErrorCode.COMPUTE_TIMEOUT,
            f"the computation did not finish within {self.timeout_s:g} s and was stopped; send a smaller "
            "request, a faster algorithm or a lower time_limit_ms.",
            {"timeout_s": self.timeout_s},
        )

    async def run_in_thread(self, call: Callable[..., T], *args: Any, ticket: Ticket | None = None) -> T:
        """`call(*args)` on one of `workers` threads, admitted and refused as the workers' jobs are: for work
        that releases the GIL (the compiled core), so it needs no process of its own. A thread cannot be
        stopped: past the deadline the request gets 504 and the result is dropped when the work ends (the
        compiled algorithms' work is bounded by the request's size)."""
        if ticket is None:
            async with self.admit() as ticket:
                return await self.run_in_thread(call, *args, ticket=ticket)
        try:
            return await asyncio.get_running_loop().run_in_executor(self._threads, call, *args)
        except BaseException as exc:
            if not is_panic(exc):
                raise
            log.error("the compiled core panicked on a thread", exc_info=exc)
            raise compute_failed(f"a panic of the compiled core: {exc}") from None

    async def run(
        self, job: Job, payload: bytes | msgspec.Struct, gone: Gone | None = None, ticket: Ticket | None = None
    ) -> bytes:
        """`job(payload)` in a worker, within the ticket's deadline (a ticket of its own when none is given);
        `gone()` returns when the client has gone away. A Struct payload is sent `parted` (its bytes beside it,
        a slice at a time, never copied into the payload; the job reads it with `joined`)."""
        return await concatenated(await self.run_chunked(job, payload, gone, ticket))

    async def run_chunked(
        self, job: Job, payload: bytes | msgspec.Struct, gone: Gone | None = None, ticket: Ticket | None = None
    ) -> list[bytes]:
        """`run`, the result in the slices it was read in (an answer passed on as it is, not joined)."""
        if ticket is None:
            async with self.admit() as ticket:
                return await self.run_chunked(job, payload, gone, ticket)
        head, blobs = (payload, []) if isinstance(payload, bytes) else parted(payload)
        worker = await self._worker_for(ticket)
        status, value = await self._call(worker, f"{job.__module__}:{job.__name__}", head, blobs, gone)
        if status == _OK:
            return value
        if status == _REFUSED:
            code, message, details = value
            raise AssignmentError(ErrorCode(code), message, details)
        if status == _OUT_OF_MEMORY:
            raise AssignmentError(
                ErrorCode.TOO_MANY_PARTITIONS,
                f"the computation needed more than the {self.memory_bytes >> 20} MB a worker may use (above the "
                f"{self.baseline_bytes >> 20} MB it has once started); send fewer partitions or members.",
                {"memory_mb": self.memory_bytes >> 20},
            )
        if status == _PANICKED:
            log.error("a compute job panicked", extra={"fields": {"job": job.__name__, "panic": value}})
            raise compute_failed(f"a panic of the compiled core: {value}")
        raise RuntimeError(f"compute job {job.__name__} failed in its worker:\n{value}")

    async def _worker_for(self, ticket: Ticket) -> _Worker:
        """An idle worker; a new one when none is idle and the pool is not full yet (the first requests after
        startup: its start is not counted in the deadline); else the ticket waits for its lane's turn."""
        if self._idle or self._alive >= self.workers:
            return await self._checkout(ticket.lane)
        self._alive += 1
        with ticket.paused():
            try:
                return await self._start()
            except BaseException:
                self._alive -= 1
                raise

    async def _call(
        self, worker: _Worker, name: str, payload: bytes, blobs: Sequence[bytes | memoryview], gone: Gone | None
    ) -> tuple[int, Any]:
        call = asyncio.ensure_future(worker.call(name, payload, blobs))
        watch = asyncio.ensure_future(gone()) if gone is not None else None
        try:
            await asyncio.wait([call] if watch is None else [call, watch], return_when=asyncio.FIRST_COMPLETED)
            if not call.done():
                raise ComputeUnavailable(
                    ErrorCode.COMPUTE_TIMEOUT, "the client went away; the computation was stopped."
                )
            status, value = call.result()
        except (asyncio.IncompleteReadError, ConnectionError):  # the worker died while computing
            self._discard(worker)
            ended = await worker.ended()
            log.error("a compute worker died", extra={"fields": {"job": name, "ended": ended}})
            raise compute_failed(f"its worker stopped: {ended}") from None
        except BaseException:
            call.cancel()
            self._discard(worker)
            raise
        finally:
            if watch is not None:
                watch.cancel()
        if status in (_OK, _REFUSED):
            self._release(worker)
        else:  # after a MemoryError, a panic or a bug the worker's state is not trusted
            self._discard(worker)
        return status, value

    async def _checkout(self, lane: str = "") -> _Worker:
        if self._idle:
            return self._idle.pop()
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(lane, collections.deque()).append(waiter)
        if lane not in self._turns:
            self._turns.append(lane)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release(waiter.result())  # handed a worker just as the deadline passed
            else:
                self._forget_waiter(lane, waiter)
            raise

    def _forget_waiter(self, lane: str, waiter: asyncio.Future[_Worker]) -> None:
        queue = self._waiting.get(lane)
        if queue is not None and waiter in queue:  # (a release may have dropped it already)
            queue.remove(waiter)
            if not queue:
                del self._waiting[lane]
                self._turns.remove(lane)

    def _release(self, worker: _Worker) -> None:
        """The worker to the first waiter of the next lane in turn (round robin over tenants), else idle."""
        while self._turns:
            lane = self._turns.popleft()
            queue = self._waiting[lane]
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    if queue:
                        self._turns.append(lane)  # its next request waits for its next turn
                    else:
                        del self._waiting[lane]
                    waiter.set_result(worker)
                    return
            del self._waiting[lane]
        self._idle.append(worker)

    def _discard(self, worker: _Worker) -> None:
        if worker not in self._all:
            return  # discarded already
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
                # ready once it has imported what it preloads, with its baseline address space
                (self.baseline_bytes,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
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

    async def call(self, name: str, payload: bytes, blobs: Sequence[bytes | memoryview]) -> tuple[int, Any]:
        """(status, value): for _OK, the result as the slices it was read in."""
        head = pickle.dumps((name, payload, [len(blob) for blob in blobs]), protocol=pickle.HIGHEST_PROTOCOL)
        self.writer.writelines((_LENGTH.pack(len(head)), head))
        for blob in blobs:
            view = memoryview(blob)
            for start in range(0, len(view), CHUNK):
                self.writer.write(view[start : start + CHUNK])
                await self.writer.drain()
        await self.writer.drain()
        (length,) = _LENGTH.unpack(await self.reader.readexactly(_LENGTH.size))
        status, value, size = pickle.loads(await self.reader.readexactly(length))
        if status != _OK:
            return status, value
        chunks = []
        while size > 0:
            chunks.append(await self.reader.readexactly(min(CHUNK, size)))
            size -= len(chunks[-1])
        return status, chunks

    async def ended(self) -> str:
        """How a worker that closed its socket ended: by a signal, or its exit status."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(self.process.wait, 5)
        code = self.process.returncode
        if code is None:
            return "it closed its connection"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
            return f"killed by signal {-code}"
        return f"exit status {code}"

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


def address_space() -> int:
    """This process's virtual memory size in bytes (what RLIMIT_AS bounds)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _serve(sock: socket.socket, memory_bytes: int) -> None:
    baseline = address_space()
    if memory_bytes:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)  # (a limit the server runs under stays one)
        limit = baseline + memory_bytes if hard == resource.RLIM_INFINITY else min(baseline + memory_bytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sock.sendall(_LENGTH.pack(baseline))
    jobs: dict[str, Job] = {}
    with sock, sock.makefile("rb") as incoming:
        while header := incoming.read(_LENGTH.size):
            (length,) = _LENGTH.unpack(header)
            name, payload, sizes = pickle.loads(incoming.read(length))
            blobs = [incoming.read(size) for size in sizes]
            output = b""
            try:
                if name not in jobs:
                    module, _, function = name.partition(":")
                    jobs[name] = getattr(importlib.import_module(module), function)
                output = jobs[name](payload, *blobs)
                result: tuple[int, Any] = (_OK, None)
            except AssignmentError as exc:
                result = (_REFUSED, (exc.code.value, exc.message, exc.details))
            except MemoryError:
                result = (_OUT_OF_MEMORY, None)
            except Exception:
                result = (_FAILED, traceback.format_exc())
            except BaseException as exc:
                if not is_panic(exc):
                    raise
                result = (_PANICKED, f"{type(exc).__name__}: {exc}")
            del blobs
            frame = pickle.dumps((*result, len(output)), protocol=pickle.HIGHEST_PROTOCOL)
            sock.sendall(_LENGTH.pack(len(frame)) + frame)
            sock.sendall(output)
