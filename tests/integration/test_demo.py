"""`groupfit demo` end to end: embedded Redis, Apache Kafka, the API, the Spark rates job, the producer and a
3-member group with the groupfit assignor, as a newcomer runs it."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

GROUPFIT = [sys.executable, "-m", "app.cli"]


def descendants(pid: int) -> set[int]:
    """Every process started under `pid`, by parent links in /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_demo_check_passes_once_the_service_rebalanced_with_measured_rates():
    finished = subprocess.run(
        [*GROUPFIT, "demo", "--check", "240", "--rejoin-s", "10"],  # make demo-check's budget
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    assert "demo check passed" in finished.stdout
    last_view = finished.stdout.rsplit("groupfit demo —", 1)[1]
    assert "rates measured by the Spark job" in last_view
    # each member on a line of its own with its partitions and load (the scaling signal's reason may name one too)
    members = [line for line in last_view.splitlines() if line.startswith("  consumer-")]
    assert len(members) == 3, last_view


def test_a_failed_demo_check_exits_non_zero_and_leaves_nothing_running():
    """A check that cannot pass in 5 s (the job has no window yet) says so, exits 1 (not 0, as it once did) and
    stops everything it started instead of hanging."""
    demo = subprocess.Popen(
        [*GROUPFIT, "demo", "--check", "5"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 240
        while demo.poll() is None and time.monotonic() < deadline:
            started |= descendants(demo.pid)
            time.sleep(0.5)
        output = demo.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
        assert demo.returncode == 1, output[-3000:]
        assert "demo check failed" in output
        deadline = time.monotonic() + 30  # Spark's JVM exits once its driver's pipe closes
        while any(alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert started and not [pid for pid in started if alive(pid)]
    finally:
        for pid in [demo.pid, *started]:
            with contextlib.suppress(ProcessLookupError):
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
        demo.wait()


@pytest.mark.parametrize(
    "stop",
    [
        lambda demo: os.killpg(demo.pid, signal.SIGINT),  # Ctrl-C in a terminal: the whole job gets SIGINT
        lambda demo: demo.send_signal(signal.SIGTERM),  # `kill`: only the demo is told, it stops the rest
    ],
    ids=["ctrl-c", "sigterm"],
)
def test_stopping_the_demo_stops_everything_it_started(stop):
    demo = subprocess.Popen(
        [*GROUPFIT, "demo", "--rejoin-s", "10"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )  # its own process group, as a terminal's job
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in demo.stdout], daemon=True).start()
    seen, started = [], set()
    try:
        deadline = time.monotonic() + 200
        while not any(line.startswith("rebalances by the service:") for line in seen):
            assert time.monotonic() < deadline and demo.poll() is None, "".join(seen[-60:])
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=1))
            started |= descendants(demo.pid)
        started |= descendants(demo.pid)
        # the servers, the job (and its JVM), the embedded Redis and broker
        assert len(started) >= 5, started
        stop(demo)
        assert demo.wait(timeout=90) == 0
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in started if alive(pid)]
    finally:  # whatever failed, leave nothing running (the broker runs in a session of its own)
        for pid in [demo.pid, *started]:
            with contextlib.suppress(ProcessLookupError):
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
        demo.wait()
