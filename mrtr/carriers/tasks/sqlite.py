"""The SQLite store: the embedded default, durable, safe for several processes on one host.

WAL mode lets readers run beside the one writer; every change is one transaction whose
first statement is the compare-and-set on the version, so SQLite's own locking makes it
atomic across processes. A record's small fields (version, status, lease, expiry) and
its body live in two tables: a lease renewal updates one short row, where updating a
column of a row that holds a large body rewrites pages of it. Round records (rounds
that run once) are a third table, one row per key, whose insert-if-absent is the
claim. Token buckets are a fourth, one row per bucket, read, refilled and taken from in
one transaction, and deleted once full again. Calls run in a worker thread
(``trio.to_thread``) so a busy database never stalls the event loop.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self, TypeVar

import msgspec
import trio

from .record import MAX_RECORD_BYTES, RoundRecord, TaskRecord, decode_round, encode, restore
from .store import StoreUnavailable, TaskExists, masked, refilled, store_failed

__all__ = ["SQLiteStore"]

T = TypeVar("T")

_TASKS = """
CREATE TABLE IF NOT EXISTS mrtr_tasks (
    id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    status TEXT NOT NULL,
    lease_expiry REAL NOT NULL,
    expires_at REAL
)"""
_LEASE_INDEX = "CREATE INDEX IF NOT EXISTS mrtr_tasks_lease ON mrtr_tasks (status, lease_expiry)"
_BODIES = "CREATE TABLE IF NOT EXISTS mrtr_task_bodies (id TEXT PRIMARY KEY, body BLOB NOT NULL)"
_ROUNDS = """
CREATE TABLE IF NOT EXISTS mrtr_rounds (
    key TEXT PRIMARY KEY,
    claim TEXT NOT NULL,
    settled INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    body BLOB NOT NULL
)"""
_ROUNDS_EXPIRY = "CREATE INDEX IF NOT EXISTS mrtr_rounds_expiry ON mrtr_rounds (expires_at)"
_ROUND_SWEEP = 10.0  # seconds between two deletions of every expired round
_BUCKETS = """
CREATE TABLE IF NOT EXISTS mrtr_buckets (
    key TEXT PRIMARY KEY,
    tokens REAL NOT NULL,
    at REAL NOT NULL,
    full_at REAL NOT NULL
)"""
_BUCKETS_FULL = "CREATE INDEX IF NOT EXISTS mrtr_buckets_full ON mrtr_buckets (full_at)"
_BUCKET_SWEEP = 10.0  # seconds between two deletions of every bucket full again


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taking the write lock at once (so a compare-and-set never has to upgrade it)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if db.in_transaction:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the original error says more; SQLite may have rolled back already
        raise
    db.execute("COMMIT")


def _create_schema(db: sqlite3.Connection) -> None:
    with transaction(db):
        columns = [row[1] for row in db.execute("PRAGMA table_info(mrtr_tasks)")]
        db.execute(_BODIES)
        if "body" in columns:  # a file of the first layout, body beside the lease: move the bodies out
            db.execute("INSERT OR REPLACE INTO mrtr_task_bodies SELECT id, body FROM mrtr_tasks")
            db.execute("ALTER TABLE mrtr_tasks RENAME TO mrtr_tasks_old")
            db.execute("DROP INDEX IF EXISTS mrtr_tasks_lease")
            db.execute(_TASKS)
            db.execute("INSERT INTO mrtr_tasks "
                       "SELECT id, version, status, lease_expiry, expires_at FROM mrtr_tasks_old")
            db.execute("DROP TABLE mrtr_tasks_old")
        db.execute(_TASKS)
        db.execute(_LEASE_INDEX)
        db.execute(_ROUNDS)
        db.execute(_ROUNDS_EXPIRY)
        db.execute(_BUCKETS)
        db.execute(_BUCKETS_FULL)


def _drop_expired(db: sqlite3.Connection, now: float, task_id: str | None = None) -> None:
    only = "" if task_id is None else " AND id = ?"
    args = (now,) if task_id is None else (now, task_id)
    db.execute(f"DELETE FROM mrtr_task_bodies WHERE id IN (SELECT id FROM mrtr_tasks WHERE expires_at < ?{only})", args)
    db.execute(f"DELETE FROM mrtr_tasks WHERE expires_at < ?{only}", args)


_BUSY_TIMEOUT = 30.0  # seconds a statement waits for another process's lock


class SQLiteStore:
    """Task records in one SQLite file; open with :meth:`open`.

    ``clock`` gives the time (epoch seconds) that decides whether a record has expired.
    """

    def __init__(self, path: str | Path, *, max_record_bytes: int = MAX_RECORD_BYTES,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self.max_record_bytes = max_record_bytes
        self._clock = clock
        self._db: sqlite3.Connection | None = None
        self._next_round_sweep = 0.0
        self._next_bucket_sweep = 0.0
        # One connection, used by one thread at a time; other processes have their own.
        self._limiter = trio.CapacityLimiter(1)

    @classmethod
    async def open(cls, path: str | Path, *, max_record_bytes: int = MAX_RECORD_BYTES,
                   clock: Callable[[], float] = time.time) -> Self:
        """Open (creating if needed) the database; :class:`StoreUnavailable` if that fails."""
        store = cls(path, max_record_bytes=max_record_bytes, clock=clock)
        try:
            await trio.to_thread.run_sync(store._connect, limiter=store._limiter)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"task store {masked(store.url)} cannot be opened: {exc}") from None
        return store

    def _connect(self) -> None:
        db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
        # Two nodes opening one file at once can both hold its shared lock and both need the exclusive
        # one to switch it to WAL: SQLite refuses one at once ("database is locked") rather than let
        # them wait on each other, so that one tries again (in this worker thread) until the timeout.
        deadline = time.monotonic() + _BUSY_TIMEOUT
        while True:
            try:
                db.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    db.close()
                    raise
                time.sleep(0.05)
        db.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL mode
        _create_schema(db)
        self._db = db

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        db = self._db
        if db is None:
            raise StoreUnavailable(f"task store {masked(self.url)} is closed")

        def call() -> T:
            # Every sqlite3 error is the store's, not only OperationalError (locked, read-only, disk
            # full): a corrupt file raises DatabaseError, an unreadable record a decoding error.
            try:
                return fn(db)
            except (sqlite3.Error, OSError, msgspec.DecodeError) as exc:
                raise store_failed(self.url, exc) from None

        return await trio.to_thread.run_sync(call, limiter=self._limiter)

    async def create(self, record: TaskRecord) -> None:
        """See :meth:`TaskStore.create`."""
        body = encode(record, self.max_record_bytes)
        row = (record.task_id, record.version, record.status, record.lease_expiry, record.expires_at)

        def insert(db: sqlite3.Connection) -> bool:
            with transaction(db):
                _drop_expired(db, self._clock(), record.task_id)
                try:
                    db.execute("INSERT INTO mrtr_tasks VALUES (?, ?, ?, ?, ?)", row)
                except sqlite3.IntegrityError:
                    return False
                db.execute("INSERT OR REPLACE INTO mrtr_task_bodies VALUES (?, ?)", (record.task_id, body))
            return True

        if not await self._run(insert):
            raise TaskExists(record.task_id)

    async def get(self, task_id: str) -> TaskRecord | None:
        """See :meth:`TaskStore.get`."""

        def select(db: sqlite3.Connection) -> TaskRecord | None:
            row = db.execute(
                "SELECT b.body, t.version, t.lease_expiry, t.expires_at FROM mrtr_tasks t "
                "JOIN mrtr_task_bodies b ON b.id = t.id WHERE t.id = ? AND (t.expires_at IS NULL OR t.expires_at >= ?)",
                (task_id, self._clock()),
            ).fetchone()
            return None if row is None else restore(*row)

        return await self._run(select)

    async def replace(self, record: TaskRecord) -> bool:
        """See :meth:`TaskStore.replace`: a conditional UPDATE on the version, then the body, in one transaction."""
        body = encode(record, self.max_record_bytes)
        values = (record.version, record.status, record.lease_expiry, record.expires_at, record.task_id,
                  record.version - 1)

        def update(db: sqlite3.Connection) -> bool:
            with transaction(db):
                cursor = db.execute(
                    "UPDATE mrtr_tasks SET version = ?, status = ?, lease_expiry = ?, expires_at = ? "
                    "WHERE id = ? AND version = ? AND (expires_at IS NULL OR expires_at >= ?)",
                    (*values, self._clock()),
                )
                if cursor.rowcount != 1:
                    return False
                db.execute("UPDATE mrtr_task_bodies SET body = ? WHERE id = ?", (body, record.task_id))
            return True

        return await self._run(update)

    async def renew(self, record: TaskRecord) -> bool:
        """See :meth:`TaskStore.renew`: one conditional UPDATE of the short row; the body is not touched."""
        values = (record.version, record.lease_expiry, record.expires_at, record.task_id, record.version - 1)

        def update(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "UPDATE mrtr_tasks SET version = ?, lease_expiry = ?, expires_at = ? "
                "WHERE id = ? AND version = ? AND (expires_at IS NULL OR expires_at >= ?)",
                (*values, self._clock()),
            )
            return cursor.rowcount == 1

        return await self._run(update)

    async def claimable(self, now: float, limit: int = 100) -> list[str]:
        """See :meth:`TaskStore.claimable`; also drops expired records, since every node calls it now and then."""

        def select(db: sqlite3.Connection) -> list[str]:
            with transaction(db):
                _drop_expired(db, now)
            rows = db.execute(
                "SELECT id FROM mrtr_tasks WHERE status = 'working' AND lease_expiry <= ? LIMIT ?", (now, limit)
            ).fetchall()
            return [row[0] for row in rows]

        return await self._run(select)

    async def delete(self, task_id: str) -> None:
        """See :meth:`TaskStore.delete`."""

        def remove(db: sqlite3.Connection) -> None:
            with transaction(db):
                db.execute("DELETE FROM mrtr_task_bodies WHERE id = ?", (task_id,))
                db.execute("DELETE FROM mrtr_tasks WHERE id = ?", (task_id,))

        await self._run(remove)

    async def in_flight(self) -> list[str]:
        """See :meth:`TaskStore.in_flight`."""

        def select(db: sqlite3.Connection) -> list[str]:
            rows = db.execute(
                "SELECT id FROM mrtr_tasks WHERE status IN ('working', 'input_required') "
                "AND (expires_at IS NULL OR expires_at >= ?) ORDER BY id", (self._clock(),)
            ).fetchall()
            return [row[0] for row in rows]

        return await self._run(select)

    async def claim_round(self, record: RoundRecord) -> RoundRecord | None:
        """See :meth:`TaskStore.claim_round`: an insert that does nothing where a live row is, in one transaction."""
        body = encode(record, self.max_record_bytes)

        def insert(db: sqlite3.Connection) -> RoundRecord | None:
            now = self._clock()
            with transaction(db):
                if now >= self._next_round_sweep:  # rounds nobody retries are never read again
                    self._next_round_sweep = now + _ROUND_SWEEP
                    db.execute("DELETE FROM mrtr_rounds WHERE expires_at < ?", (now,))
                else:
                    db.execute("DELETE FROM mrtr_rounds WHERE key = ? AND expires_at < ?", (record.key, now))
                cursor = db.execute("INSERT OR IGNORE INTO mrtr_rounds VALUES (?, ?, 0, ?, ?)",
                                    (record.key, record.claim, record.expires_at, body))
                if cursor.rowcount == 1:
                    return None
                row = db.execute("SELECT body FROM mrtr_rounds WHERE key = ?", (record.key,)).fetchone()
            return decode_round(row[0])

        return await self._run(insert)

    async def get_round(self, key: str) -> RoundRecord | None:
        """See :meth:`TaskStore.get_round`."""

        def select(db: sqlite3.Connection) -> RoundRecord | None:
            row = db.execute("SELECT body FROM mrtr_rounds WHERE key = ? AND expires_at >= ?",
                             (key, self._clock())).fetchone()
            return None if row is None else decode_round(row[0])

        return await self._run(select)

    async def settle_round(self, record: RoundRecord) -> bool:
        """See :meth:`TaskStore.settle_round`: one UPDATE conditional on the claim."""
        body = encode(record, self.max_record_bytes)

        def update(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "UPDATE mrtr_rounds SET settled = ?, expires_at = ?, body = ? "
                "WHERE key = ? AND claim = ? AND settled = 0 AND expires_at >= ?",
                (int(record.settled), record.expires_at, body, record.key, record.claim, self._clock()),
            )
            return cursor.rowcount == 1

        return await self._run(update)

    async def release_round(self, key: str, claim: str) -> None:
        """See :meth:`TaskStore.release_round`."""

        def remove(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM mrtr_rounds WHERE key = ? AND claim = ? AND settled = 0", (key, claim))

        await self._run(remove)

    async def take_token(self, bucket: str, per_second: float, burst: float) -> float:
        """See :meth:`TaskStore.take_token`: the read, the refill and the take in one write transaction."""

        def take(db: sqlite3.Connection) -> float:
            now = self._clock()
            with transaction(db):
                if now >= self._next_bucket_sweep:  # a bucket full again is what no row is: drop them now and then
                    self._next_bucket_sweep = now + _BUCKET_SWEEP
                    db.execute("DELETE FROM mrtr_buckets WHERE full_at <= ?", (now,))
                row = db.execute("SELECT tokens, at, full_at FROM mrtr_buckets WHERE key = ?", (bucket,)).fetchone()
                tokens = burst if row is None or row[2] <= now else refilled(row[0], row[1], now, per_second, burst)
                if tokens < 1:
                    return (1 - tokens) / per_second
                tokens -= 1
                db.execute("INSERT OR REPLACE INTO mrtr_buckets VALUES (?, ?, ?, ?)",
                           (bucket, tokens, now, now + (burst - tokens) / per_second))
            return 0.0

        return await self._run(take)

    async def aclose(self) -> None:
        """Close the connection."""
        db, self._db = self._db, None
        if db is not None:
            await trio.to_thread.run_sync(db.close, limiter=self._limiter)
