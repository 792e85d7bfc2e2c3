"""Jobs for the compute pool's tests, importable by a worker process (module-level functions, bytes → bytes)."""

from __future__ import annotations

import os
import time

from app.core.errors import AssignmentError, ErrorCode


def pid(payload: bytes) -> bytes:
    """The worker's process id, after sleeping `payload` seconds."""
    time.sleep(float(payload or b"0"))
    return str(os.getpid()).encode()


def refuse(payload: bytes) -> bytes:
    raise AssignmentError(ErrorCode.INVALID_PARAMETER, payload.decode(), {"at": "x"})


def allocate(payload: bytes) -> bytes:
    """Allocate `payload` megabytes."""
    return bytes(int(payload) << 20)[:1]
