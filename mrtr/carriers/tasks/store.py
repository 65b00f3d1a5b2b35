"""One store protocol, three implementations, and the compare-and-set loop over it.

A store keeps task records by id. It knows no task semantics beyond three rules:
``replace`` and ``renew`` succeed only if the stored version is the one the new record
was based on (compare-and-set); an expired record is unknown to every read;
``claimable`` lists working tasks whose lease has run out, so a node can take them over.

The same store keeps round records by key, for rounds that must run once (see
:mod:`mrtr.carriers.tasks.rounds`), under two more rules: ``claim_round`` stores a claim
only where no live record is (insert if absent), and ``settle_round`` and
``release_round`` act only on an unsettled claim of the same attempt. So one SQLite
file or one Redis serves tasks and rounds alike.

And it keeps token buckets by name (a ``RateLimit`` middleware's, :mod:`mrtr.server.ratelimit`):
``take_token`` reads a bucket, refills it for the time gone by and takes one token, in
one atomic step (a transaction on SQLite, a Lua script on Redis, on Redis's clock), so
the nodes sharing a store share the buckets. A bucket is forgotten as soon as it is full
again, which is what a bucket never seen is: the store holds only the buckets of
recent requests.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from ...core.errors import InternalError
from .record import RoundRecord, TaskRecord

__all__ = ["Observed", "TaskStore", "TaskExists", "StoreUnavailable", "mutate", "masked", "store_failed",
           "refilled"]

log = logging.getLogger("mrtr.tasks")


class TaskExists(Exception):
    """``create`` found a record under the same id (with 128 random bits: a bug, not bad luck)."""


class StoreUnavailable(InternalError):
    """The task store cannot be reached or used: every failure of a store call, of any kind.

    A ``-32603`` protocol error. What a client gets (``message``, the JSON-RPC error) is
    the same fixed text whatever went wrong: a store URL can carry a password, and its
    host, port or file path are nobody's business outside. The server-side ``detail``
    (also ``str()`` of the error, what logs and ``mrtr serve`` print) names the store
    with its password masked (see :func:`masked`) and says why.
    """

    CLIENT_MESSAGE = "Internal error: the task store is unavailable"

    def __init__(self, detail: str) -> None:
        super().__init__(self.CLIENT_MESSAGE)
        self.detail = detail

    def __str__(self) -> str:
        return self.detail


def masked(url: str) -> str:
    """``url`` with any password (in the user info or a ``password`` query parameter) shown as ``***``."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:  # not parseable as a URL: show nothing of it rather than risk a secret
        return "<unparseable store URL>"
    if "@" in url and "@" not in parts.netloc:
        # A password with an unescaped "/", "?" or "#" ends the authority early: hide all before the last "@".
        scheme, _, rest = url.partition("://")
        return f"{scheme}://***@{rest.rpartition('@')[2]}"
    shown = url  # edited in place: rebuilding would normalize the URL (sqlite:////abs loses a slash)
    if password is not None:
        userinfo, _, host = parts.netloc.rpartition("@")
        shown = shown.replace(parts.netloc, f"{userinfo.split(':', 1)[0]}:***@{host}", 1)
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if any(key.lower() == "password" for key, _ in pairs):
        query = "&".join("password=***" if key.lower() == "password" else urllib.parse.urlencode({key: value})
                         for key, value in pairs)
        shown = shown.replace("?" + parts.query, "?" + query, 1)
    return shown


