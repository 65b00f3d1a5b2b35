"""Where a client's requests go: a server object in process, a URL, or a subprocess.

A target sends one JSON-RPC request and returns its ``result``, passing the request's
notifications (progress) to a callback on the way, or raises
:class:`~mrtr.client.errors.ClientError`. The MRTR loop, answerers, ``_meta`` and the
choice of era live in :class:`mrtr.Client`; targets only carry messages.

- :class:`InProcessTarget` hands each request to a :class:`~mrtr.core.jsonrpc.Dispatcher`
  exactly as the transports do (``run_in_thread`` and a thread-safe ``notify``), after a
  round trip through JSON both ways so the server sees what a socket would deliver.
- :class:`HTTPTarget` POSTs with httpx (which runs on trio), with the MCP headers, and
  reads an ``application/json`` or ``text/event-stream`` answer. Leaving the calling
  scope closes the stream, which is how Streamable HTTP cancels a request.
- :class:`StdioTarget` starts a subprocess speaking newline-delimited JSON-RPC, routes
  responses by id and progress by token, and sends ``notifications/cancelled`` when a
  caller gives up on a request in flight.

The two network targets also carry a legacy (2025-era) session once the client has
chosen that era (:attr:`era`): the server may then send requests of its own, which go to
the ``on_request`` of the call they belong to (or to :attr:`on_request` when none can
be told), and notifications that belong to no call, which go to
:attr:`on_notification`. Over HTTP the session adds the ``Mcp-Session-Id`` the server
issued to every request, resumes a stream the server closed before its answer
(``Last-Event-ID``), keeps the standalone GET stream open where the server offers one
(:meth:`HTTPTarget.listen`), and ends the session with ``DELETE``.
"""

from __future__ import annotations

import logging
import math
import os
import re
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from ..core.eras import LATEST_LEGACY_VERSION, LEGACY, MODERN, Era
from ..core.errors import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, ProtocolError
from ..core.wire import META_SUBSCRIPTION_ID
from ..core.jsonrpc import JSONRPC_VERSION, Dispatcher, encode, notification, parse_message, parse_response
from ..transports.shared import lifespan, run_in_thread, thread_safe
from .errors import ClientError, ConnectionFailed, RoundLimitExceeded
from .framing import ACCEPT_ENCODING, Decoded, Events, Lines, too_large
from .headers import request_headers

__all__ = ["Target", "InProcessTarget", "HTTPTarget", "StdioTarget", "OnNotification", "OnRequest", "Authorizer"]

KEEPALIVE_EXPIRY = 4.0
"""Seconds an idle pooled connection is reused, at most: under the 5 s after which mrtr serve, uvicorn and
hypercorn close an idle keep-alive connection, so a request never goes out on a connection the server is
closing at that moment (which fails it unanswered: "server disconnected without sending a response")."""

log = logging.getLogger("mrtr.client")

MAX_MESSAGE_SIZE = 64 * 1024 * 1024
"""The most bytes of one message (a JSON body, one SSE event or one stdio line) the client holds
from a server, counted after any content coding is undone."""

_HEADER_VALUE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")
"""A header value a client sends: visible ASCII, spaces inside (no CR or LF, no control, nothing beyond ASCII)."""

MAX_RESUMPTIONS = 100
"""How many times one legacy request's stream may be resumed (``Last-Event-ID``) before the client gives up."""

OnNotification = Callable[[dict[str, Any]], None]
"""Receives each notification that belongs to the request in flight."""

