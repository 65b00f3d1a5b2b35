"""The SQLite store: the embedded default, durable, safe for several processes on one host.

WAL mode lets readers run beside the one writer; every change is a single statement,
so SQLite's own locking makes the compare-and-set atomic across processes. Calls run
in a worker thread (``trio.to_thread``) so a busy database never stalls the event loop.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import trio

from .record import TaskRecord, decode, encode
from .store import StoreUnavailable, TaskExists

__all__ = ["SQLiteStore"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mrtr_tasks (
    id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    status TEXT NOT NULL,
    lease_expiry REAL NOT NULL,
    expires_at REAL,
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS mrtr_tasks_lease ON mrtr_tasks (status, lease_expiry);
"""


class SQLiteStore:
    """Task records in one SQLite file; open with :meth:`open`.

    ``clock`` gives the time (epoch seconds) that decides whether a record has expired.
    """

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = str(path)
        self._clock = clock
        self.url = f"sqlite:///{self.path}"
        self._db: sqlite3.Connection | None = None
        # One connection, used by one thread at a time; other processes have their own.
        self._limiter = trio.CapacityLimiter(1)

    @classmethod
    async def open(cls, path: str | Path, *, clock: Callable[[], float] = time.time) -> SQLiteStore:
        """Open (creating if needed) the database; :class:`StoreUnavailable` if that fails."""
        store = cls(path, clock=clock)
        try:
            await trio.to_thread.run_sync(store._connect, limiter=store._limiter)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"task store {store.url} cannot be opened: {exc}") from None
        return store

    def _connect(self) -> None:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL mode
        db.executescript(_SCHEMA)
        self._db = db

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        db = self._db
        if db is None:
            raise StoreUnavailable(f"task store {self.url} is closed")

        def call() -> T:
            try:
                return fn(db)
            except sqlite3.OperationalError as exc:
                raise StoreUnavailable(f"task store {self.url} failed: {exc}") from None

        return await trio.to_thread.run_sync(call, limiter=self._limiter)

    async def create(self, record: TaskRecord) -> None:
        """See :meth:`TaskStore.create`."""
        row = (record.task_id, record.version, record.status, record.lease_expiry, record.expires_at, encode(record))

        def insert(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM mrtr_tasks WHERE id = ? AND expires_at < ?", (record.task_id, self._clock()))
            db.execute("INSERT INTO mrtr_tasks VALUES (?, ?, ?, ?, ?, ?)", row)

        try:
            await self._run(insert)
        except sqlite3.IntegrityError:
            raise TaskExists(record.task_id) from None

    async def get(self, task_id: str) -> TaskRecord | None:
        """See :meth:`TaskStore.get`."""

        def select(db: sqlite3.Connection) -> Any:
            return db.execute(
                "SELECT body FROM mrtr_tasks WHERE id = ? AND (expires_at IS NULL OR expires_at >= ?)",
                (task_id, self._clock()),
            ).fetchone()

        row = await self._run(select)
        return None if row is None else decode(row[0])

    async def replace(self, record: TaskRecord) -> bool:
        """See :meth:`TaskStore.replace`: one conditional UPDATE on the version column."""
        values = (record.version, record.status, record.lease_expiry, encode(record), record.task_id, record.version - 1)

        def update(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "UPDATE mrtr_tasks SET version = ?, status = ?, lease_expiry = ?, body = ? "
                "WHERE id = ? AND version = ? AND (expires_at IS NULL OR expires_at >= ?)",
                (*values, self._clock()),
            )
            return cursor.rowcount == 1

        return await self._run(update)

    async def claimable(self, now: float, limit: int = 100) -> list[str]:
        """See :meth:`TaskStore.claimable`; also drops expired records, since every node calls it now and then."""

        def select(db: sqlite3.Connection) -> list[str]:
            db.execute("DELETE FROM mrtr_tasks WHERE expires_at < ?", (now,))
            rows = db.execute(
                "SELECT id FROM mrtr_tasks WHERE status = 'working' AND lease_expiry <= ? LIMIT ?", (now, limit)
            ).fetchall()
            return [row[0] for row in rows]

        return await self._run(select)

    async def delete(self, task_id: str) -> None:
        """See :meth:`TaskStore.delete`."""
        await self._run(lambda db: db.execute("DELETE FROM mrtr_tasks WHERE id = ?", (task_id,)))

    async def aclose(self) -> None:
        """Close the connection."""
        db, self._db = self._db, None
        if db is not None:
            await trio.to_thread.run_sync(db.close, limiter=self._limiter)
