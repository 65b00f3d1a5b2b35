"""The stdio transport: newline-delimited JSON-RPC over a process's stdin and stdout.

The client starts the server as a subprocess and writes one JSON-RPC message per line
to its stdin; the server writes one message per line to its stdout. stdout carries
protocol messages and nothing else; logs go to stderr.

- Each request runs in its own task, so a slow tool does not hold up a fast one.
  Responses are written by a single writer task, one whole line at a time, so lines
  never interleave. Notifications a handler sends (progress, log messages) are queued
  in order and therefore reach the client before that request's response.
- ``notifications/cancelled`` (``params.requestId``) cancels the matching request in
  flight; nothing more is written for it. Other client notifications are ignored by the
  modern era.
- A request reusing the id of a request still in flight is refused with ``-32600``;
  the first one keeps running.
- At most ``max_in_flight`` requests (64 by default) are held at once, counting a
  request until its response line is written: when the client does not read stdout,
  the server stops reading stdin, so memory stays bounded. Notifications queued
  behind a stalled stdout are capped too (``notification_buffer``); beyond it they are
  dropped, never the responses.
- Each answered request gets an access line on the ``mrtr.access`` logger (see
  :mod:`mrtr.transports.logs`). What goes into a line (a notification JSON cannot hold
  is dropped, a response JSON cannot hold becomes one ``-32603``, the access record
  notes what was sent) is the rule every transport shares, in
  :mod:`mrtr.transports.outgoing`.
- On EOF the server stops reading, lets the requests in flight finish (up to a grace
  period, 10 s by default, after which they are cancelled without a response) and
  returns.

Both protocol eras are served when the dispatcher has a legacy era
(:attr:`~mrtr.core.jsonrpc.Dispatcher.legacy`). The first request pins the connection:
``initialize`` (or any request without the modern ``_meta`` claim) to the legacy era,
a request carrying the claim to the modern one; a ``server/discover`` probe is answered
by the modern era and pins nothing, and notifications before the first request are
kept (16 at most) and replayed into the era chosen. Once pinned, a request of the other
era is refused (``-32600`` on a legacy connection; ``initialize`` on a modern one gets
the modern era's ``-32022`` naming its versions). In a legacy connection the server's
own requests (``elicitation/create``, ``sampling/createMessage``, ``roots/list``) are
lines on stdout too, and the client's answers, lines on stdin, go to the call waiting
for them (:mod:`mrtr.transports.pending`); a call waiting for an answer gives its
``max_in_flight`` place back meanwhile, so the answers can always be read. On EOF the
session ends and such calls fail at once instead of waiting out the grace period.

Errors that cannot be tied to a request (a line that is not JSON, a line over the size
limit, a message whose ``id`` cannot be read) are sent without an ``id``: the MCP
schema makes ``id`` optional on error responses and does not allow ``null``.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import stat
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from ..core.eras import LEGACY, MODERN, era_of
from ..core.errors import InvalidRequest, ParseError, ProtocolError
from ..core.jsonrpc import Dispatcher, Response, is_request, parse_message
from ..core.peer import Peer, Sent
from .logs import AccessRecord
from .outgoing import NotificationSink, encode_response
from .pending import PendingRequests
from .shared import Hub, from_any_thread, lifespan, run_in_thread, thread_safe

__all__ = [
    "DEFAULT_GRACE_PERIOD",
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_NOTIFICATION_BUFFER",
    "STDIO_CLIENT",
    "run_stdio",
    "serve_stdio",
]

log = logging.getLogger("mrtr.stdio")

DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024
"""The longest line accepted (without its newline); longer lines are refused and skipped."""

DEFAULT_GRACE_PERIOD = 10.0
"""Seconds the requests in flight get to finish after stdin reaches EOF."""

DEFAULT_MAX_IN_FLIGHT = 64
"""Requests held at once, from the line read until the response line written."""

DEFAULT_NOTIFICATION_BUFFER = 10_000
"""Notifications queued behind a slow stdout before further ones are dropped."""

STDIO_CLIENT = f"stdio:{os.getpid()}"
"""What stdio tells the dispatcher its peer is (``client=``): the one process at the other end of the pipes.

