"""One HTTP exchange on the MCP endpoint, shared by the native server and the ASGI adapter.

A front end turns the bytes it reads into an :class:`HttpRequest` (method, path,
headers, the whole body) and hands it to :func:`exchange` together with a
:class:`Responder`, the four-method sink that writes the answer back. Everything the
Streamable HTTP transport decides (status codes, header checks, JSON or SSE,
cancellation) happens here, once, so both front ends answer byte for byte alike.

The rules, in order (see ``docs/http.md``):

0. ``GET``/``HEAD`` on the health path (``/healthz``) answers ``200`` at once (no
   other check, no authentication, no access line); then (after the auth metadata
   document, which any ``Host`` may read) a ``Host`` outside the allowed hosts gets
   ``421`` (see :mod:`mrtr.transports.http.hosts`);
1. the path must be the endpoint, else ``404`` (on a server protected with ``auth=``,
   the RFC 9728 metadata document is answered at its well-known path first, open to
   any origin and unauthenticated);
2. a present ``Origin`` must be allowed (localhost or the allow-list), else ``403``;
   from here on every response to an allowed ``Origin`` carries
   ``Access-Control-Allow-Origin: <that origin>`` and ``Vary: Origin`` (CORS);
3. an ``OPTIONS`` with an (allowed) ``Origin`` and ``Access-Control-Request-Method: POST``
   is a CORS preflight, answered ``204`` (see :func:`mrtr.transports.http.cors.preflight_headers`); any other method but
   ``POST`` gets ``405`` with ``Allow: POST``;
   on a protected server the bearer token is verified here (``401``/``400`` with a
   ``WWW-Authenticate`` challenge, ``403`` for missing server-wide scopes, ``503`` when
   the verifier cannot decide), before any MCP header or body is looked at;
4. ``Content-Type: application/json`` else ``415``; ``Accept`` listing both
   ``application/json`` and ``text/event-stream`` else ``406``; no
   ``Content-Encoding`` but ``identity``, else ``415`` with ``Accept-Encoding: identity``
   (the body is not read);
5. the body must parse as one JSON-RPC message: ``-32700``/``-32600`` with ``400``;
6. a notification (or a response, which no server request asked for) is accepted with
   ``202`` and no body;
7. ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` must be
   present and agree with the body, else ``400`` with ``-32020``; on a protected
   server, the scopes the request needs (the called tool's; for a task method or a
   listen stream naming tasks, the scopes of the tools those tasks run) are then
   checked (``403`` ``insufficient_scope``), before any response byte;
8. the request is dispatched (told the remote address, ``client=``); the answer is
   ``application/json`` unless the handler sends a notification first, in which case it
   becomes a ``text/event-stream`` that carries the notifications and ends with the
   response. A JSON answer carries the headers of its error, with its status: a
   request refused for rate is ``429`` with ``Retry-After`` (exposed to a browser's
   script, on an allowed ``Origin``).

When the dispatcher serves the 2025 era too (:attr:`~mrtr.core.jsonrpc.Dispatcher.legacy`)
and the front end passes its :class:`~mrtr.transports.http.sessions.HttpSessions`,
``GET`` and ``DELETE`` (after rule 3 and authentication) and every POST whose body
:meth:`~mrtr.transports.http.sessions.HttpSessions.claims` (after rule 5) go there instead:
sessions, their streams and their answers are that module's; rules 6 to 8 are the
modern era's.

A client that goes away cancels the dispatch: pass ``disconnected``, an async callable
that returns when the client is gone, and :func:`exchange` runs it beside a handler
that suspends and cancels the handler when it returns. A handler that finishes without
suspending (a sync handler running inline) is answered with no helper task at all.

Every answered request gets an access line (:class:`mrtr.transports.logs.AccessRecord`) once it
is written, or marked ``aborted`` when the client went away before it was whole. What goes
into the frames (a notification JSON cannot hold is dropped, a response JSON cannot hold
becomes one ``-32603``, the access record notes what was sent) is the rule every transport
shares, in :mod:`mrtr.transports.outgoing`.

The header rules live in :mod:`mrtr.transports.http.headers`, the origin and CORS rules in
:mod:`mrtr.transports.http.cors`, the Host rule in :mod:`mrtr.transports.http.hosts`, the options in
:mod:`mrtr.transports.http.config`.
"""

