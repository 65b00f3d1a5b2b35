"""The event streams of a 2025-era session on Streamable HTTP: ids, replay, one connection at a time.

In the 2025 revisions a session's server-to-client messages ride SSE streams: each
POST that does more than answer gets its own stream (its request's notifications, the
server's requests to the client, then the response), and the standalone ``GET``
stream carries what belongs to no request (list changes, ``resources/updated``).
An :class:`EventStream` is one such stream as the session holds it, apart from any
connection:

- **ids**: the event at position ``k`` of stream ``n`` has the id ``n-k``, unique
  within the session; an id is a cursor (``Last-Event-ID: n-k`` asks for what came
  after it on stream ``n``, never what another stream carried). When several nodes
  serve one session (sessions in Redis) each id also names where its stream is:
  ``<node>.<request>.<mark>.n-k``, the node holding the stream, the request it
  answers and a mark only the server's key makes (:func:`event_origin`), so a
  resumption reaching another node can be told apart and, when that node is gone,
  answered for the request it was for, and an id the server never minted is known as such;
- **replay**: the last :data:`KEPT_EVENTS` events are kept, so a client whose
  connection dropped resumes with ``GET`` and ``Last-Event-ID``; past that bound a
  notification nobody has been sent yet is dropped (never a request or the response,
  which a call makes a bounded number of);
- **one connection at a time**: :func:`pump` writes the stream to one HTTP response;
  a resumption supersedes the connection that wrote before (it was lost), and a
  connection that goes away leaves the stream, and the call feeding it, as they are.
  A dropped connection is not a cancellation in this era;
- **recorded** (a shared store keeps the call, :mod:`mrtr.core.calls`): once
  :meth:`EventStream.hold` is called an event goes to a connection only after the
  store has it (:meth:`EventStream.stored_to`), so a client never saw what a process
  adopting the call does not know; a stream adopted or followed here is
  :meth:`EventStream.load`-ed from the store, at the positions it had there; and a call
  handed over to another process (:meth:`EventStream.hand_over`) ends its connections
  with ``retry:``, the stream not ended: the client resumes it, wherever it lands.

What a connection writes (:class:`Pacing`): a priming event (an id and empty ``data``)
first, for 2025-11-25 sessions only (older clients fail on an empty ``data``), comment
keep-alives while the stream is quiet (a handler waiting for its user), and, when
polling is on, ``retry:`` and the end of the response once the connection has been
open ``poll_after`` seconds: the stream goes on, and the client resumes it.

This module does trio I/O through a :class:`~mrtr.transports.http.exchange.Responder`
only; it knows nothing of sessions or the server.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio

from ...core.calls import KEPT_EVENTS  # the events a stream keeps for resumption; past it, unsent notifications drop
from .messages import SSE_HEADERS, ClientGone, Responder
from .headers import RawHeader

__all__ = ["KEPT_EVENTS", "MAX_FINISHED_STREAMS", "EventStream", "Pacing", "event_origin", "parse_event_id", "pump"]

log = logging.getLogger("mrtr.http")


MAX_FINISHED_STREAMS = 16
"""Finished streams a session keeps for a late resumption, newest first; older ones are forgotten."""

_MAX_ID_DIGITS = 12
_MAX_ORIGIN = 160  # a node id and an encoded request id: longer is nothing this server minted


def parse_event_id(value: str | None) -> tuple[int, int] | None:
    """``(stream, position)`` of a ``Last-Event-ID`` this server minted, or ``None`` for anything else."""
    if value is None:
        return None
    value = value.strip()
    if len(value) > _MAX_ORIGIN + 2 * _MAX_ID_DIGITS + 1:
        return None
    number, dash, position = value.rpartition(".")[2].partition("-")
    if not dash or not (0 < len(number) <= _MAX_ID_DIGITS and 0 < len(position) <= _MAX_ID_DIGITS) \
            or not (number.isdigit() and position.isdigit() and number.isascii() and position.isascii()):
        return None
    return int(number), int(position)


def event_origin(value: str | None) -> tuple[str, str, str] | None:
    """``(node, request, mark)`` an event id of a stream held by one of several nodes names; ``None`` for a plain one.

    A request's stream is ``<node>.<request>.<mark>.<stream>-<position>``; the standalone
    stream names no request and carries no mark (``<node>..0-<position>``), and neither does
    an id of the form before marks (``<node>.<request>.<stream>-<position>``): ``mark`` is
    then ``""``. Whether the mark is the server's is the caller's to check.
    """
    if value is None or parse_event_id(value) is None:
        return None
    parts = value.strip().split(".")
    if len(parts) == 3:
        node, request, mark = parts[0], parts[1], ""
    elif len(parts) == 4:
        node, request, mark = parts[0], parts[1], parts[2]
    else:
        return None
    if not (node.isdigit() and node.isascii()):
        return None
    return node, request, mark


@dataclass(frozen=True)
class Pacing:
    """How the connections of one session's streams are written.

    ``priming``: open each connection with an id and empty ``data`` (2025-11-25
    sessions). ``keepalive``: seconds of quiet before a ``:`` comment line (``None``:
    never). ``poll_after``: seconds a connection stays open before ``retry:`` and the
    end of the response while the stream goes on (``None``: as long as the stream
    lasts; polling needs ``priming``, the id a client resumes from). ``retry``: the
    milliseconds the ``retry:`` field asks the client to wait.
    """

    priming: bool
    keepalive: float | None
    poll_after: float | None = None
    retry: int = 1000


class EventStream:
    """One SSE stream of a session, kept apart from the connections that write it (see the module docs).

    ``number`` makes its event ids unique in the session (``origin``, when several nodes
    serve it, names where the stream is held, see :func:`event_origin`). ``done`` is set once the
    stream has its last event (a request's response) or was ended without one (the
    session ended, the request was cancelled).
    """

    __slots__ = ("number", "origin", "events", "count", "sent", "done", "writer", "written", "dropped", "_changed",
                 "held", "stored", "stored_end", "moved", "settled", "gone")

    def __init__(self, number: int, origin: bytes = b"") -> None:
        self.number = number
        self.origin = origin  # b"<node>.<request>.<mark>." when several nodes serve the session
        self.events: deque[tuple[int, bytes]] = deque()  # (position, data), oldest first
        self.count = 0  # events so far; an event's position is its 1-based index
        self.sent = 0  # the last position written to some connection (not proof it was read)
        self.done = False
        self.writer = 0  # the connection writing it now; a new one supersedes it
        self.written = False  # every event, the last included, went out and the response ended
        self.dropped = 0
        self._changed: trio.Event | None = None
        self.held = False  # events go out only once recorded in the store (up to ``stored``)
        self.stored = 0
        self.stored_end = False  # the store has the stream's end
        self.moved = False  # the call went to another process: connections end with retry, the stream goes on there
        self.settled: trio.Event | None = None  # a stream followed from the store: set once the store was read
        self.gone = False  # ... and the store had no such call

    def event_id(self, position: int) -> bytes:
        """The id of the event at ``position`` (or of a cursor there)."""
        return self.origin + b"%d-%d" % (self.number, position)

    def push(self, data: bytes, *, keep: bool = False) -> bool:
        """Add one encoded message; whether it was kept.

        A notification (``keep=False``) is dropped when :data:`KEPT_EVENTS` events wait
        that no connection was sent yet; requests and responses (``keep=True``) always
        go in. Events already sent age out of the replay window first.
        """
        if self.done:
            return False
        events = self.events
        while len(events) >= KEPT_EVENTS and events[0][0] <= self.sent:
            events.popleft()
        if len(events) >= KEPT_EVENTS and not keep:
            self.dropped += 1
            if self.dropped == 1:
                log.warning("stream %d: the client reads too slowly; dropping notifications", self.number)
            return False
        self.count += 1
        events.append((self.count, data))
        self._wake()
        return True

    def send_request(self, data: bytes) -> None:
        """Add one of the server's requests to the client (or its withdrawal): never dropped."""
        self.push(data, keep=True)

    def finish(self, data: bytes | None = None) -> None:
        """The stream's last event (``None``: it ends without one); later pushes are ignored."""
        if self.done:
            return
        if data is not None:
            self.push(data, keep=True)
        self.done = True
        self._wake()

    def after(self, position: int) -> list[tuple[int, bytes]]:
        """The kept events past ``position`` that may go out (recorded, when held), oldest first."""
        last = self.stored if self.held else self.count
        if position >= last:
            return []
        return [event for event in self.events if position < event[0] <= last]

    @property
    def ended(self) -> bool:
        """Whether every event went in and (when held) the store has the end too: nothing more will come."""
        return self.done and (not self.held or (self.stored_end and self.stored >= self.count))

    # -- recorded in a shared store (mrtr.core.calls.EventSource) ------------------------------

    def hold(self) -> None:
        """From now on events go out only once :meth:`stored_to` says the store has them."""
        self.held = True

    def unstored(self) -> tuple[list[tuple[int, bytes]], int, bool]:
        """The events the store does not have yet, the count, and whether the stream ended."""
        return [event for event in self.events if event[0] > self.stored], self.count, self.done

    def stored_to(self, position: int, ended: bool) -> None:
        """The store has every event up to ``position`` (``ended``: and the end): they may go out."""
        if position > self.stored:
            self.stored = position
        if ended and self.stored >= self.count:
            self.stored_end = True
        self._wake()

    async def unstored_changed(self) -> None:
        """Wait until the stream holds events, or an end, the store does not have."""
        while not (self.held and not self.moved and (self.count > self.stored or (self.done and not self.stored_end))):
            await self.changed(math.inf)

    def unhold(self) -> None:
        """Events go out unrecorded from now on (the call is no longer recorded)."""
        self.held = False
        self._wake()

    def load(self, events: list[tuple[int, bytes]], last: int) -> None:
        """Take what the store has of the stream (events at their positions, and the last position)."""
        for position, data in events:
            if position > self.count:
                self.events.append((position, data))
                self.count = position
        while len(self.events) > KEPT_EVENTS:
            self.events.popleft()
        if last > self.count:
            self.count = last
        self.sent = max(self.sent, self.count)  # never written here, all of it written somewhere: none is dropped
        self.stored = max(self.stored, self.count)
        self._wake()

    def hand_over(self) -> None:
        """The call went to another process: the connections end (with ``retry:``), the stream ends here."""
        self.moved = True
        self.done = True
        self._wake()

    def attach(self) -> int:
        """A new connection writes the stream from now on; its token (the one before it stops)."""
        self.writer += 1
        self._wake()
        return self.writer

    def release(self, token: int) -> None:
        """The connection ``token`` stopped writing (the stream waits for the next one)."""
        if self.writer == token:
            self.writer = 0

    def forget_sent(self) -> None:
        """Keep only the last event once the stream was written whole: a late resumption still gets the response."""
        while len(self.events) > 1:
            self.events.popleft()

    async def changed(self, deadline: float) -> None:
        """Wait until something is pushed, the stream ends or another connection attaches, or ``deadline``."""
        if self._changed is None:  # several may wait (a connection, the call's recorder): one event for all
            self._changed = trio.Event()
        changed = self._changed
        with trio.move_on_at(deadline):
            await changed.wait()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None


