"""Store URLs: ``memory:``, ``sqlite:///path``, ``redis://host:port/db``."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from .memory import MemoryStore
from .sqlite import SQLiteStore
from .store import StoreUnavailable, TaskStore

__all__ = ["open_store", "DEFAULT_URL"]

DEFAULT_URL = "sqlite:///mrtr-tasks.sqlite3"
"""A file in the working directory, created only when a task tool is registered."""


@asynccontextmanager
async def open_store(url: str, *, clock: Callable[[], float] = time.time) -> AsyncIterator[TaskStore]:
    """Open the store a URL names and check it can be used now, not on the first call.

    Raises :class:`StoreUnavailable` with the URL and the reason when it cannot be
    reached, and ``ValueError`` for a URL of no known kind. ``clock`` is the time the
    memory and SQLite stores expire records by; Redis expires them by its own.
    """
    if url == "memory:" or url == "memory://":
        yield MemoryStore(clock=clock)
        return
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):]
        if path.startswith("/"):
            path = path[1:]  # sqlite:///relative/file, sqlite:////absolute/file
        if not path:
            raise ValueError(f"{url!r} names no file; use sqlite:///relative/path or sqlite:////absolute/path")
        store = await SQLiteStore.open(path, clock=clock)
        try:
            yield store
        finally:
            await store.aclose()
        return
    if url.startswith(("redis://", "rediss://", "unix://")):
        from .redis import RedisStore

        async with RedisStore(url) as redis_store:
            yield redis_store
        return
    raise ValueError(f"unknown task store URL {url!r}; expected memory:, sqlite:///path or redis://host:port/db")


__all__ += ["StoreUnavailable"]
