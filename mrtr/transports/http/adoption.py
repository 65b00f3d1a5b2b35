"""Streamable HTTP's part in 2025 calls recorded in a shared store: answers, resumptions, adoption, hand-over.

When the dispatcher records its 2025 calls in a shared store
(:attr:`~mrtr.core.jsonrpc.SessionDispatcher.calls`, :mod:`mrtr.core.calls`), the
sessions of :mod:`mrtr.transports.http.sessions` do four more things, held here:

- **a call's stream is recorded**: from the call's first question or Step its events
  reach the client only once the store has them (:meth:`Adoption._record_events` writes
  them as they come, with the carrier's saves), so whatever a client saw, a process
  adopting the call knows, at the same positions;
- **an answer is recorded before its ``202``** (:meth:`Adoption._answered`), wherever
  it lands, then handed to the call here, passed on to the live process holding it, or,
  when no live process holds it, the call is adopted here once it can be;
- **a resumption is served anywhere** (``GET`` with ``Last-Event-ID`` for a stream this
  process does not hold): the stream is read from the store and followed; when nobody
  lives holding its call (handed over, or its holder's lease lapsed) this process
  claims it and runs it, replayed to its pending question (:meth:`Adoption._follow`);
  the events after the client's id come from the store, those before it are not sent
  again;
- **a stopping process hands its waiting calls over** at once
  (:meth:`Adoption.hand_over`): each is let go in the store, its connections end with
  ``retry:``, and the client resumes it on another process. Calls running code finish
  within the shutdown grace; one that comes to wait meanwhile is handed over then.

Nothing here runs without a shared store: then a call lives and dies with its process.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from ...core.calls import CallJournal, Claimed, Held, Stored, TakenOver
from ...core.errors import ProtocolError
from ...core.jsonrpc import request
from .messages import Tracked, reject
from .streams import MAX_FINISHED_STREAMS, EventStream

if TYPE_CHECKING:
    from ...core.jsonrpc import SessionDispatcher

__all__ = ["Adoption", "RUNS_HANDLERS"]

log = logging.getLogger("mrtr.http")

RUNS_HANDLERS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The requests whose calls are recorded: those that run a handler, which may ask or run Steps."""

_SETTLING = 10.0  # seconds a resumption waits for the store's first answer about the stream it names
_FOLLOW_AFTER = 5.0  # seconds past two leases a stream nobody reads is followed, waiting for its call to be free