from __future__ import annotations

import logging
import types
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

import trio

from ...auth.resource import Reply
from ...auth.bearer import AccessToken, AuthError
from ...auth.urls import WELL_KNOWN
from ...core.errors import HeaderMismatch, InvalidRequest, ParseError
from ...core.jsonrpc import Dispatcher, Response, is_request, parse_message
from ..logs import AccessRecord
from ..outgoing import Encoded, NotificationSink, encode_response
from ..shared import run_in_thread, thread_safe
from .config import ExchangeConfig
from .cors import SESSION_REQUEST_HEADERS, cors_headers, preflight_headers, split_request_headers
from .headers import RequestHeaders, accepts_json_and_sse, check_headers, identity_encoded, is_json
from .messages import JSON, SSE_HEADERS, ClientGone, HttpRequest, Responder, Tracked, json_headers, reject

if TYPE_CHECKING:
    from .sessions import HttpSessions

__all__ = [
    "ClientGone",
    "ExchangeConfig",
    "HttpRequest",
    "Responder",
    "exchange",
]

log = logging.getLogger("mrtr.http")

async def _preflight(out: Tracked, origin: str, headers: RequestHeaders, sessions: bool = False) -> None:
    """Answer a CORS preflight from an allowed origin for a ``POST`` (or, with ``sessions``, a ``GET`` or
    ``DELETE`` of a 2025-era session): ``204``, no body.

    ``Access-Control-Allow-Headers`` echoes the requested headers a client may send and
    leaves the others out (the header is omitted when none is left); the browser then
    refuses the actual request itself, naming the header. ``Allow-Origin`` and ``Vary``
    come from ``out.cors``.
    """
    allowed, refused = split_request_headers(headers.get("access-control-request-headers"),
                                             SESSION_REQUEST_HEADERS if sessions else frozenset())
    if refused:
        log.info("CORS preflight from %r asked for request headers the endpoint does not allow: %s",
                 origin, ", ".join(refused))
    await out.respond(204, preflight_headers(allowed, _SESSION_METHODS if sessions else b"POST"), b"")


_SESSION_METHODS = b"GET, POST, DELETE"  # what the endpoint takes where 2025-era sessions are served


async def _send_reply(out: Tracked, reply: Reply) -> None:
    headers = [*reply.headers, (b"content-length", str(len(reply.body)).encode("ascii"))]
    if any(name == b"www-authenticate" for name, _ in reply.headers):
        headers.append((b"access-control-expose-headers", b"WWW-Authenticate"))  # a browser client reads the challenge
    await out.respond(reply.status, headers, reply.body)


async def _authenticate(rs: Any, headers: RequestHeaders, out: Tracked) -> AccessToken | None:
    """The caller's verified token, or ``None`` once a challenge went out."""
    try:
        return await rs.authenticate(headers.all("authorization"))  # type: ignore[no-any-return]
    except AuthError as error:
        if error.status_hint == 503:
            log.warning("token verification unavailable: %s", error.description)
        await _send_reply(out, rs.challenge(error))
        return None


class _Notifications(NotificationSink):
    """A request's notification sink (:class:`~mrtr.transports.outgoing.NotificationSink`):
    a bounded buffer, drained by a stream once one runs.

    Handler code never blocks on it: past ``notification_buffer`` queued items further
    notifications are dropped.
    """

    __slots__ = ("buffer", "cap", "on_first", "stream")

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.buffer: deque[bytes] = deque()
        self.cap = cap
        self.on_first: Callable[[], None] | None = None
        self.stream: _Stream | None = None

    def full(self) -> bool:
        return len(self.buffer) >= self.cap

    def deliver(self, data: bytes) -> None:
        self.buffer.append(data)
        if self.stream is not None:
            self.stream.wake()
        elif self.on_first is not None:
            self.on_first()


