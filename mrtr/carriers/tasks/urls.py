"""Store URLs: ``memory:``, ``sqlite:///path``, and Redis (``redis://host:port/db`` and the other shapes of
:mod:`mrtr.carriers.tasks.redis_url`); which one a process uses when none is given."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

from .memory import MemoryStore
from .redis_url import is_redis_url
from .record import MAX_RECORD_BYTES
from .sqlite import SQLiteStore
from .store import StoreUnavailable, TaskStore

__all__ = ["open_store", "DEFAULT_URL", "STORE_VARIABLES", "chosen_url"]

DEFAULT_URL = "sqlite:///mrtr-tasks.sqlite3"
"""A file in the working directory, created only when a task tool is registered."""

STORE_VARIABLES = ("MRTR_STORE", "MRTR_TASKS")
"""The environment variables naming the store, the first set one winning (``MRTR_TASKS`` is the older name)."""


def chosen_url(url: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The store someone chose: ``url`` when given, else ``MRTR_STORE``, else ``MRTR_TASKS``; ``None`` if nobody did."""
    if url:
        return url
    env = os.environ if environ is None else environ
    for name in STORE_VARIABLES:
        if env.get(name):
            return env[name]
    return None


@asynccontextmanager
async def open_store(url: str, *, max_record_bytes: int = MAX_RECORD_BYTES,
                     clock: Callable[[], float] = time.time) -> AsyncIterator[TaskStore]:
    """Open the store a URL names and check it can be used now, not on the first call.

    Raises :class:`StoreUnavailable` with the URL and the reason when it cannot be
    reached, and ``ValueError`` for a URL of no known kind. The store refuses to write
    a record longer than ``max_record_bytes`` (:class:`~mrtr.tasks.TaskTooLarge`).
    ``clock`` is the time the memory and SQLite stores expire records by; Redis expires
    them by its own.
    """
    if isinstance(max_record_bytes, bool) or not isinstance(max_record_bytes, int) or max_record_bytes < 1:
        raise ValueError(f"max_record_bytes must be a positive integer, got {max_record_bytes!r}")
    if url == "memory:" or url == "memory://":
        yield MemoryStore(max_record_bytes=max_record_bytes, clock=clock)
        return
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):]
        if path.startswith("/"):
            path = path[1:]  # sqlite:///relative/file, sqlite:////absolute/file
        if not path:
            raise ValueError(f"{url!r} names no file; use sqlite:///relative/path or sqlite:////absolute/path")
        store = await SQLiteStore.open(path, max_record_bytes=max_record_bytes, clock=clock)
        try:
            yield store
        finally:
            await store.aclose()
        return
    if is_redis_url(url):
        from .redis import open_redis_store

        async with open_redis_store(url, max_record_bytes=max_record_bytes) as redis_store:
            yield redis_store
        return
    raise ValueError(f"unknown task store URL {url!r}; expected memory:, sqlite:///path or redis://host:port/db "
                     "(also rediss://, redis+cluster://, redis+sentinel://, unix://)")


__all__ += ["StoreUnavailable"]
