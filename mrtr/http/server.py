"""The native Streamable HTTP server: trio for I/O, h11 for HTTP/1.1.

:func:`serve` runs inside a trio program (tests start it in a nursery and bind port
0); :func:`run` is the blocking entry point that owns the trio loop, installs the
SIGINT/SIGTERM handlers and can fork ``workers`` processes that share the port with
``SO_REUSEPORT``. Every request is answered by :func:`mrtr.http.exchange.exchange`, the
same code the ASGI adapter uses.

A connection's life: wait for the first bytes of a request (the connection counts as
idle meanwhile), read the head and the whole body under one deadline, run the
exchange while a sibling task watches the socket for a disconnect, then either start
the next keep-alive cycle or close. Graceful shutdown stops accepting, closes idle
connections at once and gives in-flight requests ``shutdown_grace`` seconds.
"""

from __future__ import annotations

import errno
import logging
import multiprocessing
import os
import signal
import socket
from collections.abc import Sequence
from dataclasses import dataclass, fields
from http import HTTPStatus
from typing import Any

import h11
import trio

from .exchange import ClientGone, ExchangeConfig, Header, HttpRequest, exchange

__all__ = ["ServerConfig", "run", "serve"]

log = logging.getLogger("mrtr.http")

_RECEIVE_SIZE = 64 * 1024
_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
_REASONS = {status.value: status.phrase.encode("ascii") for status in HTTPStatus}
_REASONS[413] = b"Content Too Large"  # RFC 9110's name


