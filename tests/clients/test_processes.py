"""Consumers as local processes (CommandProcesses): `{id}` in the command, SIGTERM to leave, SIGKILL for one that
does not, and a stop that does not wait when asked not to."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from groupfit_client.controller.processes import CommandProcesses

# A stand-in consumer: writes "up" to its file, then "term" on SIGTERM and exits, or ignores SIGTERM when told.
PROGRAM = """
import signal, sys, time
path, stubborn = sys.argv[1], sys.argv[2] == "stubborn"
def leave(*_):
    open(path, "a").write("term\\n")
    if not stubborn:
        sys.exit(0)
signal.signal(signal.SIGTERM, leave)
open(path, "a").write("up\\n")
while True:
    time.sleep(0.01)
"""


def command(tmp_path: Path, mode: str = "polite") -> list[str]:
    return [sys.executable, "-c", PROGRAM, str(tmp_path / "{id}.log"), mode]


def wait_for(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.02)


def test_a_consumer_runs_with_its_id_and_leaves_on_sigterm(tmp_path: Path):
    processes = CommandProcesses(command(tmp_path), stop_timeout_s=30)
    processes.create("c0")
    processes.create("c1")
    wait_for(lambda: (tmp_path / "c0.log").exists() and (tmp_path / "c1.log").exists())
    assert processes.running() == ["c0", "c1"]
    processes.delete("c0")  # waits: SIGTERM, and the process exits on it
    assert (tmp_path / "c0.log").read_text() == "up\nterm\n" and processes.running() == ["c1"]
    processes.close()
    assert (tmp_path / "c1.log").read_text() == "up\nterm\n" and processes.running() == []


def test_one_that_ignores_sigterm_is_killed_after_the_timeout_and_a_stop_need_not_wait(tmp_path: Path):
    processes = CommandProcesses(command(tmp_path, "stubborn"), stop_timeout_s=3, wait=False)
    processes.create("c0")
    wait_for(lambda: (tmp_path / "c0.log").exists())
    process = processes.processes["c0"]
    processes.delete("c0")  # returns at once
    assert processes.running() == [] and processes.reap() == ["c0"]
    wait_for(lambda: processes.reap() == [])  # past its deadline: killed
    assert process.returncode is not None and process.returncode < 0
    wait_for(lambda: "term" in (tmp_path / "c0.log").read_text())
