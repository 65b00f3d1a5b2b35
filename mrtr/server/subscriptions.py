"""``subscriptions/listen`` and the server-wide notifications it carries.

A transport that can hold a stream attaches its hub (a
:class:`~mrtr.core.jsonrpc.Broadcast`) while it serves; :class:`Subscriptions` keeps the
attached hubs, fans each server-wide notification out to all of them (list changes,
resource updates, task status changes) and to the legacy era's sessions (a relay), and
serves one listen request: it checks what
the request asks to hear, registers a listener before acknowledging (so nothing
published after the acknowledgement is missed), and relays what matches until the
stream ends. The server decides what a caller may hear (which families are offered,
which tasks it may watch, when its token expires) and passes that in; no event loop
is imported here.

Several nodes on one Redis share their notifications through a :class:`Bus`
(:class:`mrtr.carriers.tasks.bus.NodeBus`): while one is attached,
:meth:`Subscriptions.publish` hands every notification to it, and the bus hands back
to :meth:`Subscriptions.deliver` what any node published, this one included, so a
listener hears each notification once, by one path. When the bus loses what was sent
meanwhile it calls :meth:`Subscriptions.interrupt`: every listen stream ends (the
client listens again and re-reads), and new ones are refused until it is back.

**Resource interest.** A server whose resources change elsewhere (a proxy's upstream)
needs to know which resources someone listens to. A :class:`ResourceWatcher`
(:meth:`Subscriptions.watched_by`) is told, in this process, each time a listener starts
wanting a resource's updates and each time it stops: a listen stream's
``resourceSubscriptions`` (before its acknowledgement, and when it ends) and a 2025
session's ``resources/subscribe`` (until it unsubscribes or ends). Each listener's
interest in a uri begins and ends exactly once, so the watcher can count them. A mounted
server's watcher hears of the uris under its namespace, in its own names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from .catalog import unmounted_uri

from ..core import wire
from ..core.errors import InternalError, InvalidParams
from ..core.jsonrpc import Broadcast, Notify

__all__ = ["LISTEN_FILTERS", "Bus", "NOTIFICATIONS_UNAVAILABLE", "ResourceWatcher", "Subscriptions"]

NOTIFICATIONS_UNAVAILABLE = "Internal error: notifications are unavailable"
"""What a listen request is answered (``-32603``) while the nodes' shared notifications are interrupted."""


class Bus(Protocol):
    """What carries notifications between the nodes of one server (on their shared Redis)."""

    @property
    def connected(self) -> bool:
        """Whether everything any node publishes reaches this node now."""
        ...

    def publish(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification to every node, this one included; callable from any thread, never waits."""
        ...

class ResourceWatcher(Protocol):
    """What a server tells of the resources its listeners want updates of (see the module)."""

    async def watch(self, uri: str, holder: str | None) -> None:
        """One more listener wants ``uri``'s updates; raising a ``ProtocolError`` refuses its request.

        ``holder`` is who the listener is, for a watcher's shares: the caller's principal,
        else the client's address (a 2025 session's ``client``), ``None`` when neither is known.
        """
        ...

    def unwatch(self, uri: str, holder: str | None) -> None:
        """One listener that wanted ``uri``'s updates no longer does; never waits (it may run as a stream is cancelled)."""
        ...


LISTEN_FILTERS = {
    "toolsListChanged": ("notifications/tools/list_changed", "tools"),
    "promptsListChanged": ("notifications/prompts/list_changed", "prompts"),
    "resourcesListChanged": ("notifications/resources/list_changed", "resources"),
}
"""What each boolean filter of a listen request opts into, and the method family that must be offered."""


