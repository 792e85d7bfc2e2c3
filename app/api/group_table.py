"""The per-group Prometheus gauges of every worker process, in one table of at most `cap` groups: a group's
values go in its row, the least recently updated group's row is taken for a new group once the table is full,
and /metrics, in whichever process answers it, reads the whole table. prometheus_client's multiprocess mode
keeps a file per process and cannot drop a series from another process's file, so with several workers it could
not keep the cap; this table can, and with one process it is the same table in memory.

The table is a NumPy record array over a memory map: a file in the workers' metrics directory (every worker
maps the same file, and an exclusive `flock` on it orders their updates), or anonymous memory for one process.
A row: the group's name (ASCII, at most 255 bytes, as GROUP_PATTERN allows), when it was last updated (a
counter shared through the table's first row), which gauges it has, and their values.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

NAME_BYTES = 255


class GroupTable:
    """Values of `gauges` (names) per group, for at most `cap` groups; `path`: the file the processes share
    (None: this process alone)."""

    def __init__(self, gauges: Sequence[str], cap: int, path: Path | None = None) -> None:
        self.gauges = list(gauges)
        self.cap = cap
        if len(self.gauges) > 16:
            raise ValueError("a row holds at most 16 gauges")
        self.row = np.dtype(
            [("name", f"S{NAME_BYTES}"), ("touched", "<u8"), ("present", "<u2"), ("values", "<f8", len(self.gauges))],
            align=True,
        )
        size = self.row.itemsize * (cap + 1)  # row 0: the clock
        self.fd: int | None = None
        if path is None:
            self.map = mmap.mmap(-1, max(size, 1))
        else:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            if os.fstat(self.fd).st_size != size:  # a new table (the first worker); the others find it sized
                with self._locked():
                    if os.fstat(self.fd).st_size != size:
                        os.ftruncate(self.fd, size)
            self.map = mmap.mmap(self.fd, max(size, 1))
        self.table = np.ndarray(cap + 1, dtype=self.row, buffer=self.map)
        self.rows: dict[str, int] = {}  # this process's guess of a group's row: checked against its name

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self.fd is None:
            yield
            return
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def set(self, group: str, values: Mapping[str, float | None]) -> None:
        """The group's gauges `values` (gauge name → value; None: the series goes, its value no longer holds);
        the group becomes the most recently updated."""
        if self.cap == 0:
            return
        name = group.encode("ascii")
        with self._locked():
            row = self._row(name)
            clock = int(self.table[0]["touched"]) + 1
            self.table[0]["touched"] = clock
            entry = self.table[row]
            entry["touched"] = clock
            present = int(entry["present"])
            for gauge, value in values.items():
                i = self.gauges.index(gauge)
                if value is None:
                    present &= ~(1 << i)
                else:
                    entry["values"][i] = value
                    present |= 1 << i
            entry["present"] = present
        self.rows[group] = row

    def _row(self, name: bytes) -> int:
        """The group's row, or a row made its own: a free one, else the least recently updated group's."""
        rows = self.table[1:]
        guess = self.rows.get(name.decode("ascii"))
        if guess is not None and rows[guess - 1]["name"] == name:
            return guess
        found = np.flatnonzero(rows["name"] == name)
        if len(found):
            return int(found[0]) + 1
        free = np.flatnonzero(rows["name"] == b"")
        row = int(free[0]) if len(free) else int(np.argmin(rows["touched"]))
        rows[row] = (name, 0, 0, np.zeros(len(self.gauges)))
        return row + 1

    def forget(self, group: str) -> None:
        """The group's gauges go."""
        name = group.encode("ascii")
        with self._locked():
            rows = self.table[1:]
            for row in np.flatnonzero(rows["name"] == name):
                rows[row] = (b"", 0, 0, np.zeros(len(self.gauges)))
        self.rows.pop(group, None)

    def series(self) -> dict[str, list[tuple[str, float]]]:
        """gauge → its (group, value) series, groups in the order they were last updated."""
        with self._locked():
            rows = self.table[1:][self.table[1:]["name"] != b""].copy()
        rows.sort(order="touched")
        result: dict[str, list[tuple[str, float]]] = {gauge: [] for gauge in self.gauges}
        for name, _, present, values in rows.tolist():
            group = name.decode("ascii")
            for i, gauge in enumerate(self.gauges):
                if present >> i & 1:
                    result[gauge].append((group, values[i]))
        return result
