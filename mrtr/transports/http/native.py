"""The native Streamable HTTP server: trio for I/O, httptools (llhttp) for HTTP/1.1.

:func:`serve` runs inside a trio program (tests start it in a nursery and bind port
0); the blocking entry point with signals and worker processes is
:func:`mrtr.transports.http.workers.run`. Every request is answered by
:func:`mrtr.transports.http.exchange.exchange`, the same code the ASGI adapter uses.

A connection's life: wait for the first bytes of a request (the connection counts as
idle meanwhile, and an idle connection is the first to go when the server is full),
read the head and the whole body under one deadline, run the exchange, then either
serve the next request or close. The parser is fed what one ``recv`` returns; a read
that brings several pipelined requests queues them, and nothing more is read from the
socket until they are answered, so a client that sends without reading holds at most
one read's worth of requests in memory. Graceful shutdown stops accepting, closes idle
connections at once and gives in-flight requests ``shutdown_grace`` seconds.

The socket work uses a plain non-blocking socket and trio's ``wait_readable`` /
``wait_writable``: a write the kernel takes at once needs no timeout scope, and a read
that finds its bytes already there needs no wait.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import socket
from collections import OrderedDict, deque
from http import HTTPStatus
from typing import Any

import httptools
import trio

from ...core.jsonrpc import Dispatcher
from ..shared import lifespan
from .forwarding import Forwarder
from .config import ServerConfig
from .exchange import exchange
from .messages import ClientGone, HttpRequest
from .headers import RawHeader
from .sessions import HttpSessions

__all__ = ["bind", "serve", "serve_socket"]

log = logging.getLogger("mrtr.http")

_RECEIVE_SIZE = 64 * 1024
_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
_GONE_ERRNOS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
_REASONS = {status.value: status.phrase.encode("ascii") for status in HTTPStatus}
_REASONS[413] = b"Content Too Large"  # RFC 9110's name
_STATUS_LINES: dict[int, bytes] = {}
_SUPPORTED_VERSIONS = ("1.1", "1.0")
_CONNECTION_CLOSE = b"Connection: close\r\n"
_FRAMING_LENGTHS = frozenset({len(b"content-length"), len(b"expect")})  # the fields read before a body


def _status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        line = _STATUS_LINES[status] = b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))
    return line


def _head(status: int, headers: list[RawHeader], extra: bytes = b"") -> bytes:
    line = _STATUS_LINES.get(status) or _status_line(status)
    return b"".join([line, *[b"%s: %s\r\n" % field for field in headers], extra, b"\r\n"])


# -- shared state ---------------------------------------------------------------------------


class _State:
    """What the listener and all connections of one :func:`serve` share."""

    def __init__(self, server: Dispatcher, config: ServerConfig) -> None:
        self.server = server
        self.config = config
        self.exchange_config = config.exchange
        self.active = 0
        self.full = False  # whether the connection limit was hit since the last admitted connection
        self.closing = False
        # Connections waiting for a request's first byte, oldest first (the first to go when full),
        # with the trio time at which each is closed. One sweeper closes them, so waiting needs no
        # cancel scope of its own (a scope costs more than the rest of a request's trio work).
        self.idle: OrderedDict[_Connection, float] = OrderedDict()
        self.sweep_at = math.inf  # when the sweeper looks next; a deadline before it wakes the sweeper
        self.sweep_wake = trio.Event()
        # Every deadline is at least this far from when it is set, so a sweep this soon after the
        # last one sees every deadline set in between in time.
        self.sweep_every = min(config.keep_alive_timeout, config.first_byte_timeout)
        self.bound: tuple[str, int] | None = None  # the listening address, for the exchange's Host rule
        self.per_client: dict[str, int] = {}
        # The 2025 era's sessions, when the dispatcher serves it; their calls run in the connections' nursery.
        self.sessions = HttpSessions(server.legacy, self.exchange_config) if server.legacy is not None else None

    def begin_shutdown(self) -> None:
        self.closing = True
        for connection in list(self.idle):
            self.close_idle(connection)

    def wait_idle_until(self, connection: _Connection, deadline: float) -> None:
        """Count ``connection`` idle until ``deadline`` (trio time), when the sweeper closes it."""
        self.idle[connection] = deadline
        if deadline < self.sweep_at:
            self.sweep_at = deadline
            self.sweep_wake.set()

    def close_idle(self, connection: _Connection) -> None:
        """End an idle connection's wait: its ``wait_readable`` raises and the connection closes."""
        if self.idle.pop(connection, None) is not None:
            # A wait the kernel already ended goes on: the connection serves the request that came.
            trio.lowlevel.notify_closing(connection.sock)

    def evict_idle(self, client: str | None = None) -> bool:
        """Close the longest-idle connection (of ``client`` when given); whether there was one."""
        for connection in self.idle:
            if client is None or connection.client == client:
                self.close_idle(connection)
                return True
        return False

    async def sweep(self) -> None:
        """Close idle connections whose deadline passed; runs while the server accepts."""
        while True:
            now = trio.current_time()
            soonest = now + self.sweep_every
            for connection, deadline in list(self.idle.items()):
                if deadline <= now:
                    self.close_idle(connection)
                elif deadline < soonest:
                    soonest = deadline
            self.sweep_at = soonest
            self.sweep_wake = trio.Event()
            with trio.move_on_at(soonest):
                await self.sweep_wake.wait()