class _Stream:
    """The SSE answer of a request whose handler notifies while it runs: one helper task."""

    def __init__(self, out: Tracked, notes: _Notifications, config: ExchangeConfig,
                 handler: trio.CancelScope) -> None:
        self.out = out
        self.notes = notes
        self.keepalive = config.sse_keepalive
        self.handler = handler
        self.scope = trio.CancelScope()
        self.final: Encoded | None = None
        self.done = trio.Event()
        self.gone = False
        self._wake = trio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        out = self.out
        buffer = self.notes.buffer
        try:
            with self.scope:
                await out.start(200, list(SSE_HEADERS))
                while True:
                    while buffer:
                        await out.send(b"data: " + buffer.popleft() + b"\n\n")
                    if self.final is not None:
                        await out.send(b"data: " + self.final.body + b"\n\n")
                        await out.end()
                        return
                    self._wake = trio.Event()
                    if self.keepalive is None:
                        await self._wake.wait()
                        continue
                    with trio.move_on_after(self.keepalive) as quiet:
                        await self._wake.wait()
                    if quiet.cancelled_caught:
                        await out.send(b": keep-alive\n\n")
        except ClientGone:
            self.gone = True
            self.handler.cancel()
        finally:
            self.done.set()


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], trap: Any) -> Generator[Any, Any, Any]:
    """Go on running ``coro``, already stepped to its first suspension ``trap``, in this task."""
    while True:
        try:
            value = yield trap
        except BaseException as exc:  # delivered by the event loop: hand it to the coroutine
            try:
                trap = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                trap = coro.send(value)
            except StopIteration as done:
                return done.value


async def _watch(disconnected: Callable[[], Awaitable[Any]], scope: trio.CancelScope,
                 handler: trio.CancelScope) -> None:
    with scope:
        await disconnected()
        log.debug("client went away while its request ran; cancelling")
        handler.cancel()


async def _dispatch_and_stream(server: Dispatcher, message: dict[str, Any], headers: RequestHeaders, out: Tracked,
                               config: ExchangeConfig, disconnected: Callable[[], Awaitable[Any]] | None,
                               nursery: trio.Nursery, auth: AccessToken | None = None,
                               client: str | None = None) -> bool:
    """Run the handler and answer JSON, or SSE once it notifies.

    The handler's coroutine is first stepped in this task. A handler that finishes
    without suspending (a sync handler running inline) is answered with no task,
    watcher, channel or cancel scope: JSON, or SSE of its buffered notifications. One
    that suspends goes on in this task while ``nursery`` runs a disconnect watcher and,
    once it notifies, a stream writer; the wire bytes are the same either way. When the
    client goes away, ``nursery``'s scope is cancelled, this task with it. ``client`` is the
    remote address, which the dispatcher tells its middleware (a rate limit's key without
    authentication). A JSON answer carries the headers of the answer's error (``Retry-After``
    of a 429), the one place both front ends write them.
    """
    notes = _Notifications(config.notification_buffer)
    stream: _Stream | None = None
    if auth is None:
        coro = server.respond(message, headers=headers, notify=thread_safe(notes), run_sync=run_in_thread,
                              client=client)
    else:
        coro = server.respond(message, headers=headers, notify=thread_safe(notes), run_sync=run_in_thread, auth=auth,
                              client=client)
    try:
        try:
            trap = coro.send(None)
        except StopIteration as done:
            response: Response = done.value
        else:
            # A client that goes away ends the exchange: the watcher and a failed stream cancel
            # the scope of ``nursery``, which holds this task too (the connection's on the native
            # server, the request's own under ASGI). So no scope of its own is entered per request:
            # one costs more than the rest of a request's trio work.
            gone = nursery.cancel_scope

            def start_stream() -> None:
                nonlocal stream
                stream = notes.stream = _Stream(out, notes, config, gone)
                notes.on_first = None
                nursery.start_soon(stream.run)

            if notes.buffer:
                start_stream()
            else:
                notes.on_first = start_stream
            watcher: trio.CancelScope | None = None
            if disconnected is not None:
                watcher = trio.CancelScope()
                nursery.start_soon(_watch, disconnected, watcher, gone)
            try:
                response = await _resume(coro, trap)
            finally:
                notes.on_first = None
                if watcher is not None:
                    watcher.cancel()
    finally:
        notes.close()
    final = encode_response(response, out.record)
    if stream is not None:
        stream.final = final
        stream.wake()
        await stream.done.wait()
        if stream.gone:
            raise ClientGone()
        return True
    if not notes.buffer:
        if final.headers:
            await out.respond(final.status, json_headers(final.body, _with_exposed(final.headers, out)), final.body)
        else:
            await out.respond(final.status, json_headers(final.body), final.body)
        return True
    await out.start(200, list(SSE_HEADERS))
    while notes.buffer:
        await out.send(b"data: " + notes.buffer.popleft() + b"\n\n")
    await out.send(b"data: " + final.body + b"\n\n")
    await out.end()
    return True


