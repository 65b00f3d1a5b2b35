"""One store protocol, three implementations, and the compare-and-set loop over it.

A store keeps task records by id. It knows no task semantics beyond three rules:
``replace`` succeeds only if the stored version is the one the new record was based
on (compare-and-set); an expired record is unknown to every read; ``claimable``
lists working tasks whose lease has run out, so a node can take them over.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from ..errors import InternalError
from .record import TaskRecord

__all__ = ["TaskStore", "TaskExists", "StoreUnavailable", "mutate"]


class TaskExists(Exception):
    """``create`` found a record under the same id (with 128 random bits: a bug, not bad luck)."""


class StoreUnavailable(InternalError):
    """The task store cannot be reached or used; the message names the store.

    A ``-32603`` protocol error, so a request that needs the store while it is away gets
    this message rather than a bare internal error.
    """


class TaskStore(Protocol):
    """Where task records live. Every method is safe to call from concurrent tasks and nodes."""

    url: str

    async def create(self, record: TaskRecord) -> None:
        """Store a new record durably before returning; :class:`TaskExists` if the id is taken."""
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, or ``None`` when unknown or expired."""
        ...

    async def replace(self, record: TaskRecord) -> bool:
        """Store ``record`` if the stored version is ``record.version - 1``; ``False`` otherwise."""
        ...

    async def claimable(self, now: float, limit: int = 100) -> list[str]:
        """Ids of working tasks whose lease expired before ``now``."""
        ...

    async def delete(self, task_id: str) -> None:
        """Forget a task (idempotent)."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


async def mutate(
    store: TaskStore, task_id: str, change: Callable[[TaskRecord, float], TaskRecord | None]
) -> tuple[TaskRecord | None, bool]:
    """Apply ``change`` atomically: read, change, compare-and-set, retry on conflict.

    ``change`` gets the current record and the time, and returns the next version
    (built with :meth:`TaskRecord.evolve`) or ``None`` to leave it alone; it may run
    several times, so it must not have side effects. Returns the record as it stands
    afterwards (``None`` when unknown or expired) and whether this call changed it.
    """
    while True:
        current = await store.get(task_id)
        if current is None:
            return None, False
        now = time.time()
        changed = change(current, now)
        if changed is None:
            return current, False
        if await store.replace(changed):
            return changed, True
