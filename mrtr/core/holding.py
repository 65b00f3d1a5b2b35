"""Calls held live in one process between the rounds of a conversation, as a conversation's ledger names them.

A handler may start work that waits in the process that started it (the proxy's calls to
a 2025 upstream: :mod:`mrtr.bridge.held`) and record, in a Step's value, which process
holds it: a mapping with the member :data:`HELD_BY`, ``<owner>.<random>``, ``owner``
naming the worker as 2025 session ids do. A retry carrying the conversation's token can
then be sent to that worker (:meth:`mrtr.server.Server.holder_of`, which the HTTP
transport asks before dispatch when it has workers to forward to). Nothing here is I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from .kinds import Kind
from .ledger import Slot

__all__ = ["HELD_BY", "holder"]

HELD_BY = "mrtr/heldBy"
"""The member of a Step's recorded value naming the held call and the worker holding it (``<owner>.<random>``)."""

_STEP = int(Kind.STEP)


def holder(ledger: Iterable[Slot]) -> str | None:
    """The worker holding a call a ledger's Steps name, or ``None`` when they name none."""
    for slot in ledger:
        if slot.kind == _STEP and isinstance(slot.answer, dict):
            held = slot.answer.get(HELD_BY)
            if isinstance(held, str):
                owner, dot, rest = held.partition(".")
                if dot and owner and rest:
                    return owner
    return None
