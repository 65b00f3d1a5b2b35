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
- at most ``max_uris`` uris are subscribed upstream at once, and one client (its
  principal, else its address) holds at most ``max_per_client`` of them, so one
  client cannot take every uri and leave none for the others; a subscription past either
  is refused (``-32602``) naming the bound and the keyword that raises it, so clients
  cannot make the proxy hold unbounded state upstream;
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

__all__ = ["DEFAULT_MAX_WATCHED", "DEFAULT_MAX_WATCHED_PER_CLIENT", "UpstreamWatch"]

log = logging.getLogger("mrtr.bridge")

DEFAULT_MAX_WATCHED = 1_000
"""Resource uris the proxy subscribes to upstream at once, at most (as many as one 2025 session may)."""

DEFAULT_MAX_WATCHED_PER_CLIENT = 100
"""Subscriptions one client (a principal, else an address) holds through the proxy at once, at most: a tenth
of :data:`DEFAULT_MAX_WATCHED`, as a client's share of waiting calls is a tenth of the process's."""


class UpstreamWatch:
    """Counts the proxy's listeners per uri and keeps the upstream subscribed to the uris wanted (see the module).

    ``upstream`` is the proxy's :class:`~mrtr.bridge.upstream.Upstream`; ``updated(uri)``
    tells the proxy's own clients that ``uri`` changed.
    """

    def __init__(self, upstream: Any, updated: Callable[[str], None], *, max_uris: int = DEFAULT_MAX_WATCHED,
                 max_per_client: int = DEFAULT_MAX_WATCHED_PER_CLIENT) -> None:
        for name, value in (("max_uris", max_uris), ("max_per_client", max_per_client)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.upstream = upstream
        self.updated = updated
        self.max_uris = max_uris
        self.max_per_client = max_per_client
        self.counts: dict[str, int] = {}
        """How many listeners want each uri (a uri is here while its upstream subscription is being made too)."""
        self.held: dict[str, dict[str, int]] = {}
        """The uris each known client (its principal, else its address) wants, with its listeners of each: its
        share is the number of uris, so a modern client's stream replaced by a larger one (the two overlap
        for a moment) or a second stream of the same uri takes no more of it."""
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

    async def watch(self, uri: str, holder: str | None = None) -> None:
        """One more listener of ``uri`` (``holder``: the client it is, when known): the first subscribes upstream,
        and its request waits for the upstream."""
        mine = self.held.get(holder, {}) if holder is not None else {}
        if holder is not None and uri not in mine and len(mine) >= self.max_per_client:
            raise InvalidParams(f"one client holds at most {self.max_per_client} resource subscriptions through this "
                                "proxy at once; unsubscribe from some first (the proxy's max_upstream_subscriptions"
                                "_per_client raises it)",
                                data={"uri": uri, "limit": self.max_per_client, "bound": "client",
                                      "option": "max_upstream_subscriptions_per_client"})
        if uri not in self.counts and len(self.counts) >= self.max_uris:
            raise InvalidParams(f"the proxy subscribes to at most {self.max_uris} resources upstream at once; "
                                f"unsubscribe from some first",
                                data={"uri": uri, "limit": self.max_uris, "bound": "process",
                                      "option": "max_upstream_subscriptions"})
        self.counts[uri] = self.counts.get(uri, 0) + 1
        if holder is not None:
            mine = self.held.setdefault(holder, {})
            mine[uri] = mine.get(uri, 0) + 1
        try:
            # The first listener subscribes; a later one waits for a subscription being made too.
            await self._subscribed(uri)
        except BaseException:
            self.unwatch(uri, holder)
            raise

    def unwatch(self, uri: str, holder: str | None = None) -> None:
        """One listener of ``uri`` fewer; the last one's going unsubscribes upstream, in the background."""
        mine = self.held.get(holder) if holder is not None else None
        if mine is not None:
            left = mine.get(uri, 0) - 1
            if left > 0:
                mine[uri] = left
            else:
                mine.pop(uri, None)
                if not mine:
                    del self.held[holder]  # type: ignore[arg-type]  # not None: mine came from it
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
