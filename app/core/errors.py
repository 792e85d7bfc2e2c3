"""The one error type of the core: a stable code and a sentence a person can act on."""

from __future__ import annotations

from typing import Any


class AssignmentError(ValueError):
    """Bad input to an assignment. `code` is stable; the API maps it to an HTTP status."""

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    def to_body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}
