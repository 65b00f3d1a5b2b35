"""Recorded 2025 calls in SQLite: the workers of one machine adopt each other's calls.

Four tables beside the task tables, in the same file (:class:`SQLiteCalls` is a
:class:`~mrtr.carriers.tasks.sqlite.SQLiteStore` with them):

- ``mrtr_calls``, one row per call: its holder, version, request (``meta``), state, the
  position of its last event and their bytes, whether it ended, its expiry;
- ``mrtr_call_names``: the names that lead to a call within its session, ``q:<id>`` for
  each question it waits on, ``a:<id>`` for an answer that arrived (with the answer),
  ``r:<id>`` for the client's request;
- ``mrtr_call_events``: its stream's kept events;
- ``mrtr_nodes``: each process's lease (and, for a supervised worker, its slot).

And ``mrtr_session_copies``: what a 2025 session negotiated, so the process that
replaces a worker that died serves that worker's sessions (:class:`SessionCopies`).

Every operation is one transaction (``BEGIN IMMEDIATE``) in a worker thread, so the
compare-and-set of a write and the claim of an adopter are atomic across processes.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ...core.calls import AnswerRoute, Stored
from .calls import FINISHED_TTL, KEPT_EVENTS, MAX_EVENT_BYTES, Claim, Created
from .sqlite import SQLiteStore, transaction

__all__ = ["SQLiteCalls"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS mrtr_calls (
        session TEXT NOT NULL, stream TEXT NOT NULL, holder TEXT NOT NULL, version INTEGER NOT NULL,
        request TEXT NOT NULL, meta BLOB, state BLOB, last INTEGER NOT NULL, bytes INTEGER NOT NULL,
        done INTEGER NOT NULL, expires REAL NOT NULL, PRIMARY KEY (session, stream))""",
    "CREATE INDEX IF NOT EXISTS mrtr_calls_expiry ON mrtr_calls (expires)",
    """CREATE TABLE IF NOT EXISTS mrtr_call_names (
        session TEXT NOT NULL, name TEXT NOT NULL, stream TEXT NOT NULL, value BLOB, PRIMARY KEY (session, name))""",
    "CREATE INDEX IF NOT EXISTS mrtr_call_names_stream ON mrtr_call_names (session, stream)",
    """CREATE TABLE IF NOT EXISTS mrtr_call_events (
        session TEXT NOT NULL, stream TEXT NOT NULL, position INTEGER NOT NULL, data BLOB NOT NULL,
        PRIMARY KEY (session, stream, position))""",
    "CREATE TABLE IF NOT EXISTS mrtr_nodes (id TEXT PRIMARY KEY, slot TEXT, expires REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS mrtr_session_copies (id TEXT PRIMARY KEY, record BLOB NOT NULL, expires REAL NOT NULL)",
)
_SWEEP = 10.0  # seconds between two deletions of every expired call


