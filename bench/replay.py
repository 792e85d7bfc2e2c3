"""Replays of a rate stream, measured in one run: groupfit's compiled replay (the whole stream in one call to
the compiled core), groupfit's reference replay (each measurement's Problem built and solved in Python), and
the published code of Landau et al. (its own replay harness: the controller's `test-algorithms` state machine).

Streams: the published one (data/reference/paper_stream_delta5.json, 32 partitions, 100 measurements) and a
generated one (--partitions over the published code's two topics, δ = 5, C = 100). Per stream and algorithm:
milliseconds per assignment (one measurement solved from the one before), CPU time; the compiled replay as the
best of --repeat, with and without the owners and latency percentiles; the ratios of the same run.

The published code is not part of groupfit: it is cloned at bench time into a temporary directory (pinned
commit PUBLISHED_COMMIT) from --published (its GitHub address by default, or a local clone) and run in a
subprocess, driven through its own state machine with a stand-in for its Kafka-facing controller; each of its
steps applies a measurement (`StateSentinelAlgorithms`), runs the algorithm (`StateReassignAlgorithmTest`) and
scores it with its per-byte latency lists (`StateGroupManagementTest`). Where it cannot be fetched, the issue's
figure for it (100 ms per replay step) stands in, and the table says so.

    .venv/bin/python bench/replay.py [--partitions 1000] [--measurements 20] [--algorithms mwf,bfd]
                                     [--published URL|PATH] [--published-steps 5] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PUBLISHED_URL = "https://github.com/landaudiogo/kafka-consumer-group-autoscaler"
PUBLISHED_COMMIT = "c58cb5c47404bd5bdb8545db65cd4a3251e47915"  # "Commit procedure to test algorithms", 2025-01-23
PUBLISHED_TOPICS = ("delivery_events_v6_topic", "delivery_events_v7_topic")  # the topics its metadata knows
PUBLISHED_STEP_MS = 100.0  # issue #28's figure for the published code's replay step, where it cannot run here
CAPACITY = 100.0  # the published code's ALGO_CAPACITY
PAPER = ["nf", "ff", "bf", "wf", "nfd", "ffd", "bfd", "wfd", "mwf", "mbf", "mwfp", "mbfp"]


def generated(partitions: int, measurements: int, seed: int = 1) -> list[dict[str, dict[str, float]]]:
    """Eq. 15's stream (δ = 5) over the published code's two topics."""
    from app.sim.stream import generate_stream

    stream = generate_stream(partitions, measurements, 5, seed, CAPACITY, topics=2)
    names = {f"topic-{i}": name for i, name in enumerate(PUBLISHED_TOPICS)}
    return [{names[topic]: partitions for topic, partitions in m.items()} for m in stream]


def timed(work: Any) -> tuple[Any, float, float]:
    """(result, wall s, CPU s) of work()."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def groupfit(stream: list, name: str, repeat: int, reference_steps: int) -> dict[str, Any]:
    """ms per assignment of the compiled replay (best of `repeat`; read once, then replayed), with owners and the
    latency percentiles too, and of the reference replay on the first `reference_steps` measurements."""
    from app.core import native
    from app.sim.latency import LatencyModel
    from app.sim.replay import Prepared, replay

    m = len(stream)
    figures: dict[str, Any] = {}
    prepared = Prepared(stream)
    _, wall, cpu = timed(prepared.compiled)
    figures["read"] = (wall * 1e3 / m, cpu * 1e3 / m)
    assert prepared.compiled() is not None and name in native.ALGORITHMS
    best = best_latency = (float("inf"), float("inf"))
    for _ in range(repeat):
        run, wall, cpu = timed(lambda: replay(prepared, CAPACITY, name, compiled=True))
        best = min(best, (wall, cpu))
        _, wall, cpu = timed(
            lambda: replay(prepared, CAPACITY, name, keep=True, compiled=True).latency(LatencyModel()).summary()
        )
        best_latency = min(best_latency, (wall, cpu))
    figures["compiled"] = (best[0] * 1e3 / m, best[1] * 1e3 / m)
    figures["compiled+latency"] = (best_latency[0] * 1e3 / m, best_latency[1] * 1e3 / m)
    figures["consumers"] = run.avg_consumers
    part = stream[:reference_steps]
    reference, wall, cpu = timed(lambda: replay(part, CAPACITY, name, compiled=False))
    assert reference.consumers == run.consumers[: len(part)], "the two replays differ"
    figures["reference"] = (wall * 1e3 / len(part), cpu * 1e3 / len(part))
    return figures


