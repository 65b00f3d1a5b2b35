"""Streamable HTTP of the 2025 era: sessions on the one MCP endpoint, beside the modern exchange.

A 2025-era client (protocol 2025-11-25, 2025-06-18, 2025-03-26) opens a session with
``initialize`` and names it in ``Mcp-Session-Id`` on every later request; the server
sends it requests of its own (``elicitation/create``, ``sampling/createMessage``,
``roots/list``) on SSE streams while a call runs. :class:`HttpSessions` is what a front
end keeps of those sessions; the exchange hands it every request it classifies as
2025-era (:func:`speaks_legacy`), and everything else stays on the modern path.

**Which era.** Each POST is classified once, from its body and ``MCP-Protocol-Version``,
before any session lookup, by the rule every transport reads (:func:`mrtr.core.eras.era_of`;
the first rule that matches wins): a JSON-RPC response (the client answering one of
our requests) is 2025-era; ``initialize`` without the modern ``_meta`` claim is; a
message carrying the claim is modern; one without it is modern when
``MCP-Protocol-Version`` names a modern version, else 2025-era. ``GET`` and
``DELETE`` are 2025-era (a modern-only endpoint answers them ``405``).

**Sessions.** ``initialize`` opens one through the server's legacy era
(:class:`~mrtr.core.jsonrpc.SessionDispatcher`), whose registry mints the id (at least
128 random bits, never the client's) and bounds the sessions; the id goes out as
``Mcp-Session-Id`` on the JSON answer. Every other 2025-era request needs that header
(``400`` without it) and a live session the caller opened (``404`` for an unknown,
expired or ended one, or another principal's, alike). ``MCP-Protocol-Version`` may be
absent (the negotiated version holds) or name any 2025 version; anything else is
``400``. JSON-RPC errors ride ``200`` in this era: 4xx are the transport's own faults.
``DELETE`` ends the session: its handlers are cancelled (a suspended generator is
closed, so its ``finally`` runs), its pending requests fail, its streams end, and its
id is ``404`` from then on.

**Streams.** A request's answer is JSON when its handler finishes without sending
anything; otherwise an SSE stream (:mod:`mrtr.transports.http.streams`) carrying its
notifications, the server's requests to the client, then the response. The client's
answers arrive as POSTs of their own (``202``) and reach the waiting handler by
(session, request id), through the session's :class:`~mrtr.transports.pending.PendingRequests`.
The standalone ``GET`` stream, one per session (a second is ``409``), carries list
changes and resource updates. Each call runs in the runner (the front end's
long-lived nursery), not in the task of the POST that started it: a dropped connection
is not a cancellation in this era, so the call goes on and the client may resume its
stream with ``GET`` and ``Last-Event-ID``. ``notifications/cancelled`` cancels it, as
do the session's end and the answer timeout.

**Several workers.** A session lives in the process that opened it; its id names that
process (``<owner>.<random>``). A request for a session another worker owns is
forwarded there (:mod:`mrtr.transports.http.forwarding`) when the front end has a
forwarder, else answered as unknown.

**Several nodes** (a Redis store: the legacy era's ``nodes`` link is set). The session's
record is in Redis, so every node (every worker, each its own node) serves every request
of it and nothing is forwarded; a node that has no side of a session yet makes one on
its first request. A call runs where its POST arrived, and what it holds stays there:
the server's request ids (``"<node>.<n>"``) and the event ids of its stream
(``<node>.<request>.<stream>-<k>``) name that node. An answer reaching another node is
passed on over the owner's channel (``202``); when that node is gone it is an answer no
request waits for (``202``, dropped, as on one node); a
``notifications/cancelled`` for a call not running here goes to every node; a
``GET`` resuming another node's stream is ``409`` while that node lives, and once it is
gone an SSE stream carrying the call's ``-32603`` error (the client's call ends). The
one-``GET``-stream rule is each node's. A store that cannot be reached is ``503`` with
``-32603``. See ``docs/adr/0015-nodes-on-one-redis.md``.

**Recorded calls** (a shared store keeps them: SQLite for workers, Redis for nodes; the
legacy era's ``calls`` is set). A call that runs a handler is recorded from its first
question or Step, its events reaching the client once recorded; an answer is recorded
before its ``202``; a resumption of a stream this process did not open is served from the
store, and its call adopted here once nobody lives holding it; a stopping process hands
its waiting calls over. Those rules are :mod:`mrtr.transports.http.adoption`'s; then the
ids name this process even without the bus, and the ``409`` and the lost call above apply
only to calls never recorded. See ``docs/adr/0017-2025-calls-survive-by-replay.md``.
"""

