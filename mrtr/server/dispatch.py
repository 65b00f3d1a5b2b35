"""An MCP server: the shell that holds its configuration and lifecycle and builds its two eras.

:class:`Server` knows nothing about sockets. A transport parses a JSON-RPC message with
:func:`mrtr.core.jsonrpc.parse_message` and hands requests to :meth:`Server.respond`, which
returns the response message with the status to send it with (:meth:`Server.handle`: the
message alone, for callers in this process). Request-scoped notifications (progress, log
messages) go to the ``notify`` callable the transport passes in.

The server holds what is registered (its :class:`~mrtr.server.catalog.Catalog`, filled by
the decorators of :class:`~mrtr.server.registry.Registry`), its settings, its key ring and,
while :meth:`Server.running`, its task store and carriers. It builds the two eras that
serve requests from that one catalogue: the modern era (2026-07-28, every request
standing alone: :mod:`mrtr.server.modern`), which :meth:`Server.respond` hands requests to,
and the legacy era (2025-era clients in sessions opened by ``initialize``:
:attr:`Server.legacy`, :mod:`mrtr.server.legacy`). Both read the server through
:class:`~mrtr.server.shell.Shell`.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, contextmanager
from typing import Any, Literal, NamedTuple

from ..carriers.contract import STALL_WARNING, TASKS_EXTENSION, RoundRecords, TaskHost, ToolBinding
from ..carriers.sealed import TokenCarrier
from ..core.codec import RequestStateCodec
from ..core.errors import EphemeralKeyWarning, ProtocolError
from ..core.holding import holder
from ..core.jsonrpc import Broadcast, Notify, Response, RunSync
from ..core.eras import LEGACY, MODERN
from .catalog import MountedCatalog, PrincipalSource, RequestInfo, mounted_uri
from .apps import advertise_ui, check_ui_links
from .legacy import LegacyEra
from .lifespan import Lifespan
from .modern import MAX_LISTEN_TASK_IDS, SUPPORTED_VERSIONS, ModernEra
from .registry import Header, Registry
from .sessions import SessionRegistry
from .subscriptions import ResourceWatcher, Subscriptions

__all__ = [
    "SUPPORTED_VERSIONS",
    "MAX_LISTEN_TASK_IDS",
    "Header",
    "RequestInfo",
    "Server",
]

log = logging.getLogger("mrtr")


class _TaskSettings(NamedTuple):
    """How task tools are served; ``None`` leaves a setting to the next source (environment, default)."""

    url: str | None
    lease: float | None
    ttl: float | None
    max_bytes: int | None

    def check(self) -> None:
        if self.lease is not None and not self.lease > 0:
            raise ValueError(f"task_lease must be a positive number of seconds, got {self.lease!r}")
        if self.ttl is not None and not self.ttl > 0:
            raise ValueError(f"task_ttl must be a positive number of seconds (math.inf: no limit), got {self.ttl!r}")
        if self.max_bytes is not None and (isinstance(self.max_bytes, bool) or not isinstance(self.max_bytes, int)
                                           or self.max_bytes < 1):
            raise ValueError(f"task_max_bytes must be a positive number of bytes, got {self.max_bytes!r}")

    def over(self, other: _TaskSettings) -> _TaskSettings:
        """These settings where given, ``other``'s elsewhere."""
        return _TaskSettings(
            other.url if self.url is None else self.url, other.lease if self.lease is None else self.lease,
            other.ttl if self.ttl is None else self.ttl, other.max_bytes if self.max_bytes is None else self.max_bytes,
        )

def _store_url(store_url: str | None, tasks_url: str | None) -> str | None:
    """The store named by ``store_url`` or by its older name ``tasks_url``; naming two is a mistake."""
    if store_url is not None and tasks_url is not None and store_url != tasks_url:
        raise ValueError("store_url and tasks_url name the same setting (tasks_url is its older name); give one")
    return store_url if store_url is not None else tasks_url


