"""An MCP server: a registry of tools, prompts and resources, and stateless dispatch.

:class:`Server` knows nothing about sockets. A transport parses a JSON-RPC message with
:func:`mrtr.core.jsonrpc.parse_message` and hands requests to :meth:`Server.respond`, which
returns the response message with the status to send it with (:meth:`Server.handle`: the
message alone, for callers in this process). Request-scoped notifications (progress, log
messages) go to the ``notify`` callable the transport passes in.

Every request stands alone: its ``_meta`` must carry the protocol version and the
client's capabilities, and nothing is remembered between requests. The three methods
that may ask the user for input (``tools/call``, ``prompts/get``, ``resources/read``)
run through a carrier (:mod:`mrtr.carriers`): the token carrier, or the tasks carrier for a
task tool called by a client that declared the tasks extension. A handler declared
``once=True`` has the rounds that carry a token run through the server's round records
(:class:`~mrtr.carriers.contract.RoundRecords`, in the task store), so the round that
completes it runs at most once per token.

That is the modern era (2026-07-28). The legacy era (2025-era clients, sessions opened
by ``initialize``) is :attr:`Server.legacy`, :mod:`mrtr.server.legacy`: the same
registry and handlers, served live.
"""

from __future__ import annotations

import base64
import inspect
import logging
import os
import secrets
import warnings
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeVar

import msgspec

from ..carriers.contract import (
    STALL_WARNING,
    TASKS_EXTENSION,
    Carrier,
    CarrierOutcome,
    Interim,
    Placement,
    RoundRecords,
    TaskAccess,
    TaskHost,
    ToolBinding,
)
from ..carriers.token import CheckedToken, TokenCarrier
from ..core import models, wire
from ..core.codec import RequestStateCodec
from ..core.context import LOG_LEVELS, Context
from ..core.errors import (
    EphemeralKeyWarning,
    HandlerError,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    MissingRequiredClientCapability,
    ProtocolError,
    UnsupportedProtocolVersion,
)
from ..core.jsonrpc import Broadcast, Notify, Response, RunSync, result_response
from ..core.eras import LEGACY, MODERN, era_of
from .apps import advertise_ui, check_ui_links
from .legacy import LegacyEra
from .lifespan import Lifespan
from .registry import Header, Registry
from .results import shape_prompt_result, shape_resource_result, shape_tool_result
from .sessions import SessionRegistry
from .subscriptions import Subscriptions

__all__ = [
    "SUPPORTED_VERSIONS",
    "MAX_LISTEN_TASK_IDS",
    "Header",
    "RequestInfo",
    "Server",
]

log = logging.getLogger("mrtr")

SUPPORTED_VERSIONS: tuple[str, ...] = (wire.PROTOCOL_VERSION,)
META_PROTOCOL_VERSION = wire.META_PROTOCOL_VERSION
META_CLIENT_CAPABILITIES = wire.META_CLIENT_CAPABILITIES
META_CLIENT_INFO = wire.META_CLIENT_INFO
META_LOG_LEVEL = wire.META_LOG_LEVEL
META_SERVER_INFO = wire.META_SERVER_INFO


@dataclass
class RequestInfo:
    """What the principal callable sees of a request: method, params and HTTP headers (if any)."""

    method: str
    params: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


# -- cursors -------------------------------------------------------------------------------


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o{offset}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: Any) -> int:
    if cursor is None:
        return 0
    if isinstance(cursor, str):
        try:
            text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
            if text.startswith("o") and text[1:].isdigit():
                return int(text[1:])
        except (ValueError, UnicodeDecodeError):
            pass
    raise InvalidParams("Invalid cursor")


# -- the server ----------------------------------------------------------------------------


MAX_LISTEN_TASK_IDS = 1000
"""The most ``taskIds`` one ``subscriptions/listen`` may name (each is looked up in the task store)."""


_Entry = TypeVar("_Entry")


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

_TASK_GUARDS = 4096  # tasks whose guard is remembered (a few hundred bytes each)


def _store_url(store_url: str | None, tasks_url: str | None) -> str | None:
    """The store named by ``store_url`` or by its older name ``tasks_url``; naming two is a mistake."""
    if store_url is not None and tasks_url is not None and store_url != tasks_url:
        raise ValueError("store_url and tasks_url name the same setting (tasks_url is its older name); give one")
    return store_url if store_url is not None else tasks_url


PrincipalSource = Callable[[RequestInfo], "str | None | Awaitable[str | None]"]

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


# A method family is offered, and its capability advertised, only while something of
# its kind is registered: one table for both, so they never disagree.
_OFFERED_BY_FAMILY: dict[str, tuple[str, Callable[[Registry], bool]]] = {
    "tools": ("tools", lambda registry: bool(registry._tools)),
    "prompts": ("prompts", lambda registry: bool(registry._prompts)),
    "resources": ("resources", lambda registry: bool(registry._resources or registry._templates)),
    "completion": ("completions", lambda registry: registry._completion is not None),
    "tasks": ("extensions", lambda registry: registry.has_task_tools),
}

