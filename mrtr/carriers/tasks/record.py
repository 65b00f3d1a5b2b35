"""The records a store keeps: tasks (everything about one task, and its wire shape) and rounds.

A task record is immutable; every change is a new record with ``version`` one higher,
and a store accepts it only if the version it holds is still the one the change was
based on (compare-and-set). That one rule is what makes a resume happen once when
several updates race, and what keeps a terminal state from ever changing.

A round record (:class:`RoundRecord`) is the store's other kind: a round that must run
once (see :mod:`mrtr.carriers.tasks.rounds`), claimed while its first attempt runs and
settled with its outcome, kept until its token expires.
"""

from __future__ import annotations

import datetime
import secrets
from typing import Any, Literal

import msgspec

from ...core.errors import InvalidParams
from ...core.ledger import Ledger, Slot

__all__ = ["Status", "TERMINAL", "TaskRecord", "TaskTooLarge", "RoundRecord", "MAX_RECORD_BYTES", "new_task_id",
           "encode", "decode", "decode_round", "restore", "iso"]

MAX_RECORD_BYTES = 1 << 20
"""The default cap on one encoded task record (1 MiB): arguments, ledger, pending requests and outcome together."""

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
"""The five task states of the tasks extension."""

TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
"""States a task never leaves."""


def new_task_id() -> str:
    """128 random bits, URL-safe: unguessable, so a task id is not an authorization by itself either."""
    return secrets.token_urlsafe(16)


def iso(timestamp: float) -> str:
    """An epoch timestamp as an ISO 8601 UTC string with millisecond precision."""
    moment = datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TaskRecord(msgspec.Struct, kw_only=True, frozen=True):
    """One task as a store holds it.

    ``ledger`` is the same slot list the token carrier seals in a token; ``input_requests``
    holds the wire form of every request still pending while ``input_required``;
    ``fresh`` the ledger positions answered since the handler last ran (their content
    is checked against the asked schema when the replay reaches them).
    ``lease_owner``/``lease_expiry`` name the node running the task while ``working``;
    an expired lease lets another node take the task over. ``expires_at`` is the
    absolute end of the task's life (``None``: kept until deleted), ``ttl_ms`` after its
    last activity (see :meth:`lifetime_end`); every write moves it. ``scopes`` are the
    OAuth scopes the tool needed when the task was created: every task method needs
    them too (empty for records stored before they were kept). ``handler_version`` is
    the version of the handler that started the task (:func:`mrtr.core.versions.handler_version`;
    ``None`` for records stored before it was kept): a replay mismatch after a deploy says
    so, and ``tasks/get`` never shows it. ``refused_answer`` is why the run refused the last
    answer to the question the task asks again (its ``status_message`` says so to the
    client; the next answer clears both), ``None`` otherwise. Times are epoch seconds.
    """

    task_id: str
    tool: str
    arguments: dict[str, Any]
    principal: str | None
    client_capabilities: dict[str, Any]
    created_at: float
    updated_at: float
    ttl_ms: int | None
    poll_interval_ms: int
    status: Status = "working"
    status_message: str | None = None
    ledger: tuple[Slot, ...] = ()
    fresh: tuple[int, ...] = ()
    input_requests: dict[str, Any] = {}
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    lease_owner: str | None = None
    lease_expiry: float = 0.0
    expires_at: float | None = None
    version: int = 1
    scopes: tuple[str, ...] = ()
    handler_version: str | None = None
    refused_answer: str | None = None

    @property
    def terminal(self) -> bool:
        """Completed, failed or cancelled: no later change is accepted."""
        return self.status in TERMINAL

    def lifetime_end(self, now: float) -> float | None:
        """When a task written at ``now`` stops existing: ``ttl_ms`` after its last activity.

        The activity is the write itself, except while ``working``: then the runner's
        lease counts too, so a task is never dropped while a node runs it (each renewal
        moves it on), and one whose runner died stays for ``ttl_ms`` after the lease ran
        out, for another node to take over. A task waiting for input lives ``ttl_ms`` from
        its last update, a finished one ``ttl_ms`` from its end. ``None``: no limit.
        """
        if self.ttl_ms is None:
            return None
        active = max(now, self.lease_expiry) if self.status == "working" else now
        return active + self.ttl_ms / 1000

    def with_lifetime(self, now: float) -> TaskRecord:
        """This record with ``expires_at`` set for a write at ``now``."""
        return msgspec.structs.replace(self, expires_at=self.lifetime_end(now))

    def expired(self, now: float) -> bool:
        """Past its TTL: stores treat it as unknown."""
        end = self.expires_at
        return end is not None and now > end

    def lease_free(self, now: float) -> bool:
        """Working and nobody holds a live lease: any node may take it."""
        return self.status == "working" and self.lease_expiry <= now

    def evolve(self, now: float, **changes: Any) -> TaskRecord:
        """The next version of this record with ``changes`` applied, its life counted from ``now``."""
        changed = msgspec.structs.replace(self, updated_at=now, version=self.version + 1, **changes)
        return changed.with_lifetime(now)

    def renewed(self, now: float, lease_expiry: float) -> TaskRecord:
        """The next version with only the lease moved to ``lease_expiry`` (and the task's life with it).

        What :meth:`TaskStore.renew` writes: nothing a client sees changes, so neither
        does ``updated_at`` (``lastUpdatedAt``).
        """
        changed = msgspec.structs.replace(self, lease_expiry=lease_expiry, version=self.version + 1)
        return changed.with_lifetime(now)

    def restored_ledger(self) -> Ledger:
        """The ledger to replay against."""
        return Ledger(self.ledger, frozenset(self.fresh))

    def to_wire(self) -> dict[str, Any]:
        """The ``DetailedTask`` object (``tasks/get``, ``notifications/tasks``); never a ``requestState``."""
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": iso(self.created_at),
            "lastUpdatedAt": iso(self.updated_at),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status_message is not None:
            task["statusMessage"] = self.status_message
        if self.status == "input_required":
            task["inputRequests"] = self.input_requests
        elif self.status == "completed":
            task["result"] = self.result if self.result is not None else {}
        elif self.status == "failed":
            task["error"] = self.error if self.error is not None else {"code": -32603, "message": "Internal error"}
        return task


