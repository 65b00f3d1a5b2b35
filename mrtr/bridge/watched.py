"""The proxy's resource subscriptions upstream: one per uri its own clients want, counted.

A downstream client that subscribes to a resource (a 2025 session's
``resources/subscribe``, a modern ``subscriptions/listen`` naming it) makes the proxy's
server tell its :class:`~mrtr.server.subscriptions.ResourceWatcher`; :class:`UpstreamWatch`
is that watcher:

- the first listener of a uri subscribes the proxy's upstream client to it
  (:meth:`mrtr.Client.subscribe`), and the listener's request waits for the upstream's
  agreement: an upstream that refuses refuses the downstream request too, with the
  upstream's error (its "resource not found" in the downstream's era, as for a read;
  ``-32603`` when it cannot be reached);
- each further listener of the uri only counts; the last one to go unsubscribes
  upstream (in the background: a stream being cancelled cannot wait);
- at most ``max_uris`` uris are subscribed upstream at once; a subscription past that is
  refused (``-32602``) naming the bound, so clients cannot make the proxy hold unbounded
  state upstream;
- the upstream's ``notifications/resources/updated`` reach the proxy's clients subscribed
  to that uri, in their era (:meth:`~mrtr.server.Server.notify_resource_updated`);
- a new upstream connection (a restart) subscribes again to every uri still wanted,
  and each is reported updated once, since what changed meanwhile was not heard.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from ..client.client import Client
from ..client.errors import ClientError
from ..core.errors import InvalidParams
from .upstream import resource_error

__all__ = ["DEFAULT_MAX_WATCHED", "UpstreamWatch"]

log = logging.getLogger("mrtr.bridge")

DEFAULT_MAX_WATCHED = 1_000
"""Resource uris the proxy subscribes to upstream at once, at most (as many as one 2025 session may)."""


class UpstreamWatch:
    """Counts the proxy's listeners per uri and keeps the upstream subscribed to the uris wanted (see the module).

    ``upstream`` is the proxy's :class:`~mrtr.bridge.upstream.Upstream`; ``updated(uri)``
    tells the proxy's own clients that ``uri`` changed.
    """

    def __init__(self, upstream: Any, updated: Callable[[str], None], *, max_uris: int = DEFAULT_MAX_WATCHED) -> None:
        if not isinstance(max_uris, int) or max_uris < 1:
            raise ValueError(f"max_uris must be a positive integer, got {max_uris!r}")
        self.upstream = upstream
        self.updated = updated
        self.max_uris = max_uris
        self.counts: dict[str, int] = {}
        """How many listeners want each uri (a uri is here while its upstream subscription is being made too)."""
        self._sync = trio.Lock()  # one subscribe or unsubscribe upstream at a time, so they cannot cross
        self._nursery: trio.Nursery | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[UpstreamWatch]:
        """Hold the tasks that unsubscribe upstream for the block."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield self
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel()

    async def watch(self, uri: str) -> None:
        """One more listener of ``uri``: the first subscribes upstream, and its request waits for the upstream."""
        if uri in self.counts:
            self.counts[uri] += 1
            try:
                await self._subscribed(uri)  # a subscription being made: this listener waits for it too
            except BaseException:
                self.unwatch(uri)
                raise
            return
        if len(self.counts) >= self.max_uris:
            raise InvalidParams(f"the proxy subscribes to at most {self.max_uris} resources upstream at once; "
                                f"unsubscribe from some first", data={"uri": uri, "limit": self.max_uris})
        self.counts[uri] = 1
        try:
            await self._subscribed(uri)
        except BaseException:
            self.unwatch(uri)
            raise

    def unwatch(self, uri: str) -> None:
        """One listener of ``uri`` fewer; the last one's going unsubscribes upstream, in the background."""
        count = self.counts.get(uri, 0) - 1
        if count > 0:
            self.counts[uri] = count
            return
        self.counts.pop(uri, None)
        if self._nursery is not None:
            self._nursery.start_soon(self._unsubscribed, uri)

    async def _subscribed(self, uri: str) -> None:
        # The client is found outside the lock: a reconnection holds it while it subscribes again.
        client = await self.upstream.client()
        async with self._sync:
            if uri not in self.counts:
                return  # every listener left while it waited
            try:
                await client.subscribe(uri)
            except ClientError as error:
                # "not found" in the downstream's era, whichever era the upstream said it in
                raise resource_error(self.upstream.failed(client, error), uri) from None
            except (RuntimeError, trio.ClosedResourceError, trio.BrokenResourceError) as error:
                raise self.upstream.closing(client, error) from None

    async def _unsubscribed(self, uri: str) -> None:
        try:
            client = await self.upstream.client()
            async with self._sync:
                if uri in self.counts:
                    return  # wanted again meanwhile: stays subscribed
                await client.unsubscribe(uri)
        except Exception as error:  # a connection gone took its subscriptions with it
            log.info("could not unsubscribe from %s upstream: %s", uri, error)

    async def connected(self, client: Client) -> None:
        """A new upstream client: subscribe it to every uri still wanted, each reported updated once."""
        async with self._sync:
            for uri in list(self.counts):
                try:
                    await client.subscribe(uri)
                except ClientError as error:
                    log.warning("could not subscribe to %s again upstream: %s", uri, error.message)
                    continue
                self.updated(uri)

    def upstream_updated(self, uri: str) -> None:
        """The upstream says ``uri`` changed: the proxy's clients subscribed to it are told."""
        if uri in self.counts:
            self.updated(uri)
