"""Store URLs: ``memory:``, ``sqlite:///path``, ``redis://host:port/db``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .memory import MemoryStore
from .record import MAX_RECORD_BYTES
from .sqlite import SQLiteStore
from .store import StoreUnavailable, TaskStore

__all__ = ["open_store", "DEFAULT_URL"]

DEFAULT_URL = "sqlite:///mrtr-tasks.sqlite3"
"""A file in the working directory, created only when a task tool is registered."""


@asynccontextmanager
async def open_store(url: str, *, max_record_bytes: int = MAX_RECORD_BYTES) -> AsyncIterator[TaskStore]:
    """Open the store a URL names and check it can be used now, not on the first call.

    Raises :class:`StoreUnavailable` with the URL and the reason when it cannot be
    reached, and ``ValueError`` for a URL of no known kind. The store refuses to write
    a record longer than ``max_record_bytes`` (:class:`~mrtr.tasks.TaskTooLarge`).
    """
    if isinstance(max_record_bytes, bool) or not isinstance(max_record_bytes, int) or max_record_bytes < 1:
        raise ValueError(f"max_record_bytes must be a positive integer, got {max_record_bytes!r}")
    if url == "memory:" or url == "memory://":
        yield MemoryStore(max_record_bytes=max_record_bytes)
        return
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):]
        if path.startswith("/"):
            path = path[1:]  # sqlite:///relative/file, sqlite:////absolute/file
        if not path:
            raise ValueError(f"{url!r} names no file; use sqlite:///relative/path or sqlite:////absolute/path")
        store = await SQLiteStore.open(path, max_record_bytes=max_record_bytes)
        try:
            yield store
        finally:
            await store.aclose()
        return
    if url.startswith(("redis://", "rediss://", "unix://")):
        from .redis import RedisStore

        async with RedisStore(url, max_record_bytes=max_record_bytes) as redis_store:
            yield redis_store
        return
    raise ValueError(f"unknown task store URL {url!r}; expected memory:, sqlite:///path or redis://host:port/db")


__all__ += ["StoreUnavailable"]