class TaskTooLarge(InvalidParams):
    """A write would store a record over its store's size cap (``-32602``, HTTP 400); nothing was written.

    Raised to the caller whose input made it too large (the call that creates the task,
    a ``tasks/update`` with large answers); a run whose Step result or outcome is too
    large fails its task with it instead (see :class:`~mrtr.tasks.TaskCarrier`).
    ``data`` carries ``size`` and ``limit`` in bytes.
    """

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"Task too large: its record would take {size} bytes, over the limit of {limit} bytes",
                         data={"size": size, "limit": limit})
        self.size = size
        self.limit = limit


class RoundRecord(msgspec.Struct, kw_only=True, frozen=True):
    """One round that runs once, as a store holds it under ``key`` until ``expires_at``.

    ``key`` and ``answers`` are the digests of the round's token and answers
    (:class:`~mrtr.carriers.contract.RoundKey`); ``claim`` names the attempt that holds
    or held it (random per attempt); ``lease_expiry`` is how long that attempt is
    known to be alive (it renews the lease while it runs). Unsettled, the record is a
    claim; settled, it holds the round's ``result`` object or its JSON-RPC ``error``.
    Times are epoch seconds.
    """

    key: str
    answers: str
    claim: str
    lease_expiry: float
    expires_at: float
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def settled(self) -> bool:
        """Whether the round ran to an end and its outcome is recorded."""
        return self.result is not None or self.error is not None

    def expired(self, now: float) -> bool:
        """Past its token's life: stores treat it as absent."""
        return now > self.expires_at


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(TaskRecord)
_round_decoder = msgspec.json.Decoder(RoundRecord)


def encode(record: TaskRecord | RoundRecord, limit: int | None = None) -> bytes:
    """A record as JSON bytes (what the stores keep); :class:`TaskTooLarge` when longer than ``limit``.

    The one place the size cap is checked: every store encodes each record it writes
    here, so no path (creation, update, Step save, outcome, takeover, a round's
    outcome) can store more.
    """
    data = _encoder.encode(record)
    if limit is not None and len(data) > limit:
        raise TaskTooLarge(len(data), limit)
    return data


def decode(data: bytes | str) -> TaskRecord:
    """The record ``encode`` produced."""
    return _decoder.decode(data)


def decode_round(data: bytes | str) -> RoundRecord:
    """The round record ``encode`` produced."""
    return _round_decoder.decode(data)


def restore(body: bytes | str, version: int, lease_expiry: float, expires_at: float | None) -> TaskRecord:
    """A record as a store keeps it: the body of its last full write, with the lease fields kept beside it.

    A renewal (:meth:`TaskRecord.renewed`) writes only ``version``, ``lease_expiry``
    and ``expires_at``; they are stored apart from the body so a renewal never rewrites
    it, and win over the body's copies when the record is read.
    """
    return msgspec.structs.replace(decode(body), version=version, lease_expiry=lease_expiry, expires_at=expires_at)
