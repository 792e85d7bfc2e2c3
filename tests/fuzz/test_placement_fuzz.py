"""The placement fuzz, deterministic (a fixed seed: CI passes or fails by the code, not by chance): every
extreme body of placement_bodies.py and SAMPLES random ones through POST /v1/placements in process and through
`groupfit placement --input -`: never a 5xx, never an exception out of the CLI (a traceback), every refusal a
known ErrorCode and the same from both, every plan within the request's rules. The long randomized campaign is
bench/fuzz.py --target placement; what it finds becomes a case here."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from tests.fuzz.placement_bodies import (
    REGRESSIONS,
    cli,
    cli_problems,
    encode,
    extreme_bodies,
    problems,
    random_body,
)

SEED = 3003
SAMPLES = 300
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def app():
    """An app per test: placements run in its compute pool, whose workers belong to the test's event loop."""
    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0", log_level="WARNING"))
    yield app
    await app.state.services.compute.close()


async def findings_of(app, labelled: list[tuple[str, bytes]]) -> list[str]:
    found = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        for label, content in labelled:
            response = await client.post(
                "/v1/placements", content=content, headers={"content-type": "application/json"}
            )
            request = json.loads(content) if response.status_code == 200 else None
            wrong = problems(response.status_code, response.content, request)
            status, out, err = cli(content)
            wrong += cli_problems(status, out, err, request, response.status_code, response.content)
            found += [f"{label}: {problem} — {content[:300]!r}" for problem in wrong]
    return found


async def test_extreme_bodies_are_answered_or_refused_with_a_code(app):
    labelled = [(label, encode(body)) for label, body in extreme_bodies()]
    assert len(labelled) > 500
    assert await findings_of(app, labelled) == []


async def test_random_bodies_are_answered_or_refused_with_a_code(app):
    rng = random.Random(SEED)
    labelled = [(f"random #{i}", encode(random_body(rng))) for i in range(SAMPLES)]
    assert await findings_of(app, labelled) == []


async def test_what_the_campaign_found_stays_fixed(app):
    assert await findings_of(app, REGRESSIONS) == []


async def test_the_fuzz_reaches_the_solvers(app):
    """Not vacuous: of the random bodies, many are planned (by both solvers) and many refused, with several
    codes."""
    rng = random.Random(SEED)
    statuses, codes, solvers = [], set(), set()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        for _ in range(SAMPLES):
            body = random_body(rng)
            response = await client.post("/v1/placements", content=encode(body))
            statuses.append(response.status_code)
            if response.status_code == 200:
                solvers.add(body["solver"])
            else:
                codes.add(response.json()["error"]["code"])
    assert statuses.count(200) >= SAMPLES // 6 and statuses.count(422) >= SAMPLES // 2
    assert solvers == {"heuristic", "exact"} and len(codes) >= 6, codes


def test_the_installed_command_prints_no_traceback(tmp_path):
    """The real `groupfit placement` process, on the issue's reproducers: exit 2 and the error body."""
    for body in (
        {"brokers": [{"id": 1, "disk": 1e308, "network": 1e308}, {"id": 2, "disk": 1e308, "network": 1e308}]},
        {"topics": [{"name": "t", "retention_ms": 5e-324}]},
    ):
        request = {**json.loads(json.dumps(_example())), **body}
        path = tmp_path / "request.json"
        path.write_text(json.dumps(request))
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "placement", "--input", str(path)],
            capture_output=True,
            cwd=ROOT,
            timeout=120,
        )
        assert done.returncode == 2 and b"Traceback" not in done.stderr, done.stderr
        assert json.loads(done.stderr)["error"]["code"] in ("invalid_capacity", "invalid_parameter")


def _example():
    from app.api.examples import PLACEMENT_REQUEST

    return PLACEMENT_REQUEST
