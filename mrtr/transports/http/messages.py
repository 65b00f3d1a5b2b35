"""The HTTP vocabulary every part of the Streamable HTTP transport speaks: a request and how an answer is written.

A front end (the native server, the ASGI adapter) reads an :class:`HttpRequest` and writes
through a :class:`Responder`; the exchange (:mod:`mrtr.transports.http.exchange`), the
2025-era sessions (:mod:`mrtr.transports.http.sessions`), their streams
(:mod:`mrtr.transports.http.streams`) and forwarding between workers
(:mod:`mrtr.transports.http.forwarding`) answer through a :class:`Tracked` responder
(which remembers whether anything went out, and adds the CORS headers of an allowed
origin), with :func:`reject` for a JSON-RPC error, :func:`json_headers` for a JSON body
and :data:`SSE_HEADERS` for an event stream. This module imports none of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from ...core.errors import ProtocolError
from ...core.jsonrpc import encode as _encode_json
from ...core.jsonrpc import error_response
from ..logs import AccessRecord
from .headers import RawHeader

__all__ = ["JSON", "SSE", "SSE_HEADERS", "ClientGone", "HttpRequest", "Responder", "Tracked", "error_body",
           "json_headers", "reject"]

JSON = b"application/json"
"""The media type of a JSON-RPC body."""

SSE = b"text/event-stream"
"""The media type of an event stream."""


class ClientGone(Exception):
    """Raised by a :class:`Responder` when the client can no longer be written to."""


class Responder(Protocol):
    """Where an exchange writes its answer. Front ends implement it; it stays this thin.

    Either :meth:`respond` once (a complete response with a known body), or
    :meth:`start` once, :meth:`send` any number of times and :meth:`end` once (a
    streamed body). Every method raises :class:`ClientGone` when the peer is gone.
    """

    async def respond(self, status: int, headers: list[RawHeader], body: bytes) -> None:
        """Write a whole response: the status line, ``headers`` and ``body``, its length known."""

    async def start(self, status: int, headers: list[RawHeader]) -> None:
        """Begin a streamed response: the status line and ``headers``; the body follows by :meth:`send`."""

    async def send(self, chunk: bytes) -> None:
        """Write one piece of a streamed body as soon as it is ready (an SSE event, for one)."""

    async def end(self) -> None:
        """Finish a streamed body; nothing more is sent on this response."""


@dataclass
class HttpRequest:
    """An HTTP request as the exchange needs it: the body is already read in full.

    ``path`` holds no query string; ``headers`` are ``(name, value)`` byte pairs as the parser
    and ASGI give them (names are compared case-insensitively). ``bound`` is the
    listening address the request came in on, when the front end knows it (the default
    ``Host`` check depends on it). ``client`` is the remote address (a 2025 session
    counts against its client's bound by it); ``forwarded`` marks a request another
    worker forwarded to this one, which is never forwarded again.
    """

    method: str
    path: str
    headers: list[RawHeader]
    body: bytes = b""
    bound: tuple[str, int] | None = None
    client: str | None = None
    forwarded: bool = False


# -- responses ------------------------------------------------------------------------------


def error_body(error: ProtocolError, request_id: Any = None) -> bytes:
    """The JSON-RPC error response carrying ``error``, encoded."""
    return _encode_json(error_response(request_id, error))


_CONTENT_TYPE_JSON: RawHeader = (b"content-type", JSON)


def json_headers(body: bytes, extra: Iterable[RawHeader] = ()) -> list[RawHeader]:
    """The headers of a whole JSON ``body``: its type and length, then ``extra``."""
    return [_CONTENT_TYPE_JSON, (b"content-length", b"%d" % len(body)), *extra]


SSE_HEADERS: list[RawHeader] = [  # an event stream, never cached or buffered by a proxy
    (b"content-type", SSE),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class Tracked:
    """Remembers whether anything was written, so a failure knows if it may still answer.

    ``cors`` holds the CORS headers of an allowed ``Origin`` once rule 2 passed; they
    are appended to whatever goes out next (JSON, SSE, 202, errors, even a 500).
    """

    __slots__ = ("cors", "finished", "inner", "record", "started")

    def __init__(self, inner: Responder, record: AccessRecord | None) -> None:
        self.inner = inner
        self.started = False
        self.finished = False  # the whole answer was handed to the front end
        self.cors: list[RawHeader] = []
        self.record = record

    async def respond(self, status: int, headers: list[RawHeader], body: bytes) -> None:
        self.started = True
        if self.record is not None:
            self.record.status = status
        await self.inner.respond(status, [*headers, *self.cors] if self.cors else headers, body)
        self.finished = True

    async def start(self, status: int, headers: list[RawHeader]) -> None:
        self.started = True
        if self.record is not None:
            self.record.status = status
        await self.inner.start(status, [*headers, *self.cors] if self.cors else headers)

    async def send(self, chunk: bytes) -> None:
        await self.inner.send(chunk)

    async def end(self) -> None:
        await self.inner.end()
        self.finished = True


async def reject(out: Tracked, status: int | None, error: ProtocolError, request_id: Any = None,
                  extra: Iterable[RawHeader] = ()) -> None:
    """Answer ``error``, with ``status`` where HTTP itself refuses the request, else the error's own hint."""
    if out.record is not None:
        out.record.error(error.code)
    body = error_body(error, request_id)
    await out.respond(error.status_hint if status is None else status, json_headers(body, extra), body)


