"""The native Streamable HTTP server: trio for I/O, h11 for HTTP/1.1.

:func:`serve` runs inside a trio program (tests start it in a nursery and bind port
0); the blocking entry point with signals and worker processes is
:func:`mrtr.http.workers.run`. Every request is answered by
:func:`mrtr.http.exchange.exchange`, the same code the ASGI adapter uses.

A connection's life: wait for the first bytes of a request (the connection counts as
idle meanwhile), read the head and the whole body under one deadline, run the
exchange while a sibling task watches the socket for a disconnect, then either start
the next keep-alive cycle or close. Graceful shutdown stops accepting, closes idle
connections at once and gives in-flight requests ``shutdown_grace`` seconds.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

import h11
import trio

from ..transport import lifespan
from .config import ServerConfig
from .exchange import ClientGone, HttpRequest, exchange
from .headers import RawHeader

__all__ = ["bind", "serve", "serve_socket"]

log = logging.getLogger("mrtr.http")

_RECEIVE_SIZE = 64 * 1024
_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
_REASONS = {status.value: status.phrase.encode("ascii") for status in HTTPStatus}
_REASONS[413] = b"Content Too Large"  # RFC 9110's name


# -- one connection ------------------------------------------------------------------------


class _State:
    """What the listener and all connections of one :func:`serve` share."""

    def __init__(self, server: Any, config: ServerConfig) -> None:
        self.server = server
        self.config = config
        self.exchange_config = config.exchange
        self.active = 0
        self.rejecting = 0
        self.full = False  # whether the connection limit was hit since the last admitted connection
        self.closing = False
        self.idle: set[trio.CancelScope] = set()
        self.bound: tuple[str, int] | None = None  # the listening address, for the exchange's Host rule

    def begin_shutdown(self) -> None:
        self.closing = True
        for scope in list(self.idle):
            scope.cancel()


class _Closed(Exception):
    """The connection is over (EOF, reset, timeout or a fatal error already answered)."""


class _Connection:
    def __init__(self, stream: trio.SocketStream, state: _State) -> None:
        self.stream = stream
        self.state = state
        self.config = state.config
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=state.config.max_header_size)
        self.accepted_at = trio.current_time()
        self.request_method = b""

    # -- writing ---------------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        if not data:
            return
        with trio.move_on_after(self.config.write_timeout) as scope:
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise ClientGone() from exc
        if scope.cancelled_caught:
            log.debug("a client stopped reading; dropping the connection")
            raise ClientGone()

    def _headers(self, headers: list[RawHeader]) -> list[RawHeader]:
        if self.state.closing:
            return [*headers, (b"connection", b"close")]
        return headers

    async def respond(self, status: int, headers: list[RawHeader], body: bytes) -> None:
        try:
            data = self.conn.send(h11.Response(status_code=status, headers=self._headers(headers),
                                               reason=_REASONS.get(status, b"")))
            if body and self.request_method != b"HEAD":
                data += self.conn.send(h11.Data(data=body))
            data += self.conn.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:  # pragma: no cover - a bug, but never a crash
            log.error("cannot send the response: %s", exc)
            raise ClientGone() from exc
        await self.write(data)

    async def start(self, status: int, headers: list[RawHeader]) -> None:
        data = self.conn.send(h11.Response(status_code=status, headers=self._headers(headers),
                                           reason=_REASONS.get(status, b"")))
        await self.write(data)

    async def send(self, chunk: bytes) -> None:
        if self.request_method == b"HEAD":
            return
        await self.write(self.conn.send(h11.Data(data=chunk)))

    async def end(self) -> None:
        await self.write(self.conn.send(h11.EndOfMessage()))

    async def fail(self, status: int, message: str) -> None:
        """Answer a transport-level error (plain text, ``Connection: close``) if still possible."""
        if self.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        body = message.encode() + b"\n"
        headers = [(b"content-type", b"text/plain; charset=utf-8"),
                   (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
        try:
            data = self.conn.send(h11.Response(status_code=status, headers=headers, reason=_REASONS.get(status, b"")))
            data += self.conn.send(h11.Data(data=body)) + self.conn.send(h11.EndOfMessage())
        except h11.LocalProtocolError:
            return
        try:
            await self.write(data)
        except ClientGone:
            return
        await self.linger()

    async def linger(self) -> None:
        """Half-close and drain for a moment, so the client reads the error before a reset."""
        try:
            await self.stream.send_eof()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return
        budget = self.config.max_body_size + _RECEIVE_SIZE
        with trio.move_on_after(min(2.0, self.config.request_timeout)):
            while budget > 0:
                try:
                    data = await self.stream.receive_some(_RECEIVE_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not data:
                    return
                budget -= len(data)

    # -- reading ---------------------------------------------------------------------

    async def _receive(self) -> None:
        try:
            data = await self.stream.receive_some(_RECEIVE_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise _Closed() from exc
        self.conn.receive_data(data)

    async def _next_event(self) -> Any:
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                await self._receive()
                continue
            return event

    async def _wait_for_request(self, first: bool) -> float:
        """Wait (as an idle connection) until request bytes are there; return the read deadline."""
        if self.conn.trailing_data[0]:
            return trio.current_time() + self.config.request_timeout
        if self.state.closing:
            raise _Closed()
        if first:
            deadline = self.accepted_at + self.config.request_timeout
        else:
            deadline = trio.current_time() + self.config.keep_alive_timeout
        with trio.CancelScope(deadline=deadline) as idle:
            self.state.idle.add(idle)
            try:
                await self._receive()
            finally:
                self.state.idle.discard(idle)
        if idle.cancelled_caught:
            raise _Closed()
        return deadline if first else trio.current_time() + self.config.request_timeout

    async def read_request(self, first: bool) -> HttpRequest:
        deadline = await self._wait_for_request(first)
        with trio.CancelScope(deadline=deadline) as scope:
            try:
                return await self._read_request()
            except h11.RemoteProtocolError as exc:
                status = exc.error_status_hint if exc.error_status_hint in (400, 431) else 400
                log.debug("malformed request: %s", exc)
                await self.fail(status, "Request Header Fields Too Large" if status == 431 else f"Bad Request: {exc}")
                raise _Closed() from None
        assert scope.cancelled_caught
        log.debug("a client was too slow sending its request; closing")
        with trio.move_on_after(1.0):
            await self.fail(408, "Request Timeout")
        raise _Closed()

    async def _read_request(self) -> HttpRequest:
        event = await self._next_event()
        if isinstance(event, h11.ConnectionClosed):
            raise _Closed()
        if not isinstance(event, h11.Request):  # pragma: no cover - h11 yields a Request first
            raise _Closed()
        self.request_method = event.method
        # h11 bounds only a head that is still incomplete; one read can bring a whole big head
        head_size = len(event.method) + len(event.target) + 12 + sum(len(n) + len(v) + 4 for n, v in event.headers)
        if head_size > self.config.max_header_size:
            await self.fail(431, "Request Header Fields Too Large")
            raise _Closed()
        limit = self.config.max_body_size
        length = _content_length(event.headers)
        if length is not None and length > limit:
            await self.fail(413, f"Content Too Large: the body limit is {limit} bytes")
            raise _Closed()
        if self.conn.they_are_waiting_for_100_continue:
            await self.write(self.conn.send(h11.InformationalResponse(status_code=100, headers=[])))
        chunks: list[bytes] = []
        size = 0
        while True:
            part = await self._next_event()
            if isinstance(part, h11.Data):
                size += len(part.data)
                if size > limit:
                    await self.fail(413, f"Content Too Large: the body limit is {limit} bytes")
                    raise _Closed()
                chunks.append(part.data)
            elif isinstance(part, h11.EndOfMessage):
                break
            elif isinstance(part, h11.ConnectionClosed):
                raise _Closed()
        target = event.target.decode("latin-1")
        path = target.split("?", 1)[0]
        if path.startswith(("http://", "https://")):  # absolute-form target
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        return HttpRequest(event.method.decode("latin-1"), path, list(event.headers), b"".join(chunks),
                           bound=self.state.bound)

    async def watch_disconnect(self) -> None:
        """Return when the client hangs up; bytes it sends meanwhile are kept for the next request."""
        budget = self.config.max_header_size + self.config.max_body_size
        while True:
            try:
                data = await self.stream.receive_some(_RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                return
            self.conn.receive_data(data)
            budget -= len(data)
            if budget <= 0:  # a pipelining client: it is clearly there; stop reading ahead
                await trio.sleep_forever()

    # -- the loop --------------------------------------------------------------------

    async def serve(self) -> None:
        first = True
        while True:
            try:
                request = await self.read_request(first)
            except _Closed:
                return
            first = False
            completed = await exchange(self.state.server, request, self, config=self.state.exchange_config,
                                       disconnected=self.watch_disconnect)
            log.debug("%s %s -> %s", request.method, request.path, "done" if completed else "aborted")
            if not completed or self.conn.our_state is not h11.DONE or self.conn.their_state is not h11.DONE:
                return
            if self.state.closing:
                return
            try:
                self.conn.start_next_cycle()
            except h11.LocalProtocolError:
                return


def _content_length(headers: Sequence[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _handle_connection(stream: trio.SocketStream, state: _State) -> None:
    try:
        await _Connection(stream, state).serve()
    except (trio.BrokenResourceError, trio.ClosedResourceError, ClientGone, _Closed):
        pass
    except Exception:
        log.exception("unexpected failure on an HTTP connection")
    finally:
        state.active -= 1
        with trio.CancelScope(shield=True), trio.move_on_after(1.0):
            await trio.aclose_forcefully(stream)


_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
         b"content-length: 20\r\nretry-after: 1\r\nconnection: close\r\n\r\nToo many connections")


async def _reject_busy(stream: trio.SocketStream, state: _State) -> None:
    try:
        with trio.move_on_after(1.0):
            await stream.send_all(_BUSY)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        state.rejecting -= 1
        await trio.aclose_forcefully(stream)


async def _accept_loop(listener: trio.SocketListener, connections: trio.Nursery, state: _State) -> None:
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno in _ACCEPT_CAPACITY_ERRNOS:
                log.error("accept failed (%s); retrying in 100 ms", errno.errorcode.get(exc.errno, exc.errno))
                await trio.sleep(0.1)
                continue
            raise
        if state.active >= state.config.max_connections:
            if state.rejecting >= state.config.max_connections:
                await trio.aclose_forcefully(stream)
                continue
            state.rejecting += 1
            if not state.full:
                state.full = True
                log.warning("connection limit (%d) reached; answering 503 until connections free up",
                            state.config.max_connections)
            connections.start_soon(_reject_busy, stream, state)
            continue
        state.active += 1
        state.full = False
        connections.start_soon(_handle_connection, stream, state)


def bind(host: str, port: int, config: ServerConfig, *, reuse_port: bool | None = None) -> socket.socket:
    """A listening, non-blocking socket for ``host:port`` (``SO_REUSEPORT`` per ``reuse_port`` or the config)."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if config.reuse_port if reuse_port is None else reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(config.backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve_socket(
    server: Any,
    sock: socket.socket,
    config: ServerConfig,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    shutdown_event: trio.Event | None = None,
) -> None:
    """Serve on an already listening socket (see :func:`serve`); the socket is closed on return."""
    await _serve_listener(server, sock, config, task_status=task_status, shutdown_event=shutdown_event)