class _Closed(Exception):
    """The connection is over (EOF, reset, timeout or a fatal error already answered)."""


class _Reject(Exception):
    """Raised from a parser callback: the request is refused with ``status``, then the connection closes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Request:
    __slots__ = ("body", "close", "headers", "method", "target", "version")

    def __init__(self, method: bytes, target: bytes, headers: list[RawHeader], body: bytes, close: bool,
                 version: str) -> None:
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        self.close = close
        self.version = version


# -- one connection ------------------------------------------------------------------------


class _Connection:
    """One client connection: the parser's callbacks, the reads, and the :class:`Responder` writes."""

    def __init__(self, sock: socket.socket, client: str, state: _State) -> None:
        self.sock = sock
        self.client = client
        self.state = state
        self.config = state.config
        self.forwarded = sock.family == socket.AF_UNIX  # a worker's local socket: what another worker forwards
        self.parser = httptools.HttpRequestParser(self)
        self._max_head = self.config.max_header_size  # the head limit, read on every field count
        self.ready: deque[_Request] = deque()
        self.error: _Reject | None = None
        self.eof = False
        self.started_at = trio.current_time()
        self.request_started = 0.0  # when the first byte of the request being read arrived
        self.need_continue = False
        # the request being parsed
        self._target = b""
        self._headers: list[RawHeader] = []
        self._body: bytes | bytearray = b""  # one read's body as it came; a buffer once a second part arrives
        self._size = 0
        self._framing = 0  # bytes read past the head that carried no body (chunk lines, trailers)
        self._head_size = 0
        self._in_message = False
        self._in_head = False
        self._began = False
        self._head_fed = 0
        self._read_size = 0  # the bytes of the read being parsed
        self._head_read = 0  # the bytes of earlier reads that hold part of the head being parsed
        self._bodied = False  # whether the read being parsed carried body bytes
        self._declared: bytes | None = None  # the request's Content-Length, as sent
        self._continue = False  # whether it asks for 100 Continue (any Expect field saying so)
        self._fields_size = -1  # head and trailer fields counted, once a chunked body's trailers arrive
        # a request whose Upgrade offer is ignored: llhttp hands its body over as upgrade data
        self._unupgraded: tuple[_Request, int, bytearray] | None = None
        # the response being written
        self.head_only = False
        self.close_after = False
        self.chunked = False
        self.response_done = True
        self.version = "1.1"

    # -- parser callbacks (llhttp calls them from feed_data) ----------------------------

    def on_message_begin(self) -> None:
        self._target = b""
        self._headers = []
        self._declared = None
        self._continue = False
        self._fields_size = -1
        self._body = b""
        self._size = 0
        self._head_size = 12
        self._in_message = True
        self._in_head = True
        self._began = True

    def on_url(self, url: bytes) -> None:
        self._target += url
        self._head_size += len(url)
        if self._head_size > self._max_head:
            raise _Reject(431, "Request Header Fields Too Large")

    def on_header(self, name: bytes, value: bytes) -> None:
        # llhttp calls this for every field of every request, so it does the least it can: the field
        # is kept as sent (the header view maps each spelling to its lowercase key once), and only
        # names of the two lengths read before the body are lowered. The head's size is bounded at
        # its end and, while it is incomplete, after each read (feed).
        if not self._in_head:
            self._trailer(name, value)
            return
        self._headers.append((name, value))
        if len(name) in _FRAMING_LENGTHS:
            lowered = name.lower()
            if lowered == b"content-length":
                self._declared = value
            elif lowered == b"expect" and value.strip(b" \t").lower() == b"100-continue":
                self._continue = True

    def _trailer(self, name: bytes, value: bytes) -> None:
        """A trailer field of a chunked body: kept with the head's fields, and bounded with them."""
        if self._fields_size < 0:
            self._fields_size = self._head_so_far()  # once per request, at its first trailer field
        self._fields_size += len(name) + len(value) + 3
        if self._fields_size > self._max_head:
            raise _Reject(431, "Request Header Fields Too Large")
        self._headers.append((name, value))

    def _head_so_far(self) -> int:
        """The size of the head parsed so far: request line and fields, each counted with the fewest
        separators it can have on the wire (``name:value`` and CRLF), so never more than the bytes
        it was read from: whether a head is too large does not depend on how it was split into reads."""
        return self._head_size + sum([len(name) + len(value) + 3 for name, value in self._headers])

    def on_headers_complete(self) -> None:
        self._in_head = False
        version = self.parser.get_http_version()
        if version not in _SUPPORTED_VERSIONS:
            if version == "0.9":  # llhttp's reading of a request line without a version
                raise _Reject(400, "Bad Request: malformed request line")
            raise _Reject(505, f"HTTP Version Not Supported: HTTP/{version}")
        # No head is longer than the bytes read for it: counted field by field only when those could be.
        if (self._read_size if self._began else self._head_read + self._read_size) > self._max_head:
            if self._head_so_far() > self._max_head:  # (a trailer counts from _head_so_far again)
                raise _Reject(431, "Request Header Fields Too Large")
        if self._declared is not None:
            limit = self.config.max_body_size
            if int(self._declared) > limit:  # llhttp accepted it: digits only, given once
                raise _Reject(413, f"Content Too Large: the body limit is {limit} bytes")
        if self._continue and version == "1.1":
            self.need_continue = True

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self.config.max_body_size:
            raise _Reject(413, f"Content Too Large: the body limit is {self.config.max_body_size} bytes")
        # One buffer, grown in place: a body of many small chunks costs its bytes, not an object each.
        if not self._body:
            self._body = body
        elif self._body.__class__ is bytes:
            self._body = bytearray(self._body) + body
        else:
            self._body += body
        self._bodied = True
        self.need_continue = False

    def on_message_complete(self) -> None:
        self._in_message = False
        self.need_continue = False
        body = self._body
        self.ready.append(_Request(self.parser.get_method(), self._target, self._headers,
                                   body if body.__class__ is bytes else bytes(body),
                                   not self.parser.should_keep_alive(), self.parser.get_http_version()))
        self._body = b""

    def feed(self, data: bytes) -> None:
        """Parse ``data``; complete requests queue in ``ready``, a refusal is kept in ``error``."""
        if self._unupgraded is not None:
            self._unupgraded[2].extend(data)
            self._complete_unupgraded()
            return
        was_in_message = self._in_message
        was_in_head = self._in_head
        queued = len(self.ready)
        self._began = False
        self._bodied = False
        self._read_size = len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            context = exc.__context__
            self.error = context if isinstance(context, _Reject) else _Reject(400, "Bad Request")
        except httptools.HttpParserUpgrade as exc:
            offset = exc.args[0] if exc.args and isinstance(exc.args[0], int) else len(data)
            self._ignore_upgrade(data[offset:])
        except httptools.HttpParserError as exc:
            text = str(exc) or "malformed request"
            status = 505 if "HTTP version" in text else 400
            self.error = _Reject(status, "HTTP Version Not Supported" if status == 505 else f"Bad Request: {text}")
        else:
            if self._in_head:
                # the bytes read for a head that is not whole yet, a bound on its size (on_headers_complete)
                self._head_read = self._head_read + len(data) if not self._began else len(data)
                # llhttp buffers a header line it has not finished: bound the head by the bytes fed
                if not self._began:
                    self._head_fed += len(data)
                elif not was_in_message and len(self.ready) == queued:
                    self._head_fed = len(data)  # the whole read is this head
                else:
                    self._head_fed = self._head_so_far()  # shared with earlier requests: what is known
                if self._head_fed > self._max_head:
                    self.error = _Reject(431, "Request Header Fields Too Large")
            elif self._in_message:
                # Past the head, llhttp buffers what is not body without bound (a trailer field's value
                # until its line ends): a read that brought no body byte counts as framing, and framing
                # is bounded like a head (a read that began the body or a message starts the count).
                if self._bodied or self._began or was_in_head:
                    self._framing = 0
                else:
                    self._framing += len(data)
                    if self._framing > self._max_head:
                        self.error = _Reject(431, "Request Header Fields Too Large")
        if self._in_message and self._began:
            # A request that began in this read and did not arrive whole in it (after a pipelined one,
            # say): its deadline runs from now. (One that arrived whole, the usual case, needs no clock.)
            self.request_started = trio.current_time()

    def _ignore_upgrade(self, tail: bytes) -> None:
        """No protocol is upgraded to (RFC 9110 7.8 lets a server ignore the offer): read the body llhttp
        left as upgrade data, answer the request, then close. CONNECT gets what was parsed, then close."""
        request = self.ready[-1] if self.ready else None
        if request is None:
            self.eof = True
            return
        if request.method == b"CONNECT":
            request.close = True  # answered after the requests queued before it, then the connection closes
            return
        headers = {name.lower(): value for name, value in request.headers}
        if b"transfer-encoding" in headers:
            self.error = _Reject(400, "Bad Request: a chunked body with an Upgrade offer is not supported")
            return
        self.ready.pop()
        self._unupgraded = (request, int(headers.get(b"content-length", b"0")), bytearray(tail))
        self._in_message = True
        self._complete_unupgraded()

    def _complete_unupgraded(self) -> None:
        assert self._unupgraded is not None
        request, needed, body = self._unupgraded
        if len(body) < needed:
            return
        request.body = bytes(body[:needed])
        request.close = True  # the requests queued before it are answered first; the connection ends with it
        self.ready.append(request)
        self._unupgraded = None
        self._in_message = False

    # -- socket primitives ------------------------------------------------------------

    async def _recv(self, deadline: float | None) -> bytes:
        """One read; waits (under ``deadline`` when given) only if nothing is there yet."""
        try:
            return self.sock.recv(_RECEIVE_SIZE)
        except BlockingIOError:
            pass
        except OSError as exc:
            raise _Closed() from exc
        if deadline is None:
            await trio.lowlevel.wait_readable(self.sock)
        else:
            with trio.CancelScope(deadline=deadline):
                await trio.lowlevel.wait_readable(self.sock)
            # a timeout falls through: the recv below finds nothing and raises _Timeout
        try:
            return self.sock.recv(_RECEIVE_SIZE)
        except BlockingIOError:
            raise _Timeout() from None
        except OSError as exc:
            raise _Closed() from exc

    async def write(self, data: bytes) -> None:
        """Send all of ``data``; a wait (under ``write_timeout``) only when the kernel buffer is full."""
        rest: bytes | memoryview = data  # a view is made only if the kernel takes part of it
        while True:
            try:
                sent = self.sock.send(rest)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                raise ClientGone() from exc
            if sent == len(rest):
                return
            rest = memoryview(rest)[sent:]
            with trio.move_on_after(self.config.write_timeout) as scope:
                await trio.lowlevel.wait_writable(self.sock)
            if scope.cancelled_caught:
                log.debug("a client stopped reading; dropping the connection")
                raise ClientGone()

    # -- the Responder ------------------------------------------------------------------

    def _extra(self) -> bytes:
        return _CONNECTION_CLOSE if self.close_after and not self.state.closing else b""

    def _headers_out(self, headers: list[RawHeader]) -> list[RawHeader]:
        if self.state.closing:
            self.close_after = True
            return [*headers, (b"connection", b"close")]
        return headers

    async def respond(self, status: int, headers: list[RawHeader], body: bytes) -> None:
        self.response_done = True
        if self.state.closing:
            data = _head(status, self._headers_out(headers))
        else:
            data = _head(status, headers, _CONNECTION_CLOSE if self.close_after else b"")
        if body and not self.head_only:
            data += body
        await self.write(data)

    async def start(self, status: int, headers: list[RawHeader]) -> None:
        self.response_done = False
        headers = self._headers_out(headers)
        if self.version == "1.0":  # no chunked coding: the body ends when the connection does
            self.close_after = True
            self.chunked = False
            await self.write(_head(status, headers, b"" if self.state.closing else _CONNECTION_CLOSE))
            return
        self.chunked = True
        await self.write(_head(status, headers, b"Transfer-Encoding: chunked\r\n" + self._extra()))

    async def send(self, chunk: bytes) -> None:
        if self.head_only or not chunk:
            return
        if self.chunked:
            await self.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        else:
            await self.write(chunk)

    async def end(self) -> None:
        self.response_done = True
        if self.chunked and not self.head_only:
            await self.write(b"0\r\n\r\n")

    async def fail(self, status: int, message: str) -> None:
        """Answer a transport-level error (plain text, ``Connection: close``), then linger."""
        body = message.encode() + b"\n"
        data = _head(status, [(b"content-type", b"text/plain; charset=utf-8"),
                              (b"content-length", str(len(body)).encode()), (b"connection", b"close")]) + body
        try:
            await self.write(data)
        except ClientGone:
            return
        await self.linger()

    async def linger(self) -> None:
        """Half-close and drain for a moment, so the client reads the error before a reset."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            return
        budget = self.config.max_body_size + _RECEIVE_SIZE
        deadline = trio.current_time() + min(2.0, self.config.request_timeout)
        while budget > 0:
            try:
                data = await self._recv(deadline)
            except (_Closed, _Timeout):
                return
            if not data:
                return
            budget -= len(data)
            # a client that never stops sending must not hold the loop, nor the connection past the deadline
            if trio.current_time() > deadline:
                return
            await trio.lowlevel.checkpoint()

    # -- reading ------------------------------------------------------------------------

    async def _wait_idle(self, first: bool) -> bytes:
        """Wait for a request's first bytes as an idle connection (shutdown, a full server and the
        sweeper at the first-byte or keep-alive deadline may end it)."""
        try:
            data = self.sock.recv(_RECEIVE_SIZE)
        except BlockingIOError:
            pass
        except OSError as exc:
            raise _Closed() from exc
        else:
            # the bytes were already there, so nothing has yielded since the last request:
            # let the other connections run, or a client that never pauses starves them
            await trio.lowlevel.checkpoint()
            return data
        state = self.state
        if state.closing:
            raise _Closed()
        if first:
            deadline = self.started_at + self.config.first_byte_timeout
        else:
            deadline = trio.current_time() + self.config.keep_alive_timeout
        state.wait_idle_until(self, deadline)
        try:
            await trio.lowlevel.wait_readable(self.sock)
        except trio.ClosedResourceError:
            raise _Closed() from None
        finally:
            state.idle.pop(self, None)
        try:
            return self.sock.recv(_RECEIVE_SIZE)
        except BlockingIOError:
            raise _Closed() from None
        except OSError as exc:
            raise _Closed() from exc

    async def next_request(self, first: bool) -> _Request | None:
        """The next complete request, reading as needed; ``None`` once the connection is over."""
        if self.ready:
            return self.ready.popleft()
        if self.error is not None:
            await self.fail(self.error.status, self.error.message)
            return None
        if self.eof:
            return None
        if self._in_message:
            # A request pipelined behind the one just answered: nothing was read while that one ran,
            # so its deadline counts from now at the earliest.
            deadline = max(self.request_started, trio.current_time()) + self.config.request_timeout
        else:
            data = await self._wait_idle(first)
            if not data:
                return None
            self.feed(data)
            if self.ready:
                return self.ready.popleft()  # the whole request came in one read: the usual case
            # (a read of nothing but the blank lines allowed between requests begins none: from now)
            deadline = (self.request_started if self._in_message else trio.current_time()) + self.config.request_timeout
        while not self.ready:
            if self.error is not None:
                await self.fail(self.error.status, self.error.message)
                return None
            if self.need_continue:
                self.need_continue = False
                await self.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            try:
                data = await self._recv(deadline)
                if not data:
                    return None
                self.feed(data)
                if not self.ready and self.error is None:
                    # A client that keeps sending never makes the read wait, where the deadline and
                    # the loop's other tasks (a shutdown, other connections) would get their turn.
                    if trio.current_time() > deadline:
                        raise _Timeout()
                    await trio.lowlevel.checkpoint()
            except _Timeout:
                log.debug("a client was too slow sending its request; closing")
                with trio.move_on_after(1.0):
                    await self.fail(408, "Request Timeout")
                return None
        return self.ready.popleft()

    def parser_idle(self) -> bool:
        return not self._in_message

    async def watch_disconnect(self) -> None:
        """Return when the client hangs up while a handler runs.

        It peeks and never consumes: bytes the client sends meanwhile (a pipelined
        request) stay in the kernel until the connection reads its next request, so
        read-ahead stays one read long however many requests are served.
        """
        while True:
            await trio.lowlevel.wait_readable(self.sock)
            try:
                data = self.sock.recv(1, socket.MSG_PEEK)
            except BlockingIOError:
                continue
            except OSError:
                return
            if not data:
                self.eof = True
                return
            await trio.sleep_forever()  # the client is there, and sending

    # -- the loop -----------------------------------------------------------------------

    async def serve(self, helpers: trio.Nursery) -> None:
        first = True
        state = self.state
        # What every request of this connection passes on, read once (the listening address is
        # known before the first connection is accepted).
        server, config, sessions, bound = state.server, state.exchange_config, state.sessions, state.bound
        client, forwarded, disconnected = self.client, self.forwarded, self.watch_disconnect
        while True:
            request = await self.next_request(first)
            if request is None:
                return
            first = False
            self.version = request.version
            method = request.method
            self.head_only = method == b"HEAD"
            self.close_after = request.close or self.eof
            self.chunked = False
            path = _PATHS.get(request.target)
            if path is None:
                path = _path_of(request.target)
            completed = await exchange(server, HttpRequest(_METHODS.get(method) or method.decode("latin-1"), path,
                                                           request.headers, request.body, bound, client, forwarded),
                                       self, config=config, disconnected=disconnected, nursery=helpers,
                                       sessions=sessions)
            if not completed:
                log.debug("%s %s -> aborted", method, path)
                return
            if not self.response_done or self.close_after or state.closing:
                return
            if self.ready:
                # a cooperative pause, so a pipelining client cannot monopolise the loop
                await trio.lowlevel.checkpoint()


_METHODS = {method.encode(): method for method in ("POST", "GET", "DELETE", "OPTIONS", "HEAD")}  # decoded once
_PATHS: dict[bytes, str] = {}  # the path of each request target met (bounded: targets are client input)
_PATHS_LIMIT = 256
_CACHED_LENGTH = 256  # longer targets are client input too unusual to keep


def _path_of(target: bytes) -> str:
    """The path of a request target: no query, and an absolute-form target reduced to its path."""
    path = target.decode("latin-1").split("?", 1)[0]
    if path[:8].lower().startswith(("http://", "https://")):  # absolute-form target (a scheme has no case)
        path = "/" + path.split("://", 1)[1].partition("/")[2]
    if len(_PATHS) < _PATHS_LIMIT and len(target) <= _CACHED_LENGTH:
        _PATHS[target] = path
    return path


class _Timeout(Exception):
    """A read deadline passed."""


async def _handle_connection(sock: socket.socket, client: str, state: _State) -> None:
    connection = _Connection(sock, client, state)
    try:
        # one nursery per connection for the helpers of handlers that suspend (a disconnect
        # watcher, an SSE writer); a handler that runs inline needs none of it
        async with trio.open_nursery() as helpers:
            try:
                await connection.serve(helpers)
            except (ClientGone, _Closed):
                pass
            helpers.cancel_scope.cancel()
    except Exception:
        log.exception("unexpected failure on an HTTP connection")
    finally:
        state.active -= 1
        count = state.per_client.get(client, 1) - 1
        if count:
            state.per_client[client] = count
        else:
            state.per_client.pop(client, None)
        state.idle.pop(connection, None)
        sock.close()


_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
         b"content-length: 20\r\nretry-after: 1\r\nconnection: close\r\n\r\nToo many connections")


def _reject_busy(sock: socket.socket) -> None:
    try:
        sock.send(_BUSY)  # fits any empty send buffer: never waits
    except OSError:
        pass
    finally:
        sock.close()


def _admit(state: _State, client: str) -> bool:
    """Whether a new connection from ``client`` may be served, closing idle ones to make room."""
    config = state.config
    per_client = config.max_connections_per_client
    if per_client is not None and client and state.per_client.get(client, 0) >= per_client:
        # the evicted connection gives its slots back when its task ends, a moment later
        if not state.evict_idle(client):
            return False
    elif state.active >= config.max_connections:
        if not state.evict_idle():
            return False
    return True


async def _accept_loop(listener: socket.socket, connections: trio.Nursery, state: _State) -> None:
    config = state.config
    while True:
        await trio.lowlevel.wait_readable(listener)
        while True:
            try:
                sock, address = listener.accept()
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno in _ACCEPT_CAPACITY_ERRNOS:
                    log.error("accept failed (%s); retrying in 100 ms", errno.errorcode.get(exc.errno, exc.errno))
                    await trio.sleep(0.1)
                    break
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO):
                    continue
                raise
            sock.setblocking(False)
            if sock.family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client = address[0] if isinstance(address, tuple) else ""
            if not _admit(state, client):
                if not state.full:
                    state.full = True
                    log.warning("connection limit reached (%d in all, %s per client); answering 503 until "
                                "connections free up", config.max_connections, config.max_connections_per_client)
                _reject_busy(sock)
                continue
            state.active += 1
            state.per_client[client] = state.per_client.get(client, 0) + 1
            state.full = False
            connections.start_soon(_handle_connection, sock, client, state)
        await trio.lowlevel.checkpoint()


def bind(host: str, port: int, config: ServerConfig, *, reuse_port: bool | None = None,
         listen: bool = True) -> socket.socket:
    """A listening, non-blocking socket for ``host:port`` (``SO_REUSEPORT`` per ``reuse_port`` or the config).

    With ``listen=False`` the socket only holds the port: a supervisor that serves
    nothing itself keeps it so, because a listening socket in a ``SO_REUSEPORT`` group
    gets its share of new connections, which would wait unanswered and then be reset.
    """
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if config.reuse_port if reuse_port is None else reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        if listen:
            sock.listen(config.backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve_socket(
    server: Dispatcher,
    sock: socket.socket,
    config: ServerConfig,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    shutdown_event: trio.Event | None = None,
    local: socket.socket | None = None,
    forwarder: Forwarder | None = None,
) -> None:
    """Serve on an already listening socket (see :func:`serve`); the socket is closed on return.

    A worker among several also passes ``local``, the listening Unix socket the other
    workers forward its sessions' requests to, and ``forwarder``, which reaches theirs
    (see :mod:`mrtr.transports.http.forwarding`).
    """
    server.settle_key()  # a missing MRTR_SECRET is said once, at start, not at the first call
    sock.setblocking(False)
    state = _State(server, config)
    if state.sessions is not None:
        state.sessions.forwarder = forwarder
    host, port = sock.getsockname()[:2]
    state.bound = (host, port)
    try:
        # What the server keeps running beside the transport (its lifespan, its task
        # carrier) starts before the first connection is accepted, so a task store that
        # cannot be reached fails at start, and closes after the last one has drained.
        async with lifespan(server) as hub, trio.open_nursery() as connections:
            if state.sessions is not None:
                state.sessions.run_in(connections)  # a 2025 call outlives the connection that started it
            async with trio.open_nursery() as acceptor:
                acceptor.start_soon(_accept_loop, sock, connections, state)
                acceptor.start_soon(state.sweep)
                if local is not None:
                    acceptor.start_soon(_accept_loop, local, connections, state)
                log.info("serving MCP on http://%s:%d%s (pid %d)", _show_host(host), port, config.exchange.path,
                         os.getpid())
                task_status.started(port)
                if shutdown_event is None:
                    await trio.sleep_forever()
                await shutdown_event.wait()
                acceptor.cancel_scope.cancel()
            trio.lowlevel.notify_closing(sock)
            sock.close()
            log.info("shutting down: %d connection(s) open, grace %.1f s", state.active, config.shutdown_grace)
            hub.close()  # listen streams end with their result instead of holding the drain
            if state.sessions is not None:
                state.sessions.shutdown()  # so do 2025 sessions' GET streams
                connections.start_soon(state.sessions.hand_over)  # recorded calls waiting go to the store now
            state.begin_shutdown()
            connections.cancel_scope.deadline = trio.current_time() + config.shutdown_grace
        log.info("server stopped")
    finally:
        for listener in (sock, local):
            if listener is not None and listener.fileno() != -1:
                trio.lowlevel.notify_closing(listener)
                listener.close()


def _show_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def serve(
    server: Dispatcher,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    shutdown_event: trio.Event | None = None,
    sock: socket.socket | None = None,
    **options: Any,
) -> None:
    """Serve ``server`` over Streamable HTTP at ``http://host:port/mcp`` until shut down.

    Call it inside trio. ``task_status.started(port)`` reports the bound port (so
    ``port=0`` works with ``nursery.start``). Setting ``shutdown_event`` begins a
    graceful shutdown: stop accepting, close idle connections, let in-flight requests
    finish within ``shutdown_grace``, return. Without it, cancel the caller's scope to
    stop at once. ``options`` are the fields of :class:`~mrtr.transports.http.config.ServerConfig`
    and of its :class:`~mrtr.transports.http.config.ExchangeConfig`; ``sock``, when given, is a
    listening socket to serve on instead of binding ``host:port``.
    """
    config = ServerConfig.from_options(options)
    if sock is None:
        sock = bind(host, port, config)
    await serve_socket(server, sock, config, task_status=task_status, shutdown_event=shutdown_event)