async def pump(stream: EventStream, out: Responder, cursor: int, pacing: Pacing, *,
               disconnected: Callable[[], Awaitable[Any]] | None = None, nursery: trio.Nursery | None = None,
               headers: list[RawHeader] | None = None, opened: float | None = None) -> bool:
    """Write ``stream`` from ``cursor`` to one HTTP response; whether its last event went out.

    Returns ``False`` when the connection ended first: the client went away
    (``disconnected`` returned, or a write failed), another connection took the
    stream over, or polling ended the response. The stream itself is left as it is.
    ``headers`` go out besides the SSE ones; ``opened`` is when the request came (trio
    time; default now), from which polling counts.
    """
    token = stream.attach()
    gone = trio.CancelScope()
    watcher: trio.CancelScope | None = None
    watched = trio.Event()
    if disconnected is not None and nursery is not None:
        watcher = trio.CancelScope()
        nursery.start_soon(_watch, disconnected, watcher, gone, watched)
    try:
        with gone:
            return await _write(stream, out, cursor, pacing, token, headers or [],
                                trio.current_time() if opened is None else opened)
        return False
    except ClientGone:
        return False
    finally:
        stream.release(token)
        if watcher is not None:
            watcher.cancel()
            # The watcher waits on the connection's socket: it must be gone before the
            # connection reads its next request there.
            with trio.CancelScope(shield=True):
                await watched.wait()


