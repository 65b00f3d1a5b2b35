"""An ASGI 3 application that serves an MCP server, for embedding in an existing ASGI host.

It answers through :func:`mrtr.transports.http.exchange.exchange`, the code the native server
uses, so both front ends behave alike. It runs on trio primitives (a nursery per
request, a memory channel for notifications, cancel scopes for disconnects), so the
host must run the application under trio: hypercorn with ``worker_class="trio"``
(or ``hypercorn.trio.serve``), or a trio framework such as quart-trio. An asyncio
host (uvicorn, hypercorn's default worker) cannot run it.

::

    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve
    from mrtr.http import asgi_app

    config = Config()
    config.bind = ["127.0.0.1:8000"]
    trio.run(serve, asgi_app(server), config)
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import trio

from ...core.jsonrpc import Dispatcher
from ..shared import lifespan
from .config import ExchangeConfig, exchange_config
from .exchange import exchange
from .messages import ClientGone, HttpRequest
from .headers import RawHeader
from .sessions import HttpSessions

__all__ = ["ASGIApp", "asgi_app"]

log = logging.getLogger("mrtr.http")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class _Disconnected(Exception):
    pass


class _ASGIResponder:
    """A :class:`~mrtr.transports.http.exchange.Responder` on ``http.response.start``/``http.response.body``."""

    __slots__ = ("_send", "_head")

    def __init__(self, send: Send, head: bool) -> None:
        self._send = send
        self._head = head

    async def _emit(self, message: MutableMapping[str, Any]) -> None:
        try:
            await self._send(message)
        except OSError as exc:  # hosts raise an OSError subclass once the client is gone
            raise ClientGone() from exc

    async def _last(self, message: MutableMapping[str, Any]) -> None:
        # The host answers receive() with http.disconnect as soon as the response is
        # complete, and that cancels the exchange; the message completing the response
        # must not be interrupted by the very disconnect it causes.
        with trio.CancelScope(shield=True):
            await self._emit(message)

    async def respond(self, status: int, headers: list[RawHeader], body: bytes) -> None:
        await self._emit({"type": "http.response.start", "status": status, "headers": headers})
        await self._last({"type": "http.response.body", "body": b"" if self._head else body, "more_body": False})

    async def start(self, status: int, headers: list[RawHeader]) -> None:
        await self._emit({"type": "http.response.start", "status": status, "headers": headers})

    async def send(self, chunk: bytes) -> None:
        await self._emit({"type": "http.response.body", "body": chunk, "more_body": True})

    async def end(self) -> None:
        await self._last({"type": "http.response.body", "body": b"", "more_body": False})


class ASGIApp:
    """Serve ``server`` to an ASGI host that runs its applications under trio.

    ``config`` is the exchange's :class:`~mrtr.transports.http.config.ExchangeConfig` (endpoint
    path, allowed origins, SSE pacing); its fields may be given as keywords instead.
    A body larger than ``max_body_size`` (4 MiB) gets ``413``. ``lifespan`` events run
    the server's lifespan (startup before the first request, shutdown after the host has
    drained the last one) and ``websocket`` connections are refused. The calls of 2025-era
    sessions run in the lifespan's task, so they outlive the requests that start them (a
    dropped connection is not a cancellation in that era); under a host that runs no
    lifespan they run in their request's task. One process holds a session: behind a
    host with several worker processes, route on ``Mcp-Session-Id`` (``docs/eras.md``).
    """

    def __init__(
        self,
        server: Dispatcher,
        config: ExchangeConfig | None = None,
        *,
        max_body_size: int = 4 * 1024 * 1024,
        **options: Any,
    ) -> None:
        self.server = server
        self.config = exchange_config(options, config)
        if isinstance(max_body_size, bool) or not isinstance(max_body_size, int) or max_body_size < 1:
            raise ValueError(f"max_body_size must be a positive integer, got {max_body_size!r}")
        self.max_body_size = max_body_size
        self.sessions = HttpSessions(server.legacy, self.config) if server.legacy is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if not _under_trio():
            await self._wrong_loop(kind, receive, send)
            return
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1000})
        else:
            raise ValueError(f"unsupported ASGI scope type {kind!r}")

    async def _wrong_loop(self, kind: Any, receive: Receive, send: Send) -> None:
        """Refuse to run on an asyncio host: fail the lifespan start-up, or answer 500 saying why."""
        log.error("%s", WRONG_LOOP)
        if kind == "lifespan":
            message = await receive()
            if message.get("type") == "lifespan.startup":
                await send({"type": "lifespan.startup.failed", "message": WRONG_LOOP})
        elif kind == "http":
            body = (WRONG_LOOP + "\n").encode()
            await send({"type": "http.response.start", "status": 500,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                    (b"content-length", str(len(body)).encode("ascii"))]})
            await send({"type": "http.response.body", "body": body, "more_body": False})
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1011})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        # The host sends startup before any request and shutdown after the last one;
        # the server's lifespan (if any) is held open in between, in this task.
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        self.server.settle_key()  # a missing MRTR_SECRET is said now, once, not at the first call
        started = False
        try:
            async with lifespan(self.server) as hub, trio.open_nursery() as calls:
                if self.sessions is not None:
                    self.sessions.run_in(calls)
                started = True
                await send({"type": "lifespan.startup.complete"})
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
                hub.close()
                if self.sessions is not None:
                    self.sessions.shutdown()
                    self.sessions.run_in(None)
                calls.cancel_scope.cancel()  # the host drained its requests: what still runs is abandoned
        except Exception as exc:
            log.exception("lifespan %s failed", "shutdown" if started else "startup")
            failed = "lifespan.shutdown.failed" if started else "lifespan.startup.failed"
            await send({"type": failed, "message": f"{type(exc).__name__}: {exc}"})
            return
        await send({"type": "lifespan.shutdown.complete"})

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method", "GET")
        headers: list[RawHeader] = [(bytes(name), bytes(value)) for name, value in scope.get("headers", [])]
        responder = _ASGIResponder(send, method == "HEAD")
        try:
            body = await self._read_body(headers, receive, responder)
        except _Disconnected:
            return
        except ClientGone:
            return
        if body is None:
            return
        client = scope.get("client")
        request = HttpRequest(method, self._relative_path(scope), headers, body, bound=_bound(scope),
                              client=client[0] if isinstance(client, (list, tuple)) and client else None)

        async def disconnected() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return

        await exchange(self.server, request, responder, config=self.config, disconnected=disconnected,
                       sessions=self.sessions)

    @staticmethod
    def _relative_path(scope: Scope) -> str:
        path = scope.get("path", "/")
        root = scope.get("root_path") or ""
        if root and path.startswith(root) and path != root:
            return path[len(root):]
        return path

    async def _read_body(self, headers: list[RawHeader], receive: Receive, responder: _ASGIResponder) -> bytes | None:
        limit = self.max_body_size
        for name, value in headers:
            if name.lower() == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > limit:
                    await self._too_large(responder)
                    return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected()
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > limit:
                    await self._too_large(responder)
                    return None
                chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _too_large(self, responder: _ASGIResponder) -> None:
        body = f"Content Too Large: the body limit is {self.max_body_size} bytes\n".encode()
        await responder.respond(413, [(b"content-type", b"text/plain; charset=utf-8"),
                                      (b"content-length", str(len(body)).encode()),
                                      (b"connection", b"close")], body)


WRONG_LOOP = (
    "mrtr's ASGI app runs on trio, but this ASGI host runs asyncio; "
    "serve it with hypercorn --worker-class trio (or hypercorn.trio.serve, or quart-trio)"
)
"""What the app says, at lifespan start or on the first request, under an asyncio host."""


def _under_trio() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


def _bound(scope: Scope) -> tuple[str, int] | None:
    """The listening address from the ASGI scope (``server``), when the host reports one."""
    server = scope.get("server")
    if isinstance(server, (list, tuple)) and len(server) == 2 and isinstance(server[0], str) \
            and isinstance(server[1], int):
        return server[0], server[1]
    return None


def asgi_app(server: Dispatcher, config: ExchangeConfig | None = None, *, max_body_size: int = 4 * 1024 * 1024,
             **options: Any) -> ASGIApp:
    """The ASGI application serving ``server`` (see :class:`ASGIApp` for the options)."""
    return ASGIApp(server, config, max_body_size=max_body_size, **options)
