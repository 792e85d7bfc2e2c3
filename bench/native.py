"""The compiled core against the pure-Python reference, measured in the same run (issue #15's targets).

1. In-process solve (MWF, BFD, least-loaded) at 1k, 10k, 100k, 1M partitions with ~P/10 consumers and
   the previous assignment from a prior run (BFD on the measurement before, rates moved by up to ±5 % of C):
   each core on its own problem form — the compiled one on arrays (`Bulk.solve`: order, placement, fold,
   owners, moves, Rscore, sparse delta), the reference on its Problem — median ms, µs per partition, and the
   ratio; beside them the compiled core called with the reference's Python objects (converting them in and
   the outcome out), and the compiled codec's own costs: reading the request's JSON into arrays, writing
   the answer's JSON.
2. `groupfit assign --input` on a 1 000 000-partition request (MWF, previous given), whole process: wall
   time and peak RSS, next to msgspec's decode of the same file into the request type (a fresh process too).
3. The compiled reader on a request whose `params` object has 10 000 and 100 000 distinct keys (issue #27: its
   duplicate-key check was quadratic, 13 s at 85 000 keys): it must read the larger in well under a second
   (asserted).

    .venv/bin/python bench/native.py [--sizes 1000,10000,100000,1000000] [--python-limit 1000000] [--cli 1000000]
                                     [--keys 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from app.cli import tune_gc  # noqa: E402
from app.codec.assign import AssignRequest, previous_of, problem_of  # noqa: E402
from app.core import native  # noqa: E402
from app.core.algorithm import get_algorithm  # noqa: E402
from app.core.assign import solve  # noqa: E402
from app.core.model import Problem, build_problem  # noqa: E402

CAPACITY = 100.0
MAX_CONSUMERS = 10_000_000  # ~P/10 consumers at 1M partitions is above the service's default limit (100 000)
ALGORITHMS = ("mwf", "bfd", "least-loaded")


def measurements(partitions: int, seed: int = 11) -> tuple[list, list[float], list[float]]:
    """Two consecutive measurements: rates U[0, C/5] (about P/10 consumers), then each moved by ±5 % of C."""
    rng = random.Random(seed)
    keys = [(f"topic-{j % 16}", j // 16) for j in range(partitions)]
    before = [rng.uniform(0, CAPACITY / 5) for _ in keys]
    now = [min(CAPACITY, max(0.0, r + rng.uniform(-5, 5))) for r in before]
    return keys, before, now


def request(partitions: int, algorithm: str = "mwf") -> bytes:
    """The JSON request: the measurement after, with the previous assignment BFD gave the one before."""
    keys, before, now = measurements(partitions)
    first = solve(build_problem(keys, before, None, CAPACITY), get_algorithm("bfd"), None, native=native.AVAILABLE)
    previous = {
        c: [{"topic": keys[j][0], "partition": keys[j][1]} for j in held] for c, held in first.assignment.items()
    }
    partitions_doc = [{"topic": t, "partition": p, "rate": r} for (t, p), r in zip(keys, now)]
    body = {"algorithm": algorithm, "capacity": CAPACITY, "partitions": partitions_doc, "previous": previous}
    return msgspec.json.encode(body)


def instance(partitions: int) -> Problem:
    """The problem as the service builds it from the decoded request (so its objects lie in memory as they would)."""
    decoded = msgspec.json.Decoder(AssignRequest).decode(request(partitions))
    assert decoded.partitions is not None
    return problem_of(decoded, decoded.partitions, previous_of(decoded) or {}, CAPACITY, MAX_CONSUMERS)


def fresh(problem: Problem) -> Problem:
    """The same problem without cached derived fields, so each run pays for them."""
    return Problem(
        problem.keys,
        problem.rates,
        problem.lags,
        problem.capacity,
        problem.previous,
        problem.members,
        problem.member_capacities,
        problem.max_consumers,
    )


def median_ms(run, repeat: int, setup: bool = False) -> tuple[float, float]:
    """Median wall and CPU milliseconds (the CPU time is what the work costs when other jobs share the cores).
    `setup`: `run()` prepares and returns the call to time."""
    wall, cpu = [], []
    for _ in range(repeat):
        call = run() if setup else run
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3


def in_process(sizes: list[int], python_limit: int, repeat: int) -> None:
    print("in-process solve, median wall ms / CPU ms (CPU µs per partition); previous consumers = a prior BFD run")
    print(
        f"{'partitions':>10}{'consumers':>10}{'algorithm':>14}{'compiled, arrays':>30}"
        f"{'compiled, objects':>19}{'pure Python':>30}{'ratio':>8}"
    )
    for n in sizes:
        body = request(n)
        problem = instance(n)
        for name in ALGORITHMS:
            spec = get_algorithm(name)
            params = spec.parse_params(None)
            runs = repeat if n <= 100_000 else max(1, repeat // 2)
            compiled, compiled_cpu = median_ms(lambda: solve_arrays(body, name, params), runs, setup=True)  # noqa: B023
            objects, _ = median_ms(lambda: solve(fresh(problem), spec, params, native=True), runs)  # noqa: B023
            cells = f"{compiled:>10.1f} /{compiled_cpu:>8.1f} ({compiled_cpu * 1e3 / n:>5.3f}){objects:>19.1f}"
            if n <= python_limit:
                python, python_cpu = median_ms(lambda: solve(fresh(problem), spec, params), 1 if n >= 100_000 else runs)  # noqa: B023
                cells += f"{python:>12.1f} /{python_cpu:>8.1f} ({python_cpu * 1e3 / n:>5.2f}){python_cpu / compiled_cpu:>7.0f}×"
            print(f"{n:>10}{len(problem.previous):>10}{name:>14}{cells}", flush=True)
        parse, _ = median_ms(lambda: native.parse_assign(body), repeat)  # noqa: B023
        write, _ = median_ms(lambda: answer_call(body), repeat, setup=True)  # noqa: B023
        print(
            f"{'':>34}compiled codec: request JSON → arrays {parse:.1f} ms, answer → JSON {write:.1f} ms "
            f"({len(body) / 1e6:.1f} MB request)"
        )


def answer_call(body: bytes):
    """A call that writes the answer's JSON of the request's MWF solution (solved here, before the call)."""
    solution = solve_arrays(body, "mwf", get_algorithm("mwf").parse_params(None))()
    return lambda: solution.answer("mwf", 0, b"{}", b"null")


def solve_arrays(body: bytes, name: str, params: BaseModel):
    """A call that solves the request's arrays (read here, before the call: only the solve is timed)."""
    split = native.parse_assign(body)
    assert split is not None, "the compiled core declined the request"
    bulk = split[1]
    options = params.model_dump()  # every parameter: the compiled core holds no defaults
    return lambda: bulk.solve(name, CAPACITY, options)


