"""What every transport on trio shares: blocking handlers in worker threads, the dispatcher's lifecycle.

A :class:`~mrtr.Server` built with ``sync_handlers="thread"`` runs sync handlers
through the ``run_sync`` callable its transport passes to
:meth:`~mrtr.core.jsonrpc.Dispatcher.handle`, so the server itself imports no event loop.
The HTTP servers and the stdio transport pass :func:`run_in_thread`, and wrap their
notification sink with :func:`thread_safe` so a handler running in a worker thread can
still report progress. Each transport runs its dispatcher's lifecycle (part of the
:class:`~mrtr.core.jsonrpc.Dispatcher` protocol) around serving with :func:`lifespan`,
which also gives it the :class:`Hub` that ``subscriptions/listen`` streams use. What
goes into each message a transport writes is in :mod:`mrtr.transports.outgoing`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from ..core.jsonrpc import Dispatcher, Notify
from .logs import write_behind

__all__ = ["Hub", "HubListener", "from_any_thread", "lifespan", "run_in_thread", "thread_safe"]

log = logging.getLogger("mrtr")


async def run_in_thread(run: Callable[[], Any]) -> Any:
    """Run a blocking callable in a trio worker thread and return its result.

    A thread that is running cannot be interrupted: a cancelled request abandons it,
    and whatever it returns afterwards is discarded.
    """
    return await trio.to_thread.run_sync(run, abandon_on_cancel=True)


def thread_safe(notify: Notify) -> Notify:
    """A notification sink callable from the event loop and from trio worker threads alike."""

    def relay(method: str, params: dict[str, Any]) -> None:
        try:
            trio.lowlevel.current_task()
        except RuntimeError:  # a worker thread: hop back onto the loop that owns ``notify``
            trio.from_thread.run_sync(notify, method, params)
            return
        notify(method, params)

    return relay


def from_any_thread(notify: Notify) -> Notify:
    """``notify`` made callable from any thread: calls off the current trio loop are queued onto it.

    Unlike :func:`thread_safe`, the caller never waits and need not be a trio worker
    thread; after the loop has stopped, calls are dropped (nobody is listening).
    """
    token = trio.lowlevel.current_trio_token()

    def relay(method: str, params: dict[str, Any]) -> None:
        _on_loop(token, notify, method, params)

    return relay


def _on_loop(token: trio.lowlevel.TrioToken, fn: Callable[..., None], *args: Any) -> None:
    """Call ``fn(*args)`` on the loop of ``token``: now when already there, else queued from this thread."""
    try:
        here = trio.lowlevel.current_trio_token() is token
    except RuntimeError:
        here = False
    if here:
        fn(*args)
        return
    try:
        token.run_sync_soon(fn, *args)
    except trio.RunFinishedError:  # the transport has stopped: nobody is listening
        pass


class Hub:
    """Delivers server-wide notifications (list changes, resource updates) to listen streams.

    One per served transport, created on its trio loop. :meth:`publish` may be called
    from any thread. Each listener has a bounded queue: a listener that falls more than
    ``backlog`` notifications behind is ended (its stream closes with the normal
    result, and the client listens again and re-reads the lists), so a stalled client
    cannot make the server hold unbounded memory. :meth:`interrupt` ends every listener
    the same way, when notifications were lost upstream (the bus between nodes lost its
    subscription).
    """

    def __init__(self, backlog: int = 256) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._listeners: set[trio.MemorySendChannel[tuple[str, dict[str, Any]]]] = set()
        self._backlog = backlog
        self.closed = False

    def publish(self, method: str, params: dict[str, Any]) -> None:
        """Queue ``method`` with ``params`` for every listener; callable from any thread."""
        _on_loop(self._token, self._deliver, method, params)

    def _deliver(self, method: str, params: dict[str, Any]) -> None:
        for channel in list(self._listeners):
            try:
                channel.send_nowait((method, dict(params)))
            except trio.WouldBlock:
                log.warning("a subscriptions/listen stream fell %d notifications behind; ending it", self._backlog)
                self._drop(channel)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                self._listeners.discard(channel)

    def listen(self, until: float | None = None) -> HubListener:
        """A new listener, registered at once; iterating it ends when the hub closes.

        ``until`` (epoch seconds, as a token's expiry is given) ends it then as well.
        """
        send, receive = trio.open_memory_channel[tuple[str, dict[str, Any]]](self._backlog)
        if self.closed:
            send.close()
        else:
            self._listeners.add(send)
        deadline = math.inf if until is None else trio.current_time() + (until - time.time())
        return HubListener(receive, deadline)

    def _drop(self, channel: trio.MemorySendChannel[tuple[str, dict[str, Any]]]) -> None:
        self._listeners.discard(channel)
        channel.close()

    def interrupt(self) -> None:
        """End every listen stream registered now, gracefully; new ones may register. Callable from any thread."""
        _on_loop(self._token, self._interrupt)

    def _interrupt(self) -> None:
        for channel in list(self._listeners):
            self._drop(channel)

    def close(self) -> None:
        """End every listen stream gracefully: the transport is shutting down."""
        self.closed = True
        for channel in list(self._listeners):
            self._drop(channel)


class HubListener:
    """One listen stream's notifications from a :class:`Hub`: ``(method, params)`` pairs.

    Iteration ends when the hub closes or drops the listener, or at ``deadline`` (trio
    time), whichever comes first; :meth:`close` unregisters it.
    """

    __slots__ = ("_deadline", "_receive")

    def __init__(self, receive: trio.MemoryReceiveChannel[tuple[str, dict[str, Any]]], deadline: float) -> None:
        self._receive = receive
        self._deadline = deadline

    def __aiter__(self) -> HubListener:
        return self

    async def __anext__(self) -> tuple[str, dict[str, Any]]:
        with trio.move_on_at(self._deadline):
            try:
                return await self._receive.receive()
            except trio.EndOfChannel:
                raise StopAsyncIteration from None
        log.debug("a subscriptions/listen stream reached its end of validity; ending it")
        raise StopAsyncIteration

    def close(self) -> None:
        """Stop receiving: the hub forgets this listener at its next delivery."""
        self._receive.close()


@asynccontextmanager
async def lifespan(dispatcher: Dispatcher) -> AsyncIterator[Hub]:
    """Run the dispatcher's lifecycle around serving: its hub attached, ``running()`` entered.

    Cancelling the transport's scope cancels the lifespan's close as well, as trio
    cancels any cleanup: code after the lifespan's ``yield`` that must finish shields
    itself (``with trio.CancelScope(shield=True):``). The :class:`Hub` it gives is
    attached to the dispatcher (``listen_through``) so ``subscriptions/listen`` streams
    work while it serves; the transport calls ``hub.close()`` when its shutdown begins,
    so listen streams end before the requests in flight are drained. While it serves,
    access lines wait for the loop's idle moments (:func:`mrtr.transports.logs.write_behind`);
    what waits is written when it ends.
    """
    hub = Hub()
    detach = dispatcher.listen_through(hub)
    stop_writing = write_behind()  # access lines wait for the loop's idle moments while it serves
    try:
        # Entered as a block, not by hand: what runs inside (the task carrier's nursery, a
        # lifespan that opens one) holds cancel scopes that must close in order.
        async with dispatcher.running():
            yield hub
    finally:
        hub.close()
        detach()
        stop_writing()