async def _watch(disconnected: Callable[[], Awaitable[Any]], scope: trio.CancelScope,
                 writer: trio.CancelScope, watched: trio.Event) -> None:
    try:
        with scope:
            await disconnected()
            writer.cancel()  # the writer stops; the stream, and the call feeding it, go on
    finally:
        watched.set()


async def _write(stream: EventStream, out: Responder, cursor: int, pacing: Pacing, token: int,
                 headers: list[RawHeader], opened: float) -> bool:
    await out.start(200, [*SSE_HEADERS, *headers])
    if pacing.priming:
        await out.send(b"id: " + stream.event_id(cursor) + b"\ndata: \n\n")
    now = trio.current_time()
    poll_at = opened + pacing.poll_after if pacing.poll_after is not None and pacing.priming else math.inf
    keepalive = pacing.keepalive if pacing.keepalive is not None else math.inf
    quiet_until = now + keepalive
    while True:
        if stream.writer != token:
            await out.end()  # superseded by a resumption: this connection ends, the stream goes on there
            return False
        pending = stream.after(cursor)
        for position, data in pending:
            await out.send(b"id: " + stream.event_id(position) + b"\ndata: " + data + b"\n\n")
            cursor = position
            if position > stream.sent:
                stream.sent = position
        if stream.moved:
            # Handed over to another process: the client comes back with Last-Event-ID and is served there.
            await out.send(b"retry: %d\n\n" % pacing.retry)
            await out.end()
            return False
        if stream.ended and cursor >= stream.count:
            await out.end()
            stream.written = True
            return True
        now = trio.current_time()
        if pending:
            quiet_until = now + keepalive
            continue  # more may have come while these were written: only an empty look waits
        if now >= poll_at:
            # SEP-1699: the connection ends, the stream does not; the client comes back with Last-Event-ID
            await out.send(b"retry: %d\n\n" % pacing.retry)
            await out.end()
            return False
        if now >= quiet_until:
            await out.send(b": keep-alive\n\n")
            quiet_until = now + keepalive
            continue
        await stream.changed(min(poll_at, quiet_until))
