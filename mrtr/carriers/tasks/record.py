"""The task record: everything a store keeps about one task, and its wire shape.

A record is immutable; every change is a new record with ``version`` one higher, and a
store accepts it only if the version it holds is still the one the change was based on
(compare-and-set). That one rule is what makes a resume happen once when several
updates race, and what keeps a terminal state from ever changing.
"""

from __future__ import annotations

import datetime
import secrets
from typing import Any, Literal

import msgspec

from ...core.ledger import Ledger, Slot

__all__ = ["Status", "TERMINAL", "TaskRecord", "new_task_id", "encode", "decode", "iso"]

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
    absolute end of the task's life (``None``: kept until deleted). ``scopes`` are the
    OAuth scopes the tool needed when the task was created: every task method needs
    them too (empty for records stored before they were kept). Times are epoch seconds.
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
    version: int = 1
    scopes: tuple[str, ...] = ()

    @property
    def terminal(self) -> bool:
        """Completed, failed or cancelled: no later change is accepted."""
        return self.status in TERMINAL

    @property
    def expires_at(self) -> float | None:
        """When the task stops existing (creation plus TTL), or ``None`` for no limit."""
        return None if self.ttl_ms is None else self.created_at + self.ttl_ms / 1000

    def expired(self, now: float) -> bool:
        """Past its TTL: stores treat it as unknown."""
        end = self.expires_at
        return end is not None and now > end

    def lease_free(self, now: float) -> bool:
        """Working and nobody holds a live lease: any node may take it."""
        return self.status == "working" and self.lease_expiry <= now

    def evolve(self, now: float, **changes: Any) -> TaskRecord:
        """The next version of this record with ``changes`` applied."""
        return msgspec.structs.replace(self, updated_at=now, version=self.version + 1, **changes)

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


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(TaskRecord)


def encode(record: TaskRecord) -> bytes:
    """A record as JSON bytes (what SQLite and Redis store)."""
    return _encoder.encode(record)


def decode(data: bytes | str) -> TaskRecord:
    """The record ``encode`` produced."""
    return _decoder.decode(data)
