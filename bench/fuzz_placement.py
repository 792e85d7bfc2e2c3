"""The placement fuzz campaign: random and mutated placement bodies (tests/fuzz/placement_bodies.py) through
POST /v1/placements in process and through `groupfit placement --input -`, for `--seconds`, with a seed drawn
from the clock unless given. Each finding — a 5xx, an exception out of the CLI, an error without a known code,
the CLI and the API disagreeing, a plan breaking the request's rules — is printed and written with its body
under `--out`; make it a regression case in tests/fuzz/test_placement_fuzz.py. `make fuzz-placement` runs it
for 600 s.

    .venv/bin/python bench/fuzz_placement.py --seconds 600 [--seed N] [--out .groupfit/fuzz-placement]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
import traceback
from collections import Counter
from pathlib import Path

import httpx
from live import ROOT

from app.main import create_app
from app.settings import Settings
from tests.fuzz.placement_bodies import cli, cli_problems, encode, extreme_bodies, mutate, problems, random_body


async def campaign(seconds: float, seed: int, out: Path) -> int:
    rng = random.Random(seed)
    extremes = [body for _, body in extreme_bodies()]
    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0", log_level="WARNING"))
    statuses: Counter[str] = Counter()
    found, count, deadline = 0, 0, time.monotonic() + seconds
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
            count += 1
            try:
                response = await client.post("/v1/placements", content=content)
                request = json.loads(content) if response.status_code == 200 else None
                wrong = problems(response.status_code, response.content, request)
                statuses[str(response.status_code)] += 1
                status, stdout, stderr = cli(content)
                wrong += cli_problems(status, stdout, stderr, request, response.status_code, response.content)
            except Exception:  # an exception out of the CLI (or the checks): the finding is the traceback
                wrong = [traceback.format_exc()]
            if wrong:
                found += 1
                out.mkdir(parents=True, exist_ok=True)
                path = out / f"finding-{seed}-{count}.json"
                path.write_bytes(content)
                print(f"finding #{found} ({path}):", *wrong, sep="\n  ", flush=True)
    print(f"seed {seed}: {count} bodies in {seconds:g} s, answers {dict(sorted(statuses.items()))}, {found} findings")
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=None, help="default: drawn from the clock (printed)")
    parser.add_argument("--out", type=Path, default=ROOT / ".groupfit" / "fuzz-placement")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else time.time_ns() % 2**32
    raise SystemExit(1 if asyncio.run(campaign(args.seconds, seed, args.out)) else 0)


if __name__ == "__main__":
    main()
