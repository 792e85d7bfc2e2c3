"""What the benchmarks share: a live service to measure, and a process's memory."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.local.servers import free_port, wait_for_port  # noqa: E402


@contextmanager
def service_at(url: str | None, pid: int | None = None, **env: str) -> Iterator[tuple[str, int | None]]:
    """(url, pid) of the service to measure: `url` as given, or `groupfit serve` started here on a free
    loopback port (embedded Redis unless REDIS_URL is in `env`) and stopped afterwards."""
    if url is not None:
        yield url, pid
        return
    port = free_port()
    environment = {
        **os.environ,
        "GROUPFIT_PORT": str(port),
        "GROUPFIT_LOG_LEVEL": "WARNING",
        "GROUPFIT_DATA_DIR": str(ROOT / ".groupfit" / "bench"),
        **env,
    }
    service = subprocess.Popen([sys.executable, "-m", "app.cli", "serve"], env=environment, cwd=ROOT)
    try:
        wait_for_port("127.0.0.1", port, 30)
        yield f"http://127.0.0.1:{port}", service.pid
    finally:
        service.terminate()
        service.wait(timeout=15)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process and every process below it (uvicorn's workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total, pending = 0.0, [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
            for task in Path(f"/proc/{current}/task").iterdir():
                pending.extend(int(child) for child in (task / "children").read_text().split())
        except FileNotFoundError:  # ended meanwhile
            continue
    return total