class Adoption:
    """What the sessions of a front end do with recorded calls (mixed into ``HttpSessions``; see the module)."""

    legacy: SessionDispatcher
    _runner: trio.Nursery | None
    _stopping: bool

    def _run_call(self, session: Any, stream: EventStream, scope: trio.CancelScope, message: dict[str, Any],
                  headers: Any, access: Any, out: Tracked | None, journal: CallJournal | None = None) -> Any:
        raise NotImplementedError

    def _node_name(self) -> str | None:
        """This process's name in question and event ids: the bus's node, or the calls' when only they are shared."""
        nodes = self.legacy.nodes
        if nodes is not None:
            return nodes.node_id
        calls = self.legacy.calls
        return calls.node_id if calls is not None else None

    def _journal(self, session: Any, stream: EventStream, message: Mapping[str, Any]) -> CallJournal | None:
        """The journal of a new call of ``session``, when calls are recorded and it runs a handler."""
        calls = self.legacy.calls
        method = message.get("method")
        if calls is None or session.node is None or method not in RUNS_HANDLERS:
            return None
        params = message.get("params")
        return calls.journal(session.id, f"{session.node}.{stream.number}", message["id"], str(method),
                             params if isinstance(params, Mapping) else {}, stream)

    async def _record_events(self, stream: EventStream, journal: CallJournal, call: trio.CancelScope) -> None:
        """Write a recorded call's events as they come (the carrier's saves write them too)."""
        pause = 0.05
        while True:
            await stream.unstored_changed()
            before = stream.stored
            try:
                await journal.flush()
                pause = 0.05
                if stream.stored == before and stream.held:
                    await stream.changed(math.inf)  # nothing to write yet (not recorded until its first save)
            except TakenOver:
                log.warning("a 2025 call was taken over by another process; it stops here")
                call.cancel()
                return
            except ProtocolError:
                await trio.sleep(pause)  # the journal waited for the store already; try again in a while
                pause = min(pause * 2, 1.0)

    # -- answers ----------------------------------------------------------------------------

    async def _answered(self, session: Any, message: dict[str, Any], out: Tracked, headers: Any, access: Any,
                        nursery: trio.Nursery) -> bool:
        """Record an answer to a recorded call's question and see it reaches the call; whether it was one."""
        calls = self.legacy.calls
        if calls is None:
            return False
        try:
            route = await calls.answer(session.id, message)
        except ProtocolError as error:
            await reject(out, 503, error)
            return True
        if route is None:
            return False  # no recorded call asked it: an answer to an unrecorded call, or to none
        if route.holder == session.node:
            if not session.pending.answer(message):
                session.pending.stash(message)  # the call is being adopted here: its wait has not begun
        elif route.holder and route.alive:
            nodes = self.legacy.nodes
            heard = False
            if nodes is not None:
                try:
                    heard = await nodes.send_to(route.holder, "answer", [session.id, message])
                except (ValueError, ProtocolError):
                    heard = False
            if not heard:
                # Its holder is going (or, on SQLite, another worker holds it): the answer is recorded, and
                # the call is adopted with it here once its holder's lease lapses.
                self._followed(session, route.stream, b"", headers, access, nursery)
        else:
            self._followed(session, route.stream, b"", headers, access, nursery)  # nobody holds it: adopt it here
        if out.record is not None:
            out.record.result = "accepted"
        await out.respond(202, [(b"content-length", b"0")], b"")
        return True

    # -- following and adopting ----------------------------------------------------------------

    def _followed(self, session: Any, key: str, origin: bytes, headers: Any, access: Any,
                  nursery: trio.Nursery) -> EventStream:
        """The stream ``key`` (``"<node>.<n>"``) of ``session`` as this process serves it, following it from the store."""
        stream: EventStream | None = session.adopted.get(key)
        if stream is None:
            ended = [name for name, kept in session.adopted.items() if kept.done and not kept.writer]
            for name in ended[:max(0, len(ended) - MAX_FINISHED_STREAMS)]:  # kept as a session keeps its own
                del session.adopted[name]
            stream = session.adopted[key] = EventStream(int(key.rpartition(".")[2]), origin)
            stream.settled = trio.Event()
            (self._runner or nursery).start_soon(self._follow, session, key, stream, headers, access,
                                                 name=f"mrtr.http 2025 stream {key}")
        elif origin and not stream.origin:
            stream.origin = origin
        return stream

    async def _follow(self, session: Any, key: str, stream: EventStream, headers: Any, access: Any) -> None:
        """Read the stream from the store until its call can be adopted here, or it ended, or nobody reads it."""
        calls = self.legacy.calls
        assert calls is not None and stream.settled is not None
        lease = calls.lease
        give_up = trio.current_time() + 2 * lease + _FOLLOW_AFTER
        pause = min(0.25, max(0.05, lease / 8))
        adopted = False
        try:
            while session.ended is None:
                found: Any = "retry"
                try:
                    if self._stopping:
                        found = await calls.stored(session.id, key)
                    else:
                        found = await calls.claim(session.id, key)
                except ProtocolError:
                    pass  # the store is away: try again in a while
                if isinstance(found, Claimed):
                    adopted = self._adopted(session, key, stream, found, headers, access)
                    return
                if found is None:
                    stream.gone = True  # no such call recorded (never, or expired)
                    stream.finish()
                    return
                if isinstance(found, Held):
                    found = await _stored(calls, session.id, key)
                if isinstance(found, Stored):
                    stream.load(found.events, found.last)
                    if found.done:
                        stream.done = stream.stored_end = True
                        stream.finish()
                        return
                stream.settled.set()
                if stream.writer == 0 and trio.current_time() > give_up:
                    return  # nobody reads it and its call stays held: stop following
                await trio.sleep(pause)
        finally:
            stream.settled.set()
            if not adopted and session.adopted.get(key) is stream and not stream.done:
                del session.adopted[key]
                stream.finish()

    def _adopted(self, session: Any, key: str, stream: EventStream, claimed: Claimed, headers: Any,
                 access: Any) -> bool:
        """Run a claimed call here, on ``stream``, replayed from its record to where it waited."""
        stream.load(claimed.events, claimed.last)
        if not stream.origin:
            stream.origin = session.origin(key.rpartition(".")[0], claimed.request_id)
        journal = claimed.journal
        journal.attach(stream)
        request_id = claimed.request_id
        if request_id in session.calls:
            log.warning("session %s: a call %r runs here already; the adopted one waits", session.id[:8], request_id)
            return False
        scope = session.calls[request_id] = trio.CancelScope()
        message = request(request_id, claimed.method, dict(claimed.params))
        log.info("session %s...: adopted call %r (stream %s) from a process that stopped", session.id[:8],
                 request_id, key)
        runner = self._runner
        if runner is None:  # a front end that runs no calls beyond their requests cannot adopt one
            del session.calls[request_id]
            return False
        runner.start_soon(self._run_call, session, stream, scope, message, headers, access, None, journal,
                          name=f"mrtr.http 2025 adopted request {request_id!r}")
        return True

    async def _resumed_from_store(self, session: Any, key: str, origin: bytes, cursor: int, out: Tracked,
                                  headers: Any, access: Any, nursery: trio.Nursery) -> EventStream | None:
        """A resumption of a stream this process does not hold: the stream followed from the store, or ``None``
        when the store has no such call (the caller answers as before there was a store)."""
        stream = self._followed(session, key, origin, headers, access, nursery)
        assert stream.settled is not None
        with trio.move_on_after(_SETTLING):
            await stream.settled.wait()
        if stream.gone:
            return None
        return stream

    # -- handing over ----------------------------------------------------------------------------

    async def hand_over(self) -> None:
        """While the process stops: hand each recorded call waiting for answers to the store, at once, and each
        one that comes to wait later, until no recorded call is left here."""
        calls = self.legacy.calls
        if calls is None:
            return
        sessions: dict[str, Any] = getattr(self, "_sessions")
        while True:
            left = False
            for session in list(sessions.values()):
                for request_id, journal in list(session.recorded.items()):
                    left = True
                    if not journal.waiting or journal.released:
                        continue
                    try:
                        handed = await calls.release(journal)
                    except ProtocolError:
                        handed = False
                    if handed:
                        session.pending.keep(journal.questions)  # its questions stay open for the adopter
                        scope = session.calls.get(request_id)
                        if scope is not None:
                            scope.cancel()
            if not left:
                return
            await trio.sleep(0.05)


async def _stored(calls: Any, session_id: str, key: str) -> Stored | None:
    try:
        stored: Stored | None = await calls.stored(session_id, key)
        return stored
    except ProtocolError:
        return None
