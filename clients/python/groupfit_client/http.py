"""HTTP client of the groupfit API (v1), sync and async, on httpx.

Timeouts on every call; retries with exponential backoff on connection errors and 503 — only for
calls that are safe to repeat: reads, PUT of rates, and POST /v1/assign when it is stateless (no
group), a dry run, or carries an Idempotency-Key. Errors are raised as GroupfitError with the service's
stable code. Field names are those of openapi/openapi.json (a test checks them against it).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Self

import httpx

RETRYABLE_STATUS = {503}


class GroupfitError(Exception):
    """An error answer of the service: `code` is stable (e.g. version_conflict), `status` the HTTP status."""

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


class _Calls:
    """What a call is: method, path, body, and whether repeating it is safe."""

    @staticmethod
    def assign(request: dict[str, Any], dense: bool, idempotency_key: str | None) -> tuple[str, str, dict, dict, bool]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        params = {"delta": "dense"} if dense else {}
        safe = not request.get("group") or request.get("dry_run", False) or idempotency_key is not None
        return "POST", "/v1/assign", params, headers, safe


class GroupfitClient:
    def __init__(
        self,
        base_url: str,
        timeout: float = 5.0,
        retries: int = 3,
        backoff_s: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=timeout, transport=transport)
        self.retries, self.backoff_s = retries, backoff_s

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, safe: bool, **kwargs: Any) -> Any:
        for attempt in range(self.retries + 1 if safe else 1):
            try:
                response = self.http.request(method, path, **kwargs)
            except httpx.TransportError:
                if attempt >= self.retries or not safe:
                    raise
            else:
                if response.status_code not in RETRYABLE_STATUS or attempt >= self.retries or not safe:
                    return _result(response)
            time.sleep(self.backoff_s * 2**attempt)
        raise AssertionError("unreachable")

    def assign(
        self, request: dict[str, Any], dense: bool = False, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """POST /v1/assign. With a `group`, pass an idempotency_key (or use assign_idempotent) to allow retries."""
        method, path, params, headers, safe = _Calls.assign(request, dense, idempotency_key)
        return self._call(method, path, safe, json=request, params=params, headers=headers)

    def assign_idempotent(self, request: dict[str, Any], dense: bool = False) -> dict[str, Any]:
        return self.assign(request, dense, idempotency_key=uuid.uuid4().hex)

    def algorithms(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/algorithms", True)["algorithms"]

    def group(self, group: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/groups/{group}", True)

    def history(self, group: str, limit: int = 100) -> list[dict[str, Any]]:
        return self._call("GET", f"/v1/groups/{group}/history", True, params={"limit": limit})["versions"]

    def delete_group(self, group: str) -> None:
        self._call("DELETE", f"/v1/groups/{group}", True)

    def put_rates(self, group: str, partitions: list[dict[str, Any]], window_end: str) -> dict[str, Any]:
        return self._call(
            "PUT", f"/v1/groups/{group}/rates", True, json={"partitions": partitions, "window_end": window_end}
        )

    def rates(self, group: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/groups/{group}/rates", True)

    def evaluate(self, stream: list[dict], capacity: float, algorithms: list[str], latency: dict | None = None) -> dict:
        body: dict[str, Any] = {"stream": stream, "capacity": capacity, "algorithms": algorithms}
        if latency is not None:
            body["latency"] = latency
        return self._call("POST", "/v1/evaluate", True, json=body)

    def healthy(self) -> bool:
        try:
            return self.http.get("/readyz").status_code == 200
        except httpx.TransportError:
            return False


class AsyncGroupfitClient:
    def __init__(
        self,
        base_url: str,
        timeout: float = 5.0,
        retries: int = 3,
        backoff_s: float = 0.2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, timeout=timeout, transport=transport)
        self.retries, self.backoff_s = retries, backoff_s

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, safe: bool, **kwargs: Any) -> Any:
        for attempt in range(self.retries + 1 if safe else 1):
            try:
                response = await self.http.request(method, path, **kwargs)
            except httpx.TransportError:
                if attempt >= self.retries or not safe:
                    raise
            else:
                if response.status_code not in RETRYABLE_STATUS or attempt >= self.retries or not safe:
                    return _result(response)
            await asyncio.sleep(self.backoff_s * 2**attempt)
        raise AssertionError("unreachable")

    async def assign(
        self, request: dict[str, Any], dense: bool = False, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        method, path, params, headers, safe = _Calls.assign(request, dense, idempotency_key)
        return await self._call(method, path, safe, json=request, params=params, headers=headers)

    async def assign_idempotent(self, request: dict[str, Any], dense: bool = False) -> dict[str, Any]:
        return await self.assign(request, dense, idempotency_key=uuid.uuid4().hex)

    async def algorithms(self) -> list[dict[str, Any]]:
        return (await self._call("GET", "/v1/algorithms", True))["algorithms"]

    async def group(self, group: str) -> dict[str, Any]:
        return await self._call("GET", f"/v1/groups/{group}", True)

    async def history(self, group: str, limit: int = 100) -> list[dict[str, Any]]:
        return (await self._call("GET", f"/v1/groups/{group}/history", True, params={"limit": limit}))["versions"]

    async def delete_group(self, group: str) -> None:
        await self._call("DELETE", f"/v1/groups/{group}", True)

    async def rates(self, group: str) -> dict[str, Any]:
        return await self._call("GET", f"/v1/groups/{group}/rates", True)

    async def put_rates(self, group: str, partitions: list[dict[str, Any]], window_end: str) -> dict[str, Any]:
        return await self._call(
            "PUT", f"/v1/groups/{group}/rates", True, json={"partitions": partitions, "window_end": window_end}
        )


def _result(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise GroupfitError.from_response(response)
    return None if response.status_code == 204 else response.json()