@dataclass(frozen=True)
class ServerConfig:
    """Options of the native server; every one is a keyword of :func:`serve` and :func:`run`.

    ``path``, ``allowed_origins``, ``sse_keepalive`` and ``notification_buffer`` belong
    to the exchange (see :class:`~mrtr.http.exchange.ExchangeConfig`). The rest:

    - ``max_body_size`` (4 MiB): larger bodies get ``413``, as soon as
      ``Content-Length`` says so or a chunked body grows past it;
    - ``max_header_size`` (16 KiB): a request head that does not fit gets ``431``;
    - ``max_connections`` (1000): a connection beyond it is accepted, answered ``503``
      with ``Retry-After: 1`` and closed;
    - ``request_timeout`` (30 s): the time to receive a request's head and body, from
      its first byte (from the accept for a connection's first request); then ``408``;
    - ``keep_alive_timeout`` (5 s): how long an idle keep-alive connection is kept;
    - ``write_timeout`` (30 s): how long one write may wait for a client that does not
      read; then the connection is dropped and the request cancelled;
    - ``shutdown_grace`` (10 s): how long in-flight requests may run on after a
      shutdown began; then they are cancelled;
    - ``backlog`` (1024): the listen backlog; ``reuse_port`` (False): set
      ``SO_REUSEPORT`` so several processes can bind the same port.
    """

    path: str = "/mcp"
    allowed_origins: tuple[str, ...] = ()
    sse_keepalive: float | None = 15.0
    notification_buffer: int = 10_000
    max_body_size: int = 4 * 1024 * 1024
    max_header_size: int = 16 * 1024
    max_connections: int = 1000
    request_timeout: float = 30.0
    keep_alive_timeout: float = 5.0
    write_timeout: float = 30.0
    shutdown_grace: float = 10.0
    backlog: int = 1024
    reuse_port: bool = False

    def __post_init__(self) -> None:
        for name in ("max_body_size", "max_header_size", "max_connections", "backlog"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("request_timeout", "keep_alive_timeout", "write_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if isinstance(self.shutdown_grace, bool) or not isinstance(self.shutdown_grace, (int, float)) \
                or self.shutdown_grace < 0:
            raise ValueError(f"shutdown_grace must be a number of seconds >= 0, got {self.shutdown_grace!r}")
        self.exchange_config()  # validates path, origins and the notification options

    def exchange_config(self) -> ExchangeConfig:
        return ExchangeConfig(
            path=self.path,
            allowed_origins=tuple(self.allowed_origins),
            sse_keepalive=self.sse_keepalive,
            notification_buffer=self.notification_buffer,
        )

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> ServerConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unknown HTTP server option(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        if isinstance(options.get("allowed_origins"), str):
            options = {**options, "allowed_origins": (options["allowed_origins"],)}
        elif options.get("allowed_origins") is not None:
            options = {**options, "allowed_origins": tuple(options["allowed_origins"])}
        return cls(**options)


# -- one connection ------------------------------------------------------------------------


class _State:
    """What the listener and all connections of one :func:`serve` share."""

    def __init__(self, server: Any, config: ServerConfig) -> None:
        self.server = server
        self.config = config
        self.exchange_config = config.exchange_config()
        self.active = 0
        self.rejecting = 0
        self.full = False  # whether the connection limit was hit since the last admitted connection
        self.closing = False
        self.idle: set[trio.CancelScope] = set()

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

    def _headers(self, headers: list[Header]) -> list[Header]:
        if self.state.closing:
            return [*headers, (b"connection", b"close")]
        return headers

    async def respond(self, status: int, headers: list[Header], body: bytes) -> None:
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

    async def start(self, status: int, headers: list[Header]) -> None:
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
        return HttpRequest(event.method.decode("latin-1"), path, list(event.headers), b"".join(chunks))

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


def _bind(host: str, port: int, config: ServerConfig, *, reuse_port: bool | None = None) -> socket.socket:
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


async def _serve_socket(
    server: Any,
    sock: socket.socket,
    config: ServerConfig,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    shutdown_event: trio.Event | None = None,
) -> None:
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    state = _State(server, config)
    host, port = sock.getsockname()[:2]
    try:
        async with trio.open_nursery() as connections:
            async with trio.open_nursery() as acceptor:
                acceptor.start_soon(_accept_loop, listener, connections, state)
                log.info("serving MCP on http://%s:%d%s (pid %d)", _show_host(host), port, config.path, os.getpid())
                task_status.started(port)
                if shutdown_event is None:
                    await trio.sleep_forever()
                await shutdown_event.wait()
                acceptor.cancel_scope.cancel()
            await listener.aclose()
            log.info("shutting down: %d connection(s) open, grace %.1f s", state.active, config.shutdown_grace)
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
    **options: Any,
) -> None:
    """Serve ``server`` over Streamable HTTP at ``http://host:port/mcp`` until shut down.

    Call it inside trio. ``task_status.started(port)`` reports the bound port (so
    ``port=0`` works with ``nursery.start``). Setting ``shutdown_event`` begins a
    graceful shutdown: stop accepting, close idle connections, let in-flight requests
    finish within ``shutdown_grace``, return. Without it, cancel the caller's scope to
    stop at once. ``options`` are the fields of :class:`ServerConfig`.
    """
    config = ServerConfig.from_options(options)
    sock = _bind(host, port, config)
    await _serve_socket(server, sock, config, task_status=task_status, shutdown_event=shutdown_event)


# -- the blocking entry point and workers ----------------------------------------------------


async def _serve_until_signal(server: Any, sock: socket.socket, config: ServerConfig,
                              children: Sequence[Any] = ()) -> None:
    shutdown = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                async for signum in signals:
                    if shutdown.is_set():
                        log.info("received %s while already shutting down", signal.Signals(signum).name)
                        continue
                    log.info("received %s: shutting down gracefully", signal.Signals(signum).name)
                    for child in children:
                        if child.is_alive():
                            try:
                                os.kill(child.pid, signal.SIGTERM)
                            except ProcessLookupError:
                                pass
                    shutdown.set()

            async def watch_children() -> None:
                reported: set[int] = set()
                while True:
                    await trio.sleep(1.0)
                    for child in children:
                        if not child.is_alive() and child.pid not in reported and not shutdown.is_set():
                            reported.add(child.pid)
                            log.error("worker pid %d exited unexpectedly (exit code %s)", child.pid, child.exitcode)

            nursery.start_soon(on_signal)
            if children:
                nursery.start_soon(watch_children)
            await _serve_socket(server, sock, config, shutdown_event=shutdown)
            nursery.cancel_scope.cancel()


def _worker(server: Any, host: str, port: int, config: ServerConfig, inherited: socket.socket) -> None:
    inherited.close()  # the parent's socket; this worker listens on its own
    sock = _bind(host, port, config, reuse_port=True)
    trio.run(_serve_until_signal, server, sock, config)


def run(server: Any, host: str = "127.0.0.1", port: int = 8000, *, workers: int = 1, **options: Any) -> None:
    """Serve ``server`` until SIGINT or SIGTERM, then shut down gracefully and return.

    Blocks; starts its own trio loop (from inside trio, use :func:`serve`). With
    ``workers=N`` the process forks ``N - 1`` more workers; each binds the same port
    with ``SO_REUSEPORT`` and the kernel spreads connections among them. Signals are
    forwarded to the workers, and ``run`` returns once they all exited. Without a
    configured key, one random ``MRTR_SECRET`` is generated and shared (with a warning)
    so a retry can land on any worker. ``options``: see :class:`ServerConfig`.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("run() starts its own trio loop; inside trio, use mrtr.http.serve()")
    config = ServerConfig.from_options(options)
    if workers == 1:
        _ = server.engine  # build the key ring now: a missing MRTR_SECRET is reported at start-up
        sock = _bind(host, port, config)
        trio.run(_serve_until_signal, server, sock, config)
        return
    _ = server.engine  # build the key ring now: forked workers inherit the very same one
    sock = _bind(host, port, config, reuse_port=True)
    bound_port = sock.getsockname()[1]
    context = multiprocessing.get_context("fork")
    children = []
    try:
        for index in range(1, workers):
            child = context.Process(target=_worker, args=(server, host, bound_port, config, sock),
                                    name=f"mrtr-http-worker-{index}")
            child.start()
            children.append(child)
        log.info("started %d worker processes: %s", workers, ", ".join(str(p) for p in [os.getpid()] +
                                                                          [c.pid for c in children]))
        trio.run(_serve_until_signal, server, sock, config, children)
    finally:
        for child in children:
            if child.is_alive() and child.pid is not None:
                try:
                    os.kill(child.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for child in children:
            child.join(config.shutdown_grace + 5.0)
            if child.is_alive():
                log.error("worker pid %d did not stop in time; killing it", child.pid)
                child.kill()
                child.join()
            elif child.exitcode:
                log.error("worker pid %d exited with code %s", child.pid, child.exitcode)