OnRequest = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Answers a request a legacy server sent: given the request message, returns the response message."""

EXTRA_HINT = "install the 'client' extra: pip install 'mrtr[client]'"

_SESSION_ID = re.compile(r"[\x21-\x7e]{1,256}")


class Authorizer(Protocol):
    """What an HTTP target asks for the ``Authorization`` header and how to answer a 401 or 403.

    :class:`mrtr.client.oauth.OAuth` implements it.
    """

    async def authorization(self, client: Any) -> str | None:
        """The ``Authorization`` header value for the next request, or ``None`` for none."""
        ...

    async def challenged(self, client: Any, status: int, challenge: str, attempt: int) -> bool:
        """A request got ``status`` (401 or 403) with ``WWW-Authenticate: challenge``; whether to send it again."""
        ...


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


def _parse(data: bytes | str, status: int | None = None, *, requests: bool = False) -> dict[str, Any]:
    try:
        return parse_response(data, requests=requests)
    except ProtocolError as error:
        raise ClientError(error.code, error.message, status=status) from None


def _refuse(message: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC_VERSION, "id": message["id"],
            "error": {"code": METHOD_NOT_FOUND, "message": f"Method not found: {message['method']}"}}


async def _unanswered(message: dict[str, Any]) -> dict[str, Any]:
    log.warning("the server sent a %s request outside any call; refused", message.get("method"))
    return _refuse(message)


# -- in process ----------------------------------------------------------------------------


class InProcessTarget:
    """A server object in this process, reached through its Dispatcher interface."""

    mirrors_headers = False
    era: Era = MODERN

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
                   parameters: Mapping[str, tuple[str, ...]] | None = None, patient: bool = False
                   ) -> dict[str, Any]:
        """Dispatch ``message`` through the server, with the MCP headers a transport would pass.

        ``patient`` is accepted for the other targets' sake: in process nothing times out.
        """
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
    """A Streamable HTTP endpoint: one POST per request (MCP 2026-07-28), or a 2025-era session.

    ``auth`` (an :class:`Authorizer`) supplies the ``Authorization`` header and answers
    401 and 403 challenges; without it a challenge is a ClientError with the status.
    """

    mirrors_headers = True

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None, timeout: float | None = 60.0,
                 auth: Authorizer | None = None) -> None:
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
        self.auth = auth
        self._httpx = httpx
        self._headers = dict(headers or {})
        self._timeout = timeout
        self._client: Any = None
        self.era: Era = MODERN
        """Which era requests are sent in; :class:`mrtr.Client` sets it once it knows."""
        self.session_id: str | None = None
        """The legacy session's ``Mcp-Session-Id``, once the server issued one."""
        self.protocol_version = LATEST_LEGACY_VERSION
        """The legacy version negotiated (sent as ``MCP-Protocol-Version``)."""
        self.on_request: OnRequest = _unanswered
        self.on_notification: OnNotification = lambda note: None

    @property
    def http(self) -> Any:
        """The httpx client (for the authorization code to reach metadata and token endpoints)."""
        return self._client

    async def open(self, nursery: trio.Nursery) -> None:
        """Create the connection pool (and give the authorizer the endpoint it authorizes for)."""
        self._client = self._httpx.AsyncClient(timeout=self._timeout, headers=self._headers,
                                               limits=self._httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY))
        bind = getattr(self.auth, "bind", None)
        if bind is not None:
            bind(self.url, nursery)

    def _mcp_headers(self, message: dict[str, Any], parameters: Mapping[str, tuple[str, ...]] | None
                     ) -> dict[str, str]:
        if self.era == MODERN:
            return request_headers(message, parameters)
        headers = {"MCP-Protocol-Version": self.protocol_version}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        return headers

    async def _authorized(self, headers: dict[str, str]) -> dict[str, str]:
        if self.auth is not None:
            value = await self.auth.authorization(self._client)
            if value is not None:
                if not _HEADER_VALUE.fullmatch(value):
                    # httpx would refuse it with an error quoting it, credential and all.
                    raise ClientError(INVALID_REQUEST, "the authorizer gave an Authorization value that is no "
                                                       "header value (a character outside visible ASCII); not sent, "
                                                       "and not shown")
                headers["Authorization"] = value
        return headers

    async def send(self, message: dict[str, Any], on_notification: OnNotification,
                   parameters: Mapping[str, tuple[str, ...]] | None = None,
                   on_request: OnRequest | None = None, patient: bool = False) -> dict[str, Any]:
        """POST ``message``; read one JSON response or an SSE stream ending with it.

        In a legacy session, requests the server sends on that stream go to
        ``on_request`` and their answers are POSTed back; a stream that ends before the
        response is resumed with ``GET`` and ``Last-Event-ID`` when the server gave ids.
        ``patient`` waits without a read timeout (a ``subscriptions/listen`` stream is quiet
        for as long as nothing changes).
        """
        if self._client is None:
            raise RuntimeError("use the Client in 'async with' before sending")
        legacy = self.era == LEGACY
        attempt = 0
        while True:
            attempt += 1
            headers = await self._authorized({
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "Accept-Encoding": ACCEPT_ENCODING,  # what Decoded reads: the body is decoded here, not by httpx
                **self._mcp_headers(message, parameters),
            })
            reading = False
            try:
                extra = {"timeout": self._httpx.Timeout(self._timeout, read=None)} if patient else {}
                async with self._client.stream("POST", self.url, content=encode(message), headers=headers,
                                               **extra) as response:
                    status = response.status_code
                    if status in (401, 403) and self.auth is not None:
                        challenge = response.headers.get("www-authenticate", "")
                        if await self.auth.challenged(self._client, status, challenge, attempt):
                            continue  # leaving the block closes this answer; the request goes again
                    if legacy and message.get("method") == "initialize" and status == 200:
                        self._take_session_id(response.headers.get("mcp-session-id"))
                    if not legacy:
                        return await self._read(response, message, on_notification, on_request, legacy)
                    reading = True  # from here a cancel is told below
                    try:
                        return await self._read(response, message, on_notification, on_request, legacy)
                    except BaseException as error:
                        # A 2025 server does not take a closed stream for a cancel: say it.
                        if not isinstance(error, ClientError) or isinstance(error, RoundLimitExceeded):
                            await self._cancel(message)
                        raise
            except self._httpx.HTTPError as exc:
                raise ConnectionFailed(INTERNAL_ERROR, f"HTTP request to {self.url} failed: "
                                                       f"{exc or type(exc).__name__}") from exc
            except trio.Cancelled:
                # Cancelled before the answer began (the server had sent nothing yet): a 2025
                # server still runs the request, and only a notifications/cancelled stops it.
                if legacy and not reading:
                    await self._cancel(message)
                raise

    def _take_session_id(self, value: str | None) -> None:
        if value is None:
            return
        if not _SESSION_ID.fullmatch(value):
            raise ClientError(INVALID_REQUEST, "the server issued an Mcp-Session-Id that is not 1 to 256 visible "
                                               "ASCII characters")
        self.session_id = value

    async def _read(self, response: Any, message: dict[str, Any], on_notification: OnNotification,
                    on_request: OnRequest | None, legacy: bool) -> dict[str, Any]:
        status = response.status_code
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        decoded = Decoded(response.headers.get("content-encoding", ""))
        if content_type == "text/event-stream" and status == 200:
            events = Events(MAX_MESSAGE_SIZE)
            result = await self._events(response, decoded, events, message, on_notification, on_request, legacy)
            resumed = 0
            while result is None:
                if not (legacy and events.last_id is not None and resumed < MAX_RESUMPTIONS):
                    raise ClientError(INTERNAL_ERROR, "the server closed the event stream before the response",
                                      status=status)
                resumed += 1
                # A 2025-era server may close a stream and have the client come back for the rest.
                await trio.sleep(events.retry if events.retry is not None else 1.0)
                result = await self._resume(events, message, on_notification, on_request)
            return result
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
        if content_type == "application/json" and body:
            return _result_of(_parse(body, status), message["id"], status)
        text = body[:200].decode("utf-8", "replace").strip()
        reason = f"HTTP {status}" + (f": {text}" if text else "") + (f" ({content_type})" if content_type else "")
        raise ClientError(INVALID_REQUEST if status >= 400 else INTERNAL_ERROR, reason, status=status)

    async def _events(self, response: Any, decoded: Decoded, events: Events, message: dict[str, Any],
                      on_notification: OnNotification, on_request: OnRequest | None,
                      legacy: bool) -> dict[str, Any] | None:
        status = response.status_code
        async for chunk in response.aiter_raw():
            for piece in decoded.feed(chunk):
                for data in events.feed(piece):
                    found = await self._event(data, status, message, on_notification, on_request, legacy)
                    if found is not None:
                        return found
        decoded.end()
        for data in events.end():
            found = await self._event(data, status, message, on_notification, on_request, legacy)
            if found is not None:
                return found
        return None

    async def _event(self, data: bytes, status: int, message: dict[str, Any], on_notification: OnNotification,
                     on_request: OnRequest | None, legacy: bool) -> dict[str, Any] | None:
        if legacy and not data.strip():
            return None  # a priming event: an id to resume from, no message
        received = _parse(data, status, requests=legacy)
        if "method" in received:
            if "id" in received:
                answer = await (on_request or self.on_request)(received)
                await self.post(answer)
            elif received["method"] in ("notifications/progress", "notifications/message") or not legacy:
                on_notification(received)  # a log message on a request's stream is that request's
            else:
                self.on_notification(received)
            return None
        if legacy and received.get("id") != message["id"] and received.get("id") is not None:
            log.warning("ignoring a response to another request (id %r) on this stream", received.get("id"))
            return None
        return _result_of(received, message["id"], status)

    async def _resume(self, events: Events, message: dict[str, Any], on_notification: OnNotification,
                      on_request: OnRequest | None) -> dict[str, Any] | None:
        headers = await self._authorized({"Accept": "text/event-stream", "Accept-Encoding": ACCEPT_ENCODING,
                                          "Last-Event-ID": events.last_id or "", **self._mcp_headers(message, None)})
        async with self._client.stream("GET", self.url, headers=headers) as response:
            if response.status_code != 200 or "text/event-stream" not in response.headers.get("content-type", ""):
                raise ClientError(INTERNAL_ERROR, f"the server closed the event stream before the response and "
                                                  f"refused to resume it (HTTP {response.status_code})",
                                  status=response.status_code)
            decoded = Decoded(response.headers.get("content-encoding", ""))
            return await self._events(response, decoded, events, message, on_notification, on_request, True)

    async def _cancel(self, message: dict[str, Any]) -> None:
        if message.get("method") == "initialize":
            return  # never cancelled, as the 2025 lifecycle says
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            try:
                await self.post(notification("notifications/cancelled", {"requestId": message["id"],
                                                                          "reason": "abandoned by the client"}))
            except ClientError as error:
                log.debug("notifications/cancelled was not taken: %s", error)

    async def post(self, message: dict[str, Any]) -> None:
        """POST a notification or a response (legacy session): the server answers 202 with no body."""
        if self._client is None:
            return
        headers = await self._authorized({"Content-Type": "application/json",
                                          "Accept": "application/json, text/event-stream",
                                          **self._mcp_headers(message, None)})
        try:
            response = await self._client.post(self.url, content=encode(message), headers=headers)
        except self._httpx.HTTPError as exc:
            raise ConnectionFailed(INTERNAL_ERROR, f"HTTP request to {self.url} failed: "
                                                   f"{exc or type(exc).__name__}") from exc
        if response.status_code >= 400:
            raise ClientError(INVALID_REQUEST, f"the server refused a {message.get('method', 'response')} with "
                                               f"HTTP {response.status_code}", status=response.status_code)

    async def notify(self, message: dict[str, Any]) -> None:
        """Send a notification to the server (legacy session)."""
        await self.post(message)

    async def listen(self, answered: trio.Event | None = None) -> None:
        """Hold the legacy session's standalone GET stream open, for as long as the server keeps it.

        Requests on it go to :attr:`on_request`, notifications to :attr:`on_notification`.
        A server that offers no stream (405, or anything but an event stream) is left
        alone; one that ends the stream is asked again after its ``retry`` (or 1 s,
        doubling to 30 s while it keeps failing). ``answered`` is set once the server has
        answered the first ``GET``, or that ``GET`` failed, or this ends: a server may drop
        what it would send on a stream that is not open yet, so the session waits for it
        before its first request.
        """
        try:
            pause = 1.0
            while self._client is not None and self.era == LEGACY:
                headers = await self._authorized({"Accept": "text/event-stream", "Accept-Encoding": ACCEPT_ENCODING,
                                                  **self._mcp_headers({}, None)})
                events = Events(MAX_MESSAGE_SIZE)
                try:
                    async with self._client.stream("GET", self.url, headers=headers, timeout=None) as response:
                        if answered is not None:
                            answered.set()
                        if response.status_code != 200 or \
                                "text/event-stream" not in response.headers.get("content-type", ""):
                            return
                        pause = 1.0
                        decoded = Decoded(response.headers.get("content-encoding", ""))
                        async for chunk in response.aiter_raw():
                            for piece in decoded.feed(chunk):
                                for data in events.feed(piece):
                                    await self._standalone(data)
                except (self._httpx.HTTPError, ClientError) as exc:
                    log.debug("the standalone stream of %s ended: %s", self.url, exc)
                    pause = min(pause * 2, 30.0)
                if answered is not None:
                    answered.set()
                await trio.sleep(events.retry if events.retry is not None else pause)
        finally:
            if answered is not None:
                answered.set()

    async def _standalone(self, data: bytes) -> None:
        if not data.strip():
            return
        try:
            received = _parse(data, requests=True)
        except ClientError as error:
            log.warning("ignoring a message on the standalone stream: %s", error.message)
            return
        if "method" not in received:
            log.warning("ignoring a response (id %r) on the standalone stream", received.get("id"))
        elif "id" in received:
            await self.post(await self.on_request(received))
        else:
            self.on_notification(received)

    async def aclose(self) -> None:
        """End a legacy session (``DELETE``, where the server allows it) and close the connection pool."""
        client, self._client = self._client, None
        if client is None:
            return
        with trio.CancelScope(shield=True):
            if self.era == LEGACY and self.session_id is not None:
                with trio.move_on_after(5):
                    try:
                        headers = await self._authorized(self._mcp_headers({}, None))
                        await client.delete(self.url, headers=headers)
                    except Exception as exc:  # the session ends with this process either way
                        log.debug("DELETE of the session at %s failed: %s", self.url, exc)
            await client.aclose()
            closing = getattr(self.auth, "aclose", None)
            if closing is not None:
                await closing()


