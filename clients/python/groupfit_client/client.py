"""The groupfit clients: `GroupfitClient` (blocking) and `AsyncGroupfitClient` (asyncio), on httpx.

Both offer the same methods, made from the call descriptions in `_core` (each call's signature, path, retry
safety and result type written there once); the two classes differ only in how they send a request and
wait between retries. Every method takes `timeout=` (seconds, for that call only; default the client's).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Coroutine
from typing import Any, Generic, ParamSpec, Self, TypeVar, overload

import httpx

from groupfit_client import _core
from groupfit_client._core import Call, Outcome, RetryPolicy

P = ParamSpec("P")
T = TypeVar("T")
H = TypeVar("H", httpx.Client, httpx.AsyncClient)


class _Method(Generic[P, T]):
    """A client method made from a call description: on GroupfitClient it returns the call's result, on
    AsyncGroupfitClient an awaitable of it; the signature and documentation are the description's."""

    def __init__(self, build: Callable[P, Call[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__
        # The call's parameters; what it returns is the call's result (or an awaitable of it), not the Call.
        self.signature = inspect.signature(build).replace(return_annotation=inspect.Signature.empty)

    @overload
    def __get__(self, client: None, owner: type) -> Self: ...
    @overload
    def __get__(self, client: GroupfitClient, owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, client: AsyncGroupfitClient, owner: type) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, client: GroupfitClient | AsyncGroupfitClient | None, owner: type) -> Any:
        if client is None:
            return self
        perform = client._perform  # the client's way of sending: blocking or awaited

        def method(*args: P.args, **kwargs: P.kwargs) -> Any:
            return perform(self.build(*args, **kwargs))

        method.__name__, method.__doc__ = self.build.__name__, self.build.__doc__
        method.__signature__ = self.signature  # type: ignore[attr-defined]
        return method


class _ClientBase(Generic[H]):
    """What the two clients share: construction and the methods; a subclass says how to send (`_perform`)."""

    _http_class: type[H]

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 5.0,
        retries: int = 3,
        backoff_s: float = 0.2,
        token: str | None = None,
        **httpx_options: Any,
    ) -> None:
        """`timeout`: seconds per call unless the call gives its own; `retries`, `backoff_s`: see RetryPolicy;
        `token`: sent as `Authorization: Bearer …`; `httpx_options` (e.g. transport) go to httpx's client."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http: H = self._http_class(base_url=base_url, timeout=timeout, headers=headers, **httpx_options)
        self.retry = RetryPolicy(retries, backoff_s)

    assign = _Method(_core.assign)
    assign_idempotent = _Method(_core.assign_idempotent)
    algorithms = _Method(_core.algorithms)
    group = _Method(_core.group)
    history = _Method(_core.history)
    delete_group = _Method(_core.delete_group)
    put_rates = _Method(_core.put_rates)
    rates = _Method(_core.rates)
    evaluate = _Method(_core.evaluate)
    groups = _Method(_core.groups)
    scale = _Method(_core.scale)
    rates_history = _Method(_core.rates_history)
    replay = _Method(_core.replay)
    place_replicas = _Method(_core.place_replicas)
    healthy = _Method(_core.healthy)


class GroupfitClient(_ClientBase[httpx.Client]):
    """The groupfit API, blocking. Use as a context manager or call close()."""

    _http_class = httpx.Client

    def _perform(self, call: Call[T]) -> T:
        attempt, outcome = 0, self._attempt(call)
        while (delay := self.retry.delay(call, outcome, attempt)) is not None:
            time.sleep(delay)
            attempt, outcome = attempt + 1, self._attempt(call)
        return call.result(outcome)

    def _attempt(self, call: Call[Any]) -> Outcome:
        try:
            return self.http.send(call.request(self.http))
        except httpx.TransportError as error:
            return error

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncGroupfitClient(_ClientBase[httpx.AsyncClient]):
    """The groupfit API on asyncio: the same methods as GroupfitClient, awaited. Use with `async with` or call
    aclose()."""

    _http_class = httpx.AsyncClient

    async def _perform(self, call: Call[T]) -> T:
        attempt, outcome = 0, await self._attempt(call)
        while (delay := self.retry.delay(call, outcome, attempt)) is not None:
            await asyncio.sleep(delay)
            attempt, outcome = attempt + 1, await self._attempt(call)
        return call.result(outcome)

    async def _attempt(self, call: Call[Any]) -> Outcome:
        try:
            return await self.http.send(call.request(self.http))
        except httpx.TransportError as error:
            return error

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
