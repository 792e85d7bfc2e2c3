"""Who may do what: the configured bearer tokens, each with its grant (read, write, which groups). Tokens are
compared in constant time and never echoed; with no token configured every caller may do everything."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from app.core.errors import AccessDenied, ErrorCode
from app.settings import TokenGrant


@dataclass(frozen=True)
class Grant:
    """What the caller may do."""

    write: bool
    groups: frozenset[str] | None  # None: every group

    def check(self, group: str | None, write: bool) -> None:
        if write and not self.write:
            raise AccessDenied(ErrorCode.FORBIDDEN, "this token may read but not change stored state.")
        if group is not None and self.groups is not None and group not in self.groups:
            raise AccessDenied(ErrorCode.FORBIDDEN, "this token is not allowed for this group.")


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
        """The grant of an `Authorization` header's value."""
        if not self.grants:
            return OPEN
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token:
            presented = token.strip().encode()
            # compare with every token, so the time taken does not tell which one matched
            matches = [grant for secret, grant in self.grants if hmac.compare_digest(secret, presented)]
            if matches:
                return matches[0]
        raise AccessDenied(ErrorCode.UNAUTHORIZED, "send a valid token as 'Authorization: Bearer <token>'.")