# -- stdio subprocess ----------------------------------------------------------------------


@dataclass
class _Pending:
    on_notification: OnNotification
    on_request: OnRequest | None = None
    done: trio.Event = field(default_factory=trio.Event)
    response: dict[str, Any] | None = None
    failure: ClientError | None = None
    wait: trio.CancelScope = field(default_factory=trio.CancelScope)
    cancel_sent: bool = False
    patient: bool = False


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
        self._nursery: trio.Nursery | None = None
        self.era: Era = MODERN
        """Which era the process is spoken to in; :class:`mrtr.Client` sets it once it knows."""
        self.on_request: OnRequest = _unanswered
        self.on_notification: OnNotification = lambda note: None

    async def open(self, nursery: trio.Nursery) -> None:
        """Start the subprocess and the task that reads its stdout."""
        try:
            self._process = await trio.lowlevel.open_process(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                env=self._env, cwd=self._cwd)
        except OSError as exc:
            raise ConnectionFailed(INTERNAL_ERROR, f"cannot start {self.argv[0]!r}: {exc}") from exc
        self._nursery = nursery
        nursery.start_soon(self._read)

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout  # held: aclose() drops the process while this may still read
        lines = Lines(MAX_MESSAGE_SIZE)
        try:
            while True:
                chunk = await stdout.receive_some(65536)
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
            self._gone = self._gone or ConnectionFailed(INTERNAL_ERROR,
                                                        f"the server process {self.argv[0]!r} closed its output")
            for pending in self._pending.values():
                pending.failure = self._gone
                pending.done.set()

    def _deliver(self, line: bytes) -> None:
        legacy = self.era == LEGACY
        try:
            message = parse_response(line, requests=legacy)
        except ProtocolError as error:
            log.warning("ignoring a line from the server that is not a JSON-RPC message: %s", error.message)
            return
        if "method" in message:
            if "id" in message:
                assert self._nursery is not None
                self._nursery.start_soon(self._answer, message)
                return
            params = message.get("params") or {}
            token = params.get("progressToken")
            pending = self._pending.get(token) if message["method"] == "notifications/progress" else None
            subscription = (params.get("_meta") or {}).get(META_SUBSCRIPTION_ID) if isinstance(
                params.get("_meta"), dict) else None
            if subscription is not None and pending is None:
                pending = self._pending.get(subscription)  # a listen stream's notification
            if pending is not None and not pending.done.is_set():
                self._extend(pending)  # a server reporting progress is still at work
                pending.on_notification(message)
            elif legacy and message["method"] != "notifications/progress":
                self.on_notification(message)
            return
        pending = self._pending.get(message.get("id"))
        if pending is None:
            log.warning("ignoring a response to no request in flight (id %r)", message.get("id"))
            return
        if pending.failure is None:  # an answer to a call already given up changes nothing
            pending.response = message
        pending.done.set()

    async def _answer(self, message: dict[str, Any]) -> None:
        # A stdio server's request names no call it belongs to: when exactly one call is in
        # flight it is that one's (its answerers, its failure), else the client's.
        waiting = [pending for pending in self._pending.values() if not pending.done.is_set()]
        handler = waiting[0].on_request if len(waiting) == 1 and waiting[0].on_request else self.on_request
        try:
            answer = await handler(message)
        except BaseException as exc:
            abandoned = next((request_id for request_id, pending in self._pending.items()
                              if len(waiting) == 1 and pending is waiting[0]), None)
            if abandoned is not None and isinstance(exc, Exception):
                # The call has failed, whatever the server sends from now on; it is told below,
                # before the caller hears of it (done is set last).
                waiting[0].cancel_sent = True
                waiting[0].failure = exc if isinstance(exc, ClientError) else _Abandoned(exc)
            with trio.CancelScope(shield=True), trio.move_on_after(self._close_timeout):
                try:
                    if abandoned is not None and isinstance(exc, Exception):
                        # The call is given up first, so the server asks nothing more for it.
                        await self._write(notification("notifications/cancelled", {
                            "requestId": abandoned, "reason": "abandoned by the client"}))
                    await self._write({"jsonrpc": JSONRPC_VERSION, "id": message["id"],
                                       "error": {"code": INTERNAL_ERROR, "message": "the client could not answer"}})
                except ClientError:
                    pass
            if abandoned is not None and isinstance(exc, Exception):
                waiting[0].done.set()
                return
            raise
        for pending in waiting:
            self._extend(pending)  # the time the answer took is not the server's
        try:
            await self._write(answer)
        except ClientError:
            pass  # the reader finds the process gone and fails what waits

    async def _write(self, message: dict[str, Any]) -> None:
        process = self._process
        if process is None or process.stdin is None:  # closed while an answer was on its way
            raise ConnectionFailed(INTERNAL_ERROR, f"the server process {self.argv[0]!r} is closed")
        async with self._send_lock:
            try:
                await process.stdin.send_all(encode(message) + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise ConnectionFailed(INTERNAL_ERROR, f"the server process {self.argv[0]!r} is not reading its "
                                                       "input") from None

    async def notify(self, message: dict[str, Any]) -> None:
        """Write a notification (``notifications/initialized`` in a legacy session)."""
        if self._gone is not None:
            raise self._gone
        await self._write(message)

    async def send(self, message: dict[str, Any], on_notification: OnNotification,
                   parameters: Mapping[str, tuple[str, ...]] | None = None,
                   on_request: OnRequest | None = None, patient: bool = False) -> dict[str, Any]:
        """Write ``message`` and wait for the response with its id (progress tokens are request ids).

        ``patient`` waits without a timeout (a ``subscriptions/listen`` stream), and hands it the
        notifications whose ``subscriptionId`` is its id.
        """
        if self._process is None:
            raise RuntimeError("use the Client in 'async with' before sending")
        if self._gone is not None:
            raise self._gone
        request_id = message["id"]
        pending = self._pending[request_id] = _Pending(on_notification, on_request, patient=patient)
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
        if pending.failure is not None and pending.failure is not self._gone and not pending.cancel_sent:
            # The call is abandoned (an answerer failed, the question cap was met): tell the server.
            with trio.CancelScope(shield=True), trio.move_on_after(self._close_timeout):
                try:
                    await self._write(notification("notifications/cancelled",
                                                   {"requestId": request_id, "reason": "abandoned by the client"}))
                except ClientError:
                    pass
        if isinstance(pending.failure, _Abandoned):
            raise pending.failure.cause
        if pending.failure is not None:
            raise pending.failure
        assert pending.response is not None
        return _result_of(pending.response, request_id)

    def _extend(self, pending: _Pending) -> None:
        if self._timeout is not None and not pending.patient:
            pending.wait.deadline = trio.current_time() + self._timeout
        else:
            pending.wait.deadline = math.inf

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


class _Abandoned(ClientError):
    """Carries an answerer's own exception from the reader's task to the call it belonged to."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(INTERNAL_ERROR, "an answerer failed")
        self.cause = cause