def _with_exposed(extra: tuple[tuple[bytes, bytes], ...], out: Tracked) -> list[tuple[bytes, bytes]]:
    """An answer's own headers, named in ``Access-Control-Expose-Headers`` for a browser client (CORS)."""
    if not out.cors:
        return list(extra)
    return [*extra, (b"access-control-expose-headers", b", ".join(name for name, _ in extra))]


_HEALTHY = b'{"status":"ok"}\n'


async def _health(out: Tracked, method: str) -> None:
    """The health route: ``200`` while the process serves; nothing else is checked or logged."""
    if method not in ("GET", "HEAD"):
        body = b"Method Not Allowed\n"
        await out.respond(405, [(b"content-type", b"text/plain; charset=utf-8"), (b"allow", b"GET, HEAD"),
                                (b"content-length", str(len(body)).encode("ascii"))], body)
        return
    await out.respond(200, [(b"content-type", JSON), (b"cache-control", b"no-store"),
                            (b"content-length", str(len(_HEALTHY)).encode("ascii"))], _HEALTHY)


async def _exchange(server: Dispatcher, request: HttpRequest, out: Tracked, config: ExchangeConfig,
                    disconnected: Callable[[], Awaitable[Any]] | None, nursery: trio.Nursery,
                    sessions: HttpSessions | None) -> bool:
    if request.path == config.health_path:
        await _health(out, request.method)
        return True
    rs = server.auth
    if rs is not None and request.path in (rs.metadata_path, WELL_KNOWN + config.path):
        # public, and names the configured resource, not the Host: answered whatever Host says
        await _send_reply(out, rs.metadata_reply(request.method))
        return True
    headers = RequestHeaders(request.headers)
    host = headers.get("host")
    if not config.hosts.allows(host, request.bound):
        log.info("refused a request for host %r (not an allowed host)", host)
        await reject(out, 421, InvalidRequest(
            f"Misdirected Request: this server does not serve host {host!r}; see allowed_hosts"))
        return True
    if request.path != config.path:
        body = b"Not Found\n"
        await out.respond(404, [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode("ascii"))], body)
        return True
    origin = headers.get("origin")
    if origin is not None:
        if not config.origin_allowed(origin):
            log.info("refused a request from origin %r", origin)
            await reject(out, 403, InvalidRequest("Forbidden: origin not allowed"))
            return True
        out.cors = cors_headers(origin)
    if request.method != "POST":
        if request.method == "OPTIONS" and origin is not None \
                and headers.get("access-control-request-method") in (("POST",) if sessions is None
                                                                      else ("GET", "POST", "DELETE")):
            await _preflight(out, origin, headers, sessions is not None)
            return True
        if sessions is None or request.method not in ("GET", "DELETE"):
            allowed = b"POST" if sessions is None else _SESSION_METHODS
            await reject(out, 405, InvalidRequest(
                f"Method Not Allowed: {request.method}; the MCP endpoint takes {allowed.decode()}"),
                extra=[(b"allow", allowed)])
            return True
    access: AccessToken | None = None
    if rs is not None:
        access = await _authenticate(rs, headers, out)
        if access is None:
            return True
    if sessions is not None and request.method != "POST":
        return await sessions.serve_session(request, headers, out, access, disconnected, nursery)
    if not is_json(headers.get("content-type")):
        await reject(out, 415, InvalidRequest("Unsupported Media Type: Content-Type must be application/json"))
        return True
    if not accepts_json_and_sse(headers.get("accept") or ""):
        await reject(out, 406, InvalidRequest(
            "Not Acceptable: Accept must list both application/json and text/event-stream"))
        return True
    if "content-encoding" in headers and not identity_encoded(headers.all("content-encoding")):
        # A compressed body is not the JSON its Content-Type names, and one that only claims an
        # encoding has a header that lies: neither is read. RFC 9110 §15.5.16 asks for Accept-Encoding.
        await reject(out, 415, InvalidRequest(
            "Unsupported Media Type: Content-Encoding must be identity (compressed request bodies are not accepted)"),
            extra=[(b"accept-encoding", b"identity")])
        return True
    try:
        message = parse_message(request.body)
    except ParseError as error:
        await reject(out, None, error)
        return True
    except InvalidRequest as error:
        await reject(out, None, error, error.request_id)
        return True
    if out.record is not None:
        out.record.request(message)
    if sessions is not None and sessions.claims(message, headers):
        return await sessions.serve(request, message, headers, out, access, disconnected, nursery)
    if not is_request(message):  # a notification or a response: accepted, never answered
        if out.record is not None:
            out.record.result = "accepted"
        await out.respond(202, [(b"content-length", b"0")], b"")
        return True
    try:
        check_headers(server, message, headers)
    except HeaderMismatch as error:
        await reject(out, None, error, message["id"])
        return True
    if rs is not None and access is not None:
        # Mcp-Method and Mcp-Name now agree with the body; read the decoded values from it.
        method = message["method"]
        params = message.get("params")
        target = params.get("name") if isinstance(params, dict) else None
        name = target if isinstance(target, str) else None
        required = await server.required_scopes(message, headers=headers, auth=access)
        try:
            rs.authorize(access, required, f"{method} {name}" if name else method)
        except AuthError as error:
            await _send_reply(out, rs.challenge(error))
            return True
    if sessions is not None and sessions.forwarder is not None and not request.forwarded:
        # A retry continuing a call another worker holds (a proxy's call to a 2025 upstream) goes there.
        holder_of = getattr(server, "holder_of", None)
        owner = holder_of(message) if holder_of is not None else None
        if owner is not None and owner != sessions.legacy.owner:
            forwarded = await sessions.forwarder.forward(owner, request, out, disconnected)
            if forwarded is not None:
                if out.record is not None:
                    out.record.result = "forwarded"  # the owner's access line says how it was answered
                return forwarded
    return await _dispatch_and_stream(server, message, headers, out, config, disconnected, nursery, access,
                                      request.client)


