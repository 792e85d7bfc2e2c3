"""The boundary holds in one place: the CLI and the API answer the same bad request with the same code, every
/v1 route declares the authorization dependency, and every error code is in the OpenAPI description."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi.routing import APIRoute

from app.api.auth import authenticated
from app.api.errors import STATUS
from app.cli import main
from app.core.errors import ErrorCode
from app.main import create_app
from app.settings import Settings

GOOD = {"algorithm": "mwf", "capacity": 100, "partitions": [{"topic": "t", "partition": 0, "rate": 10}]}

BAD_REQUESTS = [
    ('{"algorithm": "mwf", "capacity": 100, "partitions": [], "bogus": 1}', "invalid_request"),
    (
        '{"algorithm": "mwf", "capacity": 100, "partitions": [{"topic": "t", "partition": 0, "rate": "x"}]}',
        "invalid_rate",
    ),
    (
        '{"algorithm": "mwf", "capacity": 100, "partitions": [{"topic": "t", "partition": 0, "rate": -1}]}',
        "invalid_rate",
    ),
    (
        '{"algorithm": "mwf", "capacity": 100, "partitions": [{"topic": "t", "partition": 0, "rate": 1e999}]}',
        "invalid_rate",
    ),
    (
        '{"algorithm": "mwf", "capacity": 100, "partitions": [{"topic": "t", "partition": "0", "rate": 1}]}',
        "invalid_request",
    ),
    ('{"algorithm": "mwf", "capacity": "100", "partitions": []}', "invalid_capacity"),
    ('{"algorithm": "mwf", "capacity": 0, "partitions": []}', "invalid_capacity"),
    ('{"algorithm": "mwf", "partitions": []}', "invalid_capacity"),
    ('{"algorithm": "nope", "capacity": 100, "partitions": []}', "unknown_algorithm"),
    ('{"algorithm": "mwf", "capacity": 100, "partitions": [], "members": []}', "invalid_members"),
    ('{"algorithm": "mwf", "capacity": 100, "partitions": [], "members": "a"}', "invalid_members"),
    ('{"algorithm": "mwf", "capacity": 100, "partitions": [], "previous": {"a": 1}}', "invalid_previous"),
    ('{"algorithm": "mwf", "capacity": 100, "partitions": [], "params": {"x": 1}}', "invalid_parameter"),
    ('{"algorithm": "mwf", "capacity": 100, "partitions": [], "params": 3}', "invalid_parameter"),
    (
        '{"algorithm": "mwf", "capacity": 100, "partitions": '
        '[{"topic": "t", "partition": 0, "rate": 1}, {"topic": "t", "partition": 0, "rate": 2}]}',
        "duplicate_partition",
    ),
    ('{"algorithm": "mwf", "capacity": 100', "invalid_json"),
    ("[]", "invalid_request"),
    ("", "invalid_request"),
]


@pytest.fixture
async def api():
    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0"))  # stateless assigns need no Redis
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        yield client
    await app.state.services.store.close()


@pytest.mark.parametrize(("body", "code"), BAD_REQUESTS)
async def test_the_cli_and_the_api_answer_a_bad_request_with_the_same_code(body, code, api, tmp_path, capsys):
    response = await api.post("/v1/assign", content=body.encode())
    assert response.status_code == 422
    assert response.json()["error"]["code"] == code
    path = tmp_path / "request.json"
    path.write_text(body)
    assert main(["assign", "--input", str(path)]) == 2
    assert json.loads(capsys.readouterr().err)["error"]["code"] == code


async def test_the_cli_and_the_api_give_the_same_answer(api, tmp_path, capsys):
    path = tmp_path / "request.json"
    path.write_text(json.dumps(GOOD))
    assert main(["assign", "--input", str(path)]) == 0
    by_cli = json.loads(capsys.readouterr().out)
    by_api = (await api.post("/v1/assign", json=GOOD)).json()
    assert by_cli == by_api


def _dependencies(dependant) -> set:
    found = set()
    for sub in dependant.dependencies:
        found.add(sub.call)
        found |= _dependencies(sub)
    return found


def _api_routes(routes) -> list[APIRoute]:
    """Every APIRoute, also inside included routers (FastAPI wraps those since 0.16x)."""
    found = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        elif hasattr(route, "original_router"):
            found.extend(_api_routes(route.original_router.routes))
    return found


def test_every_v1_route_declares_the_authorization_dependency():
    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0"))
    routes = [route for route in _api_routes(app.routes) if route.path.startswith("/v1/")]
    assert len(routes) >= 8
    unprotected = [f"{sorted(r.methods)} {r.path}" for r in routes if authenticated not in _dependencies(r.dependant)]
    assert unprotected == []


def test_every_error_code_has_a_status_and_is_in_the_openapi_description():
    # docs/api.md lists them too: tests/test_docs.py
    assert set(STATUS) == set(ErrorCode)
    description = create_app(Settings(redis_url="redis://127.0.0.1:1/0")).openapi()["info"]["description"]
    for code in ErrorCode:
        assert f"`{code.value}` ({STATUS[code]})" in description
