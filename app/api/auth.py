"""Optional bearer-token authentication: off when no token is configured (the loopback default).

Reads (GET) need any known token; writes (assign with a group, rates, delete) a token with `write`; a
token limited to `groups` works only on those. Stateless POST /v1/assign and /v1/evaluate change nothing
stored, so they need a token but not `write`. Tokens are compared in constant time and never echoed.
"""

from __future__ import annotations

import hmac

from starlette.requests import Request

from app.api.errors import ApiError
from app.settings import TokenGrant


class Authorizer:
    def __init__(self, grants: list[TokenGrant]) -> None:
        self.grants = [(grant.token.get_secret_value().encode(), grant) for grant in grants]

    @property
    def enabled(self) -> bool:
        return bool(self.grants)

    def check(self, request: Request, group: str | None, write: bool) -> None:
        if not self.grants:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        grant = None
        if scheme.lower() == "bearer" and token:
            presented = token.strip().encode()
            grant = next((g for secret, g in self.grants if hmac.compare_digest(secret, presented)), None)
        if grant is None:
            raise ApiError("unauthorized", "send a valid token as 'Authorization: Bearer <token>'.")
        if write and not grant.write:
            raise ApiError("forbidden", "this token may read but not change stored state.")
        if group is not None and grant.groups is not None and group not in grant.groups:
            raise ApiError("forbidden", "this token is not allowed for this group.")