def reason(exc: BaseException) -> str:
    """The text of a store client's exception; anyio reports a failed connect as a group holding the real one."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def store_failed(url: str, exc: BaseException) -> StoreUnavailable:
    """The one translation of a failed store call (any reply, I/O or decoding error) into :class:`StoreUnavailable`.

    Logged here, once per failure, with the reason and the URL masked, since the client
    is told nothing but that the store is unavailable.
    """
    error = StoreUnavailable(f"task store {masked(url)} failed: {reason(exc)}")
    log.warning("%s", error.detail)
    return error


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

    async def renew(self, record: TaskRecord) -> bool:
        """Like :meth:`replace` for a record made by :meth:`TaskRecord.renewed`, writing only its lease.

        Stores ``version``, ``lease_expiry`` and ``expires_at`` if the stored version is
        ``record.version - 1``, without rewriting the rest of the record: a running
        task's renewals cost the store a few bytes each, whatever the task's size.
        """
        ...

    async def claimable(self, now: float, limit: int = 100) -> list[str]:
        """Ids of working tasks whose lease expired before ``now``."""
        ...

    async def delete(self, task_id: str) -> None:
        """Forget a task (idempotent)."""
        ...

    async def in_flight(self) -> list[str]:
        """Ids of every task neither finished (completed, failed, cancelled) nor expired."""
        ...

    async def claim_round(self, record: RoundRecord) -> RoundRecord | None:
        """Store ``record`` (an unsettled claim) unless a live record has its key.

        Returns ``None`` when it was stored, else the live record found (a claim of
        another attempt, or a settled round). Atomic across nodes: of two claims for one
        key, one is stored.
        """
        ...

    async def get_round(self, key: str) -> RoundRecord | None:
        """The live round record under ``key``, or ``None`` (never claimed, released or expired)."""
        ...

    async def settle_round(self, record: RoundRecord) -> bool:
        """Replace the unsettled claim of ``record.key`` made by ``record.claim`` with ``record``.

        For a lease renewal (``record`` still unsettled) and for the outcome (settled).
        ``False`` when the live record is not that claim (expired, released, settled).
        """
        ...

    async def release_round(self, key: str, claim: str) -> None:
        """Drop the record under ``key`` if it is the unsettled claim ``claim`` (idempotent)."""
        ...

    async def take_token(self, bucket: str, per_second: float, burst: float) -> float:
        """Take one token from the token bucket named ``bucket``, refilled for the time gone by.

        A bucket holds at most ``burst`` tokens and gains ``per_second`` of them a second;
        one the store does not hold is full. Returns ``0.0`` when a token was there (and is
        taken now), else the seconds until one will be (and takes nothing). Atomic across
        nodes: of the requests racing for the last token, one gets it. The store forgets a
        bucket once it is full again.
        """
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def refilled(tokens: float, at: float, now: float, per_second: float, burst: float) -> float:
    """The tokens of a bucket that held ``tokens`` at ``at``, at ``now`` (never more than ``burst``).

    The rule of every store but Redis, whose script says the same in Lua.
    """
    return min(burst, tokens + max(0.0, now - at) * per_second)


class Observed:
    """A store that reports every change of a task's status or status message it writes.

    It wraps another :class:`TaskStore` and calls ``on_change(record)`` after each
    successful ``create`` or ``replace`` that changed what a client sees of the task
    (status or status message); lease renewals and ledger saves stay silent. This is
    the one place task status notifications come from, whichever code path wrote the
    change (a run, ``tasks/update``, ``tasks/cancel``, a take-over). Changes written by
    other processes or nodes are not seen.

    To stay silent on writes that change nothing a client sees, it remembers what it
    last reported of each unfinished task. That memory is bounded: a task is forgotten
    when it ends, when it expires (found by a sweep, at most once a second, of the
    entries past their ``expires_at``) and, beyond ``limit`` tasks, oldest report first.
    A forgotten task that is still alive costs at most one repeated notification.
    ``clock`` gives the time (epoch seconds) the sweep compares expiry with.
    """

    SWEEP_INTERVAL = 1.0
    """Seconds between two sweeps for expired tasks."""

    def __init__(self, store: TaskStore, on_change: Callable[[TaskRecord], None], *, limit: int = 10_000,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self._clock = clock
        self.url = store.url
        self._on_change = on_change
        self._limit = limit
        # task id -> (what was last reported, when the task expires), oldest report first
        self._seen: OrderedDict[str, tuple[tuple[str, str | None], float | None]] = OrderedDict()
        self._next_sweep = 0.0

    @property
    def tracked(self) -> int:
        """How many tasks' last reported state is remembered."""
        return len(self._seen)

    def _sweep(self) -> None:
        now = self._clock()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.SWEEP_INTERVAL
        for task_id in [task_id for task_id, (_, end) in self._seen.items() if end is not None and end < now]:
            del self._seen[task_id]

    def _remember(self, record: TaskRecord, shown: tuple[str, str | None]) -> None:
        self._seen[record.task_id] = (shown, record.expires_at)
        self._seen.move_to_end(record.task_id)
        while len(self._seen) > self._limit:
            self._seen.popitem(last=False)

    def _report(self, record: TaskRecord) -> None:
        self._sweep()
        shown = (record.status, record.status_message)
        last = self._seen.get(record.task_id)
        if last is not None and last[0] == shown:
            self._remember(record, shown)  # its life moved on
            return
        if record.terminal:
            self._seen.pop(record.task_id, None)  # a terminal state never changes again
        else:
            self._remember(record, shown)
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

    async def renew(self, record: TaskRecord) -> bool:
        """As the wrapped store: a renewal changes nothing a client sees, only how long the task lives."""
        if not await self.store.renew(record):
            return False
        last = self._seen.get(record.task_id)
        if last is not None:
            self._remember(record, last[0])
        return True

    async def claimable(self, now: float, limit: int = 100) -> list[str]:
        """As the wrapped store."""
        return await self.store.claimable(now, limit)

    async def delete(self, task_id: str) -> None:
        """As the wrapped store."""
        self._seen.pop(task_id, None)
        await self.store.delete(task_id)

    async def in_flight(self) -> list[str]:
        """As the wrapped store."""
        return await self.store.in_flight()

    async def claim_round(self, record: RoundRecord) -> RoundRecord | None:
        """As the wrapped store: rounds are no task's status."""
        return await self.store.claim_round(record)

    async def get_round(self, key: str) -> RoundRecord | None:
        """As the wrapped store."""
        return await self.store.get_round(key)

    async def settle_round(self, record: RoundRecord) -> bool:
        """As the wrapped store."""
        return await self.store.settle_round(record)

    async def release_round(self, key: str, claim: str) -> None:
        """As the wrapped store."""
        await self.store.release_round(key, claim)

    async def take_token(self, bucket: str, per_second: float, burst: float) -> float:
        """As the wrapped store: a bucket is no task's status."""
        return await self.store.take_token(bucket, per_second, burst)

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