async def exchange(
    server: Dispatcher,
    request: HttpRequest,
    responder: Responder,
    *,
    config: ExchangeConfig,
    disconnected: Callable[[], Awaitable[Any]] | None = None,
    nursery: trio.Nursery | None = None,
    sessions: HttpSessions | None = None,
) -> bool:
    """Answer one HTTP request on the MCP endpoint; return whether the answer went out whole.

    ``disconnected``, when given, is awaited beside a handler that suspends and must
    return when the client goes away; the handler is then cancelled and nothing more
    is written. ``nursery`` is where such helper tasks run (a front end with a
    nursery per connection passes it); without one, the exchange opens its own.
    ``sessions`` serves the 2025 era (a front end whose dispatcher has one passes its
    :class:`~mrtr.transports.http.sessions.HttpSessions`); without it only the modern era is.
    Unexpected failures are logged; a ``500`` goes out only if nothing was written yet.
    """
    record = None if request.path == config.health_path else AccessRecord("http", request.method, request.path)
    out = Tracked(responder, record)
    completed = False
    try:
        if nursery is not None:
            completed = await _guarded(server, request, out, config, disconnected, nursery, sessions)
        else:
            async with trio.open_nursery() as own:
                completed = await _guarded(server, request, out, config, disconnected, own, sessions)
        return completed
    finally:
        if record is not None:
            # "aborted" only when the answer did not go out whole; a delivered one keeps its result
            record.finish(outcome=None if out.finished else "aborted")


async def _guarded(server: Dispatcher, request: HttpRequest, out: Tracked, config: ExchangeConfig,
                   disconnected: Callable[[], Awaitable[Any]] | None, nursery: trio.Nursery,
                   sessions: HttpSessions | None) -> bool:
    try:
        return await _exchange(server, request, out, config, disconnected, nursery, sessions)
    except ClientGone:
        log.debug("client went away while %s %s was answered", request.method, request.path)
        return False
    except Exception:
        log.exception("unexpected failure in the HTTP exchange for %s %s", request.method, request.path)
        if out.record is not None:
            out.record.error(None)
        if not out.started:
            body = b"Internal Server Error\n"
            try:
                await out.respond(500, [(b"content-type", b"text/plain; charset=utf-8"),
                                        (b"content-length", str(len(body)).encode("ascii"))], body)
            except ClientGone:
                pass
        return False
