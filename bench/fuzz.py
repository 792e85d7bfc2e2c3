"""The fuzz campaigns: randomized (a seed drawn from the clock unless given, printed), each for `--seconds`.
Each finding is printed and written with its input under `--out`; make it a regression case of the
deterministic suite (tests/fuzz/, or the tests of its endpoint). Targets:

- api: schemathesis over every operation of openapi/openapi.json against `groupfit serve` (real sockets,
  embedded Redis, bearer tokens), in batches of cases drawn from fresh seeds: no 5xx, every answer as the
  contract says (tests/fuzz/contract.py, the checks of tests/fuzz/test_schemathesis.py, which runs a fixed
  set of cases);
- placement: random and mutated placement bodies (tests/fuzz/placement_bodies.py) through POST /v1/placements
  in process and through `groupfit placement --input -`: a 5xx, an exception out of the CLI, an error without
  a known code, the CLI and the API disagreeing, a plan breaking the request's rules;
- cores: the compiled and the reference core on extreme numbers (tests/unit/codec/test_core_extremes.py):
  the same answer or the same error, `--cases` requests per algorithm.

`make fuzz` runs every target (FUZZ_SECONDS each, 600 by default; FUZZ_CASES); `make fuzz-placement` and
`make fuzz-cores` one each.

    .venv/bin/python bench/fuzz.py [--target api|placement|cores|all] --seconds 600 [--cases 2000] [--seed N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from live import ROOT

from app.local.servers import free_port, wait_for_port
from app.main import create_app
from app.settings import Settings
from tests.fuzz.contract import GRANTS, check
from tests.fuzz.placement_bodies import cli, cli_problems, encode, extreme_bodies, mutate, problems, random_body

CASES_PER_BATCH = 25
"""schemathesis cases drawn from one seed for one operation, before the next operation and seed."""


class Campaign:
    """One target's run: its seed, its answers and its findings (each written under `out`)."""

    def __init__(self, target: str, seed: int, out: Path) -> None:
        self.target, self.seed, self.out = target, seed, out
        self.rng = random.Random(seed)
        self.answers: Counter[str] = Counter()
        self.inputs = 0
        self.findings = 0
        self.cases = 0  # (the cores' campaign: requests per algorithm)

    def found(self, content: bytes, problems: list[str], suffix: str = "json") -> None:
        self.findings += 1
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / f"{self.target}-{self.seed}-{self.inputs}.{suffix}"
        path.write_bytes(content)
        print(f"{self.target} finding #{self.findings} ({path}):", *problems, sep="\n  ", flush=True)

    def report(self, seconds: float) -> None:
        print(
            f"{self.target}: seed {self.seed}, {self.inputs} inputs in {seconds:g} s, answers "
            f"{dict(sorted(self.answers.items()))}, {self.findings} findings",
            flush=True,
        )


async def placement(campaign: Campaign, seconds: float) -> None:
    rng = campaign.rng
    extremes = [body for _, body in extreme_bodies()]
    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0", log_level="WARNING"))
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=None) as client:
        while time.monotonic() < deadline:
            draw = rng.random()
            body = (
                random_body(rng)
                if draw < 0.6
                else mutate(rng, random_body(rng), rng.randint(1, 3))
                if draw < 0.8
                else mutate(rng, rng.choice(extremes), rng.randint(1, 3))
            )
            content = encode(body)
            campaign.inputs += 1
            try:
                response = await client.post(
                    "/v1/placements", content=content, headers={"content-type": "application/json"}
                )
                request = json.loads(content) if response.status_code == 200 else None
                wrong = problems(response.status_code, response.content, request)
                campaign.answers[str(response.status_code)] += 1
                status, stdout, stderr = cli(content)
                wrong += cli_problems(status, stdout, stderr, request, response.status_code, response.content)
            except Exception:  # an exception out of the CLI (or the checks): the finding is the traceback
                wrong = [traceback.format_exc()]
            if wrong:
                campaign.found(content, wrong)
    await app.state.services.compute.close()