``stdio:`` and this process's id: every stdio process serves its own client, and two of
them keeping state in one store (a rate limit's buckets in the SQLite file a server with
task tools uses by default) must not count as one client.
"""

_READ_CHUNK = 64 * 1024


# -- streams over the standard file descriptors ------------------------------------------


class _ThreadFdReceiveStream(trio.abc.ReceiveStream):
    """Blocking reads in a worker thread: for regular files, ttys and shared descriptors."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._fd < 0:
            raise trio.ClosedResourceError("the stream is closed")
        fd = self._fd
        return await trio.to_thread.run_sync(os.read, fd, max_bytes or _READ_CHUNK, abandon_on_cancel=True)

    async def aclose(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
        await trio.lowlevel.checkpoint()


class _ThreadFdSendStream(trio.abc.SendStream):
    """Blocking writes in a worker thread: for regular files, ttys and shared descriptors."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._fd < 0:
            raise trio.ClosedResourceError("the stream is closed")
        try:
            await trio.to_thread.run_sync(_write_all, self._fd, bytes(data))
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise trio.BrokenResourceError(str(exc)) from exc

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
        await trio.lowlevel.checkpoint()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        info = os.fstat(fd)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _fd_stream(fd: int, *, receive: bool, others: Iterable[int]) -> Any:
    """A trio stream that owns ``fd``.

    Pipes and sockets get a :class:`trio.lowlevel.FdStream` (non-blocking, cancellable)
    unless one of the ``others`` descriptors refers to the same pipe or socket: making
    it non-blocking would then also affect, say, stderr writes. Everything else
    (regular files, ttys, ``/dev/null``, which epoll cannot watch) is read or written
    in a worker thread.
    """
    mode = os.fstat(fd).st_mode
    if hasattr(trio.lowlevel, "FdStream") and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        mine = _identity(fd)
        if all(_identity(other) != mine for other in others):
            return trio.lowlevel.FdStream(fd)
    return _ThreadFdReceiveStream(fd) if receive else _ThreadFdSendStream(fd)


# -- reading lines -----------------------------------------------------------------------


class _TooLong:
    """Marks a line that went over the size limit (its bytes are discarded)."""


_TOO_LONG = _TooLong()


class _LineReader:
    def __init__(self, stream: Any, max_line_bytes: int) -> None:
        self._stream = stream
        self._max = max_line_bytes
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already known to hold no newline
        self._discarding = False  # inside a line already refused as too long
        self._eof = False

    async def receive_line(self) -> bytes | _TooLong | None:
        """The next line without its newline, ``_TOO_LONG`` for a refused line, ``None`` at EOF."""
        while True:
            newline = self._buffer.find(b"\n", self._scanned)
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                self._scanned = 0
                if self._discarding:  # the tail of a refused line
                    self._discarding = False
                    continue
                if len(line) > self._max:
                    return _TOO_LONG
                return line
            if self._discarding:
                self._buffer.clear()
            elif len(self._buffer) > self._max:
                self._buffer.clear()
                self._discarding = True
                self._scanned = 0
                return _TOO_LONG
            self._scanned = len(self._buffer)
            if self._eof:
                self._scanned = 0
                if self._buffer and not self._discarding:  # a last line without a newline
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return line
                return None
            try:
                data = await self._stream.receive_some(_READ_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                log.warning("stdin failed (%s); treating it as EOF", exc)
                data = b""
            if not data:
                self._eof = True
            else:
                self._buffer += data


# -- the session ---------------------------------------------------------------------------


class _Slot:
    """One of the ``max_in_flight`` places a line read from stdin holds until answered."""

    __slots__ = ("_limit", "record", "_held", "_place")

    def __init__(self, limit: trio.Semaphore) -> None:
        self._limit = limit
        self.record: AccessRecord | None = None
        self._held = True  # the request is not answered yet
        self._place = True  # it holds a place of the semaphore

    def release(self, outcome: str | None = None) -> None:
        """Free the place (once) and log the request's access line, if it has one."""
        if not self._held:
            return
        self._held = False
        if self._place:
            self._place = False
            self._limit.release()
        if self.record is not None:
            self.record.finish(outcome=outcome)

    def lend(self) -> None:
        """Give the place back while the request waits for the client: its answers need places to be read."""
        if self._place:
            self._place = False
            self._limit.release()

    async def reclaim(self) -> None:
        """Take a place again once the client answered (a cancelled wait leaves it given back)."""
        if self._held and not self._place:
            await self._limit.acquire()
            self._place = True


@dataclass(eq=False)
class _InFlight:
    id: Any
    message: Mapping[str, Any]
    slot: _Slot
    notes: NotificationSink
    legacy: bool = False
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    cancelled: bool = False
    done: bool = False


class _Notifications(NotificationSink):
    """One request's notifications, queued in order before its response; bounded for the whole session."""

    __slots__ = ("session", "entry")

    def __init__(self, session: _Session) -> None:
        super().__init__()
        self.session = session
        self.entry: _InFlight | None = None

    def full(self) -> bool:
        return self.session.queued_notifications >= self.session.notification_buffer

    def deliver(self, data: bytes) -> None:
        self.session.queued_notifications += 1
        self.session.queue(self.entry, data, None)


class _Outlet(NotificationSink):
    """The legacy session's notifications unrelated to any request (list changes, resource updates)."""

    __slots__ = ("session",)

    def __init__(self, session: _Session) -> None:
        super().__init__()
        self.session = session

    def full(self) -> bool:
        return self.session.queued_notifications >= self.session.notification_buffer

    def deliver(self, data: bytes) -> None:
        self.session.queued_notifications += 1
        self.session.queue(None, data, None)


class _StdioPeer:
    """One legacy call's way to the client: stdout, giving its place back while it waits for answers."""

    __slots__ = ("_peer", "_slot")

    def __init__(self, peer: Peer, slot: _Slot) -> None:
        self._peer = peer
        self._slot = slot

    async def request_all(self, requests: Sequence[tuple[str, dict[str, Any]]], *,
                          timeout: float, sent: Sent | None = None) -> list[dict[str, Any]]:
        """Send the round on stdout and wait for its answers; see :class:`~mrtr.core.peer.Peer`."""
        self._slot.lend()
        try:
            return await self._peer.request_all(requests, timeout=timeout, sent=sent)
        finally:
            await self._slot.reclaim()

    async def await_answers(self, questions: Sequence[tuple[Any, str]], *, timeout: float,
                            answered: Mapping[Any, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Wait for a round sent before on stdout; see :class:`~mrtr.core.peer.Peer`."""
        self._slot.lend()
        try:
            return await self._peer.await_answers(questions, timeout=timeout, answered=answered)
        finally:
            await self._slot.reclaim()


_Line = tuple["_InFlight | None", bytes, "_Slot | None"]

_EARLY_NOTIFICATIONS = 16
"""Notifications kept from before the first request, to replay once the era is known."""


class _Session:
    def __init__(self, server: Dispatcher, stdout: Any, max_in_flight: int, notification_buffer: int) -> None:
        self.server = server
        self.stdout = stdout
        self.in_flight: dict[Any, _InFlight] = {}
        # The era, pinned by the first request but a server/discover probe (None until then). A
        # dispatcher without the legacy era never pins: every message is served as it always was.
        self.legacy = server.legacy
        self.era: str | None = None
        self.early: list[Mapping[str, Any]] = []
        self.session_id: str | None = None
        self.version: str | None = None
        self.pending: PendingRequests | None = None
        self.outlet = _Outlet(self)
        self.limit = trio.Semaphore(max_in_flight)
        self.notification_buffer = notification_buffer
        self.queued_notifications = 0
        # Unbounded as a channel, bounded by what feeds it: one final line per slot and
        # at most ``notification_buffer`` notifications (queued from sync code, so
        # ``send_nowait``).
        self.send_channel, self.receive_channel = trio.open_memory_channel[_Line](math.inf)

    # writing

    def queue(self, entry: _InFlight | None, data: bytes, slot: _Slot | None) -> None:
        """Queue one encoded message as a line; ``slot`` marks the final line of what holds it
        (released once written)."""
        self.send_channel.send_nowait((entry, data + b"\n", slot))

    def queue_response(self, entry: _InFlight | None, response: Response, slot: _Slot) -> None:
        """Queue the final line for ``slot``, noted on its access record."""
        if slot.record is None:
            slot.record = AccessRecord("stdio")
        self.queue(entry, encode_response(response, slot.record).body, slot)

    def queue_error(self, request_id: Any, error: ProtocolError, slot: _Slot) -> None:
        self.queue_response(None, Response.refusing(request_id, error), slot)

    async def writer(self, stop: trio.CancelScope) -> None:
        async with self.receive_channel:
            async for entry, line, slot in self.receive_channel:
                if slot is None:
                    self.queued_notifications -= 1
                if entry is not None and entry.cancelled:
                    if slot is not None:  # queued before the cancellation arrived: drop it
                        slot.release("cancelled")
                    continue
                try:
                    await self.stdout.send_all(line)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    log.warning("stdout is closed (%s); stopping", exc)
                    if slot is not None:
                        slot.release("aborted")
                    stop.cancel()
                    return
                if slot is not None:
                    slot.release()

    # reading and dispatch

    def send_request(self, data: bytes) -> None:
        """Queue a request of ours (or its withdrawal) as a line; counted with the notifications, never dropped."""
        self.queued_notifications += 1
        self.queue(None, data, None)

    async def dispatch(self, nursery: trio.Nursery, line: bytes, slot: _Slot) -> None:
        try:
            message = parse_message(line)
        except ParseError as error:
            self.queue_error(None, error, slot)
            return
        except InvalidRequest as error:
            self.queue_error(error.request_id, error, slot)
            return
        if "id" not in message:
            slot.release()
            self.notification(nursery, message)
            return
        if not is_request(message):  # a response: the answer to a request of ours, if any waits for it
            slot.release()
            if self.pending is None or not self.pending.answer(message):
                log.debug("ignoring a response to id %r: no request of ours waits for it", message["id"])
            return
        slot.record = AccessRecord("stdio")
        slot.record.request(message)
        request_id = message["id"]
        if request_id in self.in_flight:
            self.queue_error(
                request_id,
                InvalidRequest(f"Invalid Request: id {request_id!r} is already in use by a request in flight"),
                slot,
            )
            return
        era = self.route(message, nursery)
        if era == LEGACY:
            slot.record.round = None  # a live call has no rounds of its own: its questions ride this request
        if era == LEGACY and message["method"] == "initialize" and self.session_id is None:
            await self.initialize(message, slot)  # inline: the next line may already need the session
            return
        if era == LEGACY and era_of(message) == MODERN:
            self.queue_error(request_id, InvalidRequest(
                f"Invalid Request: this connection began with initialize and speaks MCP {self.version or 'of 2025'}; "
                "a request carrying io.modelcontextprotocol/protocolVersion belongs to the modern era "
                "(start a new connection for it)"), slot)
            return
        notes = _Notifications(self)
        entry = notes.entry = _InFlight(request_id, message, slot, notes, legacy=era == LEGACY)
        self.in_flight[request_id] = entry
        nursery.start_soon(self.run_request, entry, name=f"mrtr.stdio request {request_id!r}")

    def route(self, message: Mapping[str, Any], nursery: trio.Nursery) -> str:
        """The era a request is served in, pinning the connection's era on its first request.

        A ``server/discover`` probe is answered by the modern era without pinning, so a
        client may probe and then still ``initialize``; a ``ping`` without the modern
        ``_meta`` is answered ``{}`` without pinning either.
        """
        if self.legacy is None:
            return MODERN
        if self.era is None:
            if message["method"] == "server/discover":
                return MODERN
            if message["method"] == "ping" and era_of(message) == LEGACY:
                return LEGACY  # a host's liveness check, answered {} before initialize: it chooses no era
            self.era = era_of(message)
            log.debug("the first request (%s) pins this connection to the %s era", message["method"], self.era)
            early, self.early = self.early, []
            for notice in early:
                self.notification(nursery, notice)
        return self.era

    async def initialize(self, message: Mapping[str, Any], slot: _Slot) -> None:
        assert self.legacy is not None
        outlet = from_any_thread(self.outlet)
        response, session_id = await self.legacy.initialize(message, outlet=outlet, lasting=True,
                                                            client=STDIO_CLIENT)
        if session_id is not None:
            self.session_id = session_id
            self.version = response.message["result"]["protocolVersion"]
            self.pending = PendingRequests(self.send_request)
        self.queue_response(None, response, slot)

    def notification(self, nursery: trio.Nursery, message: Mapping[str, Any]) -> None:
        method = message["method"]
        if method != "notifications/cancelled":
            if self.legacy is None or self.era == MODERN:
                log.debug("ignoring notification %s", method)
            elif self.era is None:
                if len(self.early) < _EARLY_NOTIFICATIONS:
                    self.early.append(message)
                else:
                    log.debug("dropping %s: too many notifications before the first request", method)
            else:
                if method == "notifications/initialized" and self.pending is not None:
                    self.pending.mark_ready()
                nursery.start_soon(self.legacy.notification, self.session_id, message)
            return
        params = message.get("params") or {}
        request_id = params.get("requestId")
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            log.debug("ignoring notifications/cancelled without a valid requestId")
            return
        entry = self.in_flight.get(request_id)
        if entry is None or entry.done:
            log.debug("ignoring notifications/cancelled for %r: not in flight", request_id)
            return
        reason = params.get("reason")
        log.info("cancelling request %r%s", request_id, f" ({reason})" if isinstance(reason, str) else "")
        entry.cancelled = True
        entry.notes.close()
        entry.scope.cancel()

    def no_session(self) -> PendingRequests:
        """Where a request before ``initialize`` would ask the client: nowhere (the session refuses it first)."""
        pending = PendingRequests(self.send_request)
        pending.end("the session is not initialized")
        return pending

    async def end(self, reason: str) -> None:
        """The input is gone: the session ends, and handlers waiting for answers fail now, not after the grace period."""
        if self.pending is not None:
            self.pending.end(reason)
        # A list change published from another thread may still be on its way: it is dropped,
        # never queued behind the writer's end.
        self.outlet.close()
        if self.legacy is not None and self.session_id is not None:
            await self.legacy.close(self.session_id)

    async def run_request(self, entry: _InFlight) -> None:
        queued = False
        try:
            with entry.scope:
                if entry.legacy:
                    assert self.legacy is not None
                    peer = _StdioPeer((self.pending or self.no_session()).peer(), entry.slot)
                    response = await self.legacy.respond(self.session_id, entry.message, peer=peer,
                                                         notify=thread_safe(entry.notes), run_sync=run_in_thread)
                else:
                    response = await self.server.respond(entry.message, notify=thread_safe(entry.notes),
                                                          run_sync=run_in_thread, client=STDIO_CLIENT)
            if entry.cancelled:
                return
            entry.notes.close()
            self.queue_response(entry, response, entry.slot)
            queued = True
        finally:
            entry.notes.close()
            entry.done = True
            if self.in_flight.get(entry.id) is entry:
                del self.in_flight[entry.id]
            if not queued:
                entry.slot.release("cancelled")


def _refuse_auth(server: Dispatcher) -> None:
    """Refuse a server protected with ``auth=``: stdio carries no bearer tokens.

    The spec has a stdio server take its credentials from the environment; a server
    that expects a token on every request could only fail every request here.
    """
    if server.auth is not None:
        raise ValueError("a server built with auth= takes bearer tokens over HTTP only; stdio has none "
                         "(a stdio server takes its credentials from the environment): serve it over HTTP, "
                         "or build it without auth= for stdio")


async def serve_stdio(
    server: Dispatcher,
    *,
    stdin: trio.abc.ReceiveStream | None = None,
    stdout: trio.abc.SendStream | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    grace_period: float = DEFAULT_GRACE_PERIOD,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    notification_buffer: int = DEFAULT_NOTIFICATION_BUFFER,
) -> None:
    """Serve ``server`` over newline-delimited JSON-RPC until stdin reaches EOF.

    ``stdin`` and ``stdout`` default to the process's standard input and output (the
    descriptors are duplicated, so the originals stay open). A line longer than
    ``max_line_bytes`` is answered with ``-32600`` and skipped. After EOF the requests
    in flight get ``grace_period`` seconds to finish; any still running then are
    cancelled without a response. Returns early if stdout is closed by the client.
    At most ``max_in_flight`` lines are held until their answer is written (stdin is
    not read meanwhile); at most ``notification_buffer`` notifications wait for stdout.
    """
    if max_line_bytes < 1:
        raise ValueError("max_line_bytes must be positive")
    for name, value in (("max_in_flight", max_in_flight), ("notification_buffer", notification_buffer)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    _refuse_auth(server)
    owned: list[Any] = []
    if stdin is None:
        stdin = _fd_stream(os.dup(0), receive=True, others=(1, 2))
        owned.append(stdin)
    if stdout is None:
        stdout = _fd_stream(os.dup(1), receive=False, others=(0, 2))
        owned.append(stdout)
    try:
        session = _Session(server, stdout, max_in_flight, notification_buffer)
        # The lifespan opens before the first line is read and closes after the
        # requests in flight have finished (or the grace period cut them off).
        async with lifespan(server) as hub:
            await _serve(session, stdin, max_line_bytes, grace_period, hub)
    finally:
        for stream in owned:
            with trio.CancelScope(shield=True):
                await stream.aclose()


async def _serve(session: _Session, stdin: Any, max_line_bytes: int, grace_period: float, hub: Hub) -> None:
    reader = _LineReader(stdin, max_line_bytes)
    async with trio.open_nursery() as outer:
        outer.start_soon(session.writer, outer.cancel_scope, name="mrtr.stdio writer")
        async with trio.open_nursery() as requests:
            while True:
                # Take a place before reading: with every place held (stdout not drained),
                # stdin is left unread and the client's writes block, not our memory.
                await session.limit.acquire()
                slot = _Slot(session.limit)
                line = await reader.receive_line()
                if line is None:
                    slot.release()
                    break
                if line is _TOO_LONG:
                    session.queue_error(
                        None, InvalidRequest(f"Invalid Request: message longer than {max_line_bytes} bytes"), slot
                    )
                    continue
                assert isinstance(line, bytes)
                if not line.strip():
                    slot.release()
                    continue
                await session.dispatch(requests, line, slot)
            hub.close()  # listen streams end with their result; the rest get the grace period
            await session.end("the client closed stdin")
            if session.in_flight:
                log.info("stdin closed; waiting up to %gs for %d request(s) in flight",
                         grace_period, len(session.in_flight))
            requests.cancel_scope.deadline = trio.current_time() + grace_period
        if requests.cancel_scope.cancelled_caught:
            log.warning("grace period of %gs over: cancelled the requests still in flight", grace_period)
        session.send_channel.close()  # the writer drains what is queued, then ends


# -- the process entry point -----------------------------------------------------------------


def run_stdio(
    server: Dispatcher,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    grace_period: float = DEFAULT_GRACE_PERIOD,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
) -> None:
    """Serve ``server`` on this process's stdin/stdout until EOF, SIGINT or SIGTERM.

    Logging is the application's to configure (``mrtr serve`` sends it to stderr);
    the transport only never writes logs to stdout. While serving, file
    descriptor 1 is pointed at stderr, so a stray ``print()`` in handler code lands in
    the log instead of corrupting the protocol stream; the protocol uses a private
    duplicate of the original stdout.
    """
    _refuse_auth(server)
    # A missing MRTR_SECRET is said once, now, not at the first call; one client, one process: only a
    # restart costs anything (other instances never see this client's tokens).
    server.settle_key(alone=True)
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    saved_fd = os.dup(1)
    _point_stdout_at_stderr()
    try:
        trio.run(_run_stdio, server, protocol_fd, max_line_bytes, grace_period, max_in_flight)
    except KeyboardInterrupt:  # a signal that arrived before the handlers were installed
        log.info("interrupted")
    finally:
        sys.stdout.flush()
        os.dup2(saved_fd, 1)
        os.close(saved_fd)


def _point_stdout_at_stderr() -> None:
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr: send stray output nowhere rather than into the protocol
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)


async def _run_stdio(server: Dispatcher, protocol_fd: int, max_line_bytes: int, grace_period: float,
                     max_in_flight: int) -> None:
    stdout = _fd_stream(protocol_fd, receive=False, others=(0, 1, 2))
    stdin = _fd_stream(os.dup(0), receive=True, others=(protocol_fd, 1, 2))
    async with stdin, stdout, trio.open_nursery() as nursery:
        if threading.current_thread() is threading.main_thread():
            nursery.start_soon(_stop_on_signals, nursery.cancel_scope)
        await serve_stdio(server, stdin=stdin, stdout=stdout, max_line_bytes=max_line_bytes,
                          grace_period=grace_period, max_in_flight=max_in_flight)
        nursery.cancel_scope.cancel()


async def _stop_on_signals(scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("received %s; stopping", signal.Signals(signum).name)
            scope.cancel()
            return
