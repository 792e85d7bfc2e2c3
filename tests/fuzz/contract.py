"""What every generated case must get from the service, as the contract (openapi/openapi.json) says: no 5xx,
every answer valid against the contract, every error with the documented body, every secured operation
refusing a missing or wrong token. The deterministic suite (tests/fuzz/test_schemathesis.py) and the long
randomized campaign (bench/fuzz.py --target api) share it."""

from __future__ import annotations

from typing import Any

from schemathesis.specs.openapi.checks import positive_data_acceptance

TOKEN = "fuzz-writer-token"
GRANTS = [{"token": TOKEN, "write": True}]
"""The token the service is started with: write, on every group (what every operation needs)."""


def check(case: Any) -> None:
    """Calls the service with the case and checks its answer (raises what is wrong). Schema-valid requests may
    still be refused for rules a schema cannot state (a duplicate partition, a missing capacity): that check is
    off; every other one is on. With the valid token; schemathesis also replays secured operations without one
    (expects 401/403)."""
    case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, excluded_checks=[positive_data_acceptance])
