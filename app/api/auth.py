"""Optional bearer-token authentication, declared on every /v1 route as a FastAPI dependency (a test walks
the route table, so a route without it cannot go unnoticed); off when no token is configured.

Authentication runs before the body is read. The dependencies are coroutines: FastAPI runs a plain function
dependency in a thread, a hop that costs more than the check. Reads (GET) need any known token; writes (assign
with a group, rates, delete) a token with `write`; a token limited to `groups` works only on those, and not
on what concerns every group (`/metrics`, a replica placement: `AllGroups`, `Cluster`). Stateless POST
/v1/assign and /v1/evaluate change nothing stored, so they need a token but not `write`. The tokens and their
grants: app/service/access.py.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from app.api.dependencies import AuthorizerDep
from app.codec.wire import GROUP_PATTERN
from app.service.access import Grant


async def authenticated(request: Request, authorizer: AuthorizerDep) -> Grant:
    address = request.client.host if request.client else ""
    return authorizer.authenticate(request.headers.get("authorization", ""), address)


Authenticated = Annotated[Grant, Depends(authenticated)]
GroupPath = Annotated[str, Path(pattern=GROUP_PATTERN, description="consumer group id (no spaces or '/')")]


async def readable_group(group: GroupPath, grant: Authenticated) -> str:
    grant.check(group, write=False)
    return group


async def writable_group(group: GroupPath, grant: Authenticated) -> str:
    grant.check(group, write=True)
    return group


async def all_groups(grant: Authenticated) -> Grant:
    """A token that may read every group (the metrics name them all)."""
    grant.check_all_groups("/metrics, which names every group,")
    return grant


async def cluster(grant: Authenticated) -> Grant:
    """A token for the cluster: write, on every group (a replica placement plans data moves for all of them)."""
    grant.check(None, write=True)
    grant.check_all_groups("a replica placement, a plan for the whole cluster,")
    return grant


AllGroups = Annotated[Grant, Depends(all_groups)]
Cluster = Annotated[Grant, Depends(cluster)]
ReadableGroup = Annotated[str, Depends(readable_group)]
WritableGroup = Annotated[str, Depends(writable_group)]
