"""Every kind of error is answered by the one handler of their base (GroupfitError): the status of its code,
the one error body, and the headers a client acts on; each kind carries only its own codes."""

from __future__ import annotations

import httpx
import pytest

from app.api.errors import STATUS
from app.core.errors import AccessDenied, AssignmentError, ComputeUnavailable, ErrorCode, GroupfitError
from app.main import create_app
from app.settings import Settings

RAISED = [
    (AssignmentError(ErrorCode.INVALID_RATE, "a rate is negative.", {"at": "$.partitions[0].rate"}), 422, {}),
    (AssignmentError(ErrorCode.BODY_TOO_LARGE, "the body is too large."), 413, {}),
    (AssignmentError(ErrorCode.GROUP_NOT_FOUND, "no such group."), 404, {}),
    (AssignmentError(ErrorCode.VERSION_CONFLICT, "group g is at version 2."), 409, {}),
    (AccessDenied(ErrorCode.UNAUTHORIZED, "send a token."), 401, {"www-authenticate": "Bearer"}),
    (AccessDenied(ErrorCode.FORBIDDEN, "this token may only read."), 403, {}),
    (ComputeUnavailable(ErrorCode.COMPUTE_BUSY, "every worker is busy."), 503, {"retry-after": "1"}),
    (ComputeUnavailable(ErrorCode.COMPUTE_TIMEOUT, "past the deadline."), 504, {}),
]


@pytest.mark.parametrize(("error", "status", "headers"), RAISED, ids=[e.code.value for e, _, _ in RAISED])
async def test_each_kind_of_error_answers_with_its_status(error: GroupfitError, status: int, headers: dict) -> None:
    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0"))

    async def fail() -> None:
        raise error

    app.router.add_api_route("/fail", fail)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        answer = await client.get("/fail")
    assert answer.status_code == status == STATUS[error.code]
    assert answer.json() == {"error": {"code": error.code.value, "message": error.message, "details": error.details}}
    assert {name: answer.headers.get(name) for name in headers} == headers
    if "retry-after" not in headers:
        assert "retry-after" not in answer.headers


def test_each_kind_carries_only_its_own_codes() -> None:
    kinds = (AssignmentError, AccessDenied, ComputeUnavailable)
    own = {ErrorCode.NOT_FOUND, ErrorCode.METHOD_NOT_ALLOWED, ErrorCode.STORE_UNAVAILABLE, ErrorCode.INTERNAL_ERROR}
    assert sum(len(kind.codes) for kind in kinds) + len(own) == len(ErrorCode)  # no code in two kinds
    assert set().union(*(kind.codes for kind in kinds)) | own == set(ErrorCode)
    for kind in kinds:
        assert issubclass(kind, GroupfitError)
        stranger = next(code for code in ErrorCode if code not in kind.codes)
        with pytest.raises(ValueError, match=stranger.value):
            kind(stranger, "a code of another kind.")
    assert GroupfitError(ErrorCode.INTERNAL_ERROR, "the API's own answer.").code is ErrorCode.INTERNAL_ERROR