@contextlib.contextmanager
def served(out: Path) -> Iterator[str]:
    """`groupfit serve` with the contract's token, on its own embedded Redis: its URL."""
    port = free_port()
    environment = {
        **os.environ,
        "GROUPFIT_PORT": str(port),
        "GROUPFIT_LOG_LEVEL": "WARNING",
        "GROUPFIT_DATA_DIR": str(out / "service-data"),
        "GROUPFIT_AUTH_TOKENS": json.dumps(GRANTS),
    }
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "service.log", "ab") as log:
        service = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve"], env=environment, cwd=ROOT, stdout=log, stderr=log
        )
    try:
        wait_for_port("127.0.0.1", port, 60)
        httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=30).raise_for_status()
        yield f"http://127.0.0.1:{port}"
    finally:
        service.terminate()
        service.wait(timeout=30)


async def api(campaign: Campaign, seconds: float) -> None:
    await asyncio.to_thread(_api, campaign, seconds)


def _api(campaign: Campaign, seconds: float) -> None:
    import schemathesis

    with served(campaign.out) as url:
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
        operations = sorted((result.ok() for result in schema.get_all_operations()), key=lambda o: o.label)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            batch(campaign, campaign.rng.choice(operations))


def batch(campaign: Campaign, operation: Any) -> None:
    """CASES_PER_BATCH cases of `operation` from a fresh seed; a failure (shrunk by hypothesis) is a finding."""
    from hypothesis import HealthCheck, given, seed, settings
    from hypothesis import strategies as st

    failing: list[Any] = []

    @seed(campaign.rng.getrandbits(64))
    @settings(max_examples=CASES_PER_BATCH, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        case = data.draw(operation.as_strategy())
        campaign.inputs += 1
        try:
            check(case)
        except Exception:
            failing[:] = [case]  # the last one to fail: after shrinking, the smallest
            raise
        campaign.answers[operation.label] += 1

    try:
        run()
    except Exception as exc:
        curl = failing[0].as_curl_command() if failing else operation.label
        campaign.found(curl.encode(), [f"{operation.label}: {type(exc).__name__}: {exc}"[:4000]], "sh")


async def cores(campaign: Campaign, seconds: float) -> None:
    """The two cores' differential test on extreme numbers (tests/unit/codec/test_core_extremes.py), on the
    campaign's seed and `--cases` requests per algorithm (not timed: it runs them all)."""
    environment = {**os.environ, "GROUPFIT_FUZZ_SEED": str(campaign.seed), "GROUPFIT_FUZZ_CASES": str(campaign.cases)}
    command = [sys.executable, "-m", "pytest", "-q", "tests/unit/codec/test_core_extremes.py", "-k", "agree"]
    run = await asyncio.to_thread(subprocess.run, command, env=environment, cwd=ROOT, capture_output=True)
    campaign.inputs = campaign.cases
    campaign.answers["pytest exit " + str(run.returncode)] += 1
    if run.returncode != 0:
        campaign.found(run.stdout + run.stderr, [run.stdout.decode(errors="replace")[-4000:]], "txt")


TARGETS: dict[str, Callable] = {"api": api, "placement": placement, "cores": cores}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=[*TARGETS, "all"], default="all")
    parser.add_argument("--seconds", type=float, default=600.0, help="per target")
    parser.add_argument("--seed", type=int, default=None, help="default: drawn from the clock (printed)")
    parser.add_argument("--out", type=Path, default=ROOT / ".groupfit" / "fuzz")
    parser.add_argument("--cases", type=int, default=2000, help="cores: requests per algorithm")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else time.time_ns() % 2**32
    findings = 0
    for name in TARGETS if args.target == "all" else [args.target]:
        campaign = Campaign(name, seed, args.out)
        campaign.cases = args.cases
        asyncio.run(TARGETS[name](campaign, args.seconds))
        campaign.report(args.seconds)
        findings += campaign.findings
    raise SystemExit(1 if findings else 0)


if __name__ == "__main__":
    main()
