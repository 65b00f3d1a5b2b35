"""Store URLs: ``memory:``, ``sqlite:///path``, and Redis (``redis://host:port/db`` and the other shapes of
:mod:`mrtr.carriers.tasks.redis_url`); which one a process uses when none is given."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

from .memory import MemoryStore
from .redis_url import is_redis_url
from .record import MAX_RECORD_BYTES
from .sqlite import SQLiteStore
from .store import StoreUnavailable, TaskStore

__all__ = ["open_store", "STORE_VARIABLES", "chosen_url", "default_path", "default_url"]

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


def default_path(server_name: str, environ: Mapping[str, str] | None = None) -> Path:
    """The SQLite file of a server whose store nobody chose: one per server name, in the user's state folder.

    ``$XDG_STATE_HOME/mrtr/stores/<name>.sqlite3``, ``~/.local/state/mrtr/stores/<name>.sqlite3`` when
    ``XDG_STATE_HOME`` is unset (the XDG base directory for state that outlives a process, where
    ``mrtr call`` keeps its OAuth tokens too). Never the working directory: a server started
    from a checkout writes nothing into it. ``<name>`` is the server's name with every
    character but letters, digits, ``.``, ``_`` and ``-`` turned into ``_``, so the workers
    and restarts of one server share one file and two servers never share one.
    """
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", server_name)[:64].lstrip(".") or "server"
    return Path(base) / "mrtr" / "stores" / f"{name}.sqlite3"


def default_url(server_name: str, environ: Mapping[str, str] | None = None) -> str:
    """:func:`default_path` as a store URL (``sqlite:////absolute/path``)."""
    return f"sqlite:///{default_path(server_name, environ)}"


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
