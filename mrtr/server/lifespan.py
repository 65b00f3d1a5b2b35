"""The server's lifespan: what handlers share, opened once per process however many transports serve it.

``@server.lifespan`` registers an async generator function (or any callable returning
an async context manager); :class:`Lifespan` checks it, enters it when the first
``Server.running()`` block starts, gives what it yielded to every handler as
``ctx.lifespan``, and closes it when the last block ends. Nested or concurrent entries
(two transports in one process) share the first one's value. No event loop is
imported: the transports (and ``async with server.running():``) drive it.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from ..core.context import LifespanNotRunning

__all__ = ["Lifespan"]


def _takes_argument(fn: Any) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)


class Lifespan:
    """One server's lifespan: the registered function, its value while running, and who holds it.

    ``owner`` is what the function is called with when it takes a parameter (the server).
    """

    __slots__ = ("_fn", "_owner", "_starting", "_users", "value")

    def __init__(self, owner: Any) -> None:
        self._owner = owner
        self._fn: Callable[..., Any] | None = None
        self._users = 0
        self._starting = False
        self.value: Any = None
        """What handlers see as ``ctx.lifespan``: the yielded value while running, ``None``
        without a lifespan, a :class:`~mrtr.core.context.LifespanNotRunning` otherwise."""

    def register(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Check and keep ``fn`` (see ``Server.lifespan``); returns it unchanged."""
        if self._fn is not None:
            raise ValueError("a lifespan is already registered; combine the resources in one")
        if not callable(fn):
            raise TypeError(f"@server.lifespan decorates a function, got {type(fn).__name__}")
        if not inspect.isasyncgenfunction(fn) and (inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn)):
            kind = "generator function" if inspect.isgeneratorfunction(fn) else "coroutine function"
            raise TypeError(
                f"@server.lifespan needs an async generator function (`async def ...: ... yield value`), "
                f"got the {kind} {fn.__qualname__}"
            )
        self._fn = asynccontextmanager(fn) if inspect.isasyncgenfunction(fn) else fn
        self.value = LifespanNotRunning(
            f"the lifespan {fn.__qualname__} is not running: serve the server with a transport "
            "(mrtr.http, the ASGI app with lifespan events, mrtr.stdio) or inside `async with server.running():`"
        )
        return fn

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Any]:
        """Hold the lifespan open for the block; the first entry opens it, the last exit closes it."""
        fn = self._fn
        if fn is None:
            yield None
            return
        if self._users:
            if self._starting:
                raise RuntimeError("the lifespan is still starting in another task; enter it once, before serving")
            self._users += 1
            try:
                yield self.value
            finally:
                self._users -= 1
            return
        manager = fn(self._owner) if _takes_argument(fn) else fn()
        if not isinstance(manager, AbstractAsyncContextManager) and not hasattr(manager, "__aenter__"):
            raise TypeError(f"the lifespan returned {type(manager).__name__}, not an async context manager")
        self._users = 1
        self._starting = True
        not_running = self.value
        try:
            value = await manager.__aenter__()
        except BaseException:
            self._users = 0
            raise
        finally:
            self._starting = False
        self.value = value
        try:
            yield value
        except BaseException as exc:
            self._users -= 1
            self.value = not_running
            if not await manager.__aexit__(type(exc), exc, exc.__traceback__):
                raise
        else:
            self._users -= 1
            self.value = not_running
            await manager.__aexit__(None, None, None)
