"""Optional bearer-token authentication, declared on every /v1 route as a FastAPI dependency (a test walks
the route table, so a route without it cannot go unnoticed); off when no token is configured.

Authentication runs before the body is read. The dependencies are coroutines: FastAPI runs a plain function
dependency in a thread, a hop that costs more than the check. Reads (GET) need any known token; writes (assign
with a group, rates, delete) a token with `write`; a token limited to `groups` works only on those. Stateless
POST /v1/assign and /v1/evaluate change nothing stored, so they need a token but not `write`. The tokens and
their grants: app/service/access.py.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from app.api.dependencies import AuthorizerDep
from app.codec.wire import GROUP_PATTERN
from app.service.access import Grant


async def authenticated(request: Request, authorizer: AuthorizerDep) -> Grant:
    return authorizer.authenticate(request.headers.get("authorization", ""))


Authenticated = Annotated[Grant, Depends(authenticated)]
GroupPath = Annotated[str, Path(pattern=GROUP_PATTERN, description="consumer group id (no spaces or '/')")]


async def readable_group(group: GroupPath, grant: Authenticated) -> str:
    grant.check(group, write=False)
    return group


async def writable_group(group: GroupPath, grant: Authenticated) -> str:
    grant.check(group, write=True)
    return group


async def writer(grant: Authenticated) -> Grant:
    """A token with write, for operations that act on no group (a placement plan)."""
    grant.check(None, write=True)
    return grant


Writer = Annotated[Grant, Depends(writer)]
ReadableGroup = Annotated[str, Depends(readable_group)]
WritableGroup = Annotated[str, Depends(writable_group)]
