"""The client as a live conversation reaches it: requests from the server, and what can go wrong.

In a legacy (2025-era) session the server asks the client while a call runs: it sends
``elicitation/create``, ``sampling/createMessage`` or ``roots/list`` as JSON-RPC
requests of its own and waits for the answers. The transport that carries the session
implements :class:`Peer` for each call (it knows where the requests go: stdout on
stdio, the call's event stream on Streamable HTTP, and how answers come back); the
live carrier (:mod:`mrtr.carriers.live`) uses it without knowing the transport or the
event loop.

What a peer raises when a round cannot be answered is a :class:`LiveRequestFailed`:
the client did not answer in time (:class:`AnswerTimeout`), answered with a JSON-RPC
error (:class:`ClientAnswerError`), or the session ended first (:class:`SessionEnded`);
:class:`TooManySuspended` is the server refusing to hold one more handler waiting (the
session, its client or the process holds its share). Each
is a ``-32603`` whose ``data`` says what happened; the server renders them as the era
expects (a tool's error result, a prompt's or resource's JSON-RPC error).

This module does no I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from .errors import INTERNAL_ERROR, ProtocolError

__all__ = [
    "Peer",
    "Sent",
    "LiveRequestFailed",
    "AnswerTimeout",
    "ClientAnswerError",
    "SessionEnded",
    "TooManySuspended",
]


Sent = Callable[[list[Any]], Awaitable[None]]
"""Told the ids a round went out under, once its requests are queued for the client and before the wait."""


class Peer(Protocol):
    """Where one call of a live session sends its requests to the client."""

    async def request_all(self, requests: Sequence[tuple[str, dict[str, Any]]], *,
                          timeout: float, sent: Sent | None = None) -> list[dict[str, Any]]:
        """Send every ``(method, params)`` at once and return their results, in order, once all are answered.

        ``timeout`` (seconds) bounds the wait for the whole round. When the round ends
        without every answer (a timeout, an error answer, the session ending, the call
        being cancelled) the requests still unanswered are withdrawn with
        ``notifications/cancelled`` before the error (or the cancellation) propagates.
        ``sent``, when given, is awaited with the ids the requests went out under before
        the wait begins (a recorded call records its round there). Raises
        :class:`LiveRequestFailed` subclasses.
        """
        ...

    async def await_answers(self, questions: Sequence[tuple[Any, str]], *, timeout: float,
                            answered: Mapping[Any, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Wait for the answers to a round already sent (``(id, method)`` each), as :meth:`request_all` waits.

        For a call adopted from another process: its round went out there, under these
        ids, and the client answers them here. ``answered`` holds the client's responses
        that arrived meanwhile (by id). Nothing is sent but the withdrawals of a round
        that ends unanswered.
        """
        ...


class LiveRequestFailed(ProtocolError):
    """A round of server-to-client requests of a live call could not be answered (-32603).

    ``method`` names the request the failure is about; ``data`` carries ``method`` and
    the specifics of each subclass.
    """

    code = INTERNAL_ERROR

    def __init__(self, message: str, *, method: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message, data={"method": method, **(data or {})})
        self.method = method


class AnswerTimeout(LiveRequestFailed):
    """The client did not answer within the answer timeout; ``data.timeoutSeconds`` says how long it had."""

    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(
            f"The client did not answer {method} within {timeout:g} s; the call was abandoned",
            method=method, data={"timeoutSeconds": timeout},
        )
        self.timeout = timeout


class ClientAnswerError(LiveRequestFailed):
    """The client answered a request with a JSON-RPC error, kept as ``data.clientError``."""

    def __init__(self, method: str, error: Any) -> None:
        code = error.get("code") if isinstance(error, dict) else None
        text = error.get("message") if isinstance(error, dict) else None
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        text = text if isinstance(text, str) else ""
        shown = {"code": code, "message": text}
        super().__init__(f"The client answered {method} with an error ({code}: {text[:200]})", method=method,
                         data={"clientError": shown})
        self.error = shown


class SessionEnded(LiveRequestFailed):
    """The session ended (closed, expired, its input gone) while a request waited for its answer."""

    def __init__(self, method: str, reason: str) -> None:
        super().__init__(f"The session ended before the client answered {method}: {reason}", method=method,
                         data={"reason": reason})


class TooManySuspended(LiveRequestFailed):
    """A bound on handlers waiting for answers is reached: the session's, the client's or the process's.

    ``bound`` says which (``"session"``, ``"client"`` or ``"process"``), ``limit`` its
    value and ``option`` the setting that raises it; ``data`` carries all three, and the
    message says them in words.
    """

    def __init__(self, method: str, limit: int, *, bound: str = "process", option: str = "max_suspended") -> None:
        holder = {"session": "This session holds", "client": "This client holds"}.get(bound, "The server is holding")
        super().__init__(
            f"{holder} {limit} calls waiting for their answers, its limit (the server's {option}); "
            f"{method} was not sent: answer or cancel a waiting call, or try again later",
            method=method, data={"limit": limit, "bound": bound, "option": option},
        )
        self.limit = limit
        self.bound = bound
        self.option = option
