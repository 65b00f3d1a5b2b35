"""What a 2025-era call keeps in a shared store so another process can adopt it, and who reads it.

A 2025 call's generator waits at its ``yield`` in one process (:mod:`mrtr.core.live`).
With a shared store (SQLite for the workers of one machine, Redis for nodes) the call
also records, as it goes, what a replay needs: its ledger (the answers so far and the
Step values, the slots every carrier uses), the round it waits on with the server-side
request ids it was sent under (:class:`Question`), and the events of its SSE stream.
Then, when its process is gone (killed, or stopping and handing it over), any process
can adopt it: replay the handler from the top against the ledger up to the pending
question and wait there, live, for the answer the client may already have sent.

Three parties share these types, each through a protocol, so none imports another:

- the carrier (:class:`~mrtr.carriers.live.LiveCarrier`) saves the call's
  :class:`CallState` through a :class:`CallJournal` before its question goes out and
  after each Step, and starts an adopted call from a :class:`Resumption`;
- the transport (the Streamable HTTP sessions) gives the journal the call's event
  stream (:class:`EventSource`), whose events then reach the client only once recorded,
  and asks :class:`RecordedCalls` to record answers, follow and adopt calls;
- the server's legacy era implements :class:`RecordedCalls` over the store
  (:mod:`mrtr.server.calls`).

This module does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import msgspec

from .ledger import Slot

__all__ = ["KEPT_EVENTS", "Question", "CallState", "Resumption", "EventSource", "CallJournal", "Claimed", "Held",
           "Stored", "AnswerRoute", "RecordedCalls", "TakenOver"]

KEPT_EVENTS = 256
"""Events one SSE stream of a 2025 call keeps for a resumption, in memory and in a shared store alike."""


class TakenOver(BaseException):
    """This process no longer holds the call: another adopted it (this one's lease lapsed), or its record is gone.

    Raised out of a journal's write into the call whatever the handler catches, like a
    cancellation: the call stops here without a response, and its holder goes on.
    """


class Question(msgspec.Struct, array_like=True, frozen=True, omit_defaults=True):
    """One request of the round a recorded call waits on: its ledger ``key``, the ``id`` it went out under, its
    ``method`` and, for a URL elicitation, the ``elicitation_id`` it carried."""

    key: str
    id: Any
    method: str
    elicitation_id: str = ""


class CallState(msgspec.Struct, frozen=True, kw_only=True):
    """What a call's carrier records: enough for another process to replay it and wait where it waited.

    ``ledger`` is the call's slots so far; ``rounds`` the rounds of questions it asked
    (the pending one included); ``pending`` the round it waits on (empty while it runs
    code), sent at ``asked_at`` (epoch seconds), from which the answer timeout counts;
    ``accepted`` the URL elicitations accepted and not yet gone past (fingerprint in hex
    to ``elicitationId``), whose completion is still to be told.
    """

    ledger: tuple[Slot, ...] = ()
    rounds: int = 0
    pending: tuple[Question, ...] = ()
    asked_at: float = 0.0
    accepted: dict[str, str] = {}


class Resumption(NamedTuple):
    """An adopted call's start: its recorded ``state`` and the ``answers`` that arrived for its pending round
    while no process held it (by question id: the client's JSON-RPC response, ``result`` or ``error``)."""

    state: CallState
    answers: Mapping[Any, Mapping[str, Any]]


class EventSource(Protocol):
    """A call's event stream as its journal records it (the transport's SSE stream)."""

    def hold(self) -> None:
        """From now on an event reaches the client only once :meth:`stored_to` says it is recorded."""
        ...

    def unstored(self) -> tuple[list[tuple[int, bytes]], int, bool]:
        """The events not recorded yet (position and data, oldest first), the stream's count, and whether it ended."""
        ...

    def stored_to(self, position: int, ended: bool) -> None:
        """Every event up to ``position`` is recorded (and, ``ended``, the end too): they may go out."""
        ...

    def unhold(self) -> None:
        """The call is no longer recorded: its events go out without waiting for the store."""
        ...


class CallJournal(Protocol):
    """Where one call records itself as it goes, for the carrier and the transport alike.

    ``resumed`` is set when the call is an adoption (the carrier starts from it);
    ``principal`` is whose call it is (the session's; set by the server before the
    carrier runs); ``waiting`` is true while the call waits for its client's answers.
    A journal records nothing until its first :meth:`save`: a call that never asks and
    runs no Step costs the store nothing. Every method raises
    :class:`~mrtr.core.errors.ProtocolError` (``-32603``) when the store cannot be used.
    """

    resumed: Resumption | None
    principal: str | None
    waiting: bool
    released: bool
    """Handed over to the store (this process stopped): it is another's now."""
    taken: bool
    """Taken over by another process (:class:`TakenOver` was raised)."""
    questions: list[Any]
    """The ids of the round the call waits on (as last recorded)."""

    @property
    def recorded(self) -> bool:
        """Whether the call has a record in the store (and its events are recorded before they go out)."""
        ...

    async def flush(self, *, done: bool = False) -> None:
        """Record the stream's events not recorded yet (``done``: and that the call ended) in one write."""
        ...

    def attach(self, source: EventSource) -> None:
        """Record the events of ``source`` (the call's stream) with the call."""
        ...

    def hold(self) -> None:
        """The call is about to be recorded: its events wait for the store from now on."""
        ...

    async def save(self, state: CallState) -> None:
        """Record ``state`` with every event of the call so far, atomically, before returning."""
        ...

    def save_from_thread(self, state: CallState) -> None:
        """:meth:`save`, from the worker thread a sync handler runs in."""
        ...


class Claimed(NamedTuple):
    """A recorded call this process now holds: its ``journal`` (with ``resumed`` set), the client's request
    (``request_id``, ``method``, ``params``) and its recorded stream (``events``, the kept ones, and ``last``,
    the position of its last event)."""

    journal: CallJournal
    request_id: Any
    method: str
    params: Mapping[str, Any]
    events: list[tuple[int, bytes]]
    last: int


class Held(NamedTuple):
    """A recorded call another live process holds (``holder``: its node id)."""

    holder: str


class Stored(NamedTuple):
    """A recorded call's stream as the store has it: ``events`` (the kept ones, oldest first), the position of its
    ``last`` event, whether it ended (``done``), and who holds it (``holder``: ``""`` for nobody, ``alive`` whether
    that node lives)."""

    events: list[tuple[int, bytes]]
    last: int
    done: bool
    holder: str
    alive: bool


class AnswerRoute(NamedTuple):
    """Where an answer to a recorded call's question goes: the call's ``stream``, its ``holder`` (``""``: nobody)
    and whether that node lives (``alive``). The answer is in the store already."""

    stream: str
    holder: str
    alive: bool


class RecordedCalls(Protocol):
    """The recorded 2025 calls of a dispatcher, as a transport reaches them (``SessionDispatcher.calls``).

    A stream is named by the node that opened it and its number there (``"<node>.<n>"``),
    which its event ids carry; a question by the id it went out under.
    """

    @property
    def node_id(self) -> str:
        """This process's name among the processes sharing the store (in question and event ids)."""
        ...

    @property
    def lease(self) -> float:
        """Seconds a process's lease lasts: a call whose holder died is adoptable once its lease lapsed."""
        ...

    def journal(self, session_id: str, stream: str, request_id: Any, method: str,
                params: Mapping[str, Any], source: EventSource) -> CallJournal:
        """The journal of a new call of ``session_id`` whose events are ``source``'s, named ``stream``."""
        ...

    async def claim(self, session_id: str, stream: str) -> Claimed | Held | Stored | None:
        """Hold the recorded call ``stream`` here if nobody lives holding it (:class:`Claimed`).

        :class:`Held` when a live process holds it, :class:`Stored` when it ended (its
        kept events), ``None`` when there is no such record (never recorded, or expired).
        """
        ...

    async def stored(self, session_id: str, stream: str) -> Stored | None:
        """What the store has of the stream ``stream`` (for following a call another process holds)."""
        ...

    async def answer(self, session_id: str, message: Mapping[str, Any]) -> AnswerRoute | None:
        """Record the client's answer to a recorded question of the session; ``None`` when none waits for its id."""
        ...

    async def cancel(self, session_id: str, request_id: Any) -> Held | bool:
        """End a recorded call nobody holds (``notifications/cancelled``): whether there was one; :class:`Held`
        when a live process holds it (that process cancels it)."""
        ...

    async def release(self, journal: CallJournal) -> bool:
        """Hand a waiting call over to the store (this process stops): whether it was handed over."""
        ...

    async def forget(self, session_id: str) -> None:
        """Remove every recorded call of a session that ended."""
        ...
