"""Forwarding a 2025 session's request to the worker process that holds the session.

With ``mrtr serve --workers N`` every worker accepts on the same port
(``SO_REUSEPORT``), so a 2025-era client's requests reach whichever worker the kernel
picks, and one client opens several connections (the ``GET`` stream, each POST, the
answers to the server's questions). A session cannot move between processes: a
suspended generator lives where it started. So a session lives in the worker that
opened it, and its id names that worker (``<worker>.<random>``, minted by the
session registry). A worker that receives a request for a session another one owns
forwards it there, over a Unix socket the owner listens on:

- **bytes in**: the request as it came (method, path, headers but the hop-by-hop ones
  and ``Origin``, which this worker already checked, and its body), on a fresh
  connection with ``Connection: close``;
- **bytes out**: the owner's answer, relayed as it comes: a JSON body whole, an SSE
  stream chunk by chunk for as long as it lasts. When the client goes away the
  forwarding connection closes, which the owner sees as its own client going away.

The owner serves a forwarded request like any other (``Host``, authentication, the
session's principal are checked again; its access line is its own) and never forwards
it on. A worker that is not there (never was, or died with its sessions) leaves the
request to be answered as for an unknown session: ``404``, and the client starts a new
one. The sockets live in a directory only this user can enter, made by the supervisor
before it forks.

Across several hosts none of this applies: route on ``Mcp-Session-Id`` at the load
balancer (see ``docs/eras.md``), or put the sessions in Redis (``--store redis://...``),
which makes every worker and every host serve every session and forwards nothing.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import httptools
import trio

from .messages import ClientGone, HttpRequest, Responder
from .headers import RawHeader

__all__ = ["Forwarder"]

log = logging.getLogger("mrtr.http")

# Headers that describe one connection, not the request (RFC 9110 7.6.1), and Origin, already checked here.
_NOT_FORWARDED = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te",
                            b"trailer", b"upgrade", b"content-length", b"expect", b"origin"})
_NOT_RELAYED = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"content-length"})
_RECEIVE_SIZE = 64 * 1024


class Forwarder:
    """The Unix sockets of one server's workers, in ``directory``: listen on one's own, forward to the others."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def path(self, owner: str) -> str:
        """The socket path of worker ``owner``."""
        return os.path.join(self.directory, f"worker-{owner}.sock")

    def listen(self, owner: str, backlog: int = 1024) -> socket.socket:
        """Bind and listen on the socket of ``owner`` (a replaced worker takes its predecessor's path)."""
        path = self.path(owner)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(path)
            os.chmod(path, 0o600)
            sock.listen(backlog)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        return sock

    async def forward(self, owner: str, request: HttpRequest, out: Responder,
                      disconnected: Callable[[], Awaitable[Any]] | None = None) -> bool | None:
        """Relay ``request`` to worker ``owner`` and its answer to ``out``.

        Returns whether the answer went out whole, or ``None`` when no worker ``owner``
        listens (nothing was written: the caller answers as for an unknown session).
        ``disconnected`` returns when the client goes away: the relay then stops and the
        forwarding connection closes at once, so the owner lets go of what the client held
        (a GET stream, which another connection may then open) without waiting for a write
        to fail.
        """
        try:
            stream = await trio.open_unix_socket(self.path(owner))
        except OSError as exc:
            log.debug("no worker %r to forward to (%s)", owner, exc)
            return None
        async with stream:
            try:
                await stream.send_all(_request_bytes(request))
            except trio.BrokenResourceError:
                return None
            if disconnected is None:
                return await _relay(stream, out)
            whole = False
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_when, disconnected, nursery.cancel_scope)
                whole = await _relay(stream, out)
                nursery.cancel_scope.cancel()
            return whole


async def _cancel_when(disconnected: Callable[[], Awaitable[Any]], scope: trio.CancelScope) -> None:
    await disconnected()
    log.debug("a client went away from a forwarded request; closing the forwarding connection")
    scope.cancel()


def _request_bytes(request: HttpRequest) -> bytes:
    head = [f"{request.method} {request.path} HTTP/1.1\r\n".encode("latin-1")]
    for name, value in request.headers:
        if name.lower() not in _NOT_FORWARDED:
            head.append(name + b": " + value + b"\r\n")
    head.append(b"content-length: %d\r\nconnection: close\r\n\r\n" % len(request.body))
    return b"".join(head) + request.body


class _Answer:
    """httptools' callbacks for the owner's answer: the head, then body chunks as they are parsed."""

    def __init__(self) -> None:
        self.headers: list[RawHeader] = []
        self.head_done = False
        self.chunks: list[bytes] = []
        self.complete = False
        self.streamed = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.head_done = True
        names = {name for name, _ in self.headers}
        self.streamed = b"content-length" not in names

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


async def _relay(stream: trio.SocketStream, out: Responder) -> bool:
    answer = _Answer()
    parser: Any = httptools.HttpResponseParser(answer)
    started = False
    try:
        while not answer.complete:
            try:
                data = await stream.receive_some(_RECEIVE_SIZE)
            except trio.BrokenResourceError:
                data = b""
            if not data:
                break  # the owner closed before its answer was whole (it stopped, or died)
            try:
                parser.feed_data(data)
            except httptools.HttpParserError:
                log.warning("a worker sent a malformed answer to a forwarded request")
                break
            if not answer.head_done or not answer.streamed:
                continue
            if not started:
                await out.start(parser.get_status_code(), _relayed(answer.headers))
                started = True
            chunks, answer.chunks = answer.chunks, []
            for chunk in chunks:
                await out.send(chunk)
        if answer.complete and not answer.streamed:
            body = b"".join(answer.chunks)
            headers = [*_relayed(answer.headers), (b"content-length", b"%d" % len(body))]
            await out.respond(parser.get_status_code(), headers, body)
            return True
        if started:
            if answer.complete:
                await out.end()
                return True
            return False
        body = b"Bad Gateway: the worker holding this session did not answer\n"
        await out.respond(502, [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", b"%d" % len(body))], body)
        return True
    except ClientGone:
        return False


def _relayed(headers: list[RawHeader]) -> list[RawHeader]:
    return [(name, value) for name, value in headers if name not in _NOT_RELAYED]
