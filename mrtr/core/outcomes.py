"""What running a handler ends in, whichever driver ran it.

:class:`Completed` (the handler finished), :class:`InputRequired` (it asked what has
no answer yet) and :class:`Detached` (asked to stop before a Step, it stopped there):
the replay (:mod:`mrtr.core.replay`) returns all three, the live driver
(:mod:`mrtr.core.live`) the first, and every carrier reads them.
"""

from __future__ import annotations

from typing import Any

from .effects import Request
from .ledger import Ledger

__all__ = ["Completed", "InputRequired", "Detached"]


class Completed:
    """The handler finished; ``result`` is what it returned (or, for an async generator, yielded last)."""

    __slots__ = ("result",)

    def __init__(self, result: Any) -> None:
        self.result = result

    def __repr__(self) -> str:
        return f"Completed({self.result!r})"


class InputRequired:
    """The handler needs answers: ``requests`` maps wire keys to the pending requests.

    ``ledger`` is the ledger to carry into the next round: every slot reached so far,
    with the new pending ones appended and this round's answers and Step results kept.
    """

    __slots__ = ("requests", "ledger")

    def __init__(self, requests: dict[str, Request], ledger: Ledger) -> None:
        self.requests = requests
        self.ledger = ledger

    def to_wire(self) -> dict[str, dict[str, Any]]:
        """The ``inputRequests`` object for these requests."""
        return {key: request.to_wire() for key, request in self.requests.items()}

    def __repr__(self) -> str:
        return f"InputRequired({self.requests!r})"


class Detached:
    """The handler reached a Step that has not run yet and the caller asked to stop there.

    ``ledger`` holds every answer and Step result so far, plus the Step's position,
    pending: a carrier that runs the rest elsewhere (a task) replays from it.
    """

    __slots__ = ("ledger",)

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def __repr__(self) -> str:
        return f"Detached({self.ledger!r})"