from __future__ import annotations

import base64
import json
import logging
import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from ...core.calls import CallJournal, TakenOver
from ...core.eras import LEGACY, LEGACY_VERSIONS, MODERN_VERSIONS, era_of
from ...core.errors import INTERNAL_ERROR, HeaderMismatch, InternalError, InvalidRequest, ProtocolError
from ...core.jsonrpc import NodeLink, Response, SessionDispatcher, is_request
from ..outgoing import NotificationSink, encode_response
from ..pending import PendingRequests
from ..shared import from_any_thread, run_in_thread, thread_safe
from .adoption import Adoption
from .config import ExchangeConfig
from .messages import HttpRequest, Tracked, json_headers, reject
from .headers import RequestHeaders, accepts, media_types
from .streams import MAX_FINISHED_STREAMS, EventStream, Pacing, event_origin, parse_event_id, pump

if TYPE_CHECKING:
    from .forwarding import Forwarder

__all__ = ["SESSION_NOT_FOUND", "HttpSessions", "speaks_legacy"]

log = logging.getLogger("mrtr.http")

SESSION_NOT_FOUND = -32001
"""The code of the ``404`` body for an unknown session (the one the official SDKs and the suite's server use)."""


_SSE_ONLY = b"text/event-stream"
_OWNER_RETURNS = 15.0  # seconds a request waits for the worker owning its session to be replaced, calls recorded
_MAX_NAMED_ID = 64  # request ids longer than this (as JSON) are not named in event ids
NODE_GONE = ("Internal error: the node running this call has stopped; the call is lost (its questions can no "
             "longer be answered), the session goes on: call again")
"""The error a call gets when the node that ran it is gone (its stream resumed elsewhere, or an answer sent to it)."""


def speaks_legacy(message: Mapping[str, Any], headers: RequestHeaders) -> bool:
    """Whether a parsed POST body is 2025-era: :func:`mrtr.core.eras.era_of` with ``MCP-Protocol-Version``."""
    return era_of(message, headers.get("mcp-protocol-version")) == LEGACY


class _StreamSink(NotificationSink):
    """A call's notifications (progress, log messages, ``elicitation/complete``), as events of its stream."""

    __slots__ = ("stream",)

    def __init__(self, stream: EventStream) -> None:
        super().__init__()
        self.stream = stream

    def full(self) -> bool:
        return False  # the stream bounds itself and drops past its bound

    def deliver(self, data: bytes) -> None:
        self.stream.push(data)