def _eras(eras: str | Iterable[str]) -> frozenset[str]:
    """The eras ``Server(eras=...)`` names: ``"both"``, ``"modern"``, or a collection of era names."""
    if isinstance(eras, str):
        named = {"both": (MODERN, LEGACY), MODERN: (MODERN,)}.get(eras)
        if named is None:
            raise ValueError(f'eras must be "both" or "modern", or a collection of era names, got {eras!r}')
        return frozenset(named)
    served = frozenset(eras)
    if served not in (frozenset({MODERN}), frozenset({MODERN, LEGACY})):
        raise ValueError(f'eras must hold "modern", and may hold "legacy"; got {sorted(served)!r}')
    return served


_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")

# The capability each offered family advertises (Catalog.offered decides what is offered).
_CAPABILITY_OF = {"tools": "tools", "prompts": "prompts", "resources": "resources", "completion": "completions"}


class Server(Registry):
    """An MCP server: register handlers with the decorators, serve it with a transport.

    ``secret``/``codec`` and ``ttl`` configure the sealed ``requestState`` token (see
    :meth:`mrtr.core.codec.RequestStateCodec.configure`: by default from ``MRTR_SECRET`` and
    ``MRTR_TTL``, or an ephemeral key with a warning). ``principal`` is a callable given
    a :class:`RequestInfo` that returns the authenticated principal (or ``None``);
    tokens are bound to it. ``answers`` selects the answer policy, ``"strict"`` or
    ``"lenient"`` (see ``docs/security.md``). ``sync_handlers="thread"`` runs sync
    handlers (plain functions and sync generators) through the ``run_sync`` the
    transport passes (a worker thread), so blocking code in them does not stall other
    requests; the default ``"inline"`` runs them on the event loop, which is faster for
    handlers that do not block, and a handler registered with ``thread=True`` gets a
    worker thread alone. ``stall_warning`` (0.1 s): a sync handler on the event loop that
    holds it longer is named once in a warning, with the fix (``None``: never).

    ``auth`` makes the server an OAuth 2.1 protected resource (see ``docs/auth.md``):
    the HTTP transports then authenticate every request with it, ``ctx.auth`` carries
    the verified token, ``requestState`` is bound to the token's issuer, subject and
    client (unless ``principal`` is given), ``tools/list`` leaves out the tools whose
    ``scopes`` the caller lacks, and lists default to ``cache_scope="private"``.

    What a failing handler shows the client (see ``docs/security.md``): with
    ``mask_errors`` (the default) the message of a :class:`~mrtr.core.errors.PublicError`
    the handler raised on purpose, and for any other exception a generic message naming
    the tool, prompt or resource with a short reference that the server's log prints
    beside the traceback; replay diagnostics go as their typed error and contract,
    without file paths and source lines. ``debug=True`` (or ``MRTR_DEBUG=1``, which
    ``mrtr serve --reload`` sets) shows the client everything, for development, and so
    does ``mask_errors=False``; an explicit ``mask_errors`` wins over ``debug``.

    ``store_url`` names the store that holds what is not stateless (see
    ``docs/deployment.md``): task records, the rounds of handlers declared ``once=True``,
    the buckets of a ``RateLimit`` middleware and, on Redis, the notifications every node's
    listeners hear (``MRTR_STORE``, or ``MRTR_TASKS``; else, for task tools, a SQLite file
    of this server's own in the user's state folder, ``$XDG_STATE_HOME/mrtr/stores/<name>.sqlite3``,
    and ``memory:`` for rounds and buckets alone). ``tasks_url`` is its older name. ``task_lease``, ``task_ttl`` and
    ``task_max_bytes`` configure task tools (see ``docs/tasks.md``): the runner's lease in
    seconds (``MRTR_TASK_LEASE`` or 30), how long a task lives after its last activity in
    seconds (``MRTR_TASK_TTL`` or one hour; ``math.inf``: no limit) and the cap on one
    task record (``mrtr.tasks.MAX_RECORD_BYTES``); rounds that run once use the same
    lease and record cap. :meth:`running` takes the same arguments for one serving block
    (``mrtr serve --store``, ``--task-lease``, ``--task-ttl``).

    ``eras`` says which protocol eras are served (see ``docs/eras.md``): ``"both"`` (the
    default) serves 2025-era clients too, in sessions opened by ``initialize``, with the
    same handlers (:attr:`legacy`); ``"modern"`` serves MCP 2026-07-28 only, and answers
    ``initialize`` with ``-32022`` naming the versions it speaks. ``answer_timeout``
    bounds, in seconds, how long a 2025-era call waits for the client's answers to one
    round (default: the ``requestState`` TTL); ``sessions`` is the
    :class:`~mrtr.server.sessions.SessionRegistry` holding those sessions, for other
    bounds than its defaults.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        title: str | None = None,
        instructions: str | None = None,
        secret: str | bytes | list[bytes] | None = None,
        codec: RequestStateCodec | None = None,
        ttl: float | None = None,
        principal: PrincipalSource | None = None,
        answers: Literal["strict", "lenient"] = "strict",
        sync_handlers: Literal["inline", "thread"] = "inline",
        stall_warning: float | None = STALL_WARNING,
        page_size: int = 100,
        list_ttl_ms: int = 60_000,
        cache_scope: Literal["public", "private"] | None = None,
        auth: Any = None,
        mask_errors: bool | None = None,
        debug: bool | None = None,
        store_url: str | None = None,
        tasks_url: str | None = None,
        task_lease: float | None = None,
        task_ttl: float | None = None,
        task_max_bytes: int | None = None,
        eras: str | Iterable[str] = "both",
        answer_timeout: float | None = None,
        sessions: SessionRegistry | None = None,
    ) -> None:
        super().__init__()
        served = _eras(eras)
        if answers not in ("strict", "lenient"):
            raise ValueError(f'answers must be "strict" or "lenient", got {answers!r}')
        if sync_handlers not in ("inline", "thread"):
            raise ValueError(f'sync_handlers must be "inline" or "thread", got {sync_handlers!r}')
        if stall_warning is not None and (isinstance(stall_warning, bool) or not isinstance(stall_warning, (int, float))
                                          or not stall_warning > 0):
            raise ValueError(f"stall_warning must be a positive number of seconds or None, got {stall_warning!r}")
        if codec is not None and (secret is not None or ttl is not None):
            raise ValueError("give either codec or secret/ttl, not both")
        store_url = _store_url(store_url, tasks_url)
        _TaskSettings(store_url, task_lease, task_ttl, task_max_bytes).check()
        self.name = name
        self.debug = _env_flag("MRTR_DEBUG") if debug is None else bool(debug)
        catalog = self.catalog
        catalog.mask_errors = (not self.debug) if mask_errors is None else bool(mask_errors)
        catalog.auth = auth
        catalog.principal_source = principal
        catalog.page_size = page_size
        self.version = version
        self.instructions = instructions
        self.server_info: dict[str, Any] = {"name": name, "version": version}
        if title:
            self.server_info["title"] = title
        self._codec_args = (secret, codec, ttl)
        self._token_carrier: TokenCarrier | None = None
        self._key_alone = False  # settle_key(alone=True): only what a restart costs is worth saying
        self._answers = answers
        self.sync_handlers = sync_handlers
        self.stall_warning = stall_warning
        self.list_ttl_ms = list_ttl_ms
        # What a list holds depends on the caller once scopes hide tools, so a shared cache must not reuse it.
        self.cache_scope: Literal["public", "private"] = cache_scope or ("private" if auth is not None else "public")
        self._lifespan = Lifespan(self)
        catalog.lifespan = self._lifespan
        self._subscriptions = Subscriptions()
        self._tasks: TaskHost | None = None
        self._rounds: RoundRecords | None = None
        self._task_settings = _TaskSettings(store_url, task_lease, task_ttl, task_max_bytes)
        self._modern = ModernEra(catalog, self, self._subscriptions)
        self._mounted: dict[str, Server] = {}
        self._legacy: LegacyEra | None = None
        if LEGACY in served:
            self._legacy = LegacyEra(catalog, self, sessions if sessions is not None else SessionRegistry(),
                                     answer_timeout=answer_timeout, subscriptions=self._subscriptions)
            self._subscriptions.relay(self._legacy.publish)
        elif sessions is not None or answer_timeout is not None:
            raise ValueError("sessions= and answer_timeout= configure the legacy era, which eras= leaves out")

    # -- lifespan ----------------------------------------------------------------------

    def lifespan(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Register the server's lifespan: what handlers share, opened once per process.

        ``fn`` is an async generator function (or any callable returning an async
        context manager), called with the server if it takes a parameter. What it yields
        is ``ctx.lifespan`` in every handler; code after its ``yield`` runs at shutdown,
        after the requests in flight have finished::

            @server.lifespan
            async def resources(server):
                async with open_pool() as pool:
                    yield {"pool": pool}

        The transports (the native HTTP server, the ASGI app's lifespan events, stdio)
        enter it before serving; elsewhere use ``async with server.running():``.
        """
        return self._lifespan.register(fn)

    def running(self, *, store_url: str | None = None, tasks_url: str | None = None,
                task_lease: float | None = None, task_ttl: float | None = None,
                task_max_bytes: int | None = None) -> AbstractAsyncContextManager[Any]:
        """What a serving process keeps running beside its transport, for an ``async with`` block.

        The lifespan (its yielded value is what the block gives), then, on a Redis store,
        this node's end of the bus between nodes (notifications), and, with task tools,
        handlers that run once or middleware keeping state in it (a ``RateLimit``)
        registered, the store and this node's task carrier; a store that cannot be reached
        fails here, at start. The store arguments, where given
        (``tasks_url`` is the older name of ``store_url``), override the constructor's for
        this block. Entered once per process: nested or concurrent entries (two transports
        in one process) share the first one's resources (and task settings), and the last
        exit closes them. The transports enter it (:class:`~mrtr.core.jsonrpc.Dispatcher`).
        """
        given = _TaskSettings(_store_url(store_url, tasks_url), task_lease, task_ttl, task_max_bytes)
        given.check()
        check_ui_links(self.catalog)  # a tool may be registered before the interface it links to: checked once all are
        return self._running(given.over(self._task_settings))

    @asynccontextmanager
    async def _running(self, settings: _TaskSettings) -> AsyncIterator[Any]:
        clashes = self.catalog.clashes()  # a mounted server registered a name of ours after it was mounted
        if clashes:
            raise ValueError("names a mounted server shares with its parent: " + "; ".join(clashes))
        async with self._lifespan.running() as value, AsyncExitStack() as mounted:
            # Each mounted server's lifespan, inside ours: its handlers read their own ctx.lifespan.
            for child in self._mounted.values():
                await mounted.enter_async_context(child._lifespan.running())
            async with self._bus_running(settings), self._tasks_running(settings), \
                    self._calls_running(settings):
                yield value

    @asynccontextmanager
    async def _bus_running(self, settings: _TaskSettings) -> AsyncIterator[None]:
        """On a Redis store, this node's end of the bus: ``notify_*`` and task status reach every node."""
        from ..carriers.tasks.redis_url import is_redis_url
        from ..carriers.tasks.urls import chosen_url

        url = chosen_url(settings.url)
        if self._subscriptions.bus is not None or url is None or not is_redis_url(url):
            yield
            return
        from ..carriers.tasks.host import serve_bus

        subscriptions = self._subscriptions
        async with serve_bus(url, deliver=subscriptions.deliver, lost=subscriptions.interrupt) as bus:
            detach = subscriptions.through(bus)
            unshare = None
            if self._legacy is not None:
                from ..carriers.tasks.sessions import SessionRecords

                # 2025-era sessions in the same Redis: any node serves any request of a session.
                unshare = self._legacy.share(SessionRecords(bus.client, bus.layout, url), bus)
            try:
                if self._legacy is None:
                    yield
                else:
                    # ... and their calls: any node adopts the calls of a node that stopped.
                    async with self._recording(url, bus.node_id, settings, client=bus.client, layout=bus.layout):
                        yield
            finally:
                detach()
                if unshare is not None:
                    unshare()

    @asynccontextmanager
    async def _calls_running(self, settings: _TaskSettings) -> AsyncIterator[None]:
        """On a SQLite store, the 2025-era calls are recorded there: the workers of a machine adopt each other's."""
        from ..carriers.tasks.urls import chosen_url

        url = chosen_url(settings.url)
        if self._legacy is None or url is None or not url.startswith("sqlite://") or self._legacy.calls is not None:
            yield
            return
        from ..carriers.tasks.bus import new_node_id

        async with self._recording(url, new_node_id(), settings):
            yield

    @asynccontextmanager
    async def _recording(self, url: str, node_id: str, settings: _TaskSettings, *, client: Any = None,
                         layout: Any = None) -> AsyncIterator[None]:
        """Record the legacy era's calls in the store ``url`` names, as node ``node_id``, for the block."""
        from ..carriers.tasks.calls import record_ttl
        from ..carriers.tasks.host import lease_from_env, serve_calls

        legacy = self._legacy
        assert legacy is not None
        lease = settings.lease if settings.lease is not None else lease_from_env()
        ttl = record_ttl(legacy.sessions.idle_timeout, legacy.answer_timeout, lease)
        # A supervised worker's slot (its supervisor, its position): its replacement adopts its calls at once.
        slot = f"{platform.node()}:{os.getppid()}:{legacy.owner}" if legacy.owner != "0" else None
        async with serve_calls(url, node_id, lease=lease, ttl=ttl, slot=slot, client=client, layout=layout) as calls:
            stop = legacy.keep_calls(calls)
            try:
                yield
            finally:
                stop()

    @asynccontextmanager
    async def _tasks_running(self, settings: _TaskSettings) -> AsyncIterator[None]:
        stored = self.catalog.stored_middleware
        if self._rounds is not None or not (self.has_task_tools or self.has_once_handlers or stored):
            yield
            return
        if not self.has_task_tools:
            from ..carriers.tasks.host import serve_rounds

            # Rounds that run once, or middleware keeping state (a RateLimit's buckets): the store alone.
            async with serve_rounds(settings.url, lease=settings.lease, max_record_bytes=settings.max_bytes) as rounds:
                self._rounds = rounds
                try:
                    with _store_for(stored, rounds.store):
                        yield
                finally:
                    self._rounds = None
            return
        from ..carriers.tasks.host import serve_tasks

        # Status changes go to subscriptions/listen streams that asked for the task. On Redis the
        # store publishes every node's changes itself, and the bus delivers them here.
        def changed(record: Any) -> None:
            self._subscriptions.publish("notifications/tasks", record.to_wire())

        observe = None if self._subscriptions.bus is not None else changed
        async with serve_tasks(self.task_binding, self.token_carrier, settings.url, lease=settings.lease,
                               ttl=settings.ttl, max_record_bytes=settings.max_bytes, on_change=observe,
                               name=self.name) as carrier:
            self._tasks = carrier
            self._rounds = carrier.rounds
            try:
                with _store_for(stored, carrier.store):
                    yield
            finally:
                self._tasks = None
                self._rounds = None

    def settle_key(self, *, alone: bool = False) -> None:
        """Build the ``requestState`` key ring now, before the first request.

        So a missing ``MRTR_SECRET`` is reported once, at start, as the one log line the
        codec writes (its :class:`~mrtr.core.errors.EphemeralKeyWarning`, the same news, is
        not shown again); a transport that forks workers calls it before forking, so every
        worker seals and opens tokens with the very same key ring. ``alone``: this process
        is the only one its client reaches (stdio), so the line says what a throwaway key
        costs there (a restart), not what it costs across instances.
        """
        self._key_alone = alone
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EphemeralKeyWarning)
            _ = self.token_carrier

    @property
    def node_id(self) -> str | None:
        """This node's name among the nodes on one Redis while :meth:`running` on it, else ``None``."""
        bus = self._subscriptions.bus
        return getattr(bus, "node_id", None)

    @property
    def tasks(self) -> TaskHost | None:
        """This node's tasks carrier while :meth:`running` (with task tools registered), else ``None``."""
        return self._tasks

    @property
    def rounds(self) -> RoundRecords | None:
        """Where rounds that run once are recorded while :meth:`running` (with such handlers), else ``None``."""
        return self._rounds

    @property
    def store_url(self) -> str | None:
        """The store the constructor was given (``None``: ``MRTR_STORE``, ``MRTR_TASKS`` or the default)."""
        return self._task_settings.url

    @property
    def tasks_url(self) -> str | None:
        """The older name of :attr:`store_url`."""
        return self._task_settings.url

    @property
    def task_lease(self) -> float | None:
        """The task lease in seconds the constructor was given (``None``: ``MRTR_TASK_LEASE`` or 30)."""
        return self._task_settings.lease

    @property
    def task_ttl(self) -> float | None:
        """The task TTL in seconds the constructor was given (``None``: ``MRTR_TASK_TTL`` or one hour)."""
        return self._task_settings.ttl

    @property
    def task_max_bytes(self) -> int | None:
        """The cap on one task record the constructor was given (``None``: ``mrtr.tasks.MAX_RECORD_BYTES``)."""
        return self._task_settings.max_bytes

    # -- configuration ---------------------------------------------------------------

    @property
    def token_carrier(self) -> TokenCarrier:
        """The token carrier (its key ring), built on first use so an unused server never warns about keys.

        A transport that forks workers builds it before forking, so every worker seals
        and opens tokens with the very same key ring.
        """
        if self._token_carrier is None:
            secret, codec, ttl = self._codec_args
            self._token_carrier = TokenCarrier(codec or RequestStateCodec.configure(secret, ttl=ttl,
                                                                                    alone=self._key_alone),
                                               answers=self._answers)
        return self._token_carrier

    @property
    def mask_errors(self) -> bool:
        """Whether a failing handler's details are kept from clients (see the class)."""
        return self.catalog.mask_errors

    @mask_errors.setter
    def mask_errors(self, value: bool) -> None:
        self.catalog.mask_errors = bool(value)

    @property
    def principal(self) -> PrincipalSource | None:
        """The principal source given to the constructor, or ``None`` (the verified token's principal)."""
        return self.catalog.principal_source

    @property
    def page_size(self) -> int:
        """How many items one page of a listing holds."""
        return self.catalog.page_size

    @page_size.setter
    def page_size(self, value: int) -> None:
        self.catalog.page_size = value

    @property
    def auth(self) -> Any:
        """The ``mrtr.auth.ResourceServer`` when the server is protected, else ``None``.

        The auth layer sits above the server (it knows HTTP challenges and fetches keys);
        the server only asks it whether a token's scopes satisfy a tool's.
        """
        return self.catalog.auth

    @property
    def legacy(self) -> LegacyEra | None:
        """The legacy era (2025-era sessions), or ``None`` when ``eras="modern"``.

        What a transport drives for a client that opens with ``initialize`` (see
        :class:`~mrtr.core.jsonrpc.SessionDispatcher`); its ``sessions`` is the
        :class:`~mrtr.server.sessions.SessionRegistry`.
        """
        return self._legacy

    @property
    def eras(self) -> tuple[str, ...]:
        """The eras served: ``("modern", "legacy")`` by default, ``("modern",)`` with ``eras="modern"``."""
        return (MODERN, LEGACY) if self._legacy is not None else (MODERN,)

    @property
    def answers(self) -> str:
        """The answer policy: ``"strict"`` or ``"lenient"``."""
        return self._answers

    # -- what is offered -------------------------------------------------------------

    def serves(self, method: str) -> bool:
        """Whether a request for ``method`` is dispatched (rather than answered ``-32601``)."""
        return self._modern.serves(method)

    def capabilities(self) -> dict[str, Any]:
        """The server capabilities, derived from what is registered.

        ``listChanged`` and ``subscribe`` are advertised only while a transport that can
        hold a ``subscriptions/listen`` stream is serving the server.
        """
        catalog = self.catalog
        capabilities: dict[str, Any] = {name: {} for family, name in _CAPABILITY_OF.items() if catalog.offered(family)}
        if catalog.offered("tasks"):
            capabilities["extensions"] = {TASKS_EXTENSION: {}}
        advertise_ui(self.catalog, capabilities)  # MCP Apps; the legacy era's initialize reads it from here too
        capabilities["logging"] = {}
        if self._subscriptions.available:
            for family in ("tools", "prompts", "resources"):
                if family in capabilities:
                    capabilities[family] = {"listChanged": True}
            if "resources" in capabilities:
                capabilities["resources"]["subscribe"] = True
        return capabilities

    def task_binding(self, name: str, raw_arguments: Mapping[str, Any]) -> ToolBinding:
        """How the tasks carrier runs tool ``name`` with the arguments a call carried."""
        return self._modern.task_binding(name, raw_arguments)

    # -- composition ---------------------------------------------------------------------

    def mount(self, child: Server, namespace: str) -> Server:
        """Serve ``child``'s tools, prompts, resources and templates from this server, under ``namespace``.

        Its tools and prompts are listed and called as ``<namespace>_<name>``, its resource
        uris and templates with the namespace after the scheme (``weather://forecast`` as
        ``weather://billing/forecast``: :func:`mrtr.server.catalog.mounted_uri`). A request for
        them goes through this server's middleware, then the child's, then the child's
        handler, which reads its own names, its own ``ctx.lifespan`` (the child's lifespan
        runs inside this one's) and asks its questions in this server's rounds, sessions,
        tasks and store; what it registers later shows at once, and its ``notify_*``
        reach this server's listeners, uris renamed. Who may call what and how failures
        show are this server's rules. A name both would list is refused here (and at
        :meth:`running`, for one registered on the child later), naming both registrations.
        Returns ``child``.
        """
        if not isinstance(child, Server):
            raise TypeError(f"mount takes a Server, got {type(child).__name__}")
        if child is self:
            raise ValueError("a server cannot be mounted in itself")
        if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
            raise ValueError(f"a namespace is letters, digits, '-' and '_', starting with a letter or digit; "
                             f"got {namespace!r}")
        for taken in self._mounted:
            if taken == namespace or taken.startswith(namespace + "_") or namespace.startswith(taken + "_"):
                raise ValueError(f"namespace {namespace!r} would share names with the server mounted as {taken!r}; "
                                 "choose a namespace that is not the other's followed by '_'")
        self.catalog.mounts[namespace] = MountedCatalog(child.catalog, self.catalog)
        clashes = self.catalog.clashes()
        if clashes:
            del self.catalog.mounts[namespace]
            raise ValueError("cannot mount: " + "; ".join(clashes))
        self._mounted[namespace] = child

        def renamed(method: str, params: dict[str, Any]) -> None:
            if method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
                params = {**params, "uri": mounted_uri(namespace, params["uri"])}
            self._subscriptions.publish(method, params)

        child._subscriptions.relay(renamed)
        self._subscriptions.mount(namespace, child._subscriptions)  # and the interest in its resources, to it
        return child

    # -- dispatch ------------------------------------------------------------------------

    async def respond(
        self,
        message: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        notify: Notify | None = None,
        run_sync: RunSync | None = None,
        auth: Any = None,
        client: str | None = None,
    ) -> Response:
        """Serve one parsed JSON-RPC request: its response message and the status to send it with.

        ``headers`` are the transport's request headers (for the principal source),
        ``notify`` receives the request's notifications, and ``run_sync`` runs a sync
        handler away from the event loop when the server was built with
        ``sync_handlers="thread"`` (``notify`` must then accept calls from that thread;
        see :mod:`mrtr.transports.shared`). Without ``run_sync`` every handler runs inline.
        Protocol errors become error responses with their status hint (as :meth:`shown`
        gives them); an unexpected failure becomes ``-32603`` (logged with its
        traceback, never sent to the client). ``auth`` is the caller's verified token; a
        protected server refuses a request without one. ``client`` is the transport's name
        for the peer (its remote address on HTTP, ``"stdio:<pid>"`` on stdio, the serving
        process's id), which middleware reads as :attr:`~mrtr.server.pipeline.Incoming.client`
        (a rate limit's key without authentication). The modern era serves it (:mod:`mrtr.server.modern`).
        """
        return await self._modern.respond(message, headers=headers, notify=notify, run_sync=run_sync, auth=auth,
                                          client=client)

    async def handle(
        self,
        message: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        notify: Notify | None = None,
        run_sync: RunSync | None = None,
        auth: Any = None,
        client: str | None = None,
    ) -> dict[str, Any]:
        """Serve one parsed JSON-RPC request and return its response message (see :meth:`respond`).

        For callers in this process, which have no status to send.
        """
        return (await self._modern.respond(message, headers=headers, notify=notify, run_sync=run_sync,
                                           auth=auth, client=client)).message

    async def required_scopes(self, message: Mapping[str, Any], *, headers: Mapping[str, str] | None = None,
                              auth: Any = None) -> tuple[str, ...]:
        """The OAuth scopes serving ``message`` needs beyond the server-wide ones.

        ``tools/call``: the tool's ``scopes``. ``tasks/get``, ``tasks/update`` and
        ``tasks/cancel``: the scopes of the tool whose task it is; ``subscriptions/listen``
        with ``taskIds``: those of every task listed. Only tasks the caller may see count,
        so no answer tells another caller's task from an unknown id. The HTTP transports
        ask this before dispatch to answer 403; dispatch checks the same scopes again.
        """
        return await self._modern.required_scopes(message, headers=headers, auth=auth)

    def holder_of(self, message: Mapping[str, Any]) -> str | None:
        """The worker holding a call the request continues, named in its ``requestState``; else ``None``.

        A handler that keeps a call waiting in its process between rounds (the proxy's, to a
        2025 upstream) names that process in its ledger (:mod:`mrtr.core.holding`); the HTTP
        transport, with workers to forward to, asks this before dispatch and sends the
        request to that worker. A token that does not open names nothing (dispatch answers it).
        """
        params = message.get("params")
        token = params.get("requestState") if isinstance(params, Mapping) else None
        if not isinstance(token, str):
            return None
        try:
            state = self.token_carrier.codec.decode(token)
        except ProtocolError:
            return None
        return holder(state.ledger)

    def shown(self, error: ProtocolError) -> ProtocolError:
        """``error`` as this server shows it to clients (see :meth:`mrtr.server.catalog.Catalog.shown`)."""
        return self.catalog.shown(error)

    # -- subscriptions ---------------------------------------------------------------

    def listen_through(self, hub: Broadcast) -> Callable[[], None]:
        """Let ``subscriptions/listen`` streams use ``hub``; returns the function that detaches it.

        Transports call this when they start serving (see :func:`mrtr.transports.shared.lifespan`).
        """
        return self._subscriptions.attach(hub)

    def notify_tools_changed(self) -> None:
        """Tell listening clients that the tool list changed. Callable from any task or thread."""
        self._subscriptions.publish("notifications/tools/list_changed", {})

    def notify_prompts_changed(self) -> None:
        """Tell listening clients that the prompt list changed. Callable from any task or thread."""
        self._subscriptions.publish("notifications/prompts/list_changed", {})

    def notify_resources_changed(self) -> None:
        """Tell listening clients that the resource list changed. Callable from any task or thread."""
        self._subscriptions.publish("notifications/resources/list_changed", {})

    def watch_resources(self, watcher: ResourceWatcher | None) -> None:
        """Tell ``watcher`` which resources this process's clients want the updates of (``None``: nobody).

        ``await watcher.watch(uri)`` each time a client starts wanting them (a
        ``subscriptions/listen`` naming it, before the acknowledgement; a 2025 session's
        ``resources/subscribe``), and ``watcher.unwatch(uri)`` each time one stops (the
        stream ends, the session unsubscribes or ends): each listener's interest begins and
        ends once, so a watcher can count them, and start watching a resource only while
        someone wants it. A ``ProtocolError`` raised by ``watch`` refuses the request that
        asked. A mounted server's watcher hears of the uris under its namespace, in its own
        names. The proxy's upstream subscriptions are such a watcher (``docs/proxy.md``).
        """
        self._subscriptions.watched_by(watcher)

    def notify_resource_updated(self, uri: str) -> None:
        """Tell the clients subscribed to ``uri`` that it changed and may be read again."""
        if not isinstance(uri, str) or not uri:
            raise ValueError(f"notify_resource_updated needs a resource uri, got {uri!r}")
        self._subscriptions.publish("notifications/resources/updated", {"uri": uri})


@contextmanager
def _store_for(stages: list[Any], store: Any) -> Iterator[None]:
    """Hand ``store`` to the middleware that keeps state in it, and take it back after (:func:`uses_store`)."""
    for stage in stages:
        stage.use_store(store)
    try:
        yield
    finally:
        for stage in stages:
            stage.use_store(None)


def _env_flag(name: str) -> bool:
    """A yes/no environment variable: ``1``, ``true``, ``yes`` or ``on`` (any case) mean yes."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
