"""2025-era calls recorded in the shared store, so any process can adopt one whose process stopped.

A 2025 call lives in the process running its generator (:mod:`mrtr.carriers.live`).
With a shared store (SQLite for the workers of one machine, Redis for nodes) it also
records, as it goes, what a replay needs (see :mod:`mrtr.core.calls`): the client's
request, whose call it is, its ledger, the round it waits on under the server-side ids
it went out with, and the events of its SSE stream. Each record names its **holder**,
the process running it, and each process holds a **lease** in the store (its node id,
renewed every third of the lease); so a call is adoptable when its holder let it go
(at shutdown) or its holder's lease lapsed (the process died). One compare-and-set
decides who adopts: :meth:`Calls.claim`.

What this module holds:

- :class:`CallStore`, the store operations, implemented on SQLite
  (:mod:`mrtr.carriers.tasks.calls_sqlite`) and on Redis
  (:mod:`mrtr.carriers.tasks.calls_redis`), each write one transaction or one script;
  the memory store has none: without a shared store a call lives and dies with its
  process, as before;
- :class:`Journal`, one call's recorder (:class:`~mrtr.core.calls.CallJournal`): the
  carrier's saves and the stream's events go to the store together, one write at a
  time, and an event reaches the client only once written, so whatever a client saw,
  an adopter knows;
- :class:`Calls`, the recorded calls of one process
  (:class:`~mrtr.core.calls.RecordedCalls`): journals, claims, answers recorded as they
  arrive (before the ``202``), cancellation of a call nobody holds, hand-over, and this
  process's lease (:meth:`Calls.serve`).

**Bounds.** A record (the request's params and the call's state) is at most
:data:`MAX_CALL_BYTES` (a call past it goes on unrecorded, in its process, as without
a store); its stream keeps the last :data:`KEPT_EVENTS` events and at most
:data:`MAX_EVENT_BYTES` of them (the oldest dropped first, as the stream in memory
does). A record lives ``ttl`` seconds after its last write (the session's idle
timeout, at least the answer timeout and a lease), and :data:`FINISHED_TTL` seconds
once the call ended, for a late resumption to read its response. A write the store fails
is tried again for :data:`PATIENCE` seconds (the call's events wait meanwhile); after that
the call goes on unrecorded, in its process alone.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple, Protocol

import msgspec
import trio

from ...core.calls import (KEPT_EVENTS, AnswerRoute, CallState, Claimed, EventSource, Held, Resumption, Stored,
                               TakenOver)
from ...core.jsonrpc import encode, notification
from .store import StoreUnavailable

__all__ = ["FINISHED_TTL", "KEPT_EVENTS", "MAX_CALL_BYTES", "MAX_EVENT_BYTES", "PATIENCE", "CallStore", "Calls",
           "Journal", "Created", "Claim", "record_ttl"]

log = logging.getLogger("mrtr.tasks")

MAX_CALL_BYTES = 1 << 20
"""The largest record of a call (its request's params and its state: ledger, round) the store keeps."""


MAX_EVENT_BYTES = 4 << 20
"""Bytes of one call's kept events, together; past it the oldest are dropped (never the last)."""

FINISHED_TTL = 60.0
"""Seconds an ended call's stream stays in the store, for a client resuming it to read its response."""

PATIENCE = 30.0
"""Seconds a call's write is tried again while the store fails, before the call goes on unrecorded."""
_encode = msgspec.json.Encoder().encode
_decode_state = msgspec.json.Decoder(CallState).decode
_decode = msgspec.json.Decoder().decode


class Created(NamedTuple):
    """What a call's first write stores besides its state: the client's request and whose call it is (JSON)."""

    request: bytes
    meta: bytes


class Claim(NamedTuple):
    """What :meth:`CallStore.claim` found: ``status`` ``"claimed"`` (with ``version``, ``meta``, ``state``,
    ``answers``), ``"held"`` (``holder``), ``"done"``; the stream's kept ``events`` and ``last`` position."""

    status: str
    version: int = 0
    meta: bytes = b""
    state: bytes = b""
    answers: dict[str, bytes] = {}
    events: list[tuple[int, bytes]] = []
    last: int = 0
    holder: str = ""


class CallStore(Protocol):
    """The store operations of recorded calls; every one raises :class:`~mrtr.carriers.tasks.store.StoreUnavailable`.

    A call is named by its ``session`` and its ``stream`` (``"<node>.<n>"``); questions
    and requests by their JSON-RPC ids as JSON text.
    """

    url: str

    async def write(self, session: str, stream: str, *, node: str, version: int, created: Created | None,
                    state: bytes | None, pending: list[str] | None, events: list[tuple[int, bytes]], done: bool,
                    ttl: float) -> int:
        """One write of a call by its holder ``node``, at ``version`` (``created``: the first write, version 0).

        ``state`` replaces the recorded state (``None``: kept); ``pending`` the questions
        the call waits on (``None``: kept; the answers recorded for the earlier ones go,
        since the state now holds them); ``events`` are appended (past the bounds the
        oldest go); ``done`` ends the record (kept :data:`FINISHED_TTL` for its events).
        The record lives ``ttl`` seconds from now. Returns the new version, or 0 when
        ``node`` no longer holds the record at ``version`` (or it is gone).
        """
        ...

    async def claim(self, session: str, stream: str, node: str) -> Claim | None:
        """Make ``node`` the holder unless a live node holds it; ``None`` for no such record."""
        ...

    async def release(self, session: str, stream: str, node: str, version: int) -> int:
        """Let the call go (its holder ``node`` at ``version`` stops): the new version, or 0."""
        ...

    async def read(self, session: str, stream: str) -> Stored | None:
        """The stream's kept events and who holds it, for a process following it."""
        ...

    async def answer(self, session: str, question: str, message: bytes) -> AnswerRoute | None:
        """Record ``message`` as the answer to the pending question ``question`` (its first answer wins)."""
        ...

    async def find(self, session: str, request: str) -> str | None:
        """The stream of the session's recorded call for request ``request``, if it has not ended."""
        ...

    async def forget(self, session: str) -> None:
        """Remove every recorded call of ``session`` (it ended)."""
        ...

    async def hold_lease(self, node: str, slot: str | None, lease: float) -> None:
        """Hold ``node``'s lease ``lease`` more seconds; with ``slot`` (a supervisor's worker position), end the
        lease of the process that held that slot before (it was replaced: it is gone)."""
        ...

    async def end_lease(self, node: str) -> None:
        """End ``node``'s lease now (it stops): what it still holds is adoptable at once."""
        ...


def request_key(request_id: Any) -> str:
    """The name of a JSON-RPC id in the store: its JSON text (``"7"`` and ``7`` differ)."""
    return _encode(request_id).decode()


class Journal:
    """One call's recorder (:class:`~mrtr.core.calls.CallJournal`), writing through its :class:`Calls`.

    Writes are one at a time: a save (the carrier's state) or a flush (the stream's
    events) takes what is waiting of both and writes it in one store write. A write the
    store refuses because another process holds the call now raises :class:`TakenOver`;
    a store that keeps failing for :data:`PATIENCE` seconds leaves the call unrecorded
    (``lost``): its events go out unwritten and it goes on in this process alone.
    """

    def __init__(self, calls: Calls, session: str, stream: str, created: Created | None, *, version: int = 0,
                 resumed: Resumption | None = None) -> None:
        self.calls = calls
        self.session = session
        self.stream = stream
        self.resumed = resumed
        self.principal: str | None = None
        self.waiting = False
        self.released = False
        self.lost = False
        self.taken = False
        self.questions: list[Any] = [question.id for question in resumed.state.pending] if resumed is not None else []
        self._created = created
        self._version = version
        self._source: EventSource | None = None
        self._state: bytes | None = None
        self._pending: list[str] | None = None
        self._lock = trio.Lock()
        self._token: trio.lowlevel.TrioToken | None = None

    @property
    def recorded(self) -> bool:
        """Whether the call has a record in the store."""
        return self._version > 0 and not self.lost

    def attach(self, source: EventSource) -> None:
        """Record the events of ``source`` with the call."""
        self._source = source
        if self._version > 0:
            source.hold()  # adopted: recorded already

    def hold(self) -> None:
        """Events wait for the store from now on (the call is about to be recorded)."""
        if self._source is not None and not self.lost:
            self._source.hold()

    async def save(self, state: CallState) -> None:
        """Record ``state`` with the events so far, before returning."""
        if self.lost or self.released:
            return
        if self._created is not None and self.principal is not None:
            self._created = Created(self._created.request, _with_principal(self._created.meta, self.principal))
        data = _encode(state)
        if len(data) + (len(self._created.meta) if self._created is not None else 0) > MAX_CALL_BYTES:
            self._give_up(f"its record would pass {MAX_CALL_BYTES} bytes")
            return
        self._state = data
        self._pending = [request_key(question.id) for question in state.pending]
        self.questions = [question.id for question in state.pending]
        await self.flush()

    def save_from_thread(self, state: CallState) -> None:
        """:meth:`save`, from a worker thread of this trio run."""
        trio.from_thread.run(self.save, state)

    async def flush(self, *, done: bool = False) -> None:
        """Write what waits (state, events; ``done``: the end of the call) in one store write."""
        async with self._lock:
            if self.lost and done and not self.taken and self._version > 0:
                await self._end_quietly()  # given up on: what the store has of it goes, if it can
                return
            if self.lost or self.released:
                return
            if self._version == 0 and self._state is None:
                return  # not recorded: nothing to keep
            source = self._source
            events, last, ended = source.unstored() if source is not None else ([], 0, False)
            if any(len(data) > MAX_EVENT_BYTES for _, data in events):
                self._give_up(f"one of its events is over {MAX_EVENT_BYTES} bytes")
                return
            if self._state is None and not events and not done:
                return
            state, pending = self._state, self._pending
            deadline = trio.current_time() + self.calls.patience
            pause = 0.05
            while True:
                try:
                    version = await self.calls.store.write(
                        self.session, self.stream, node=self.calls.node_id, version=self._version,
                        created=self._created if self._version == 0 else None, state=state, pending=pending,
                        events=events, done=done, ttl=self.calls.ttl)
                    break
                except StoreUnavailable:
                    if trio.current_time() + pause > deadline:
                        self._give_up("the store stayed unavailable")
                        return
                    await trio.sleep(pause)
                    pause = min(pause * 2, 1.0)
            if version == 0:
                self.lost = self.taken = True
                if source is not None:
                    source.stored_to(last, ended)
                raise TakenOver(f"call {self.stream} of session {self.session[:8]}...: another process holds it now")
            self._version = version
            self._created = None
            if state is self._state:
                self._state = None
                self._pending = None
            if source is not None:
                source.stored_to(last, ended)

    async def release(self) -> bool:
        """Let the call go to the store (this process stops): whether it was handed over."""
        async with self._lock:
            if self.lost or self.released or self._version == 0:
                return False
            try:
                version = await self.calls.store.release(self.session, self.stream, self.calls.node_id, self._version)
            except StoreUnavailable:
                return False
            if version == 0:
                return False
            self._version = version
            self.released = True
            return True

    async def _end_quietly(self) -> None:
        try:
            await self.calls.store.write(self.session, self.stream, node=self.calls.node_id, version=self._version,
                                         created=None, state=None, pending=[], events=[], done=True,
                                         ttl=FINISHED_TTL)
        except StoreUnavailable:
            pass

    def _give_up(self, why: str) -> None:
        if not self.lost:
            log.warning("a 2025 call (stream %s) is no longer recorded: %s; it goes on in this process only",
                        self.stream, why)
        self.lost = True
        if self._source is not None:
            self._source.unhold()  # nothing waits for the store any more


def _with_principal(meta: bytes, principal: str | None) -> bytes:
    fields = _decode(meta)
    fields["principal"] = principal
    return _encode(fields)


class Calls:
    """The recorded 2025 calls of one process on one shared store (:class:`~mrtr.core.calls.RecordedCalls`).

    ``node_id`` names this process (in question and event ids, and as holder);
    ``lease`` is how long its lease lasts without renewal; ``slot``, for a worker under
    a supervisor, is its position (a replacement takes over its predecessor's calls at
    once). ``ttl`` is how long a record lives after its last write; ``patience`` how long a write
    is tried again while the store fails. Run :meth:`serve` for the lease.
    """

    def __init__(self, store: CallStore, node_id: str, *, lease: float, ttl: float, slot: str | None = None,
                 patience: float = PATIENCE) -> None:
        if not lease > 0 or not ttl > 0:
            raise ValueError("lease and ttl must be positive numbers of seconds")
        self.store = store
        self.patience = patience
        self._node_id = node_id
        self._lease = float(lease)
        self.ttl = float(ttl)
        self.slot = slot
        self._errands: list[Callable[[], Awaitable[Any]]] = []
        self._errand = trio.Event()

    @property
    def node_id(self) -> str:
        """This process's name among the processes sharing the store."""
        return self._node_id

    @property
    def lease(self) -> float:
        """Seconds this process's lease lasts without renewal."""
        return self._lease

    @property
    def copies(self) -> Any:
        """Where what a session negotiated is kept for the process replacing its worker (SQLite), else ``None``.

        On Redis the sessions' own records serve (:mod:`mrtr.carriers.tasks.sessions`).
        """
        return self.store if hasattr(self.store, "save_session") else None

    def later(self, errand: Callable[[], Awaitable[Any]]) -> None:
        """Run ``errand`` soon, in :meth:`serve` (from code that cannot wait for the store); failures are logged."""
        if len(self._errands) < 10_000:
            self._errands.append(errand)
        self._errand.set()

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Hold this process's lease (renewed every third of it) until cancelled, then end it; run errands."""
        # A store that cannot be reached fails here, at start.
        await self.store.hold_lease(self._node_id, self.slot, self._lease)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._run_errands)
                task_status.started()
                while True:
                    await trio.sleep(self._lease / 3)
                    try:
                        await self.store.hold_lease(self._node_id, None, self._lease)
                    except StoreUnavailable:
                        log.warning("cannot renew this process's lease on its 2025 calls while the store is "
                                    "unavailable")
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                try:
                    await self.store.end_lease(self._node_id)
                except StoreUnavailable:
                    pass

    async def _run_errands(self) -> None:
        while True:
            await self._errand.wait()
            self._errand = trio.Event()
            errands, self._errands = self._errands, []
            for errand in errands:
                try:
                    await errand()
                except StoreUnavailable:
                    log.warning("a 2025 session's record could not be updated in the store; it expires by itself")

    def journal(self, session_id: str, stream: str, request_id: Any, method: str, params: Mapping[str, Any],
                source: EventSource) -> Journal:
        """The journal of a new call (recorded from its first save)."""
        meta = _encode({"request": request_id, "method": method, "params": params, "principal": None})
        journal = Journal(self, session_id, stream, Created(request_key(request_id).encode(), meta))
        journal.attach(source)
        return journal

    async def claim(self, session_id: str, stream: str) -> Claimed | Held | Stored | None:
        """See :meth:`mrtr.core.calls.RecordedCalls.claim`."""
        found = await self.store.claim(session_id, stream, self._node_id)
        if found is None:
            return None
        if found.status == "held":
            return Held(found.holder)
        if found.status == "done":
            return Stored(found.events, found.last, True, "", False)
        meta = _decode(found.meta)
        state = _decode_state(found.state) if found.state else CallState()
        answers = {}
        for question, data in found.answers.items():
            try:
                answers[_decode(question)] = _decode(data)
            except msgspec.DecodeError:
                continue
        request = meta.get("request")
        journal = Journal(self, session_id, stream, None, version=found.version,
                          resumed=Resumption(state, answers))
        journal.principal = meta.get("principal")
        return Claimed(journal, request, str(meta.get("method")), dict(meta.get("params") or {}), found.events,
                       found.last)

    async def stored(self, session_id: str, stream: str) -> Stored | None:
        """See :meth:`mrtr.core.calls.RecordedCalls.stored`."""
        return await self.store.read(session_id, stream)

    async def answer(self, session_id: str, message: Mapping[str, Any]) -> AnswerRoute | None:
        """See :meth:`mrtr.core.calls.RecordedCalls.answer`."""
        question = message.get("id")
        if isinstance(question, bool) or not isinstance(question, (str, int)):
            return None
        return await self.store.answer(session_id, request_key(question), _encode(message))

    async def cancel(self, session_id: str, request_id: Any) -> Held | bool:
        """See :meth:`mrtr.core.calls.RecordedCalls.cancel`: the pending questions are withdrawn on its stream."""
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            return False
        stream = await self.store.find(session_id, request_key(request_id))
        if stream is None:
            return False
        found = await self.store.claim(session_id, stream, self._node_id)
        if found is None or found.status == "done":
            return False
        if found.status == "held":
            return Held(found.holder)
        state = _decode_state(found.state) if found.state else CallState()
        position = found.last
        withdrawn = []
        for question in state.pending:
            position += 1
            withdrawn.append((position, encode(notification("notifications/cancelled", {
                "requestId": question.id, "reason": "the call was cancelled"}))))
        await self.store.write(session_id, stream, node=self._node_id, version=found.version, created=None,
                               state=None, pending=[], events=withdrawn, done=True, ttl=FINISHED_TTL)
        return True

    async def release(self, journal: Any) -> bool:
        """See :meth:`mrtr.core.calls.RecordedCalls.release`."""
        assert isinstance(journal, Journal)
        return await journal.release()

    async def forget(self, session_id: str) -> None:
        """Remove every recorded call of a session that ended."""
        await self.store.forget(session_id)


def record_ttl(idle_timeout: float, answer_timeout: float, lease: float) -> float:
    """How long a call's record lives after its last write: the session's idle timeout, and at least what a
    question may wait for its answer plus a lease (so an orphaned question outlives its timeout)."""
    return max(idle_timeout, answer_timeout + lease) if math.isfinite(idle_timeout) else answer_timeout + lease
