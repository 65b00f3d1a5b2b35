"""What every transport on trio shares: blocking handlers in worker threads.

A :class:`~mrtr.Server` built with ``sync_handlers="thread"`` runs sync handlers
through the ``run_sync`` callable its transport passes to
:meth:`~mrtr.jsonrpc.Dispatcher.handle`, so the server itself imports no event loop.
The HTTP servers and the stdio transport pass :func:`run_in_thread`, and wrap their
notification sink with :func:`thread_safe` so a handler running in a worker thread can
still report progress.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from .jsonrpc import Notify

__all__ = ["run_in_thread", "thread_safe"]


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
