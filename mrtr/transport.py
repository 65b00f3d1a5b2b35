"""What every transport on trio shares: blocking handlers in worker threads, the lifespan.

A :class:`~mrtr.Server` built with ``sync_handlers="thread"`` runs sync handlers
through the ``run_sync`` callable its transport passes to
:meth:`~mrtr.jsonrpc.Dispatcher.handle`, so the server itself imports no event loop.
The HTTP servers, the stdio transport and the in-process client pass
:func:`run_in_thread`, and wrap their notification sink with :func:`thread_safe` so a
handler running in a worker thread can still report progress. Each transport runs
its dispatcher's lifespan around serving with :func:`lifespan`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from .jsonrpc import Notify

__all__ = ["lifespan", "run_in_thread", "thread_safe"]


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


@asynccontextmanager
async def lifespan(dispatcher: Any) -> AsyncIterator[None]:
    """Run the dispatcher's lifespan (``Server.running()``) around serving, if it has one.

    The exit is shielded from cancellation, so resources close completely even when
    the transport stops because its scope was cancelled. Dispatchers without a
    lifespan are served as they are.
    """
    running = getattr(dispatcher, "running", None)
    if running is None:
        yield
        return
    manager = running()
    await manager.__aenter__()
    try:
        yield
    except BaseException as exc:
        with trio.CancelScope(shield=True):
            await manager.__aexit__(type(exc), exc, exc.__traceback__)
        raise
    with trio.CancelScope(shield=True):
        await manager.__aexit__(None, None, None)
