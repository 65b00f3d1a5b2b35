"""Server-to-client requests of one legacy session, waiting for the client's answers.

In a 2025-era session the server asks the client while a call runs
(``elicitation/create``, ``sampling/createMessage``, ``roots/list``).
:class:`PendingRequests` is what every transport carrying such sessions shares for it,
one per session (stdio holds one for its process; Streamable HTTP one per
``Mcp-Session-Id``):

- **ids**: a per-session counter, never reused (a client's ids live in the other
  direction, so a clash in value is harmless); when several nodes serve one session
  each node's ids are strings that start with its name (``"<node>.<n>"``, the
  ``prefix``), so the node an answer reaches can tell which node's handler waits for it
  without asking anyone;
- **sending**: a round goes out at once, every request through the ``write`` of the
  call's :meth:`PendingRequests.peer` (stdout on stdio, the call's event stream on
  HTTP), held back until the client sent ``notifications/initialized`` (the lifecycle
  says a server sends no requests before it);
- **answers**: the transport hands every JSON-RPC response the client sends to
  :meth:`PendingRequests.answer`, which wakes the call waiting for it; an answer no
  request waits for (unknown, timed out, withdrawn) is dropped and logged;
- **waiting, bounded**: a round waits for all its answers at most its ``timeout``
  (:class:`~mrtr.core.peer.AnswerTimeout`); an error answer ends the round at once
  (:class:`~mrtr.core.peer.ClientAnswerError`); :meth:`PendingRequests.end` fails every
  waiting round (:class:`~mrtr.core.peer.SessionEnded`);
- **withdrawing**: whenever a round ends without all its answers (a timeout, an error
  answer, the session ending, the call cancelled) each request still unanswered gets a
  courtesy ``notifications/cancelled``, so the client stops asking its user.

A dropped connection is not a cancellation in this era: nothing here watches one. The
call is cancelled only by its transport (on the client's ``notifications/cancelled``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio

from ..core.jsonrpc import encode, notification, request
from ..core.peer import AnswerTimeout, ClientAnswerError, LiveRequestFailed, Peer, Sent, SessionEnded

__all__ = ["PendingRequests"]

log = logging.getLogger("mrtr")

_EARLY_ANSWERS = 64  # answers kept for rounds being adopted, per session

Write = Callable[[bytes], None]
"""Queues one encoded message for the client; must not block."""


class _Round:
    """One ``request_all``: its requests' answers as they come, and what wakes the waiting call."""

    __slots__ = ("methods", "results", "missing", "error", "changed", "reason")

    def __init__(self, size: int) -> None:
        self.reason = "the call ended before the client answered"  # why what is unanswered is withdrawn
        self.methods: list[str] = []
        self.results: list[Any] = [None] * size
        self.missing = size
        self.error: LiveRequestFailed | None = None
        self.changed = trio.Event()


