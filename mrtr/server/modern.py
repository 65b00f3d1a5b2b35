"""The modern era (MCP 2026-07-28): every request stands alone, and a handler's questions are rounds.

:class:`ModernEra` serves what a 2026-07-28 client sends: its ``_meta`` must carry the
protocol version and the client's capabilities, and nothing is remembered between
requests. The three methods that may ask the user for input (``tools/call``,
``prompts/get``, ``resources/read``) run through a carrier (:mod:`mrtr.carriers`): the token
carrier, or the tasks carrier for a task tool called by a client that declared the tasks
extension. A handler declared ``once=True`` has the rounds that carry a token run through
the server's round records, so the round that completes it runs at most once per token.

What the request names is looked up, checked and decoded by the catalogue both eras share
(:mod:`mrtr.server.catalog`); what the era needs of the server that holds it (its carriers,
settings and capabilities) is a :class:`~mrtr.server.shell.Shell`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from ..carriers.contract import TASKS_EXTENSION, Carrier, CarrierOutcome, Interim, Placement, TaskAccess, ToolBinding
from ..carriers.sealed import CheckedToken, TokenCarrier
from ..core import wire
from ..core.context import LOG_LEVELS, Context
from ..core.eras import LEGACY, MODERN, era_of
from ..core.errors import (
    HandlerError,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    MissingRequiredClientCapability,
    ProtocolError,
    UnsupportedProtocolVersion,
)
from ..core.jsonrpc import Notify, Response, RunSync, result_response
from .catalog import Catalog, ToolEntry, checked_progress_token, mounted_definition, token_principal
from .pipeline import Component, Incoming, Shared
from .shell import Shell
from .results import shape_prompt_result, shape_resource_result, shape_tool_result
from .subscriptions import Subscriptions

__all__ = ["MAX_LISTEN_TASK_IDS", "SUPPORTED_VERSIONS", "ModernEra"]

log = logging.getLogger("mrtr")

SUPPORTED_VERSIONS: tuple[str, ...] = (wire.PROTOCOL_VERSION,)
"""The protocol versions the modern era speaks."""

MAX_LISTEN_TASK_IDS = 1000
"""The most ``taskIds`` one ``subscriptions/listen`` may name (each is looked up in the task store)."""

META_PROTOCOL_VERSION = wire.META_PROTOCOL_VERSION
META_CLIENT_CAPABILITIES = wire.META_CLIENT_CAPABILITIES
META_CLIENT_INFO = wire.META_CLIENT_INFO
META_LOG_LEVEL = wire.META_LOG_LEVEL
META_SERVER_INFO = wire.META_SERVER_INFO

_TASK_GUARDS = 4096  # tasks whose guard is remembered (a few hundred bytes each)

# The method family each method belongs to, where offering it depends on what is registered
# (Catalog.offered): the one table serves() reads.
_FAMILY_OF = {"tools/list": "tools", "tools/call": "tools", "prompts/list": "prompts", "prompts/get": "prompts",
              "resources/list": "resources", "resources/templates/list": "resources", "resources/read": "resources",
              "completion/complete": "completion", "tasks/get": "tasks", "tasks/update": "tasks",
              "tasks/cancel": "tasks"}


class ModernEra:
    """Serves a server's 2026-07-28 requests (see the module) from ``catalog``, for ``shell``.

    ``subscriptions`` holds the ``subscriptions/listen`` streams and their fan-out.
    """

    def __init__(self, catalog: Catalog, shell: Shell, subscriptions: Subscriptions) -> None:
        self.catalog = catalog
        self.shell = shell
        self.subscriptions = subscriptions
        self._methods: dict[str, Callable[[_Request], Awaitable[dict[str, Any]]]] = {
            "server/discover": self._discover,
            "tools/list": self._list,
            "tools/call": self._call_tool,
            "prompts/list": self._list,
            "prompts/get": self._get_prompt,
            "resources/list": self._list,
            "resources/templates/list": self._list,
            "resources/read": self._read_resource,
            "completion/complete": self._complete,
            "tasks/get": self._task_method,
            "tasks/update": self._task_method,
            "tasks/cancel": self._task_method,
            "subscriptions/listen": self._listen,
        }
        # (task id, principal) -> what guards that task. Both are fixed at creation, so an entry
        # never goes stale; it spares the store a second read when the transport asked first.
        self._task_guards: OrderedDict[tuple[str, str | None], TaskAccess] = OrderedDict()
        self._children: dict[str, ModernEra] = {}  # the mounted servers' eras, made on first use

    def serves(self, method: str) -> bool:
        """Whether a request for ``method`` is dispatched (rather than answered ``-32601``)."""
        if method not in self._methods:
            return False
        family = _FAMILY_OF.get(method)
        if family is not None:
            return self.catalog.offered(family)
        return method != "subscriptions/listen" or self.subscriptions.available  # only while a stream can be held

    def task_binding(self, name: str, raw_arguments: Mapping[str, Any]) -> ToolBinding:
        """How the tasks carrier runs tool ``name`` with the arguments a call carried."""
        tool = self.catalog.tools.get(name)
        if tool is None:
            routed = self.catalog.route("tools/call", {"name": name}) if self.catalog.mounts else None
            if routed is None:
                raise InvalidParams(f"Unknown tool: {name}")
            return self._child(routed[0]).task_binding(routed[1]["name"], raw_arguments)
        structured = tool.structured
        catalog = self.catalog
        return ToolBinding(
            tool.fn, catalog.tool_arguments(tool, raw_arguments), lambda value: shape_tool_result(value, structured),
            lambda error: catalog.tool_error(name, error), tool.scopes,
            lambda error: catalog.shown(error).to_error_object(),
        )

    async def _listen(self, request: _Request) -> dict[str, Any]:
        # A stream must not outlive its token: it ends, with its result (the spec's graceful
        # closure), when a new request with the token would be refused, and the client
        # listens again with a fresh one.
        until = None if self.catalog.auth is None or request.auth is None else self.catalog.auth.accepted_until(request.auth)
        wanted = request.params.get("notifications")
        # Who listens, for a resource watcher's shares (the proxy's upstream subscriptions):
        # the principal, else the client's address, as a 2025 session counts against its client.
        holder = None
        if isinstance(wanted, dict) and wanted.get("resourceSubscriptions"):
            principal = await self._caller(request)
            holder = principal if principal is not None else request.client
        return await self.subscriptions.listen(
            wanted, request_id=request.id, notify=request.notify, offered=self.serves,
            until=until, watch_tasks=lambda task_ids: self._watched_tasks(request, task_ids), holder=holder,
        )

    async def _caller(self, request: _Request) -> str | None:
        """The request's principal, resolved as the task methods resolve it."""
        principal = request.principal
        if principal is _UNSET:
            principal = token_principal(request.auth) if self.catalog.principal_source is None \
                else await self._principal(request)
        return principal

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
        if self.shell.tasks is None:
            return []
        principal = await self._caller(request)
        watched = []
        required: dict[str, None] = {}
        for task_id in dict.fromkeys(task_ids):
            guard = await self._task_guard(task_id, principal, fresh=True)
            if guard is None:
                continue
            watched.append(task_id)
            required.update(dict.fromkeys(guard))
        if not self.catalog.allows(request.auth, tuple(required)):
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
        tasks = self.shell.tasks
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
        return tuple(dict.fromkeys((*found.scopes, *self.catalog.tool_scopes(found.tool))))

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
            return self.catalog.tool_scopes(params.get("name"))
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
        if self.shell.tasks is None:
            return ()
        try:
            principal = await self.catalog.principal(str(method), params, headers or {}, auth)
            return await self._task_scopes(task_ids, principal)
        except Exception:
            # Dispatch meets the same failure and answers it; its own scope check still holds.
            log.debug("could not look up the scopes of %s before dispatch", method, exc_info=True)
            return ()

    # -- dispatch ------------------------------------------------------------------------

    async def respond(self, message: Mapping[str, Any], *, headers: Mapping[str, str] | None = None,
                      notify: Notify | None = None, run_sync: RunSync | None = None, auth: Any = None,
                      client: str | None = None) -> Response:
        """Serve one parsed JSON-RPC request: its response and status (see :meth:`mrtr.server.Server.respond`).

        What the request's middleware noted for its access line goes with the response (``Response.notes``).
        """
        request_id: Any = message.get("id")
        # A mounted server's middleware shares the request's notes too, so one with any makes them.
        shared = Shared() if self.catalog.middleware or self.catalog.mounts else None
        try:
            result = await self._dispatch(message, headers or {}, notify, run_sync, auth, client, shared)
        except ProtocolError as error:
            return Response.refusing(request_id, self.catalog.shown(error), shared.notes if shared else None)
        except Exception:
            log.exception("unexpected failure serving %s", message.get("method"))
            return Response.refusing(request_id, InternalError("Internal error"), shared.notes if shared else None)
        if shared is not None and shared.notes:
            return Response(result_response(request_id, result), notes=shared.notes)
        return Response(result_response(request_id, result))

    async def _dispatch(self, message: Mapping[str, Any], headers: Mapping[str, str], notify: Notify | None,
                        run_sync: RunSync | None, auth: Any, client: str | None = None,
                        shared: Shared | None = None) -> Any:
        method = message["method"]
        if self.catalog.auth is not None and auth is None:
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
        request = _Request(method, params, _read_envelope(params), headers, notify, message.get("id"), run_sync, auth,
                           client=client, shared=shared)
        result = await self._serve(request)
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {META_SERVER_INFO: self.shell.server_info}
        elif META_SERVER_INFO not in meta:
            result["_meta"] = {**meta, META_SERVER_INFO: self.shell.server_info}
        return result

    def _principal(self, request: _Request) -> Awaitable[str | None]:
        # Hands over the catalogue's awaitable instead of awaiting it in a coroutine of its own.
        return self.catalog.principal(request.method, request.params, request.headers, request.auth)

    # -- middleware and mounted servers -------------------------------------------------

    def _child(self, namespace: str) -> ModernEra:
        """The era serving the server mounted as ``namespace``, under this one's shell (its carriers, its store)."""
        era = self._children.get(namespace)
        catalog = self.catalog.mounts[namespace]
        if era is None or era.catalog is not catalog:
            era = self._children[namespace] = ModernEra(catalog, self.shell, self.subscriptions)
        return era

    def _serve(self, request: _Request) -> Awaitable[dict[str, Any]]:
        """Serve a request this era's catalogue holds, through its middleware when it has any."""
        if self.catalog.middleware:
            return self._through_middleware(request)
        return self._method(request)

    def _method(self, request: _Request) -> Awaitable[dict[str, Any]]:
        """The method that serves ``request``: this era's, or a mounted server's (its middleware inside ours)."""
        routed = self.catalog.route(request.method, request.params) if self.catalog.mounts else None
        if routed is None:
            return self._methods[request.method](request)
        namespace, params = routed
        # The mounted server reads its own names; the token stays bound to what the client sent.
        return self._child(namespace)._serve(dataclasses.replace(
            request, params=params, outer=request.outer if request.outer is not None else request.params,
            checked=None, tool=None))

    async def _through_middleware(self, request: _Request) -> dict[str, Any]:
        """Serve ``request`` through the server's middleware (:mod:`mrtr.server.pipeline`), then its method."""
        principal = token_principal(request.auth) if self.catalog.principal_source is None \
            else await self._principal(request)
        request.principal = principal  # computed once: the method reads it from here
        envelope = request.envelope
        view = Incoming(request.method, request.params, principal=principal, auth=request.auth, era=MODERN,
                        client_capabilities=envelope.capabilities, client_info=envelope.client_info,
                        request_id=request.id, is_task=self._is_task(request), facts=self, client=request.client,
                        version=envelope.version, shared=request.shared)

        async def method(passed: Incoming) -> dict[str, Any]:
            served = request if passed.params is view.params else dataclasses.replace(
                request, method=passed.method, params=dict(passed.params), checked=None, tool=None)
            return await self._method(served)

        return await self.catalog.through_middleware(view, method)  # type: ignore[no-any-return]

    def round_of(self, view: Incoming) -> int:
        """The 1-based round of the conversation a request is: one more than its ``requestState`` records.

        A request without one, or whose token does not open (it is refused at dispatch),
        is a first round.
        """
        token = view.params.get("requestState")
        if not isinstance(token, str):
            return 1
        try:
            return self.shell.token_carrier.codec.decode(token).rounds + 1
        except ProtocolError:
            return 1

    def component_of(self, view: Incoming) -> Component | None:
        """What a request names as registered (see :attr:`Incoming.component`)."""
        return self.catalog.component(view.method, view.params)

    def _is_task(self, request: _Request) -> bool:
        """Whether a request creates a task or is a task method (see :attr:`Incoming.is_task`)."""
        if request.method.startswith("tasks/"):
            return True
        if request.method != "tools/call" or self.shell.tasks is None or not _declares_tasks(request.envelope):
            return False
        name = request.params.get("name")
        tool = self.catalog.tools.get(name) if isinstance(name, str) else None
        return tool is not None and bool(tool.task)

    def _context(self, request: _Request, arguments: Mapping[str, Any], principal: str | None, target: str) -> Context:
        envelope = request.envelope
        return self.catalog.context(arguments, principal, envelope.capabilities, envelope.client_info, request.method,
                                    target, request.id, envelope.progress_token, envelope.log_level, request.notify,
                                    request.auth)

    def _cacheable(self, result: dict[str, Any], ttl_ms: int | None = None) -> dict[str, Any]:
        """Mark a result cacheable; hints a handler set on its own result win (a private resource stays private)."""
        result["resultType"] = "complete"
        result.setdefault("ttlMs", self.shell.list_ttl_ms if ttl_ms is None else ttl_ms)
        result.setdefault("cacheScope", self.shell.cache_scope)
        return result

    # -- methods ------------------------------------------------------------------------

    async def _discover(self, request: _Request) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": self.shell.capabilities(),
        }
        if self.shell.instructions:
            result["instructions"] = self.shell.instructions
        return self._cacheable(result)

    async def _list(self, request: _Request) -> dict[str, Any]:
        items = await self._items(request)
        if request.unpaged:  # a mounted server's items, for its parent's listing
            return {"items": items}
        return self._cacheable(self.catalog.page(request.method, request.params, items))

    async def _items(self, request: _Request) -> list[dict[str, Any]]:
        """Every item a list request shows this caller: this catalogue's, then each mounted server's, renamed.

        A mounted server's come through its own middleware, so what it hides from a
        caller stays hidden through its parent.
        """
        items = self.catalog.items(request.method, request.auth)
        for namespace in self.catalog.mounts:
            listed = await self._child(namespace)._serve(dataclasses.replace(request, params={"_meta": request.params.get("_meta")},
                                                            unpaged=True, checked=None, tool=None))
            items += [mounted_definition(namespace, request.method, item) for item in listed["items"]]
        return items

    async def _call_tool(self, request: _Request) -> dict[str, Any]:
        params = request.params
        name, tool = self.catalog.tool(params, request.auth)
        request.tool = tool
        if tool.task == "required" and not _declares_tasks(request.envelope):
            raise MissingRequiredClientCapability(
                f'Tool "{name}" requires the {TASKS_EXTENSION} client capability', {"extensions": {TASKS_EXTENSION: {}}}
            )
        arguments = self.catalog.tool_arguments(tool, params.get("arguments"))
        principal = await self._caller(request)
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
            return self.catalog.tool_error(name, error)

    async def _task_method(self, request: _Request) -> dict[str, Any]:
        if not _declares_tasks(request.envelope):
            raise MissingRequiredClientCapability(
                f'Method "{request.method}" requires the {TASKS_EXTENSION} client capability',
                {"extensions": {TASKS_EXTENSION: {}}},
            )
        tasks = self.shell.tasks
        if tasks is None:
            raise InternalError("Internal error: no task store is running (enter Server.running())")
        principal = await self._caller(request)
        task_id = request.params.get("taskId")
        if self.catalog.auth is not None:
            required = await self._task_scopes([task_id], principal)
            if not self.catalog.allows(request.auth, required):
                # The HTTP transports answer 403 before dispatch; this guards in-process callers.
                raise InvalidRequest(f"Forbidden: this task needs the scopes {' '.join(required)}")
        if request.method == "tasks/get":
            return await tasks.get(task_id, principal)
        if request.method == "tasks/update":
            return await tasks.update(task_id, principal, request.params.get("inputResponses"))
        return await tasks.cancel(task_id, principal)

    async def _get_prompt(self, request: _Request) -> dict[str, Any]:
        name, prompt, arguments = self.catalog.prompt(request.params)
        principal = await self._caller(request)
        ctx = self._context(request, arguments, principal, name)

        description = prompt.definition.get("description")

        async def produce() -> dict[str, Any] | ProtocolError:
            return await self._run_protocol_handler(request, prompt.fn, arguments, ctx,
                                                    lambda value: shape_prompt_result(value, description),
                                                    prompt.thread)

        return await self._round(request, prompt.once, principal, produce)

    async def _read_resource(self, request: _Request) -> dict[str, Any]:
        uri, entry, arguments = self.catalog.resource(request.params)
        principal = await self._caller(request)
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
        token_carrier = self.shell.token_carrier
        if once and self._carrier_for(request) is token_carrier:
            request.checked = token_carrier.check(request.method, request.bound_params, principal)
            key = request.checked.key()
            if key is not None:
                rounds = self.shell.rounds
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
        tasks = self.shell.tasks
        if tasks is not None and request.tool is not None and request.tool.task and _declares_tasks(request.envelope):
            return tasks
        return self.shell.token_carrier

    def _execute(self, request: _Request, fn: Any, arguments: Mapping[str, Any], ctx: Context,
                 thread: bool = False) -> Coroutine[Any, Any, CarrierOutcome]:
        # The carrier's coroutine, handed over rather than awaited in one more: every call comes through here.
        carrier = self._carrier_for(request)
        # Where its sync code runs is decided in run_handler, from this placement and the transport's run_sync.
        placement = Placement(thread or self.shell.sync_handlers == "thread", self.shell.stall_warning)
        if request.checked is not None and isinstance(carrier, TokenCarrier):  # its token is read already
            return carrier.execute(request.method, request.bound_params, fn, arguments, ctx,
                                   run_sync=request.run_sync, checked=request.checked, placement=placement)
        return carrier.execute(request.method, request.bound_params, fn, arguments, ctx,  # type: ignore[return-value]
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
            return self.catalog.internal_error(request.method, ctx.target, error)

    async def _complete(self, request: _Request) -> dict[str, Any]:
        return {"resultType": "complete", **await self.catalog.complete(request.params)}




def _declares_tasks(envelope: _Envelope) -> bool:
    extensions = envelope.capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


# -- requests ----------------------------------------------------------------------------


@dataclass
class _Envelope:
    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None
    progress_token: str | int | None


_UNSET: Any = object()


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
    tool: ToolEntry | None = None  # the tool a tools/call names, once looked up
    principal: Any = _UNSET  # who is asking, once computed (str or None)
    outer: Mapping[str, Any] | None = None  # for a mounted server: the params as the client sent them
    unpaged: bool = False  # a mounted server's listing: every item, for its parent to page
    client: str | None = None  # the transport's name for the peer (Incoming.client)
    shared: Shared | None = None  # what every middleware view of the request shares with respond

    @property
    def bound_params(self) -> Mapping[str, Any]:
        """The params a carrier binds the request's token (or task) to: the client's, names as it used them."""
        return self.params if self.outer is None else self.outer


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
    progress_token = checked_progress_token(meta.get("progressToken"))
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedProtocolVersion(version, list(SUPPORTED_VERSIONS))
    return _Envelope(version, capabilities, client_info, log_level, progress_token)