_UNKNOWN: Any = object()


def _offered_by_method(methods: Any) -> dict[str, Callable[[Registry], bool] | None]:
    """Each dispatched method's entry of :data:`_OFFERED_BY_FAMILY` (``None``: always offered), read per request."""
    table: dict[str, Callable[[Registry], bool] | None] = {}
    for method in methods:
        offered = _OFFERED_BY_FAMILY.get(method.split("/", 1)[0])
        table[method] = None if offered is None else offered[1]
    return table


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
    ``docs/deployment.md``): task records, the rounds of handlers declared ``once=True``
    and, on Redis, the notifications every node's listeners hear (``MRTR_STORE``, or
    ``MRTR_TASKS``; else, for task tools, a SQLite file of this server's own in the user's
    state folder, ``$XDG_STATE_HOME/mrtr/stores/<name>.sqlite3``, and ``memory:`` for rounds
    alone). ``tasks_url`` is its older name. ``task_lease``, ``task_ttl`` and
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
        self.mask_errors = (not self.debug) if mask_errors is None else bool(mask_errors)
        self.version = version
        self.instructions = instructions
        self.server_info: dict[str, Any] = {"name": name, "version": version}
        if title:
            self.server_info["title"] = title
        self._codec_args = (secret, codec, ttl)
        self._token_carrier: TokenCarrier | None = None
        self._answers = answers
        self.sync_handlers = sync_handlers
        self.stall_warning = stall_warning
        self.principal = principal
        self.page_size = page_size
        self.list_ttl_ms = list_ttl_ms
        self._auth = auth
        # What a list holds depends on the caller once scopes hide tools, so a shared cache must not reuse it.
        self.cache_scope: Literal["public", "private"] = cache_scope or ("private" if auth is not None else "public")
        self._lifespan = Lifespan(self)
        self._methods: dict[str, Callable[[_Request], Awaitable[dict[str, Any]]]] = {
            "server/discover": self._discover,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
            "prompts/list": self._list_prompts,
            "prompts/get": self._get_prompt,
            "resources/list": self._list_resources,
            "resources/templates/list": self._list_templates,
            "resources/read": self._read_resource,
            "completion/complete": self._complete,
            "tasks/get": self._task_method,
            "tasks/update": self._task_method,
            "tasks/cancel": self._task_method,
            "subscriptions/listen": self._listen,
        }
        self._offered_by_method = _offered_by_method(self._methods)  # what serves() reads, from the same keys
        self._subscriptions = Subscriptions()
        # (task id, principal) -> what guards that task. Both are fixed at creation, so an entry
        # never goes stale; it spares the store a second read when the transport asked first.
        self._task_guards: OrderedDict[tuple[str, str | None], TaskAccess] = OrderedDict()
        self._tasks: TaskHost | None = None
        self._rounds: RoundRecords | None = None
        self._task_settings = _TaskSettings(store_url, task_lease, task_ttl, task_max_bytes)
        self._legacy: LegacyEra | None = None
        if LEGACY in served:
            self._legacy = LegacyEra(self, sessions if sessions is not None else SessionRegistry(),
                                     answer_timeout=answer_timeout)
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
        this node's end of the bus between nodes (notifications), and, with task tools or
        handlers that run once registered, the store and this node's task carrier; a store
        that cannot be reached fails here, at start. The store arguments, where given
        (``tasks_url`` is the older name of ``store_url``), override the constructor's for
        this block. Entered once per process: nested or concurrent entries (two transports
        in one process) share the first one's resources (and task settings), and the last
        exit closes them. The transports enter it (:class:`~mrtr.core.jsonrpc.Dispatcher`).
        """
        given = _TaskSettings(_store_url(store_url, tasks_url), task_lease, task_ttl, task_max_bytes)
        given.check()
        check_ui_links(self)  # a tool may be registered before the interface it links to: checked once all are
        return self._running(given.over(self._task_settings))

    @asynccontextmanager
    async def _running(self, settings: _TaskSettings) -> AsyncIterator[Any]:
        async with self._lifespan.running() as value, self._bus_running(settings), self._tasks_running(settings):
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
                yield
            finally:
                detach()
                if unshare is not None:
                    unshare()

    @asynccontextmanager
    async def _tasks_running(self, settings: _TaskSettings) -> AsyncIterator[None]:
        if self._rounds is not None or not (self.has_task_tools or self.has_once_handlers):
            yield
            return
        if not self.has_task_tools:
            from ..carriers.tasks.host import serve_rounds

            async with serve_rounds(settings.url, lease=settings.lease, max_record_bytes=settings.max_bytes) as rounds:
                self._rounds = rounds
                try:
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
                yield
            finally:
                self._tasks = None
                self._rounds = None

    def settle_key(self) -> None:
        """Build the ``requestState`` key ring now, before the first request.

        So a missing ``MRTR_SECRET`` is reported once, at start, as the one log line the
        codec writes (its :class:`~mrtr.core.errors.EphemeralKeyWarning`, the same news, is
        not shown again); a transport that forks workers calls it before forking, so every
        worker seals and opens tokens with the very same key ring.
        """
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
            self._token_carrier = TokenCarrier(codec or RequestStateCodec.configure(secret, ttl=ttl),
                                               answers=self._answers)
        return self._token_carrier

    @property
    def auth(self) -> Any:
        """The ``mrtr.auth.ResourceServer`` when the server is protected, else ``None``.

        The auth layer sits above the server (it knows HTTP challenges and fetches keys);
        the server only asks it whether a token's scopes satisfy a tool's.
        """
        return self._auth

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
        offered = self._offered_by_method.get(method, _UNKNOWN)
        if offered is _UNKNOWN:
            return False
        if offered is None:
            return method != "subscriptions/listen" or self._subscriptions.available  # only while a stream can be held
        return offered(self)

    def _offered(self, family: str) -> bool:
        """Whether the method family (``tools``, ``prompts``, ``resources``, ``completion``) is offered: both eras ask."""
        return _OFFERED_BY_FAMILY[family][1](self)

    def capabilities(self) -> dict[str, Any]:
        """The server capabilities, derived from what is registered.

        ``listChanged`` and ``subscribe`` are advertised only while a transport that can
        hold a ``subscriptions/listen`` stream is serving the server.
        """
        capabilities: dict[str, Any] = {name: {} for name, offered in _OFFERED_BY_FAMILY.values() if offered(self)}
        if "extensions" in capabilities:
            capabilities["extensions"] = {TASKS_EXTENSION: {}}
        advertise_ui(self, capabilities)  # MCP Apps; the legacy era's initialize reads it from here too
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
        tool = self._tools.get(name)
        if tool is None:
            raise InvalidParams(f"Unknown tool: {name}")
        structured = tool.structured
        return ToolBinding(
            tool.fn, self._tool_arguments(tool, raw_arguments), lambda value: shape_tool_result(value, structured),
            lambda error: self._tool_error(name, error), tool.scopes,
            lambda error: self.shown(error).to_error_object(),
        )

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

    def notify_resource_updated(self, uri: str) -> None:
        """Tell the clients subscribed to ``uri`` that it changed and may be read again."""
        if not isinstance(uri, str) or not uri:
            raise ValueError(f"notify_resource_updated needs a resource uri, got {uri!r}")
        self._subscriptions.publish("notifications/resources/updated", {"uri": uri})

    async def _listen(self, request: _Request) -> dict[str, Any]:
        # A stream must not outlive its token: it ends, with its result (the spec's graceful
        # closure), when a new request with the token would be refused, and the client
        # listens again with a fresh one.
        until = None if self._auth is None or request.auth is None else self._auth.accepted_until(request.auth)
        return await self._subscriptions.listen(
            request.params.get("notifications"), request_id=request.id, notify=request.notify, offered=self.serves,
            until=until, watch_tasks=lambda task_ids: self._watched_tasks(request, task_ids),
        )

    async def _watched_tasks(self, request: _Request, task_ids: Any) -> list[str] | None:
        """The ``taskIds`` of a listen request this caller may watch, in order; ``None`` when none were asked.

        Asking needs the tasks extension (``-32021``); more than :data:`MAX_LISTEN_TASK_IDS`
        ids is ``-32602``. Unknown, expired and other callers' tasks are left out of the
        acknowledgement, with no way to tell which.
        """
        if task_ids is None:
            return None
        if isinstance(task_ids, list) and len(task_ids) > MAX_LISTEN_TASK_IDS:
            # Checked first: each id costs a store lookup, and 200,000 of them cost a node seconds.
            raise InvalidParams(
                f"subscriptions/listen: notifications.taskIds may name at most {MAX_LISTEN_TASK_IDS} task ids, "
                f"got {len(task_ids)}; open several streams to watch more"
            )
        if not isinstance(task_ids, list) or not all(isinstance(task_id, str) and task_id for task_id in task_ids):
            raise InvalidParams("subscriptions/listen: notifications.taskIds must be a list of task ids")
        if not _declares_tasks(request.envelope):
            raise MissingRequiredClientCapability(
                f"Task notifications require the {TASKS_EXTENSION} client capability",
                {"extensions": {TASKS_EXTENSION: {}}},
            )
        if self._tasks is None:
            return []
        principal = _token_principal(request.auth) if self.principal is None else await self._principal(request)
        watched = []
        required: dict[str, None] = {}
        for task_id in dict.fromkeys(task_ids):
            guard = await self._task_guard(task_id, principal, fresh=True)
            if guard is None:
                continue
            watched.append(task_id)
            required.update(dict.fromkeys(guard))
        if not self._permitted(request, tuple(required)):
            # Before the acknowledgement: a stream that may not carry a task's news never opens.
            raise InvalidRequest(f"Forbidden: the tasks listed need the scopes {' '.join(required)}")
        return watched

    # -- scopes of tasks ---------------------------------------------------------------

    async def _task_guard(self, task_id: Any, principal: str | None, *, fresh: bool = False) -> tuple[str, ...] | None:
        """The scopes guarding a task this principal may see, or ``None`` for any other id.

        The scopes recorded with the task, and those its tool has now: a record stored
        before scopes were kept, or a tool given more scopes since, still guards its
        tasks. ``fresh`` asks the store even when the answer is cached (the task may have
        expired since). Raises the store's error when it cannot be asked.
        """
        tasks = self._tasks
        if tasks is None or not isinstance(task_id, str):
            return None
        key = (task_id, principal)
        found = None if fresh else self._task_guards.get(key)
        if found is None:
            found = await tasks.access(task_id, principal)
            if found is None:
                self._task_guards.pop(key, None)
                return None
            self._task_guards[key] = found
            while len(self._task_guards) > _TASK_GUARDS:
                self._task_guards.popitem(last=False)
        return tuple(dict.fromkeys((*found.scopes, *self.tool_scopes(found.tool))))

    async def _task_scopes(self, task_ids: list[Any], principal: str | None) -> tuple[str, ...]:
        required: dict[str, None] = {}
        for task_id in dict.fromkeys(task_ids):
            guard = await self._task_guard(task_id, principal)
            if guard is not None:
                required.update(dict.fromkeys(guard))
        return tuple(required)

    async def required_scopes(self, message: Mapping[str, Any], *, headers: Mapping[str, str] | None = None,
                              auth: Any = None) -> tuple[str, ...]:
        """The OAuth scopes serving ``message`` needs beyond the server-wide ones.

        ``tools/call``: the tool's ``scopes``. ``tasks/get``, ``tasks/update`` and
        ``tasks/cancel``: the scopes of the tool whose task it is; ``subscriptions/listen``
        with ``taskIds``: those of every task listed. Only tasks the caller (the
        principal of ``headers`` and ``auth``, as :meth:`handle` would see it) may see
        count, so no answer tells another caller's task from an unknown id; an unknown
        tool or task needs nothing here, and dispatch answers it. The HTTP transports ask
        this before dispatch to answer 403; dispatch checks the same scopes again, so a
        lookup that fails here (the task store away) leaves the request guarded.
        """
        method = message.get("method")
        params = message.get("params")
        if not isinstance(params, Mapping):
            params = {}
        if method == "tools/call":
            return self.tool_scopes(params.get("name"))
        if method in ("tasks/get", "tasks/update", "tasks/cancel"):
            task_ids = [params.get("taskId")]
        elif method == "subscriptions/listen":
            wanted = params.get("notifications")
            listed = wanted.get("taskIds") if isinstance(wanted, Mapping) else None
            if not isinstance(listed, list):
                return ()
            task_ids = listed
        else:
            return ()
        if self._tasks is None:
            return ()
        try:
            principal = await self._principal_of(str(method), params, headers or {}, auth)
            return await self._task_scopes(task_ids, principal)
        except Exception:
            # Dispatch meets the same failure and answers it; its own scope check still holds.
            log.debug("could not look up the scopes of %s before dispatch", method, exc_info=True)
            return ()

    # -- dispatch ------------------------------------------------------------------------

    async def respond(
        self,
        message: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        notify: Notify | None = None,
        run_sync: RunSync | None = None,
        auth: Any = None,
    ) -> Response:
        """Serve one parsed JSON-RPC request: its response message and the status to send it with.

        ``headers`` are the transport's request headers (for the principal source),
        ``notify`` receives the request's notifications, and ``run_sync`` runs a sync
        handler away from the event loop when the server was built with
        ``sync_handlers="thread"`` (``notify`` must then accept calls from that thread;
        see :mod:`mrtr.transports.shared`). Without ``run_sync`` every handler runs inline.
        Protocol errors become error responses with their status hint (as :meth:`shown`
        gives them); an unexpected failure becomes ``-32603`` (logged with its
        traceback, never sent to the client). ``auth`` is the caller's verified token; a protected server refuses a
        request without one.
        """
        request_id: Any = message.get("id")
        try:
            result = await self._dispatch(message, headers or {}, notify, run_sync, auth)
        except ProtocolError as error:
            return Response.refusing(request_id, self.shown(error))
        except Exception:
            log.exception("unexpected failure serving %s", message.get("method"))
            return Response.refusing(request_id, InternalError("Internal error"))
        return Response(result_response(request_id, result))

    async def handle(
        self,
        message: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        notify: Notify | None = None,
        run_sync: RunSync | None = None,
        auth: Any = None,
    ) -> dict[str, Any]:
        """Serve one parsed JSON-RPC request and return its response message (see :meth:`respond`).

        For callers in this process, which have no status to send.
        """
        return (await self.respond(message, headers=headers, notify=notify, run_sync=run_sync, auth=auth)).message

    async def _dispatch(self, message: Mapping[str, Any], headers: Mapping[str, str], notify: Notify | None,
                        run_sync: RunSync | None, auth: Any) -> Any:
        method = message["method"]
        if self._auth is not None and auth is None:
            # Fail closed: a transport that cannot authenticate must not reach a protected server.
            raise InvalidRequest("Unauthorized: this server requires a verified bearer token")
        if method == "initialize" and era_of(message) == LEGACY:
            # A legacy client cannot fall forward: name the versions this dispatch speaks (a
            # transport serving the legacy era routes initialize to Server.legacy instead).
            # One carrying the modern claim is a modern request for a removed method: -32601.
            params = message.get("params")
            requested = params.get("protocolVersion") if isinstance(params, Mapping) else None
            raise UnsupportedProtocolVersion(requested if isinstance(requested, str) else "", list(SUPPORTED_VERSIONS))
        # Unknown and removed methods (ping, logging/setLevel, ...) are -32601 whatever their params.
        if not self.serves(method):
            raise MethodNotFound(f"Method not found: {method}")
        params = message.get("params")
        if params is None:
            params = {}
        request = _Request(method, params, _read_envelope(params), headers, notify, message.get("id"), run_sync, auth)
        result = await self._methods[method](request)
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {META_SERVER_INFO: self.server_info}
        elif META_SERVER_INFO not in meta:
            result["_meta"] = {**meta, META_SERVER_INFO: self.server_info}
        return result

    def _principal(self, request: _Request) -> Coroutine[Any, Any, str | None]:
        # Hands over _principal_of's coroutine instead of awaiting it in one of its own: every call pays for it.
        return self._principal_of(request.method, request.params, request.headers, request.auth)

    async def _principal_of(self, method: str, params: Mapping[str, Any], headers: Mapping[str, str],
                            auth: Any) -> str | None:
        if self.principal is None:
            return _token_principal(auth)
        value = self.principal(RequestInfo(method, params, headers))
        if inspect.isawaitable(value):
            value = await value
        if value is not None and not isinstance(value, str):
            raise TypeError(f"the principal source must return a str or None, got {type(value).__name__}")
        return value

    def _context(self, request: _Request, arguments: Mapping[str, Any], principal: str | None, target: str) -> Context:
        envelope = request.envelope
        return Context.of_request(arguments, principal, envelope.capabilities, envelope.client_info, request.method,
                                  target, request.id, envelope.progress_token, envelope.log_level, request.notify,
                                  request.auth, self._lifespan.value)

    def _cacheable(self, result: dict[str, Any], ttl_ms: int | None = None) -> dict[str, Any]:
        """Mark a result cacheable; hints a handler set on its own result win (a private resource stays private)."""
        result["resultType"] = "complete"
        result.setdefault("ttlMs", self.list_ttl_ms if ttl_ms is None else ttl_ms)
        result.setdefault("cacheScope", self.cache_scope)
        return result

    # -- methods ------------------------------------------------------------------------

    async def _discover(self, request: _Request) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": self.capabilities(),
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return self._cacheable(result)

    def _page(self, request: _Request, items: list[dict[str, Any]], member: str) -> dict[str, Any]:
        return self._cacheable(self._paged(request.params, items, member))

    def _paged(self, params: Mapping[str, Any], items: list[dict[str, Any]], member: str) -> dict[str, Any]:
        """The page of ``items`` a list request's ``cursor`` asks for, under ``member``: both eras page alike."""
        offset = _decode_cursor(params.get("cursor"))
        if offset > len(items):
            raise InvalidParams("Invalid cursor")
        page = items[offset:offset + self.page_size]
        result: dict[str, Any] = {member: page}
        if offset + self.page_size < len(items):
            result["nextCursor"] = _encode_cursor(offset + self.page_size)
        return result

    def _permitted(self, request: _Request, scopes: tuple[str, ...]) -> bool:
        return self._allows(request.auth, scopes)

    def _allows(self, auth: Any, scopes: tuple[str, ...]) -> bool:
        """Whether the caller's verified token grants ``scopes`` (always, on a server without ``auth=``)."""
        if self._auth is None or not scopes:
            return True
        return auth is not None and bool(self._auth.satisfies(auth, scopes))

    async def _list_tools(self, request: _Request) -> dict[str, Any]:
        tools = [tool.definition for tool in self._tools.values() if self._permitted(request, tool.scopes)]
        return self._page(request, tools, "tools")

    async def _list_prompts(self, request: _Request) -> dict[str, Any]:
        return self._page(request, [prompt.definition for prompt in self._prompts.values()], "prompts")

    async def _list_resources(self, request: _Request) -> dict[str, Any]:
        return self._page(request, [resource.definition for resource in self._resources.values()], "resources")

    async def _list_templates(self, request: _Request) -> dict[str, Any]:
        return self._page(request, [template.definition for template in self._templates], "resourceTemplates")

    def _named_tool(self, params: Mapping[str, Any]) -> tuple[str, Any]:
        """The tool a ``tools/call`` names: -32602 for a missing or unknown name."""
        return _named(params, self._tools, "tools/call", "tool")

    async def _call_tool(self, request: _Request) -> dict[str, Any]:
        params = request.params
        name, tool = _named(params, self._tools, "tools/call", "tool")
        if tool.scopes and not self._permitted(request, tool.scopes):
            # The HTTP transports answer 403 before dispatch; this guards in-process callers.
            raise InvalidRequest(f"Forbidden: tool {name} needs the scopes {' '.join(tool.scopes)}")
        if tool.task == "required" and not _declares_tasks(request.envelope):
            raise MissingRequiredClientCapability(
                f'Tool "{name}" requires the {TASKS_EXTENSION} client capability', {"extensions": {TASKS_EXTENSION: {}}}
            )
        arguments = self._tool_arguments(tool, params.get("arguments"))
        principal = _token_principal(request.auth) if self.principal is None else await self._principal(request)
        ctx = self._context(request, arguments, principal, name)
        if not tool.once:
            return await self._tool_round(request, tool, name, arguments, ctx)
        return await self._round(request, True, principal,
                                 lambda: self._tool_round(request, tool, name, arguments, ctx))

    async def _tool_round(self, request: _Request, tool: Any, name: str, arguments: dict[str, Any],
                          ctx: Context) -> dict[str, Any]:
        """One round of a tool call: its result, its interim result, or its failure as a tool error result."""
        try:
            outcome = await self._execute(request, tool.fn, arguments, ctx, tool.thread)
            if isinstance(outcome, Interim):
                return outcome.result
            return shape_tool_result(outcome.result, tool.structured)
        except HandlerError as error:
            return self._tool_error(name, error)

    def _tool_arguments(self, tool: Any, raw: Any) -> dict[str, Any]:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise InvalidParams(f"Invalid arguments for tool {tool.name}: arguments must be an object")
        if tool.check_arguments is not None:
            tool.check_arguments(raw)
        try:
            decoded = msgspec.convert(raw, tool.arguments_type, strict=False)
        except msgspec.ValidationError as exc:
            raise InvalidParams(f"Invalid arguments for tool {tool.name}: {exc}") from None
        # The Struct's fields are the handler's parameters, in order (registry._arguments_struct).
        arguments: dict[str, Any] = msgspec.structs.asdict(decoded)
        if not tool.models:
            return arguments
        for field_name, model in tool.models.items():
            if arguments[field_name] is not None:
                arguments[field_name] = models.validate(
                    model, arguments[field_name], f"Invalid arguments for tool {tool.name}: `{field_name}`")
        return arguments

    async def _task_method(self, request: _Request) -> dict[str, Any]:
        if not _declares_tasks(request.envelope):
            raise MissingRequiredClientCapability(
                f'Method "{request.method}" requires the {TASKS_EXTENSION} client capability',
                {"extensions": {TASKS_EXTENSION: {}}},
            )
        tasks = self.tasks
        if tasks is None:
            raise InternalError("Internal error: no task store is running (enter Server.running())")
        principal = _token_principal(request.auth) if self.principal is None else await self._principal(request)
        task_id = request.params.get("taskId")
        if self._auth is not None:
            required = await self._task_scopes([task_id], principal)
            if not self._permitted(request, required):
                # The HTTP transports answer 403 before dispatch; this guards in-process callers.
                raise InvalidRequest(f"Forbidden: this task needs the scopes {' '.join(required)}")
        if request.method == "tasks/get":
            return await tasks.get(task_id, principal)
        if request.method == "tasks/update":
            return await tasks.update(task_id, principal, request.params.get("inputResponses"))
        return await tasks.cancel(task_id, principal)

    def _prompt_arguments(self, params: Mapping[str, Any]) -> tuple[str, Any, dict[str, Any]]:
        """The prompt a ``prompts/get`` names and the arguments its handler gets: -32602 for bad ones."""
        name, prompt = _named(params, self._prompts, "prompts/get", "prompt")
        raw = params.get("arguments") or {}
        if not isinstance(raw, dict) or not all(isinstance(value, str) for value in raw.values()):
            raise InvalidParams(f"Invalid arguments for prompt {name}: arguments must map names to strings")
        missing = [argument for argument in prompt.required if argument not in raw]
        if missing:
            raise InvalidParams(f"Invalid arguments for prompt {name}: missing required argument {missing[0]!r}")
        return name, prompt, {key: value for key, value in raw.items() if key in prompt.parameter_names}

    async def _get_prompt(self, request: _Request) -> dict[str, Any]:
        name, prompt, arguments = self._prompt_arguments(request.params)
        principal = _token_principal(request.auth) if self.principal is None else await self._principal(request)
        ctx = self._context(request, arguments, principal, name)

        description = prompt.definition.get("description")

        async def produce() -> dict[str, Any] | ProtocolError:
            return await self._run_protocol_handler(request, prompt.fn, arguments, ctx,
                                                    lambda value: shape_prompt_result(value, description),
                                                    prompt.thread)

        return await self._round(request, prompt.once, principal, produce)

    async def _read_resource(self, request: _Request) -> dict[str, Any]:
        params = request.params
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise InvalidParams('resources/read needs a string "uri"')
        found = self.resource_entry(uri)
        if found is None:
            raise InvalidParams(f"Resource not found: {uri}", data={"uri": uri})
        entry, arguments = found
        principal = _token_principal(request.auth) if self.principal is None else await self._principal(request)
        ctx = self._context(request, arguments, principal, uri)

        async def produce() -> dict[str, Any] | ProtocolError:
            return await self._run_protocol_handler(
                request, entry.fn, arguments, ctx,
                lambda value: self._cacheable(shape_resource_result(value, uri, entry.mime_type), ttl_ms=0),
                entry.thread)

        return await self._round(request, entry.once, principal, produce)

    async def _round(self, request: _Request, once: bool, principal: str | None,
                     produce: Callable[[], Awaitable[dict[str, Any] | ProtocolError]]) -> dict[str, Any]:
        """The result of one round: ``produce``'s, run at most once per token for a handler declared ``once``.

        A ``once`` round that carries a token goes through :attr:`rounds` (a retry gets
        the recorded result or error); one without a token (a first call) has nothing to
        name it and runs as any other. The tasks carrier keys the rounds it serves itself.
        An error ``produce`` returns is the round's answer, recorded like a result.
        """
        if once and self._carrier_for(request) is self.token_carrier:
            request.checked = self.token_carrier.check(request.method, request.params, principal)
            key = request.checked.key()
            if key is not None:
                rounds = self._rounds
                if rounds is None:
                    raise InternalError("Internal error: no task store is running for the rounds that run once "
                                        "(enter Server.running())")
                return await rounds.once(key, produce)
        outcome = await produce()
        if isinstance(outcome, ProtocolError):
            raise outcome
        return outcome

    def _carrier_for(self, request: _Request) -> Carrier:
        """The carrier that holds this request's ledger.

        The tasks carrier for ``tools/call`` to a task tool from a client that declared
        the tasks extension (when a task store is running); the token carrier
        (:attr:`token_carrier`) for everything else. Reads the envelope dispatch parsed.
        """
        tasks = self._tasks
        if tasks is not None and request.method == "tools/call" and _declares_tasks(request.envelope):
            tool = self._tools.get(request.params.get("name"))  # type: ignore[arg-type]
            if tool is not None and tool.task:
                return tasks
        return self._token_carrier or self.token_carrier

    def _execute(self, request: _Request, fn: Any, arguments: Mapping[str, Any], ctx: Context,
                 thread: bool = False) -> Coroutine[Any, Any, CarrierOutcome]:
        # The carrier's coroutine, handed over rather than awaited in one more: every call comes through here.
        carrier = self._carrier_for(request)
        # Where its sync code runs is decided in run_handler, from this placement and the transport's run_sync.
        placement = Placement(thread or self.sync_handlers == "thread", self.stall_warning)
        if request.checked is not None and carrier is self._token_carrier:  # its token is read already
            return self._token_carrier.execute(request.method, request.params, fn, arguments, ctx,
                                               run_sync=request.run_sync, checked=request.checked,
                                               placement=placement)
        return carrier.execute(request.method, request.params, fn, arguments, ctx,  # type: ignore[return-value]
                               run_sync=request.run_sync, placement=placement)

    async def _run_protocol_handler(self, request: _Request, fn: Any, arguments: Mapping[str, Any], ctx: Context,
                                    shape: Callable[[Any], dict[str, Any]],
                                    thread: bool = False) -> dict[str, Any] | ProtocolError:
        """A prompt's or resource's round: the result ``shape`` makes of its value, the carrier's interim
        result, or its handler's failure as the ``-32603`` to answer (returned, so a round that runs once
        records it)."""
        try:
            outcome = await self._execute(request, fn, arguments, ctx, thread)
            if isinstance(outcome, Interim):
                return outcome.result
            return shape(outcome.result)
        except HandlerError as error:
            return self._internal_error(request.method, ctx.target, error)

    def _internal_error(self, method: str, target: Any, error: HandlerError) -> InternalError:
        """A failed prompt or resource handler as its ``-32603`` (they have no error result), in both eras."""
        text = self._handler_failed(method, target, error)
        return InternalError(text if error.public else f"Internal error: {text}")

    def _tool_error(self, name: str, error: HandlerError) -> dict[str, Any]:
        """A failing tool's result: the error as tool output, so the model can see it (as much as may be shown)."""
        text = self._handler_failed("tools/call", name, error)
        return {"resultType": "complete", "content": [{"type": "text", "text": text}], "isError": True}

    def _handler_failed(self, method: str, target: Any, error: HandlerError) -> str:
        """Log a failed handler with its traceback and a reference; the text the client may see.

        Everything when errors are not masked; a :class:`~mrtr.core.errors.PublicError`'s
        message always; otherwise a generic sentence naming the target and the reference
        the log line carries, so an operator can find the traceback a user reports.
        """
        reference = secrets.token_hex(4)
        where = f" at {error.location}" if error.location else ""
        log.error("%s %r failed%s [reference %s]: %s", method, target, where, reference, error.message,
                  exc_info=error.__cause__)
        if error.public or not self.mask_errors:
            return error.message
        return (f"{_KIND_OF.get(method, 'handler')} {target} failed with an internal error "
                f"(reference {reference}; the server's log has the details)")

    def shown(self, error: ProtocolError) -> ProtocolError:
        """``error`` as this server shows it to clients: :meth:`~mrtr.core.errors.ProtocolError.masked` when masking.

        The runtime's own diagnostics (a replay mismatch) keep their code, data and
        contract, and leave out the handler's files, source lines and values.
        """
        if not self.mask_errors:
            return error
        masked = error.masked()
        if masked is not error:
            # The client gets the brief form; whoever runs the server needs the whole diagnostic.
            log.warning("%s (the client was sent this without the handler's files and lines)", error.message)
        return masked

    async def _complete(self, request: _Request) -> dict[str, Any]:
        return {"resultType": "complete", **await self._completion_of(request.params)}

    async def _completion_of(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The ``{"completion": ...}`` a ``completion/complete`` with ``params`` answers, in both eras."""
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise InvalidParams('completion/complete needs "ref" and "argument" objects')
        if ref.get("type") == "ref/prompt" and ref.get("name") not in self._prompts:
            raise InvalidParams(f"Unknown prompt: {ref.get('name')}")
        try:
            values = self._completion(ref, argument, params.get("context"))
            if inspect.isawaitable(values):
                values = await values
        except ProtocolError:
            raise
        except Exception as exc:
            reference = secrets.token_hex(4)
            log.error("completion/complete failed [reference %s]", reference, exc_info=exc)
            raise InternalError(f"Internal error: completion failed (reference {reference})" if self.mask_errors
                                else f"Internal error: completion failed: {exc}") from exc
        completion = dict(values) if isinstance(values, dict) else {"values": list(values or [])}
        completion["values"] = [str(value) for value in completion.get("values", [])][:100]
        return {"completion": completion}


_KIND_OF = {"tools/call": "tool", "prompts/get": "prompt", "resources/read": "resource"}


def _token_principal(auth: Any) -> str | None:
    """The principal of a server without a principal source: the verified token's, else none.

    The dispatch methods read it without a coroutine when no source is set (every call asks).
    """
    return None if auth is None else auth.principal  # type: ignore[no-any-return]


def _env_flag(name: str) -> bool:
    """A yes/no environment variable: ``1``, ``true``, ``yes`` or ``on`` (any case) mean yes."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _declares_tasks(envelope: _Envelope) -> bool:
    extensions = envelope.capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def _named(params: Mapping[str, Any], entries: Mapping[str, _Entry], method: str, kind: str) -> tuple[str, _Entry]:
    """The entry a request names in ``params.name``: -32602 for a missing or unknown name."""
    name = params.get("name")
    if not isinstance(name, str):
        raise InvalidParams(f'{method} needs a string "name"')
    entry = entries.get(name)
    if entry is None:
        raise InvalidParams(f"Unknown {kind}: {name}")
    return name, entry


# -- requests ----------------------------------------------------------------------------


@dataclass
class _Envelope:
    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None
    progress_token: str | int | None


@dataclass
class _Request:
    method: str
    params: Mapping[str, Any]
    envelope: _Envelope
    headers: Mapping[str, str]
    notify: Notify | None
    id: Any
    run_sync: RunSync | None
    auth: Any = None  # the verified mrtr.auth.AccessToken, on a protected server
    checked: CheckedToken | None = None  # its token, once read for a round that runs once


def _read_envelope(params: Mapping[str, Any]) -> _Envelope:
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise InvalidParams("Missing required _meta: every request must carry io.modelcontextprotocol/protocolVersion "
                            "and io.modelcontextprotocol/clientCapabilities")
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str):
        raise InvalidParams(f"Missing required _meta key: {META_PROTOCOL_VERSION}")
    capabilities = meta.get(META_CLIENT_CAPABILITIES)
    if not isinstance(capabilities, dict):
        raise InvalidParams(f"Missing required _meta key: {META_CLIENT_CAPABILITIES}")
    client_info = meta.get(META_CLIENT_INFO)
    if client_info is not None and not (
        isinstance(client_info, dict) and isinstance(client_info.get("name"), str) and isinstance(client_info.get("version"), str)
    ):
        raise InvalidParams(f"Malformed _meta key {META_CLIENT_INFO}: it needs string name and version")
    log_level = meta.get(META_LOG_LEVEL)
    if log_level is not None and log_level not in LOG_LEVELS:
        raise InvalidParams(f"Invalid _meta {META_LOG_LEVEL} {log_level!r}; expected one of {', '.join(LOG_LEVELS)}")
    progress_token = meta.get("progressToken")
    if progress_token is not None and (isinstance(progress_token, bool) or not isinstance(progress_token, (str, int))):
        raise InvalidParams("progressToken must be a string or an integer")
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedProtocolVersion(version, list(SUPPORTED_VERSIONS))
    return _Envelope(version, capabilities, client_info, log_level, progress_token)