class Subscriptions:
    """The hubs transports attached while serving, and the listen streams that use them."""

    __slots__ = ("_bus", "_hubs", "_relays", "_watcher", "_mounted")

    def __init__(self) -> None:
        self._hubs: list[Broadcast] = []
        self._relays: list[Callable[[str, dict[str, Any]], None]] = []
        self._bus: Bus | None = None
        self._watcher: ResourceWatcher | None = None
        self._mounted: dict[str, Subscriptions] = {}

    def watched_by(self, watcher: ResourceWatcher | None) -> None:
        """Tell ``watcher`` which resources this process's listeners want (``None``: nobody)."""
        self._watcher = watcher

    def mount(self, namespace: str, child: Subscriptions) -> None:
        """Pass the interest in uris under ``namespace`` on to a mounted server's subscriptions, in its names."""
        self._mounted[namespace] = child

    async def watch(self, uri: str, holder: str | None = None) -> None:
        """A listener (``holder``, see :class:`ResourceWatcher`) starts wanting ``uri``'s updates: its watcher
        (and a mounted server's) is told.

        Raises what a watcher raises to refuse it (then none of them counts it).
        """
        if self._watcher is not None:
            await self._watcher.watch(uri, holder)
        for namespace, child in self._mounted.items():
            inner = unmounted_uri(namespace, uri)
            if inner is None:
                continue
            try:
                await child.watch(inner, holder)
            except BaseException:
                if self._watcher is not None:
                    self._watcher.unwatch(uri, holder)
                raise

    def unwatch(self, uri: str, holder: str | None = None) -> None:
        """A listener no longer wants ``uri``'s updates (one :meth:`watch` of it, undone); never waits."""
        if self._watcher is not None:
            self._watcher.unwatch(uri, holder)
        for namespace, child in self._mounted.items():
            inner = unmounted_uri(namespace, uri)
            if inner is not None:
                child.unwatch(inner, holder)

    def relay(self, deliver: Callable[[str, dict[str, Any]], None]) -> None:
        """Hand every published notification to ``deliver`` too (the legacy era's sessions), from any thread."""
        self._relays.append(deliver)

    def attach(self, hub: Broadcast) -> Callable[[], None]:
        """Let listen streams use ``hub``; returns the function that detaches it."""
        self._hubs.append(hub)
        return lambda: self._hubs.remove(hub) if hub in self._hubs else None

    @property
    def available(self) -> bool:
        """Whether a transport that can hold a listen stream is serving."""
        return bool(self._hubs)

    def through(self, bus: Bus) -> Callable[[], None]:
        """Publish through ``bus`` (which delivers back here) from now on; returns what detaches it."""
        self._bus = bus

        def detach() -> None:
            if self._bus is bus:
                self._bus = None

        return detach

    @property
    def bus(self) -> Bus | None:
        """The bus notifications go through between nodes, if any."""
        return self._bus

    def publish(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification to every listener (of every node, with a bus); callable from any thread."""
        bus = self._bus
        if bus is not None:
            bus.publish(method, params)
        else:
            self.deliver(method, params)

    def deliver(self, method: str, params: dict[str, Any]) -> None:
        """Queue a notification for every listener of this process's hubs and relays; callable from any thread."""
        for hub in list(self._hubs):
            hub.publish(method, params)
        for deliver in self._relays:
            deliver(method, params)

    def interrupt(self) -> None:
        """End every listen stream now: notifications were lost, and their clients must listen and re-read."""
        for hub in list(self._hubs):
            hub.interrupt()

    async def listen(
        self,
        wanted: Any,
        *,
        request_id: Any,
        notify: Notify | None,
        offered: Callable[[str], bool],
        until: float | None,
        watch_tasks: Callable[[Any], Awaitable[list[str] | None]],
        holder: str | None = None,
    ) -> dict[str, Any]:
        """Serve one ``subscriptions/listen`` until its stream ends; returns the request's result.

        ``wanted`` is the request's ``notifications`` object; ``offered(method)`` says
        whether the server serves a method; ``until`` (epoch seconds) ends the stream when
        the caller's token would be refused; ``watch_tasks(task_ids)`` returns the asked
        ``taskIds`` the caller may watch (``None`` when none were asked), or raises;
        ``holder`` is who the caller is, for the resource watcher's shares.
        """
        if not isinstance(wanted, dict):
            raise InvalidParams('subscriptions/listen needs a "notifications" object naming what to receive')
        if notify is None or not self._hubs:
            raise InvalidParams("subscriptions/listen needs a transport that streams notifications")
        if self._bus is not None and not self._bus.connected:
            raise InternalError(NOTIFICATIONS_UNAVAILABLE)
        agreed: dict[str, Any] = {}
        methods: set[str] = set()
        for name, (method, family) in LISTEN_FILTERS.items():
            value = wanted.get(name)
            if value is not None and not isinstance(value, bool):
                raise InvalidParams(f"subscriptions/listen: notifications.{name} must be a boolean")
            if value and offered(f"{family}/list"):
                agreed[name] = True
                methods.add(method)
        uris = wanted.get("resourceSubscriptions")
        if uris is not None:
            if not isinstance(uris, list) or not all(isinstance(uri, str) and uri for uri in uris):
                raise InvalidParams("subscriptions/listen: notifications.resourceSubscriptions must be a list of uris")
            if offered("resources/read"):
                agreed["resourceSubscriptions"] = list(dict.fromkeys(uris))
        subscribed = set(agreed.get("resourceSubscriptions", ()))
        meta = {wire.META_SUBSCRIPTION_ID: request_id}
        # Registered before the acknowledgement (and before the task checks below), so
        # nothing published after it is missed.
        listener = self._hubs[-1].listen(until)
        interested: list[str] = []  # the uris this stream told the watchers of, undone when it ends
        try:
            for uri in agreed.get("resourceSubscriptions", ()):
                await self.watch(uri, holder)
                interested.append(uri)
            watched = await watch_tasks(wanted.get("taskIds"))
            if watched is not None:
                agreed["taskIds"] = watched
            notify("notifications/subscriptions/acknowledged", {"notifications": agreed, "_meta": meta})
            tasks = set(watched or ())
            async for method, params in listener:
                if method in methods or (method == "notifications/resources/updated" and params.get("uri") in subscribed) \
                        or (method == "notifications/tasks" and params.get("taskId") in tasks):
                    notify(method, {**params, "_meta": meta})
        finally:
            listener.close()  # a client that went away stops receiving at once
            for uri in interested:
                self.unwatch(uri, holder)
        return {"resultType": "complete", "_meta": dict(meta)}