class PendingRequests:
    """The server-to-client requests of one session awaiting answers; see the module docstring.

    ``write`` is where requests and withdrawals go unless a call's :meth:`peer` names
    its own; ``prefix`` makes the ids strings that start with it (``None``: integers).
    Use from the session's trio loop.
    """

    def __init__(self, write: Write, prefix: str | None = None) -> None:
        self._write = write
        self._prefix = prefix
        self._next_id = 0
        self._waiting: dict[Any, tuple[_Round, int]] = {}
        self._ready = trio.Event()
        self.ended: str | None = None
        self._early: dict[Any, Mapping[str, Any]] = {}  # answers to a round adopted here, come before its wait

    @property
    def waiting(self) -> int:
        """Requests sent and not answered yet."""
        return len(self._waiting)

    def peer(self, write: Write | None = None) -> Peer:
        """The :class:`~mrtr.core.peer.Peer` of one call, sending its requests with ``write`` (default: the session's)."""
        return _CallPeer(self, write or self._write)

    def mark_ready(self) -> None:
        """The client sent ``notifications/initialized``: requests may go out."""
        self._ready.set()

    def answer(self, message: Mapping[str, Any]) -> bool:
        """Hand over a JSON-RPC response from the client; whether a request waited for it."""
        entry = self._waiting.pop(message.get("id"), None)
        if entry is None:
            log.debug("dropping an answer to %r: no request waits for it (answered, withdrawn or timed out)",
                      message.get("id"))
            return False
        round_, index = entry
        if "error" in message:
            if round_.error is None:
                round_.error = ClientAnswerError(round_.methods[index], message.get("error"))
        else:
            round_.results[index] = message.get("result")
            round_.missing -= 1
        round_.changed.set()
        return True

    def end(self, reason: str) -> None:
        """The session ended: every waiting round fails with :class:`~mrtr.core.peer.SessionEnded`."""
        self.ended = reason
        self._ready.set()  # a round held back for initialized fails now too
        for round_, index in list(self._waiting.values()):
            if round_.error is None:
                round_.error = SessionEnded(round_.methods[index], reason)
            round_.changed.set()

    async def request_all(self, requests: Sequence[tuple[str, dict[str, Any]]], *, timeout: float,
                          write: Write | None = None, sent: Sent | None = None) -> list[dict[str, Any]]:
        """Send a round and wait for all its answers; see :meth:`mrtr.core.peer.Peer.request_all`."""
        if not requests:
            return []
        send = write or self._write
        round_ = _Round(len(requests))
        ids: list[Any] = []
        try:
            with trio.move_on_after(timeout):
                await self._ready.wait()
                if self.ended is not None:
                    raise SessionEnded(requests[0][0], self.ended)
                for index, (method, params) in enumerate(requests):
                    self._next_id += 1
                    request_id: Any = self._next_id if self._prefix is None else f"{self._prefix}{self._next_id}"
                    round_.methods.append(method)
                    self._waiting[request_id] = (round_, index)
                    ids.append(request_id)
                    send(encode(request(request_id, method, params)))
                if sent is not None:
                    await sent(list(ids))
                await self._wait(round_)
                round_.reason = ""
                return list(round_.results)
            round_.reason = f"no answer within {timeout:g} s"
            unanswered = next((round_.methods[i] for i, rid in enumerate(ids) if rid in self._waiting),
                              requests[0][0])
            raise AnswerTimeout(unanswered, timeout)
        finally:
            self._withdraw(ids, send, round_.reason)

    async def await_answers(self, questions: Sequence[tuple[Any, str]], *, timeout: float,
                            answered: Mapping[Any, Mapping[str, Any]] | None = None,
                            write: Write | None = None) -> list[dict[str, Any]]:
        """Wait for a round another process sent; see :meth:`mrtr.core.peer.Peer.await_answers`."""
        send = write or self._write
        round_ = _Round(len(questions))
        ids = [question_id for question_id, _ in questions]
        try:
            with trio.move_on_after(max(timeout, 0.0)):
                for index, (question_id, method) in enumerate(questions):
                    round_.methods.append(method)
                    self._waiting[question_id] = (round_, index)
                for message in (answered or {}).values():
                    self.answer(message)
                for question_id in ids:
                    early = self._early.pop(question_id, None)
                    if early is not None:
                        self.answer(early)
                if self.ended is not None:
                    raise SessionEnded(round_.methods[0], self.ended)
                await self._wait(round_)
                round_.reason = ""
                return list(round_.results)
            round_.reason = f"no answer within {timeout:g} s"
            unanswered = next((round_.methods[i] for i, rid in enumerate(ids) if rid in self._waiting),
                              round_.methods[0])
            raise AnswerTimeout(unanswered, timeout)
        finally:
            self._withdraw(ids, send, round_.reason)

    def stash(self, message: Mapping[str, Any]) -> None:
        """Keep an answer no round waits for yet: one to a round this process is adopting, whose wait
        (:meth:`await_answers`) has not begun. Bounded: the oldest kept go first."""
        self._early[message.get("id")] = message
        while len(self._early) > _EARLY_ANSWERS:
            del self._early[next(iter(self._early))]

    def keep(self, ids: Sequence[Any]) -> None:
        """Let these requests go unanswered here without withdrawing them: another process waits for them now."""
        for request_id in ids:
            self._waiting.pop(request_id, None)

    @staticmethod
    async def _wait(round_: _Round) -> None:
        """Wait until every request of ``round_`` is answered, or raise the error that ended it."""
        while round_.missing:
            if round_.error is not None:
                round_.reason = "another request of the same round failed"
                raise round_.error
            round_.changed = trio.Event()
            await round_.changed.wait()
        if round_.error is not None:
            raise round_.error

    def _withdraw(self, sent: list[Any], send: Write, reason: str) -> None:
        for request_id in sent:
            if self._waiting.pop(request_id, None) is None:
                continue  # answered
            if self.ended is None:
                send(encode(notification("notifications/cancelled", {"requestId": request_id, "reason": reason})))


class _CallPeer:
    """The peer of one call: its session's pending requests, written where the call's go."""

    __slots__ = ("_pending", "_write")

    def __init__(self, pending: PendingRequests, write: Write) -> None:
        self._pending = pending
        self._write = write

    async def request_all(self, requests: Sequence[tuple[str, dict[str, Any]]], *,
                          timeout: float, sent: Sent | None = None) -> list[dict[str, Any]]:
        """Send every request at once and return their results, in order; see :class:`~mrtr.core.peer.Peer`."""
        return await self._pending.request_all(requests, timeout=timeout, write=self._write, sent=sent)

    async def await_answers(self, questions: Sequence[tuple[Any, str]], *, timeout: float,
                            answered: Mapping[Any, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Wait for a round another process sent; see :class:`~mrtr.core.peer.Peer`."""
        return await self._pending.await_answers(questions, timeout=timeout, answered=answered, write=self._write)