async def _serve_listener(
    server: Any,
    sock: socket.socket,
    config: ServerConfig,
    *,
    task_status: trio.TaskStatus[int],
    shutdown_event: trio.Event | None,
) -> None:
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    state = _State(server, config)
    host, port = sock.getsockname()[:2]
    state.bound = (host, port)
    try:
        # What the server keeps running beside the transport (its lifespan, its task
        # carrier) starts before the first connection is accepted, so a task store that
        # cannot be reached fails at start, and closes after the last one has drained.
        async with lifespan(server) as hub, trio.open_nursery() as connections:
            async with trio.open_nursery() as acceptor:
                acceptor.start_soon(_accept_loop, listener, connections, state)
                log.info("serving MCP on http://%s:%d%s (pid %d)", _show_host(host), port, config.exchange.path,
                         os.getpid())
                task_status.started(port)
                if shutdown_event is None:
                    await trio.sleep_forever()
                await shutdown_event.wait()
                acceptor.cancel_scope.cancel()
            await listener.aclose()
            log.info("shutting down: %d connection(s) open, grace %.1f s", state.active, config.shutdown_grace)
            hub.close()  # listen streams end with their result instead of holding the drain
            state.begin_shutdown()
            connections.cancel_scope.deadline = trio.current_time() + config.shutdown_grace
        log.info("server stopped")
    finally:
        with trio.CancelScope(shield=True):
            await listener.aclose()


def _show_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def serve(
    server: Any,
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
    stop at once. ``options`` are the fields of :class:`~mrtr.http.config.ServerConfig`
    and of its :class:`~mrtr.http.config.ExchangeConfig`; ``sock``, when given, is a
    listening socket to serve on instead of binding ``host:port``.
    """
    config = ServerConfig.from_options(options)
    if sock is None:
        sock = bind(host, port, config)
    else:
        sock.setblocking(False)
    await serve_socket(server, sock, config, task_status=task_status, shutdown_event=shutdown_event)
