"""The one exception a client call raises, and its round-cap subclass."""

from __future__ import annotations

from typing import Any

__all__ = ["ClientError", "ConnectionFailed", "RoundLimitExceeded", "StateLost", "Unreadable"]


class ClientError(Exception):
    """A request failed: the server's JSON-RPC error, or an answer the client cannot use.

    ``code``, ``message`` and ``data`` are the JSON-RPC error's members when the server
    sent one. Failures found by the client itself (an unreadable response, an unknown
    ``resultType``, an HTTP status without a JSON-RPC body) carry the code of the
    matching JSON-RPC error (``-32700`` for bytes that are not JSON, ``-32600`` for a
    malformed message) so callers handle every failure the same way. ``status`` is the
    HTTP status when the failure came over HTTP.
    """

    def __init__(self, code: int, message: str, data: Any = None, *, status: int | None = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data
        self.status = status

    @classmethod
    def from_error(cls, error: dict[str, Any], *, status: int | None = None) -> ClientError:
        """The exception for a JSON-RPC ``error`` object."""
        return cls(error["code"], error["message"], error.get("data"), status=status)


class RoundLimitExceeded(ClientError):
    """The server was still asking after the client's round cap (``max_rounds``).

    ``code`` is ``-32603``: from the caller's point of view the request did not finish.
    ``data`` holds ``{"rounds": N, "lastKeys": [...]}``.
    """


class ConnectionFailed(ClientError):
    """The server could not be reached or stopped being reachable: no connection, a process that
    exited or stopped reading. ``code`` is ``-32603``; nothing the server said is in it."""


class StateLost(ClientError):
    """The server could not open the ``requestState`` it issued ("failed authentication").

    The usual cause: the server restarted with a new key (it runs without a fixed
    ``MRTR_SECRET``, so each start makes one), or the retry reached another node that
    has a different key. The conversation cannot continue; it must start again from the
    first round, which :meth:`mrtr.Client.call_tool` does not do by itself (the answers
    may have had effects).
    """


class Unreadable(ClientError):
    """What the server sent cannot be read: a message over the size cap, or a body that does not decode."""