class SQLiteCalls(SQLiteStore):
    """Recorded calls (:class:`~mrtr.carriers.tasks.calls.CallStore`) and session copies in one SQLite file."""

    _next_sweep = 0.0

    def _connect(self) -> None:
        super()._connect()
        assert self._db is not None
        with transaction(self._db):
            for statement in _SCHEMA:
                self._db.execute(statement)

    # -- calls ------------------------------------------------------------------------------

    async def write(self, session: str, stream: str, *, node: str, version: int, created: Created | None,
                    state: bytes | None, pending: list[str] | None, events: list[tuple[int, bytes]], done: bool,
                    ttl: float) -> int:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.write`."""

        def write(db: sqlite3.Connection) -> int:
            now = self._clock()
            expires = now + (FINISHED_TTL if done else ttl)
            with transaction(db):
                self._sweep(db, now)
                if created is not None:
                    try:
                        db.execute("INSERT INTO mrtr_calls VALUES (?, ?, ?, 1, ?, ?, NULL, 0, 0, 0, ?)",
                                   (session, stream, node, created.request.decode(), created.meta, expires))
                    except sqlite3.IntegrityError:
                        return 0
                    db.execute("INSERT OR REPLACE INTO mrtr_call_names VALUES (?, ?, ?, NULL)",
                               (session, "r:" + created.request.decode(), stream))
                    current = 1
                else:
                    cursor = db.execute(
                        "UPDATE mrtr_calls SET version = version + 1 WHERE session = ? AND stream = ? AND holder = ? "
                        "AND version = ? AND done = 0 AND expires >= ?", (session, stream, node, version, now))
                    if cursor.rowcount != 1:
                        return 0
                    current = version + 1
                if state is not None:
                    db.execute("UPDATE mrtr_calls SET state = ? WHERE session = ? AND stream = ?",
                               (state, session, stream))
                if pending is not None:
                    db.execute("DELETE FROM mrtr_call_names WHERE session = ? AND stream = ? AND "
                               "(name LIKE 'q:%' OR name LIKE 'a:%')", (session, stream))
                    db.executemany("INSERT OR REPLACE INTO mrtr_call_names VALUES (?, ?, ?, NULL)",
                                   [(session, "q:" + question, stream) for question in pending])
                last, size = db.execute("SELECT last, bytes FROM mrtr_calls WHERE session = ? AND stream = ?",
                                        (session, stream)).fetchone()
                fresh = [(session, stream, position, data) for position, data in events if position > last]
                if fresh:
                    db.executemany("INSERT OR REPLACE INTO mrtr_call_events VALUES (?, ?, ?, ?)", fresh)
                    last = fresh[-1][2]
                    size += sum(len(row[3]) for row in fresh)
                    size = _trim(db, session, stream, size)
                db.execute("UPDATE mrtr_calls SET last = ?, bytes = ?, expires = ? WHERE session = ? AND stream = ?",
                           (last, size, expires, session, stream))
                if done:
                    db.execute("UPDATE mrtr_calls SET done = 1, state = NULL, meta = NULL, holder = '' "
                               "WHERE session = ? AND stream = ?", (session, stream))
                    db.execute("DELETE FROM mrtr_call_names WHERE session = ? AND stream = ?", (session, stream))
            return current

        return await self._run(write)

    async def claim(self, session: str, stream: str, node: str) -> Claim | None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.claim`."""

        def claim(db: sqlite3.Connection) -> Claim | None:
            now = self._clock()
            with transaction(db):
                row = db.execute("SELECT holder, version, meta, state, last, done FROM mrtr_calls "
                                 "WHERE session = ? AND stream = ? AND expires >= ?", (session, stream, now)).fetchone()
                if row is None:
                    return None
                holder, version, meta, state, last, done = row
                events = _events(db, session, stream)
                if done:
                    return Claim("done", events=events, last=last)
                if holder and holder != node and _alive(db, holder, now):
                    return Claim("held", holder=holder, last=last)
                db.execute("UPDATE mrtr_calls SET holder = ?, version = version + 1 WHERE session = ? AND stream = ?",
                           (node, session, stream))
                answers = {name[2:]: value for name, value in db.execute(
                    "SELECT name, value FROM mrtr_call_names WHERE session = ? AND stream = ? AND name LIKE 'a:%'",
                    (session, stream))}
            return Claim("claimed", version + 1, bytes(meta or b"{}"), bytes(state or b""), answers, events, last)

        return await self._run(claim)

    async def release(self, session: str, stream: str, node: str, version: int) -> int:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.release`."""

        def release(db: sqlite3.Connection) -> int:
            cursor = db.execute("UPDATE mrtr_calls SET holder = '', version = version + 1 WHERE session = ? "
                                "AND stream = ? AND holder = ? AND version = ? AND done = 0",
                                (session, stream, node, version))
            return version + 1 if cursor.rowcount == 1 else 0

        return await self._run(release)

    async def read(self, session: str, stream: str) -> Stored | None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.read`."""

        def read(db: sqlite3.Connection) -> Stored | None:
            now = self._clock()
            row = db.execute("SELECT holder, last, done FROM mrtr_calls WHERE session = ? AND stream = ? "
                             "AND expires >= ?", (session, stream, now)).fetchone()
            if row is None:
                return None
            holder, last, done = row
            return Stored(_events(db, session, stream), last, bool(done), holder,
                          bool(holder) and _alive(db, holder, now))

        return await self._run(read)

    async def answer(self, session: str, question: str, message: bytes) -> AnswerRoute | None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.answer`."""

        def answer(db: sqlite3.Connection) -> AnswerRoute | None:
            now = self._clock()
            with transaction(db):
                row = db.execute("SELECT stream FROM mrtr_call_names WHERE session = ? AND name = ?",
                                 (session, "q:" + question)).fetchone()
                if row is None:
                    return None
                stream = row[0]
                db.execute("INSERT OR IGNORE INTO mrtr_call_names VALUES (?, ?, ?, ?)",
                           (session, "a:" + question, stream, message))
                found = db.execute("SELECT holder FROM mrtr_calls WHERE session = ? AND stream = ?",
                                   (session, stream)).fetchone()
            holder = found[0] if found is not None else ""
            return AnswerRoute(stream, holder, bool(holder) and _alive(db, holder, now))

        return await self._run(answer)

    async def find(self, session: str, request: str) -> str | None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.find`."""

        def find(db: sqlite3.Connection) -> str | None:
            row = db.execute("SELECT stream FROM mrtr_call_names WHERE session = ? AND name = ?",
                             (session, "r:" + request)).fetchone()
            return None if row is None else str(row[0])

        return await self._run(find)

    async def forget(self, session: str) -> None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.forget`."""

        def forget(db: sqlite3.Connection) -> None:
            with transaction(db):
                for table in ("mrtr_calls", "mrtr_call_names", "mrtr_call_events"):
                    db.execute(f"DELETE FROM {table} WHERE session = ?", (session,))

        await self._run(forget)

    async def hold_lease(self, node: str, slot: str | None, lease: float) -> None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.hold_lease`."""

        def renew(db: sqlite3.Connection) -> None:
            with transaction(db):
                if slot is not None:
                    db.execute("DELETE FROM mrtr_nodes WHERE slot = ? AND id != ?", (slot, node))
                    db.execute("INSERT OR REPLACE INTO mrtr_nodes VALUES (?, ?, ?)",
                               (node, slot, self._clock() + lease))
                else:
                    cursor = db.execute("UPDATE mrtr_nodes SET expires = ? WHERE id = ?", (self._clock() + lease, node))
                    if cursor.rowcount == 0:
                        db.execute("INSERT INTO mrtr_nodes VALUES (?, NULL, ?)", (node, self._clock() + lease))

        await self._run(renew)

    async def end_lease(self, node: str) -> None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.end_lease`."""
        await self._run(lambda db: db.execute("DELETE FROM mrtr_nodes WHERE id = ?", (node,)))

    def _sweep(self, db: sqlite3.Connection, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + _SWEEP
        expired = db.execute("SELECT session, stream FROM mrtr_calls WHERE expires < ?", (now,)).fetchall()
        for session, stream in expired:
            db.execute("DELETE FROM mrtr_call_names WHERE session = ? AND stream = ?", (session, stream))
            db.execute("DELETE FROM mrtr_call_events WHERE session = ? AND stream = ?", (session, stream))
        db.execute("DELETE FROM mrtr_calls WHERE expires < ?", (now,))
        db.execute("DELETE FROM mrtr_nodes WHERE expires < ?", (now - 3600,))
        db.execute("DELETE FROM mrtr_session_copies WHERE expires < ?", (now,))

    # -- session copies -------------------------------------------------------------------------

    async def save_session(self, session: str, record: bytes, ttl: float) -> None:
        """Keep what a session negotiated ``ttl`` seconds (see :class:`~mrtr.server.calls.SessionCopies`)."""
        await self._run(lambda db: db.execute("INSERT OR REPLACE INTO mrtr_session_copies VALUES (?, ?, ?)",
                                              (session, record, self._clock() + ttl)))

    async def load_session(self, session: str) -> bytes | None:
        """The copy of a session, or ``None`` (never kept, expired, or the session ended)."""

        def load(db: sqlite3.Connection) -> bytes | None:
            row = db.execute("SELECT record FROM mrtr_session_copies WHERE id = ? AND expires >= ?",
                             (session, self._clock())).fetchone()
            return None if row is None else bytes(row[0])

        return await self._run(load)

    async def delete_session(self, session: str) -> None:
        """Forget the copy of a session (it ended)."""
        await self._run(lambda db: db.execute("DELETE FROM mrtr_session_copies WHERE id = ?", (session,)))


def _events(db: sqlite3.Connection, session: str, stream: str) -> list[tuple[int, bytes]]:
    return [(int(position), bytes(data)) for position, data in db.execute(
        "SELECT position, data FROM mrtr_call_events WHERE session = ? AND stream = ? ORDER BY position",
        (session, stream))]


def _alive(db: sqlite3.Connection, node: str, now: float) -> bool:
    row = db.execute("SELECT expires FROM mrtr_nodes WHERE id = ?", (node,)).fetchone()
    return row is not None and row[0] >= now


def _trim(db: sqlite3.Connection, session: str, stream: str, size: int) -> int:
    """Drop the oldest kept events past the bounds; the bytes left."""
    rows = db.execute("SELECT position, length(data) FROM mrtr_call_events WHERE session = ? AND stream = ? "
                      "ORDER BY position", (session, stream)).fetchall()
    dropped: list[Any] = []
    count = len(rows)
    for position, length in rows:
        if count <= 1 or (count <= KEPT_EVENTS and size <= MAX_EVENT_BYTES):
            break
        dropped.append((session, stream, position))
        count -= 1
        size -= length
    if dropped:
        db.executemany("DELETE FROM mrtr_call_events WHERE session = ? AND stream = ? AND position = ?", dropped)
    return size