def fetch_published(source: str) -> tuple[Path | None, str]:
    """A temporary checkout of the published code at PUBLISHED_COMMIT, or None and why not."""
    where = Path(tempfile.mkdtemp(prefix="published-"))
    try:
        subprocess.run(["git", "clone", "--quiet", source, str(where)], check=True, capture_output=True, timeout=300)
        subprocess.run(
            ["git", "-C", str(where), "checkout", "--quiet", PUBLISHED_COMMIT], check=True, capture_output=True
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as error:
        detail = getattr(error, "stderr", b"") or b""
        return None, f"{error} {detail.decode(errors='replace').strip()}"
    return where / "src" / "controller", ""


def published(controller: Path, stream: list, name: str, steps: int) -> dict[str, Any]:
    """The published code's replay of the first `steps` measurements, in a subprocess (its modules set up
    logging and read files relative to their directory)."""
    with tempfile.TemporaryDirectory() as scratch:
        stream_file, out_file = Path(scratch) / "stream.json", Path(scratch) / "out.json"
        stream_file.write_text(json.dumps(stream[:steps]))
        subprocess.run(
            [sys.executable, __file__, "--published-worker", str(controller), str(stream_file), name, str(out_file)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        result = json.loads(out_file.read_text())
    n = len(result["step"])
    return {
        "step": (sum(result["step"]) * 1e3 / n, sum(result["step_cpu"]) * 1e3 / n),
        "algorithm": (sum(result["algorithm"]) * 1e3 / n, sum(result["algorithm_cpu"]) * 1e3 / n),
        "consumers": sum(result["consumers"]) / n,
    }


def published_worker(controller: str, stream_file: str, name: str, out_file: str) -> None:
    """Runs in its own process: the published code's `test-algorithms` state machine over the stream, with a
    stand-in for its controller (no Kafka, no files): each measurement is one sentinel → reassign → manage
    cycle of its own states."""
    os.chdir(controller)  # its config reads detopic_metadata.json from here
    sys.path.insert(0, controller)
    # its state machine imports test.monitor_sequence.make_sequence from this directory, not the stdlib's test
    package = types.ModuleType("test")
    package.__path__ = [str(Path(controller) / "test")]
    sys.modules["test"] = package
    random.seed(1)  # its nf/ff/bf/wf shuffle the partitions
    from approximation_algorithms import AlgorithmFactory  # type: ignore[import-not-found]
    from dstructures import ConsumerList  # type: ignore[import-not-found]
    from exc import StopMeasurementIteration  # type: ignore[import-not-found]
    from state_machine import StateMachine  # type: ignore[import-not-found]

    stream = json.loads(Path(stream_file).read_text())

    class Controller:
        """What its states read and write of the controller (controller.py's test mode without Kafka)."""

        def __init__(self) -> None:
            self.consumer_list = ConsumerList()
            self.unassigned_partitions: list = []
            self.next_assignment = None
            self.state_machine = StateMachine.factory_method(self, "test-algorithms")

        def get_file_measurement(self, _file: str) -> dict:
            if len(stream) <= self.state_machine.CYCLE:
                raise StopMeasurementIteration()
            return stream[self.state_machine.CYCLE]

    controller_ = Controller()
    machine = controller_.state_machine
    reassign = machine.states["reassign"]
    reassign.algorithm_name, reassign.algorithm = name, AlgorithmFactory.get_algorithm(name)
    result: dict[str, list[float]] = {k: [] for k in ("step", "step_cpu", "algorithm", "algorithm_cpu", "consumers")}
    for _ in stream:
        step = (time.perf_counter(), time.process_time())
        for state in ("sentinel", "reassign", "manage"):
            assert machine.current_state is None or machine.current_state is machine.states[state]
            started = (time.perf_counter(), time.process_time())
            machine.execute()  # the state's execute, then its transition to the next
            if state == "reassign":
                result["algorithm"].append(time.perf_counter() - started[0])
                result["algorithm_cpu"].append(time.process_time() - started[1])
        result["step"].append(time.perf_counter() - step[0])
        result["step_cpu"].append(time.process_time() - step[1])
        result["consumers"].append(len(controller_.consumer_list.active_consumers) - 1)
    Path(out_file).write_text(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000, help="of the generated stream")
    parser.add_argument("--measurements", type=int, default=20, help="of the generated stream")
    parser.add_argument("--algorithms", default="mwf,bfd")
    parser.add_argument("--published", default=PUBLISHED_URL, help="where to clone the published code from")
    parser.add_argument("--published-steps", type=int, default=5, help="measurements the published code replays")
    parser.add_argument("--reference-steps", type=int, default=10, help="measurements the reference replays")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--published-worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.published_worker:
        published_worker(*args.published_worker)
        return

    from app.sim.stream import load_stream

    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())} on {os.cpu_count()} cores")
    controller, why = fetch_published(args.published)
    if controller is None:
        print(
            f"the published code was not fetched ({why}); its column is issue #28's {PUBLISHED_STEP_MS:g} ms per step"
        )
    streams = {
        "published (32 partitions)": [dict(m) for m in load_stream(ROOT / "data/reference/paper_stream_delta5.json")],
        f"generated ({args.partitions} partitions)": generated(args.partitions, args.measurements),
    }
    header = (
        f"{'stream':<27}{'algo':<6}{'consumers':>10}{'read':>8}{'compiled':>10}{'+latency':>10}"
        f"{'reference':>11}{'published':>11}{'its algo':>10}{'ref ×':>8}{'pub ×':>9}"
    )
    print("ms per assignment (CPU ms; wall in brackets where the load inflates it); × = same-run ratio to compiled")
    print(header)
    for label, stream in streams.items():
        for name in args.algorithms.split(","):
            ours = groupfit(stream, name, args.repeat, args.reference_steps)
            theirs = (
                published(controller, stream, name, args.published_steps)
                if controller is not None
                else {"step": (PUBLISHED_STEP_MS, PUBLISHED_STEP_MS), "algorithm": (float("nan"),) * 2}
            )
            compiled = ours["compiled"][1]
            print(
                f"{label:<27}{name:<6}{ours['consumers']:>10.2f}{ours['read'][1]:>8.3f}{compiled:>10.3f}"
                f"{ours['compiled+latency'][1]:>10.3f}{ours['reference'][1]:>11.2f}{theirs['step'][1]:>11.1f}"
                f"{theirs['algorithm'][1]:>10.1f}{ours['reference'][1] / compiled:>8.0f}"
                f"{theirs['step'][1] / compiled:>9.0f}",
                flush=True,
            )
            print(
                f"{'':<27}{'wall':<6}{'':>10}{ours['read'][0]:>8.3f}{ours['compiled'][0]:>10.3f}"
                f"{ours['compiled+latency'][0]:>10.3f}{ours['reference'][0]:>11.2f}{theirs['step'][0]:>11.1f}"
                f"{theirs['algorithm'][0]:>10.1f}",
                flush=True,
            )
    print(
        "read: the stream into the compiled core's arrays, once for every algorithm; compiled: its replay; "
        "+latency: with the owners and the latency percentiles (§VI-C); reference: groupfit's Python replay "
        f"(first {args.reference_steps} measurements); published: a step of the published code (first "
        f"{args.published_steps} measurements; its algorithm alone in 'its algo', the rest its per-byte latency lists)"
    )
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
