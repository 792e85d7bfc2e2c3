"""Jobs for the compute pool's tests, importable by a worker process (module-level functions, bytes → bytes)."""

from __future__ import annotations

import os
import resource
import signal
import time

import msgspec

from app.core.errors import AssignmentError, ErrorCode
from app.service.compute import joined


def pid(payload: bytes) -> bytes:
    """The worker's process id, after sleeping `payload` seconds."""
    time.sleep(float(payload or b"0"))
    return str(os.getpid()).encode()


def refuse(payload: bytes) -> bytes:
    raise AssignmentError(ErrorCode.INVALID_PARAMETER, payload.decode(), {"at": "x"})


def allocate(payload: bytes) -> bytes:
    """Allocate `payload` megabytes."""
    return bytes(int(payload) << 20)[:1]


def crash(payload: bytes) -> bytes:
    """The worker killed by a signal while computing (as a segfault of compiled code would)."""
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(10)
    return b""


class PanicException(BaseException):
    """What pyo3 raises for a panic of the compiled core: a BaseException, not an Exception."""


def panic(payload: bytes) -> bytes:
    raise PanicException(payload.decode())


def address_space(payload: bytes) -> bytes:
    """The worker's address-space limit and its address space now, in bytes."""
    from app.service.compute import address_space as current

    return f"{resource.getrlimit(resource.RLIMIT_AS)[0]} {current()}".encode()


class Blobs(msgspec.Struct):
    parts: list[bytes]


def echo(payload: bytes, *blobs: bytes) -> bytes:
    """Its parts, joined."""
    return b"".join(joined(msgspec.msgpack.Decoder(Blobs), payload, blobs).parts)
