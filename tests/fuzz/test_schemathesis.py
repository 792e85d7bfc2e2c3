"""schemathesis against the exported contract, over HTTP on a live service (real Redis behind it) that
requires bearer tokens, as the contract declares: no 5xx, every answer valid against openapi/openapi.json,
every error with the documented body, and every secured operation refusing a missing or wrong token
(tests/fuzz/contract.py). Deterministic (derandomized: the same cases on every run, so CI passes or fails by
the code, not by chance); the long randomized campaign is `make fuzz` (bench/fuzz.py), and what it finds
becomes a case here or in the suite of its endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import LiveService
from tests.fuzz.contract import GRANTS, check

pytestmark = pytest.mark.integration

CONTRACT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
EXAMPLES_PER_OPERATION = 110  # 11 operations: more than 1 000 generated cases in all
OPERATIONS = sorted(
    f"{method.upper()} {path}"
    for path, methods in json.loads(CONTRACT.read_text())["paths"].items()
    for method in methods
)


@pytest.fixture(scope="module")
def secured_service(redis_server, tmp_path_factory):
    service = LiveService(
        redis_server.url, tmp_path_factory.mktemp("fuzz") / "service.log", GROUPFIT_AUTH_TOKENS=json.dumps(GRANTS)
    ).start()
    yield service
    service.stop()


@pytest.fixture(scope="module")
def operations(secured_service):
    loaded = schemathesis.openapi.from_url(f"{secured_service.url}/openapi.json")
    operations = (result.ok() for result in loaded.get_all_operations())
    return {f"{operation.method.upper()} {operation.path}": operation for operation in operations}


@pytest.mark.parametrize("label", OPERATIONS)
def test_every_operation_honours_the_contract(operations, label):
    operation = operations[label]

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def run(data):
        check(data.draw(operation.as_strategy()))

    run()
