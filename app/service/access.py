"""Who may do what: the configured bearer tokens, each with its grant (read, write, which groups), and who the
caller is for fair shares of the compute pool (the tenant). Tokens are compared in constant time and never
echoed; with no token configured every caller may do everything, and is told apart by its address."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from app.core.errors import AccessDenied, ErrorCode
from app.settings import TokenGrant


@dataclass(frozen=True)
class Grant:
    """What the caller may do, and who it is (`tenant`: a token's name, or the address of a caller without one)."""

    write: bool
    groups: frozenset[str] | None  # None: every group
    tenant: str = "anonymous"

    def check(self, group: str | None, write: bool) -> None:
        if write and not self.write:
            raise AccessDenied(ErrorCode.FORBIDDEN, "this token may read but not change stored state.")
        if group is not None and self.groups is not None and group not in self.groups:
            raise AccessDenied(ErrorCode.FORBIDDEN, "this token is not allowed for this group.")

    def check_all_groups(self, what: str) -> None:
        """For what concerns every group at once (the metrics, a cluster's replica placement)."""
        if self.groups is not None:
            raise AccessDenied(
                ErrorCode.FORBIDDEN,
                f"this token is limited to some groups; {what} needs a token without 'groups' (every group).",
            )

    def tenants(self, group: str | None = None) -> tuple[str, ...]:
        """Whose share of the compute pool a request counts against: its token, and its group if it names one."""
        return (self.tenant, f"group {group!r}") if group else (self.tenant,)


class Authorizer:
    def __init__(self, grants: list[TokenGrant]) -> None:
        self.grants = [
            (
                grant.token.get_secret_value().encode(),
                Grant(
                    grant.write,
                    frozenset(grant.groups) if grant.groups is not None else None,
                    f"token {grant.name!r}" if grant.name else f"token #{number}",
                ),
            )
            for number, grant in enumerate(grants, 1)
        ]

    def authenticate(self, authorization: str, address: str = "") -> Grant:
        """The grant of an `Authorization` header's value (`address`: the caller's, its tenant without tokens)."""
        if not self.grants:
            return Grant(write=True, groups=None, tenant=f"client {address or 'unknown'}")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token:
            presented = token.strip().encode()
            # compare with every token, so the time taken does not tell which one matched
            matches = [grant for secret, grant in self.grants if hmac.compare_digest(secret, presented)]
            if matches:
                return matches[0]
        raise AccessDenied(ErrorCode.UNAUTHORIZED, "send a valid token as 'Authorization: Bearer <token>'.")
