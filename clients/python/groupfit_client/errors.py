"""The service's error answers as one exception type."""

from __future__ import annotations

from typing import Any

import httpx


class GroupfitError(Exception):
    """An error answer of the service: `code` is stable (e.g. version_conflict), `status` the HTTP status,
    `message` says what to do, `details` carries the specifics (e.g. the current version on a conflict)."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.status, self.code, self.message, self.details = status, code, message, details

    @classmethod
    def from_response(cls, response: httpx.Response) -> GroupfitError:
        try:
            error = response.json()["error"]
            return cls(response.status_code, error["code"], error["message"], error.get("details"))
        except (ValueError, KeyError, TypeError):
            return cls(response.status_code, "http_error", response.text[:200] or response.reason_phrase)
