"""Where a client's requests go: a server object in process, a URL, or a subprocess.

A target sends one JSON-RPC request and returns its ``result``, passing the request's
notifications (progress) to a callback on the way, or raises
:class:`~mrtr.client.errors.ClientError`. The MRTR loop, answerers and ``_meta`` live in
:class:`mrtr.Client`; targets only carry messages.

- :class:`InProcessTarget` hands each request to a :class:`~mrtr.core.jsonrpc.Dispatcher`
  exactly as the transports do (``run_in_thread`` and a thread-safe ``notify``), after a
  round trip through JSON both ways so the server sees what a socket would deliver.
- :class:`HTTPTarget` POSTs with httpx (which runs on trio), with the MCP headers, and
  reads an ``application/json`` or ``text/event-stream`` answer. Leaving the calling
  scope closes the stream, which is how Streamable HTTP cancels a request.
- :class:`StdioTarget` starts a subprocess speaking newline-delimited JSON-RPC, routes
  responses by id and progress by token, and sends ``notifications/cancelled`` when a
  caller gives up on a request in flight.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from ..core.errors import INTERNAL_ERROR, INVALID_REQUEST, ProtocolError
from ..core.jsonrpc import Dispatcher, encode, notification, parse_message, parse_response
from ..transports.shared import lifespan, run_in_thread, thread_safe
from .errors import ClientError
from .framing import ACCEPT_ENCODING, Decoded, Events, Lines, too_large
from .headers import request_headers

__all__ = ["Target", "InProcessTarget", "HTTPTarget", "StdioTarget", "OnNotification"]

log = logging.getLogger("mrtr.client")

MAX_MESSAGE_SIZE = 64 * 1024 * 1024
"""The most bytes of one message (a JSON body, one SSE event or one stdio line) the client holds
from a server, counted after any content coding is undone."""

OnNotification = Callable[[dict[str, Any]], None]
"""Receives each notification that belongs to the request in flight."""

EXTRA_HINT = "install the 'client' extra: pip install 'mrtr[client]'"


class Target(Protocol):
    """What :class:`mrtr.Client` needs of a destination."""

    #: Whether ``Mcp-Param-*`` headers matter (the client then needs each tool's schema).
    mirrors_headers: bool

    async def open(self, nursery: trio.Nursery) -> None:
        """Get ready; background tasks go into ``nursery``."""
        ...

    async def send(self, message: dict[str, Any], on_notification: OnNotification,
                   parameters: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
        """Send one request; return its ``result`` or raise ClientError."""
        ...

    async def aclose(self) -> None:
        """Release what :meth:`open` acquired."""
        ...


def _result_of(response: dict[str, Any], request_id: Any, status: int | None = None) -> dict[str, Any]:
    if "method" in response:
        raise ClientError(INVALID_REQUEST, "Invalid response: expected a response, got a notification", status=status)
    answered = response.get("id")
    # An error is this request's only when it carries this id, or a null one (the server
    # could not read the request); anything else answers some other request.
    if answered != request_id and not ("error" in response and answered is None):
        raise ClientError(INVALID_REQUEST, f"Invalid response: id {answered!r} does not match the "
                                           f"request's {request_id!r}", status=status)
    if "error" in response:
        raise ClientError.from_error(response["error"], status=status)
    result: dict[str, Any] = response["result"]
    return result


def _parse(data: bytes | str, status: int | None = None) -> dict[str, Any]:
    try:
        return parse_response(data)
    except ProtocolError as error:
        raise ClientError(error.code, error.message, status=status) from None


# -- in process ----------------------------------------------------------------------------


class InProcessTarget:
    """A server object in this process, reached through its Dispatcher interface."""

    mirrors_headers = False

    def __init__(self, server: Dispatcher) -> None:
        self.server = server

    async def open(self, nursery: trio.Nursery) -> None:
        """Nothing to start: the server runs in the caller's task."""

    def serving(self) -> AbstractAsyncContextManager[Any]:
        """What a transport keeps running around serving: the server's lifespan and task
        carrier, and the hub ``subscriptions/listen`` streams use (:func:`mrtr.transports.shared.lifespan`).

        :class:`mrtr.Client` enters it for as long as the client is open, so a server
        tested in process behaves as it does behind a transport.
        """
        return lifespan(self.server)

    async def send(self, message: dict[str, Any], on_notification: OnNotification,
                   parameters: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
        """Dispatch ``message`` through the server, with the MCP headers a transport would pass."""
        arrived = parse_message(encode(message))
        headers = {name.lower(): value for name, value in request_headers(message, parameters).items()}

        def notify(method: str, params: dict[str, Any]) -> None:
            on_notification(_parse(encode(notification(method, params))))

        response = await self.server.handle(arrived, headers=headers, notify=thread_safe(notify),
                                            run_sync=run_in_thread)
        return _result_of(_parse(encode(response)), message["id"])

    async def aclose(self) -> None:
        """Nothing to release."""


# -- Streamable HTTP -------------------------------------------------------------------------


class HTTPTarget:
    """A Streamable HTTP endpoint (MCP 2026-07-28: one POST per request, no sessions)."""

    mirrors_headers = True

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None, timeout: float | None = 60.0) -> None:
        try:
            import httpx
        except ImportError:
            raise ImportError(f"mrtr.Client over HTTP needs httpx: {EXTRA_HINT}") from None
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise ValueError(f"not a usable MCP endpoint URL {url!r}: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"not a usable MCP endpoint URL {url!r}: it needs http:// or https:// and a host")
        self.url = url
        self._httpx = httpx
        self._headers = dict(headers or {})
        self._timeout = timeout
        self._client: Any = None

    async def open(self, nursery: trio.Nursery) -> None:
        """Create the connection pool."""
        self._client = self._httpx.AsyncClient(timeout=self._timeout, headers=self._headers)

    async def send(self, message: dict[str, Any], on_notification: OnNotification,
                   parameters: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
        """POST ``message``; read one JSON response or an SSE stream ending with it."""
        if self._client is None:
            raise RuntimeError("use the Client in 'async with' before sending")
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Accept-Encoding": ACCEPT_ENCODING,  # what Decoded reads: the body is decoded here, not by httpx
            **request_headers(message, parameters),
        }
        try:
            async with self._client.stream("POST", self.url, content=encode(message), headers=headers) as response:
                status = response.status_code
                content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                decoded = Decoded(response.headers.get("content-encoding", ""))
                if content_type == "text/event-stream" and status == 200:
                    events = Events(MAX_MESSAGE_SIZE)
                    async for chunk in response.aiter_raw():
                        for piece in decoded.feed(chunk):
                            for data in events.feed(piece):
                                received = _parse(data, status)
                                if "method" in received:
                                    on_notification(received)
                                    continue
                                return _result_of(received, message["id"], status)
                    decoded.end()
                    for data in events.end():
                        received = _parse(data, status)
                        if "method" not in received:
                            return _result_of(received, message["id"], status)
                        on_notification(received)
                    raise ClientError(INTERNAL_ERROR, "the server closed the event stream before the response",
                                      status=status)
                announced = response.headers.get("content-length", "")
                if announced.strip().isdigit() and int(announced) > MAX_MESSAGE_SIZE:
                    raise too_large(MAX_MESSAGE_SIZE)  # refused before a byte of it is read
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_raw():
                    for piece in decoded.feed(chunk):
                        size += len(piece)
                        if size > MAX_MESSAGE_SIZE:
                            raise too_large(MAX_MESSAGE_SIZE)
                        chunks.append(piece)
                decoded.end()
                body = b"".join(chunks)
        except self._httpx.HTTPError as exc:
            raise ClientError(INTERNAL_ERROR, f"HTTP request to {self.url} failed: {exc or type(exc).__name__}") \
                from exc
        if content_type == "application/json" and body:
            return _result_of(_parse(body, status), message["id"], status)
        text = body[:200].decode("utf-8", "replace").strip()
        reason = f"HTTP {status}" + (f": {text}" if text else "") + (f" ({content_type})" if content_type else "")
        raise ClientError(INVALID_REQUEST if status >= 400 else INTERNAL_ERROR, reason, status=status)

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


# -- stdio subprocess ----------------------------------------------------------------------


@dataclass
class _Pending:
    on_notification: OnNotification
    done: trio.Event = field(default_factory=trio.Event)
    response: dict[str, Any] | None = None
    failure: ClientError | None = None
    wait: trio.CancelScope = field(default_factory=trio.CancelScope)


class StdioTarget:
    """A server started as a subprocess, one JSON-RPC message per line on its stdin/stdout."""

    mirrors_headers = False

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
                 stderr: int | None = None, close_timeout: float = 5.0, timeout: float | None = 60.0) -> None:
        if not argv:
            raise ValueError("Client.stdio needs a command to run")
        self.argv = list(argv)
        self._env = None if env is None else {**os.environ, **env}
        self._cwd = cwd
        self._stderr = stderr
        self._close_timeout = close_timeout
        self._timeout = timeout
        self._process: trio.Process | None = None
        self._pending: dict[Any, _Pending] = {}
        self._send_lock = trio.Lock()
        self._gone: ClientError | None = None

    async def open(self, nursery: trio.Nursery) -> None:
        """Start the subprocess and the task that reads its stdout."""
        try:
            self._process = await trio.lowlevel.open_process(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                env=self._env, cwd=self._cwd)
        except OSError as exc:
            raise ClientError(INTERNAL_ERROR, f"cannot start {self.argv[0]!r}: {exc}") from exc
        nursery.start_soon(self._read)

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        lines = Lines(MAX_MESSAGE_SIZE)
        try:
            while True:
                chunk = await self._process.stdout.receive_some(65536)
                if not chunk:
                    break
                for line in lines.feed(bytes(chunk)):
                    if line.strip():
                        self._deliver(line)
        except ClientError as error:  # a line past the cap: the server cannot be read any further
            self._gone = error
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        finally:
            self._gone = self._gone or ClientError(INTERNAL_ERROR,
                                                   f"the server process {self.argv[0]!r} closed its output")
            for pending in self._pending.values():
                pending.failure = self._gone
                pending.done.set()

    def _deliver(self, line: bytes) -> None:
        try:
            message = parse_response(line)
        except ProtocolError as error:
            log.warning("ignoring a line from the server that is not a JSON-RPC message: %s", error.message)
            return
        if "method" in message:
            token = (message.get("params") or {}).get("progressToken")
            pending = self._pending.get(token) if message["method"] == "notifications/progress" else None
            if pending is not None and not pending.done.is_set():
                self._extend(pending)  # a server reporting progress is still at work
                pending.on_notification(message)
            return
        pending = self._pending.get(message.get("id"))
        if pending is None:
            log.warning("ignoring a response to no request in flight (id %r)", message.get("id"))
            return
        pending.response = message
        pending.done.set()

    async def _write(self, message: dict[str, Any]) -> None:
        assert self._process is not None and self._process.stdin is not None
        async with self._send_lock:
            try:
                await self._process.stdin.send_all(encode(message) + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise ClientError(INTERNAL_ERROR, f"the server process {self.argv[0]!r} is not reading its input") \
                    from None

    async def send(self, message: dict[str, Any], on_notification: OnNotification,
                   parameters: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
        """Write ``message`` and wait for the response with its id (progress tokens are request ids)."""
        if self._process is None:
            raise RuntimeError("use the Client in 'async with' before sending")
        if self._gone is not None:
            raise self._gone
        request_id = message["id"]
        pending = self._pending[request_id] = _Pending(on_notification)
        try:
            await self._write(message)
            self._extend(pending)
            with pending.wait:
                await pending.done.wait()
            if not pending.done.is_set():
                with trio.CancelScope(shield=True), trio.move_on_after(self._close_timeout):
                    await self._write(notification("notifications/cancelled",
                                                   {"requestId": request_id, "reason": "no answer in time"}))
                raise ClientError(INTERNAL_ERROR, f"no answer from the server {self.argv[0]!r} "
                                                  f"within {self._timeout} s")
        except trio.Cancelled:
            if not pending.done.is_set() and self._gone is None:
                with trio.CancelScope(shield=True), trio.move_on_after(self._close_timeout):
                    await self._write(notification("notifications/cancelled",
                                                   {"requestId": request_id, "reason": "cancelled by the client"}))
            raise
        finally:
            del self._pending[request_id]
        if pending.failure is not None:
            raise pending.failure
        assert pending.response is not None
        return _result_of(pending.response, request_id)

    def _extend(self, pending: _Pending) -> None:
        if self._timeout is not None:
            pending.wait.deadline = trio.current_time() + self._timeout

    async def aclose(self) -> None:
        """Close the server's stdin (its cue to finish), wait for it to exit, kill it if it will not."""
        process, self._process = self._process, None
        if process is None:
            return
        with trio.CancelScope(shield=True):
            if process.stdin is not None:
                await process.stdin.aclose()
            with trio.move_on_after(self._close_timeout):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            if process.stdout is not None:
                await process.stdout.aclose()


