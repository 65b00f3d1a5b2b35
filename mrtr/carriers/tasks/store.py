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

from ...core.errors import InternalError
from .record import TaskRecord

__all__ = ["Observed", "TaskStore", "TaskExists", "StoreUnavailable", "mutate"]


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


class Observed:
    """A store that reports every change of a task's status or status message it writes.

    It wraps another :class:`TaskStore` and calls ``on_change(record)`` after each
    successful ``create`` or ``replace`` that changed what a client sees of the task
    (status or status message); lease renewals and ledger saves stay silent. This is
    the one place task status notifications come from, whichever code path wrote the
    change (a run, ``tasks/update``, ``tasks/cancel``, a take-over). Changes written by
    other processes or nodes are not seen.
    """

    def __init__(self, store: TaskStore, on_change: Callable[[TaskRecord], None]) -> None:
        self.store = store
        self.url = store.url
        self._on_change = on_change
        self._seen: dict[str, tuple[str, str | None]] = {}  # task id -> what was last reported

    def _report(self, record: TaskRecord) -> None:
        shown = (record.status, record.status_message)
        if self._seen.get(record.task_id) == shown:
            return
        if record.terminal:
            self._seen.pop(record.task_id, None)  # a terminal state never changes again
        else:
            self._seen[record.task_id] = shown
        self._on_change(record)

    async def create(self, record: TaskRecord) -> None:
        """Create, then report the new task."""
        await self.store.create(record)
        self._report(record)

    async def get(self, task_id: str) -> TaskRecord | None:
        """As the wrapped store."""
        return await self.store.get(task_id)

    async def replace(self, record: TaskRecord) -> bool:
        """Compare-and-set, then report the change if it is one a client sees."""
        if not await self.store.replace(record):
            return False
        self._report(record)
        return True

    async def claimable(self, now: float, limit: int = 100) -> list[str]:
        """As the wrapped store."""
        return await self.store.claimable(now, limit)

    async def delete(self, task_id: str) -> None:
        """As the wrapped store."""
        self._seen.pop(task_id, None)
        await self.store.delete(task_id)

    async def aclose(self) -> None:
        """As the wrapped store."""
        await self.store.aclose()


async def mutate(
    store: TaskStore,
    task_id: str,
    change: Callable[[TaskRecord, float], TaskRecord | None],
    *,
    clock: Callable[[], float] = time.time,
) -> tuple[TaskRecord | None, bool]:
    """Apply ``change`` atomically: read, change, compare-and-set, retry on conflict.

    ``change`` gets the current record and the time, and returns the next version
    (built with :meth:`TaskRecord.evolve`) or ``None`` to leave it alone; it may run
    several times, so it must not have side effects. Returns the record as it stands
    afterwards (``None`` when unknown or expired) and whether this call changed it.
    ``clock`` gives the time in epoch seconds.
    """
    while True:
        current = await store.get(task_id)
        if current is None:
            return None, False
        now = clock()
        changed = change(current, now)
        if changed is None:
            return current, False
        if await store.replace(changed):
            return changed, True