class _Session:
    """What the HTTP side keeps of one session: its pending requests, calls in flight and streams."""

    __slots__ = ("id", "version", "pending", "calls", "streams", "standalone", "numbers", "pacing", "ended", "outlet",
                 "node", "mark", "adopted", "recorded")

    def __init__(self, config: ExchangeConfig, node: str | None = None,
                 mark: Callable[[str], str] | None = None) -> None:
        self.id = ""
        self.version = ""
        self.node = node  # this node's name when several serve the session: in request and event ids
        self.mark = mark  # the server's mark of what an event id names (several nodes): see minted()
        self.standalone = EventStream(0, b"" if node is None else f"{node}..".encode("ascii"))
        self.outlet = _StreamSink(self.standalone)  # list changes and resource updates
        self.pending = PendingRequests(self.standalone.send_request, None if node is None else f"{node}.")
        self.calls: dict[Any, trio.CancelScope] = {}
        self.streams: OrderedDict[int, EventStream] = OrderedDict()  # the requests' streams, oldest first
        self.numbers = 0
        self.pacing = Pacing(priming=False, keepalive=config.sse_keepalive)
        self.ended: str | None = None
        self.adopted: dict[str, EventStream] = {}  # streams other processes opened, adopted or followed here
        self.recorded: dict[Any, CallJournal] = {}  # the calls in flight here that a shared store records

    def opened(self, session_id: str, version: str, config: ExchangeConfig) -> None:
        self.id = session_id
        self.version = version
        # Older clients fail on a priming event's empty data (and so cannot poll): 2025-11-25 only.
        priming = version == LEGACY_VERSIONS[0]
        self.pacing = Pacing(priming=priming, keepalive=config.sse_keepalive,
                             poll_after=config.sse_poll_after if priming else None,
                             retry=round(config.sse_retry * 1000))

    def origin(self, node: str, request_id: Any) -> bytes:
        """What the event ids of a request's stream opened by ``node`` start with (several processes serving)."""
        if self.mark is None:
            return b""
        named = json.dumps(request_id, separators=(",", ":")).encode()
        shown = base64.urlsafe_b64encode(named).rstrip(b"=").decode() if len(named) <= _MAX_NAMED_ID else ""
        return f"{node}.{shown}.{self.mark(_marked_text(self.id, node, shown))}.".encode("ascii")

    def open_stream(self, request_id: Any) -> EventStream:
        self.numbers += 1
        origin = self.origin(self.node, request_id) if self.node is not None else b""
        stream = self.streams[self.numbers] = EventStream(self.numbers, origin)
        finished = [number for number, kept in self.streams.items() if kept.done]
        for number in finished[:max(0, len(finished) - MAX_FINISHED_STREAMS)]:
            del self.streams[number]
        return stream

    def stream(self, number: int) -> EventStream | None:
        return self.standalone if number == 0 else self.streams.get(number)

    def delivered(self, stream: EventStream) -> None:
        """A request's stream went out whole: it keeps only its response, for a resumption that lost it."""
        stream.forget_sent()
        self.streams.move_to_end(stream.number)

    def end(self, reason: str) -> None:
        if self.ended is not None:
            return
        self.ended = reason
        self.pending.end(reason)
        self.outlet.close()
        for scope in list(self.calls.values()):
            scope.cancel()
        for stream in self.streams.values():
            stream.finish()
        for stream in self.adopted.values():
            stream.finish()
        self.standalone.finish()


