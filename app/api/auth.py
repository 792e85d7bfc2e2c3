"""Optional bearer-token authentication, declared on every /v1 route as a FastAPI dependency (a test walks
the route table, so a route without it cannot go unnoticed); off when no token is configured.

Authentication runs before the body is read. The dependencies are coroutines: FastAPI runs a plain
function dependency in a thread, a hop that costs more than the check. Reads (GET) need any known token; writes (assign with a group,
rates, delete) a token with `write`; a token limited to `groups` works only on those. Stateless POST
/v1/assign and /v1/evaluate change nothing stored, so they need a token but not `write`. Tokens are
compared in constant time and never echoed.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Request

from app.codec.wire import GROUP_PATTERN
from app.core.errors import AssignmentError, ErrorCode
from app.settings import TokenGrant


@dataclass(frozen=True)
class Grant:
    """What the caller may do."""

    write: bool
    groups: frozenset[str] | None  # None: every group

    def check(self, group: str | None, write: bool) -> None:
        if write and not self.write:
            raise AssignmentError(ErrorCode.FORBIDDEN, "this token may read but not change stored state.")
        if group is not None and self.groups is not None and group not in self.groups:
            raise AssignmentError(ErrorCode.FORBIDDEN, "this token is not allowed for this group.")


OPEN = Grant(write=True, groups=None)


class Authorizer:
    def __init__(self, grants: list[TokenGrant]) -> None:
        self.grants = [
            (
                grant.token.get_secret_value().encode(),
                Grant(grant.write, frozenset(grant.groups) if grant.groups is not None else None),
            )
            for grant in grants
        ]

    def authenticate(self, authorization: str) -> Grant:
        if not self.grants:
            return OPEN
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token:
            presented = token.strip().encode()
            # compare with every token, so the time taken does not tell which one matched
            matches = [grant for secret, grant in self.grants if hmac.compare_digest(secret, presented)]
            if matches:
                return matches[0]
        raise AssignmentError(ErrorCode.UNAUTHORIZED, "send a valid token as 'Authorization: Bearer <token>'.")


async def authenticated(request: Request) -> Grant:
    return request.app.state.authorizer.authenticate(request.headers.get("authorization", ""))


Authenticated = Annotated[Grant, Depends(authenticated)]
GroupPath = Annotated[str, Path(pattern=GROUP_PATTERN, description="consumer group id (no spaces or '/')")]


async def readable_group(group: GroupPath, grant: Authenticated) -> str:
    grant.check(group, write=False)
    return group


async def writable_group(group: GroupPath, grant: Authenticated) -> str:
    grant.check(group, write=True)
    return group


def writer(grant: Authenticated) -> Grant:
    """A token with write, for operations that act on no group (a placement plan)."""
    grant.check(None, write=True)
    return grant


Writer = Annotated[Grant, Depends(writer)]
ReadableGroup = Annotated[str, Depends(readable_group)]
WritableGroup = Annotated[str, Depends(writable_group)]