def many_keys(count: int, repeat: int) -> None:
    """The compiled reader on `params` objects of count / 10 and `count` distinct keys."""
    print(
        f"\ncompiled reader, a request whose params object has many distinct keys: median wall ms / CPU ms of {repeat}"
    )
    wall = 0.0
    for n in (count // 10, count):
        body = msgspec.json.encode(
            {"algorithm": "mwf", "capacity": CAPACITY, "partitions": [], "params": {f"key-{i}": i for i in range(n)}}
        )
        assert native.parse_assign(body) is not None, "the compiled core declined the request"
        wall, cpu = median_ms(lambda: native.parse_assign(body), repeat)  # noqa: B023
        print(f"  {n:>7} keys ({len(body) / 1e6:.2f} MB): {wall:.1f} / {cpu:.1f}")
    assert wall < 1000, f"{count} keys took {wall:.0f} ms: the duplicate-key check is not linear"


PEAK = (
    "import atexit, sys; atexit.register(lambda: print('peak', "
    "open('/proc/self/status').read().split('VmHWM:')[1].split()[0], file=sys.stderr))"
)


def child(code: str, env: dict[str, str] | None = None) -> tuple[float, float, bytes]:
    """Wall seconds, peak RSS (MB) and standard output of a fresh `python -c code`. The peak is the process's
    own VmHWM as it exits (wait4's ru_maxrss would count this benchmark's memory, inherited at the fork)."""
    with tempfile.TemporaryFile() as out:  # a file, as `groupfit assign … > answer.json` writes it
        start = time.perf_counter()
        process = subprocess.run(
            [sys.executable, "-c", f"{PEAK}; {code}"],
            stdout=out,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            check=True,
        )
        elapsed = time.perf_counter() - start
        out.seek(0)
        return elapsed, int(process.stderr.split(b"peak")[-1]) / 1024, out.read()


def cli(partitions: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "request.json"
        path.write_bytes(request(partitions))
        decode = (
            "import time, msgspec; from app.codec.assign import AssignRequest; from app.cli import tune_gc; "
            f"tune_gc(); body = open({str(path)!r}, 'rb').read(); t = time.perf_counter(); "
            "msgspec.json.Decoder(AssignRequest).decode(body); print(time.perf_counter() - t)"
        )
        assign = (
            f"import runpy; sys.argv = ['groupfit', 'assign', '--input', {str(path)!r}]; "
            "runpy.run_module('app.cli', run_name='__main__')"
        )
        size = path.stat().st_size / 1e6
        print(f"\ngroupfit assign --input: {partitions} partitions, MWF, previous given, {size:.0f} MB")
        decodes = [float(child(decode)[2]) for _ in range(repeat)]
        print(f"  msgspec decode of the file into AssignRequest: median {statistics.median(decodes):.2f} s")
        for core in ("native", "python"):
            runs = [
                child(assign, {"GROUPFIT_CORE": core, "GROUPFIT_MAX_CONSUMERS": str(MAX_CONSUMERS)})
                for _ in range(repeat if core == "native" else 1)
            ]
            wall = statistics.median(r[0] for r in runs)
            rss = max(r[1] for r in runs)
            answer = json.loads(runs[0][2])
            print(
                f"  whole process, GROUPFIT_CORE={core}: median {wall:.2f} s = {wall / statistics.median(decodes):.2f}× "
                f"the decode, peak RSS {rss:.0f} MB ({answer['consumer_count']} consumers, rscore {answer['rscore']:.2f})",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--python-limit", type=int, default=1_000_000, help="largest size the reference runs at")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cli", type=int, default=1_000_000, help="partitions of the CLI request (0: skip)")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct keys of the reader's test (0: skip)")
    args = parser.parse_args()
    if not native.AVAILABLE:
        sys.exit("the compiled core is not installed: make .venv/.native")
    tune_gc()  # as `groupfit serve` and the CLI run
    in_process([int(s) for s in args.sizes.split(",") if s], args.python_limit, args.repeat)
    if args.keys:
        many_keys(args.keys, args.repeat)
    if args.cli:
        cli(args.cli, 3)


if __name__ == "__main__":
    main()