class HttpSessions(Adoption):
    """The 2025-era sessions one front end serves over Streamable HTTP (see the module docs).

    ``legacy`` is the dispatcher's legacy era; ``config`` the exchange's options (SSE
    pacing, polling). The front end runs calls in a nursery of its own that outlives
    connections (:meth:`run_in`); a call started with none runs in the exchange's.
    ``forwarder`` reaches the other workers, when there are any.
    """

    def __init__(self, legacy: SessionDispatcher, config: ExchangeConfig, *,
                 forwarder: Forwarder | None = None) -> None:
        self.legacy = legacy
        self.config = config
        self.forwarder = forwarder
        self._sessions: dict[str, _Session] = {}
        self._runner: trio.Nursery | None = None
        self._linked: NodeLink | None = None  # the link this front end's handlers are registered with
        self._stopping = False

    def __len__(self) -> int:
        return len(self._sessions)

    claims = staticmethod(speaks_legacy)
    """Whether a parsed POST body is 2025-era and served here: :func:`speaks_legacy` itself (no call around it)."""

    def run_in(self, nursery: trio.Nursery | None) -> None:
        """Run calls in ``nursery`` from now on (``None``: in the nursery of each request's exchange)."""
        self._runner = nursery

    def shutdown(self) -> None:
        """The front end stops serving: standalone streams end (calls in flight get the shutdown grace; recorded
        calls waiting for answers are handed over, :meth:`hand_over`)."""
        self._stopping = True
        for session in list(self._sessions.values()):
            session.standalone.finish()

    # -- POST ------------------------------------------------------------------------------

    async def serve(self, request: HttpRequest, message: dict[str, Any], headers: RequestHeaders, out: Tracked,
                    access: Any, disconnected: Callable[[], Awaitable[Any]] | None, nursery: trio.Nursery) -> bool:
        """Answer one 2025-era POST (``speaks_legacy`` said so); whether the answer went out whole."""
        asking = is_request(message)
        request_id = message.get("id") if asking else None
        if asking and message["method"] == "initialize":
            return await self._initialize(request, message, headers, out, access)
        if not await self._version_header(headers, out, request_id):
            return True
        session = await self._gate(request, headers, out, access, request_id, disconnected)
        if session is None:
            return out.finished
        if "method" not in message:
            if session.node is not None and await self._answered(session, message, out, headers, access, nursery):
                return True
            if session.node is not None and await self._routed(session, message, out):
                return True
            if not session.pending.answer(message):
                log.debug("an answer to %r that no request of session %s waits for", message.get("id"),
                          _shown(session.id))
            return await _accepted(out)
        if not asking:
            await self._notification(session, message, headers, access)
            return await _accepted(out)
        if out.record is not None:
            out.record.round = None  # a live call has no rounds: its questions ride this request
        return await self._call(session, message, headers, out, access, disconnected, nursery)

    async def _initialize(self, request: HttpRequest, message: dict[str, Any], headers: RequestHeaders,
                          out: Tracked, access: Any) -> bool:
        header = headers.get("mcp-protocol-version")
        if header in MODERN_VERSIONS:
            await reject(out, 400, HeaderMismatch(
                f"Header mismatch: MCP-Protocol-Version is {header}, but initialize opens a 2025-era session "
                "(a 2026-07-28 client sends no initialize)"), message["id"])
            return True
        nodes = self._nodes()
        session = _Session(self.config, self._node_name(), self.legacy.mark)

        def ended(reason: str) -> None:
            self._ended(session, reason)

        response, session_id = await self.legacy.initialize(
            message, outlet=from_any_thread(session.outlet), headers=headers, auth=access, client=request.client,
            on_end=ended)
        encoded = encode_response(response, out.record)
        extra = []
        if session_id is not None:
            session.opened(session_id, response.message["result"]["protocolVersion"], self.config)
            self._sessions[session_id] = session
            if nodes is not None or session.node is not None:  # notifications/initialized may reach another node
                self.legacy.attach(session_id, outlet=from_any_thread(session.outlet), on_end=ended,
                                   on_ready=session.pending.mark_ready)
            extra.append((b"mcp-session-id", session_id.encode("ascii")))
            if out.cors:
                extra.append((b"access-control-expose-headers", b"Mcp-Session-Id"))
        await out.respond(encoded.status, json_headers(encoded.body, extra), encoded.body)
        return True

    async def _notification(self, session: _Session, message: dict[str, Any], headers: RequestHeaders,
                            access: Any) -> None:
        method = message["method"]
        if method != "notifications/cancelled":
            if method == "notifications/initialized":
                session.pending.mark_ready()
            await self.legacy.notification(session.id, message, headers=headers, auth=access)
            return
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            log.debug("ignoring notifications/cancelled without a valid requestId")
            return
        scope = session.calls.get(request_id)
        if scope is None:
            calls = self.legacy.calls
            if calls is not None:
                try:
                    if await calls.cancel(session.id, request_id) is True:
                        log.info("cancelled the recorded call %r, which no process held", request_id)
                        return  # nobody held it: it ended in the store, its questions withdrawn on its stream
                except ProtocolError:
                    log.warning("could not cancel the recorded call %r: the store is unavailable", request_id)
            nodes = self.legacy.nodes
            if nodes is not None:  # the call may run on another node: the one holding it cancels it
                nodes.send_all("cancel", [session.id, request_id])
                return
            log.debug("ignoring notifications/cancelled for %r: not in flight", request_id)
            return
        reason = params.get("reason") if isinstance(params, dict) else None
        log.info("cancelling request %r%s", request_id, f" ({reason[:200]})" if isinstance(reason, str) else "")
        scope.cancel()

    async def _call(self, session: _Session, message: dict[str, Any], headers: RequestHeaders, out: Tracked,
                    access: Any, disconnected: Callable[[], Awaitable[Any]] | None, nursery: trio.Nursery) -> bool:
        request_id = message["id"]
        if request_id in session.calls:
            refused = encode_response(Response.refusing(request_id, InvalidRequest(
                f"Invalid Request: id {request_id!r} is already in use by a request in flight")), out.record)
            await out.respond(200, json_headers(refused.body), refused.body)
            return True
        opened = trio.current_time()
        stream = session.open_stream(request_id)
        scope = session.calls[request_id] = trio.CancelScope()
        journal = self._journal(session, stream, message)
        (self._runner or nursery).start_soon(self._run_call, session, stream, scope, message, headers, access, out,
                                             journal, name=f"mrtr.http 2025 request {request_id!r}")
        # JSON if the handler finishes without sending anything; with polling on, a call still
        # silent when the connection is due to close gets a stream, closed for polling at once.
        pacing = session.pacing
        poll_at = opened + pacing.poll_after if pacing.poll_after is not None else math.inf
        while stream.count == 0 and not stream.done and trio.current_time() < poll_at:
            await stream.changed(poll_at)
        if stream.done and stream.count == 1 and stream.events[0][0] == 1:
            # The handler sent nothing before its response: one JSON answer, as the modern path gives.
            body = stream.events[0][1]
            await out.respond(200, json_headers(body), body)
            session.streams.pop(stream.number, None)
            return True
        if stream.done and stream.count == 0:  # cancelled before anything was sent: an empty stream
            await out.respond(200, [(b"content-type", _SSE_ONLY), (b"content-length", b"0")], b"")
            session.streams.pop(stream.number, None)
            return True
        await pump(stream, out, 0, pacing, disconnected=disconnected, nursery=nursery, opened=opened)
        if stream.written:
            session.delivered(stream)
        return out.finished

    async def _run_call(self, session: _Session, stream: EventStream, scope: trio.CancelScope,
                        message: dict[str, Any], headers: RequestHeaders, access: Any, out: Tracked | None,
                        journal: CallJournal | None = None) -> None:
        """One call, in the runner: it outlives the connection that asked for it (``journal``: recorded)."""
        request_id = message["id"]
        sink = _StreamSink(stream)
        peer = session.pending.peer(stream.send_request)
        response: Response | None = None
        record = out.record if out is not None else None
        if journal is not None:
            session.recorded[request_id] = journal
        try:
            with scope:
                async with trio.open_nursery() as keeping:
                    if journal is not None:
                        keeping.start_soon(self._record_events, stream, journal, scope)
                    try:
                        response = await self.legacy.respond(session.id, message, peer=peer, headers=headers,
                                                             notify=thread_safe(sink), run_sync=run_in_thread,
                                                             auth=access, journal=journal)
                    except TakenOver:
                        log.info("request %r: its call was taken over by another process", request_id)
                    keeping.cancel_scope.cancel()
        except Exception:  # the legacy era answers its own failures; this is a bug, not a client's fault
            log.exception("unexpected failure serving %s in a 2025 session", message.get("method"))
            response = Response.refusing(request_id, InternalError("Internal error"))
        finally:
            sink.close()
            if session.calls.get(request_id) is scope:
                del session.calls[request_id]
            if journal is not None:
                await self._settle(session, stream, journal, request_id, response, record)
            elif response is None:
                stream.finish()  # cancelled: no response is sent
            else:
                stream.finish(encode_response(response, record).body)

    async def _settle(self, session: _Session, stream: EventStream, journal: CallJournal, request_id: Any,
                      response: Response | None, record: Any) -> None:
        """The end of a recorded call here: handed over (the stream moves), or ended in the store too."""
        if session.recorded.get(request_id) is journal:
            del session.recorded[request_id]
        calls = self.legacy.calls
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            handed = journal.released or journal.taken
            if not handed and response is None and self._stopping and journal.recorded and calls is not None:
                # Stopped by the shutdown while running code: let it go, for a process to adopt it now.
                try:
                    handed = await calls.release(journal)
                except ProtocolError:
                    handed = False
            if handed:
                stream.hand_over()
                return
            stream.finish(None if response is None else encode_response(response, record).body)
            try:
                await journal.flush(done=True)
            except TakenOver:
                pass
            except ProtocolError:
                log.warning("request %r: could not record the end of its call", request_id)
                stream.stored_to(stream.count, True)  # the client is told all the same

    # -- GET and DELETE ------------------------------------------------------------------

    async def serve_session(self, request: HttpRequest, headers: RequestHeaders, out: Tracked, access: Any,
                            disconnected: Callable[[], Awaitable[Any]] | None, nursery: trio.Nursery) -> bool:
        """Answer a ``GET`` (the standalone stream, or a resumption) or a ``DELETE`` (the session's end)."""
        if request.method == "GET" and not accepts(media_types(headers.get("accept") or ""), "text/event-stream"):
            await reject(out, 406, InvalidRequest("Not Acceptable: a GET stream needs Accept: text/event-stream"))
            return True
        if not await self._version_header(headers, out, None):
            return True
        session = await self._gate(request, headers, out, access, None, disconnected)
        if session is None:
            return out.finished
        if request.method == "DELETE":
            try:
                closed = await self.legacy.close(session.id, headers=headers, auth=access)
            except ProtocolError as error:
                await reject(out, _lookup_status(error), error)
                return True
            await out.respond(200 if closed else 404, [(b"content-length", b"0")], b"")
            return True
        last_event_id = headers.get("last-event-id")
        resumed = self._minted(session, last_event_id)  # an id this server did not mint: as if absent
        origin = event_origin(last_event_id) if resumed is not None and session.node is not None else None
        if resumed is not None and origin is not None and resumed[0] != 0 and self.legacy.calls is not None \
                and (origin[0] != session.node or f"{origin[0]}.{resumed[0]}" in session.adopted):
            # A stream this process did not open: the store has it, wherever its call runs.
            key = f"{origin[0]}.{resumed[0]}"
            followed = await self._resumed_from_store(session, key, f"{origin[0]}.{origin[1]}.{origin[2]}.".encode(),
                                                      resumed[1], out, headers, access, nursery)
            if followed is not None:
                await pump(followed, out, resumed[1], session.pacing, disconnected=disconnected, nursery=nursery)
                return out.finished
        if resumed is not None and origin is not None and origin[0] != session.node:
            if resumed[0] != 0:
                await self._resumed_elsewhere(session, (origin[0], origin[1]), out)
                return True
            resumed = None  # another node's GET stream: this node's is a fresh one
        standalone = session.standalone
        if resumed is not None and resumed[0] != 0:
            stream = session.streams.get(resumed[0])
            if stream is None or resumed[1] > stream.count or (stream.done and resumed[1] == stream.count):
                # Nothing is left to send on it, ever: a 4xx that does not mean the session is gone,
                # so a client stops resuming (an empty stream would have it come back forever).
                await reject(out, 410, InvalidRequest(
                    f"Gone: stream {resumed[0]} of this session has ended and nothing is left to resume"))
                return True
            await pump(stream, out, resumed[1], session.pacing, disconnected=disconnected, nursery=nursery)
            if stream.written:
                session.delivered(stream)
            return out.finished
        if resumed is not None and resumed[1] <= standalone.count:
            cursor = resumed[1]  # a resumption takes the stream over from a connection the client lost
        elif standalone.writer:
            await reject(out, 409, InvalidRequest(
                "Conflict: this session's GET stream is already open on another connection"))
            return True
        else:
            cursor = standalone.sent  # what no connection was sent yet
        await pump(standalone, out, cursor, session.pacing, disconnected=disconnected, nursery=nursery)
        return out.finished

    def _minted(self, session: _Session, last_event_id: str | None) -> tuple[int, int] | None:
        """``(stream, position)`` of a ``Last-Event-ID`` this server minted for ``session``, else ``None``.

        On one node an id is ``<stream>-<position>``, a cursor in the session's own streams
        (one with nothing left to send is ``410``). Across nodes an id also names a node and
        a request, which no node can check against what another holds, and a node that is
        gone would answer for that request; the id of a request's stream therefore carries
        the server's mark over the session, the node and the request
        (:meth:`SessionDispatcher.mark`), and one without it (forged, another session's,
        or from before marks) was not minted. The standalone stream's ids name no request
        and need no mark: resuming one is never more than reading the session's own stream.
        """
        resumed = parse_event_id(last_event_id)
        if resumed is None or session.node is None:
            return resumed
        origin = event_origin(last_event_id)
        if origin is None:
            return None
        node, shown, mark = origin
        if resumed[0] == 0:
            return resumed if not shown and not mark else None
        if not self.legacy.marked(_marked_text(session.id, node, shown), mark):
            log.info("session %s: a Last-Event-ID this server did not mint; opening the session's stream",
                     _shown(session.id))
            return None
        return resumed

    # -- shared rules ----------------------------------------------------------------------

    async def _version_header(self, headers: RequestHeaders, out: Tracked, request_id: Any) -> bool:
        """Whether ``MCP-Protocol-Version`` is absent or a 2025 version; else ``400`` went out."""
        values = headers.all("mcp-protocol-version")
        if not values or (len(values) == 1 and values[0] in LEGACY_VERSIONS):
            return True
        shown = ", ".join(values)[:100]
        await reject(out, 400, InvalidRequest(
            f"Bad Request: unsupported MCP-Protocol-Version {shown!r}; this endpoint speaks "
            f"{', '.join(MODERN_VERSIONS)} and, in sessions opened by initialize, {', '.join(LEGACY_VERSIONS)}"),
            request_id)
        return False

    async def _gate(self, request: HttpRequest, headers: RequestHeaders, out: Tracked, access: Any,
                    request_id: Any, disconnected: Callable[[], Awaitable[Any]] | None = None) -> _Session | None:
        """The live session the request names, or ``None`` once an answer went out (400, 404, or forwarded)."""
        values = headers.all("mcp-session-id")
        if len(values) != 1 or not values[0]:
            problem = "is required" if not values or not values[0] else "must appear once"
            await reject(out, 400, InvalidRequest(
                f"Bad Request: the Mcp-Session-Id header {problem}; a 2025-era session starts with initialize"),
                request_id)
            return None
        session_id = values[0]
        nodes = self._nodes()
        owner = self.legacy.owner_of(session_id)
        if nodes is None and owner is not None and owner != self.legacy.owner and self.forwarder is not None \
                and not request.forwarded:
            forwarded = await self.forwarder.forward(owner, request, out, disconnected)
            if forwarded is None and self.legacy.calls is not None:
                forwarded = await self._forwarded_when_back(owner, request, out, disconnected)
            if forwarded is not None:
                if out.record is not None:
                    out.record.result = "forwarded"  # the owner's access line says how it was answered
                return None
        try:
            version = await self.legacy.version_of(session_id, headers=headers, auth=access)
        except ProtocolError as error:
            await reject(out, _lookup_status(error), error, request_id)
            return None
        session = self._sessions.get(session_id) if version is not None else None
        if session is None and version is not None and (nodes is not None or self.legacy.calls is not None):
            session = self._adopt(session_id, version)
        if session is None:
            await reject(out, 404, ProtocolError(
                "Session not found: the Mcp-Session-Id is unknown or expired; initialize a new session",
                code=SESSION_NOT_FOUND), request_id)
            return None
        named = headers.get("mcp-protocol-version")
        if named is not None and named != session.version:
            log.debug("session %s: a request names version %s; serving the negotiated %s", _shown(session_id),
                      named, session.version)
        return session

    async def _forwarded_when_back(self, owner: str, request: HttpRequest, out: Tracked,
                                   disconnected: Callable[[], Awaitable[Any]] | None) -> bool | None:
        """Forward to a worker being replaced (its calls are recorded: its replacement serves its sessions)."""
        assert self.forwarder is not None
        with trio.move_on_after(_OWNER_RETURNS):
            while True:
                await trio.sleep(0.1)
                forwarded = await self.forwarder.forward(owner, request, out, disconnected)
                if forwarded is not None:
                    return forwarded
        return None

    # -- several nodes (sessions in a shared store) ------------------------------------------

    def _nodes(self) -> NodeLink | None:
        """The link to the other nodes, with this front end's handlers registered on it, or ``None``."""
        nodes = self.legacy.nodes
        if nodes is not None and nodes is not self._linked:
            nodes.handle("answer", self._answer_from_node)
            nodes.handle("cancel", self._cancel_from_node)
            self._linked = nodes
        return nodes

    def _adopt(self, session_id: str, version: str) -> _Session:
        """This node's side of a session another node (or process) opened: its own streams, calls and questions."""
        session = _Session(self.config, self._node_name(), self.legacy.mark)
        session.opened(session_id, version, self.config)
        self._sessions[session_id] = session

        def ended(reason: str) -> None:
            self._ended(session, reason)

        self.legacy.attach(session_id, outlet=from_any_thread(session.outlet), on_end=ended,
                           on_ready=session.pending.mark_ready)
        return session

    async def _routed(self, session: _Session, message: dict[str, Any], out: Tracked) -> bool:
        """Pass an answer on to the node whose request it answers, if another; whether it did (and answered)."""
        answered = message.get("id")
        if not isinstance(answered, str):
            return False  # an integer id: asked without nodes (or by no one), answered here
        node = answered.partition(".")[0]
        nodes = self.legacy.nodes
        if nodes is None or not node.isdigit() or node == session.node:
            return False
        try:
            heard = await nodes.send_to(node, "answer", [session.id, message])
        except ValueError:
            await reject(out, 413, InvalidRequest("Payload Too Large: this answer is too large to pass on"))
            return True
        except ProtocolError as error:
            await reject(out, 503, error)
            return True
        if not heard:
            # The node that asked has stopped, and its call with it. This is an answer no request waits for,
            # accepted and dropped as one node does (an HTTP error here makes SDK 1.x clients close the whole
            # session); the call's own error reaches the client on its resumed stream (``_resumed_elsewhere``).
            log.info("an answer to %r of session %s: the node that asked has stopped; dropped",
                     answered[:80], _shown(session.id))
        await _accepted(out)
        return True

    def _answer_from_node(self, body: Any) -> None:
        session = self._sessions.get(str(body[0]))
        message = body[1]
        if session is None or not isinstance(message, dict):
            log.debug("an answer passed on for a session this node does not hold")
            return
        if not session.pending.answer(message):  # only this session's requests: the key is (session, request id)
            session.pending.stash(message)  # a call being adopted here may wait for it in a moment

    def _cancel_from_node(self, body: Any) -> None:
        session = self._sessions.get(str(body[0]))
        scope = session.calls.get(body[1]) if session is not None and isinstance(body[1], (str, int)) else None
        if scope is not None:
            log.info("cancelling request %r (asked on another node)", body[1])
            scope.cancel()

    async def _resumed_elsewhere(self, session: _Session, origin: tuple[str, str], out: Tracked) -> None:
        """A ``Last-Event-ID`` of a stream another node holds: the call's error if it is gone, else a clear 4xx."""
        node, named = origin
        nodes = self.legacy.nodes
        try:
            alive = nodes is not None and await nodes.send_to(node, "probe", None)
        except ProtocolError as error:
            await reject(out, 503, error)
            return
        request_id: Any = None
        if named:
            try:
                request_id = json.loads(base64.urlsafe_b64decode(named + "=" * (-len(named) % 4)))
            except ValueError:
                request_id = None
        if alive or isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            # No relaying of streams between nodes: the client must come back to the node holding it.
            held = "Conflict: this stream is held by another node" if alive else \
                "Gone: this stream was held by a node that has stopped"
            await reject(out, 409 if alive else 410, InvalidRequest(
                f"{held}; a resumption must reach the node that holds the stream (route GET with Last-Event-ID on it)"))
            return
        # The node is gone and so is the call: say so as the call's answer, on the stream the client asked for.
        body = encode_response(Response.refusing(request_id, InternalError(NODE_GONE)), out.record).body
        log.info("session %s: request %r ran on node %s, which has stopped", _shown(session.id), request_id, node)
        event = b"event: message\ndata: " + body + b"\n\n"
        await out.respond(200, [(b"content-type", _SSE_ONLY), (b"cache-control", b"no-cache"),
                                (b"content-length", b"%d" % len(event))], event)

    def _ended(self, session: _Session, reason: str) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
        session.end(reason)


def _marked_text(session_id: str, node: str, shown: str) -> str:
    """What the mark of a request stream's event ids is made over: the session, the node and the request."""
    return f"{session_id}\n{node}\n{shown}"


def _lookup_status(error: ProtocolError) -> int:
    """The status of a failed session lookup: ``-32603`` is the server's (its shared store away), temporary: 503."""
    return 503 if error.code == INTERNAL_ERROR else error.status_hint


async def _accepted(out: Tracked) -> bool:
    if out.record is not None:
        out.record.result = "accepted"
    await out.respond(202, [(b"content-length", b"0")], b"")
    return True


def _shown(session_id: str) -> str:
    """A session id as logs show it: enough to tell sessions apart, never enough to use one."""
    return session_id[:8] + "..."
