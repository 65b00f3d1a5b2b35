"""The legacy era of the server: 2025-era sessions, their methods, results shaped per version.

A client of MCP 2025-11-25, 2025-06-18 or 2025-03-26 opens a session with
``initialize`` and sends every later request in it. :class:`LegacyEra` serves those
sessions for a :class:`~mrtr.server.Server`, from the same registry and with the same
handlers as the modern era:

- ``initialize`` negotiates the version (:func:`mrtr.core.eras.negotiate`), reads the
  client's capabilities as that version defines them, and answers with the server's
  capabilities from the same table the modern era advertises from (tools, prompts,
  resources with ``subscribe`` and ``listChanged``, logging, completions, and the
  extensions of ``Server.capabilities()`` but tasks, which is modern);
- ``ping`` and ``logging/setLevel`` answer exactly ``{}``; ``ctx.log`` then feeds
  ``notifications/message`` at the session's level and above (every level until the
  client sets one, as the official SDKs do);
- ``tools/call``, ``prompts/get`` and ``resources/read`` run through the live carrier
  (:mod:`mrtr.carriers.live`): the same generator handler, suspended at each ``yield``
  while the question goes to the client;
- lists page as in the modern era; ``completion/complete`` answers from the same
  provider; ``resources/subscribe`` and ``unsubscribe`` answer ``{}`` and the
  server's ``notify_resource_updated`` / ``notify_*_changed`` reach the session through
  the same fan-out ``subscriptions/listen`` uses (:mod:`mrtr.server.subscriptions`).

Results are shaped from the same return values, as the session's version defines them:
no ``resultType``, ``ttlMs``, ``cacheScope`` or server ``_meta``; ``structuredContent``
only when it is an object, and none at all, nor ``outputSchema``, titles or
``resource_link`` blocks, on 2025-03-26. Errors are this era's: a resource that does not
exist is ``-32002`` with ``data.uri``; the modern codes ``-32020``-``-32022`` never
appear. A call that cannot go on because the client lacks a capability, or its answers
could not be had (:class:`~mrtr.core.peer.LiveRequestFailed`), is a tool's error result
(the model sees why) and ``-32603`` with ``data`` for a prompt or a resource (which have
no error result); the modern era answers the first with ``-32021``, which 2025 does not
define.

Every JSON-RPC error goes with status 200, as this era's Streamable HTTP carries them;
only a refused session (:class:`~mrtr.server.sessions.SessionLimit`) and, with sessions
in Redis, a store that cannot be reached (:class:`~mrtr.carriers.tasks.store.StoreUnavailable`,
``-32603``) hint 503: both are temporary.

**Several nodes** (:meth:`LegacyEra.share`, on a Redis store). Each session's record
(what ``initialize`` negotiated, the principal, the log level, the subscriptions,
whether it is initialized) lives in Redis (:mod:`mrtr.carriers.tasks.sessions`), so any
node serves any request of it: each request reads the record, which moves its expiry,
and a node that had no copy of the session makes one (:meth:`SessionRegistry.adopt`).
A change is written back and told to every node (``session``), so the copy of a node
holding the session's ``GET`` stream filters resource updates by the subscriptions
made elsewhere, and a call held back until ``notifications/initialized`` goes on when
that notification reached another node. ``DELETE`` removes the record and tells every
node (``ended``), which end their copies: calls in flight are cancelled, streams end.
The bounds on sessions hold across the nodes, counted in Redis: ``initialize`` stores
its record only within the client's bound and the server's (the registry's
``max_per_client`` and ``max_sessions``), ending the least recently active idle session
to make room, or refusing with :class:`~mrtr.server.sessions.SessionLimit` when every one
is busy (a call running a handler keeps its session busy for every node); a session so
ended, or found expired, is removed from Redis and every node is told (``ended``), so it
is ``404`` everywhere. Without a shared store nothing of this runs: sessions live in the
process.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from ..carriers.live import LiveCarrier
from ..carriers.tasks.store import StoreUnavailable
from ..core.codec import MARK_SIZE
from ..core.context import LOG_LEVELS, Context
from ..core.eras import LEGACY, LEGACY_VERSIONS, Unexpressible, negotiate, session_capabilities
from ..core.errors import (
    HEADER_MISMATCH,
    LEGACY_RATE_LIMITED,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    HandlerError,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    MissingRequiredClientCapability,
    ProtocolError,
    RateLimited,
)
from ..core.calls import CallJournal, RecordedCalls
from ..core.jsonrpc import NodeLink, Notify, Response, RunSync, encode, error_response, result_response
from ..core.live import MAX_LIVE_ROUNDS
from ..core.peer import LiveRequestFailed, Peer
from ..core.replay import Completed
from .apps import session_extensions
from .calls import CallKeeping
from .catalog import Catalog, ResourceNotFound, checked_progress_token, mounted_definition
from .pipeline import Component, Incoming, Shared
from .pipeline import run as run_pipeline
from .shell import Shell
from .subscriptions import Subscriptions
from .results import shape_prompt_result, shape_resource_result, shape_tool_result
from .sessions import (
    ENDED_FOR_CLIENT,
    ENDED_FOR_PROCESS,
    MAX_SUBSCRIPTIONS,
    Session,
    SessionLimit,
    SessionRegistry,
    owner_of,
)

if TYPE_CHECKING:
    from ..carriers.tasks.sessions import SessionRecords

__all__ = ["RESOURCE_NOT_FOUND", "LegacyEra", "legacy_error"]

log = logging.getLogger("mrtr")

RESOURCE_NOT_FOUND = -32002
"""The 2025 code of ``resources/read`` for a uri no resource serves (``data.uri`` names it)."""

_MODERN_ONLY = (HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION)

_FRESH = 1.0
"""Seconds a node's copy of a shared session is used without reading its record again.

A request's lookups (the transport's, then the method's) read it once; every end and
change made elsewhere arrives as a message meanwhile, so only an expiry can go unseen,
and for no longer than this."""

_RUNS_HANDLERS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""Methods that run a handler, which may wait for its client: with sessions in Redis, a session is busy
for every node while one runs (the rest answer at once)."""

_ENDED_BY_STORE = {"client": ENDED_FOR_CLIENT, "process": ENDED_FOR_PROCESS, "expired": "expired"}

_EVENT_MARK = b"mrtr/event-id/v1"  # what marks of event ids are made for: they pass for nothing else
_MARK_CHARS = -(-MARK_SIZE * 4 // 3)  # its Base64URL without padding

# What a session's family methods need registered: the modern era's table (Server._offered).
_FAMILIES = {"tools": "tools", "prompts": "prompts", "resources": "resources", "completion": "completion"}


def legacy_error(error: ProtocolError) -> ProtocolError:
    """``error`` as a legacy session receives it: the modern-only codes become ``-32603`` (message and data kept),
    a resource nothing serves is this era's ``-32002``, and a request refused for rate ``-32000`` with its
    ``data.retryAfter`` (and status 200, as every error of this era)."""
    if isinstance(error, RateLimited):
        return ProtocolError(error.message, code=LEGACY_RATE_LIMITED, data=error.data)
    if error.code in _MODERN_ONLY:
        return InternalError(error.message, data=error.data)
    if isinstance(error, ResourceNotFound):
        return ProtocolError(error.message, code=RESOURCE_NOT_FOUND, data=error.data)
    return error


def _refusal(request_id: Any, error: ProtocolError, shared: bool = False) -> Response:
    # With sessions in Redis, a store away fails the session itself for now: temporary, as a full server is.
    temporary = isinstance(error, SessionLimit) or (shared and isinstance(error, StoreUnavailable))
    return Response(error_response(request_id, legacy_error(error)), 503 if temporary else 200)


def _failed_call(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _capability_text(error: MissingRequiredClientCapability) -> str:
    if isinstance(error, Unexpressible):
        return error.message
    named = [f"{name} capability ({', '.join(map(str, sub))})" if isinstance(sub, Mapping) and sub
             else f"{name} capability" for name, sub in error.required.items()]  # "elicitation capability (form)"
    which = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
    return f"This call needs the client's {which}, which this session's initialize did not declare"


# -- results per version ----------------------------------------------------------------------

_MODERN_RESULT_KEYS = ("resultType", "ttlMs", "cacheScope")


def _plain(result: dict[str, Any]) -> dict[str, Any]:
    """A result without the members only the modern era defines."""
    for key in _MODERN_RESULT_KEYS:
        result.pop(key, None)
    return result


def _content_for(blocks: Any, version: str) -> Any:
    if version != "2025-03-26" or not isinstance(blocks, list):
        return blocks
    shaped = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "resource_link":
            # 2025-03-26 has no resource links: say where the resource is in words.
            name = block.get("name") or block.get("uri")
            shaped.append({"type": "text", "text": f"{name}: {block.get('uri')}"})
        else:
            shaped.append(block)
    return shaped


def _tool_result(result: dict[str, Any], version: str) -> dict[str, Any]:
    result = _plain(result)
    structured = result.get("structuredContent")
    if structured is not None and (not isinstance(structured, dict) or version == "2025-03-26"):
        result.pop("structuredContent")  # its text copy stays in content
    if "content" in result:
        result["content"] = _content_for(result["content"], version)
    return result


def _prompt_result(result: dict[str, Any], version: str) -> dict[str, Any]:
    result = _plain(result)
    if version == "2025-03-26":
        for message in result.get("messages", []):
            if isinstance(message, dict) and isinstance(message.get("content"), dict):
                message["content"] = _content_for([message["content"]], version)[0]
    return result


def _definition(definition: dict[str, Any], version: str) -> dict[str, Any]:
    """A tool, prompt, resource or template definition as ``version`` lists it."""
    if version != "2025-03-26":
        return definition
    shaped = {key: value for key, value in definition.items() if key not in ("title", "outputSchema", "icons")}
    if isinstance(shaped.get("arguments"), list):
        shaped["arguments"] = [{key: value for key, value in argument.items() if key != "title"}
                               for argument in shaped["arguments"]]
    return shaped


class LegacyEra:
    """Serves a server's legacy sessions; implements :class:`~mrtr.core.jsonrpc.SessionDispatcher`.

    ``sessions`` bounds them (:class:`~mrtr.server.sessions.SessionRegistry`);
    ``answer_timeout`` (seconds; ``None``: the ``requestState`` TTL, the time a modern
    client has to answer a round) bounds the wait for each round's answers;
    ``max_rounds`` caps the rounds of one call.
    """

    def __init__(self, catalog: Catalog, shell: Shell, sessions: SessionRegistry, *,
                 answer_timeout: float | None = None, max_rounds: int = MAX_LIVE_ROUNDS,
                 subscriptions: Subscriptions | None = None) -> None:
        if answer_timeout is not None and not answer_timeout > 0:
            raise ValueError(f"answer_timeout must be a positive number of seconds, got {answer_timeout!r}")
        self.catalog = catalog
        self.shell = shell
        self.sessions = sessions
        self.subscriptions = subscriptions if subscriptions is not None else Subscriptions()
        self._answer_timeout = answer_timeout
        self.max_rounds = max_rounds
        self._children: dict[str, LegacyEra] = {}  # the mounted servers' eras, made on first use
        self._records: SessionRecords | None = None
        self._nodes: NodeLink | None = None
        self._keeping: CallKeeping | None = None
        self._methods: dict[str, Callable[[_Call], Awaitable[dict[str, Any]]]] = {
            "logging/setLevel": self._set_level,
            "tools/list": self._list,
            "tools/call": self._call_tool,
            "prompts/list": self._list,
            "prompts/get": self._get_prompt,
            "resources/list": self._list,
            "resources/templates/list": self._list,
            "resources/read": self._read_resource,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
            "completion/complete": self._complete,
        }

    @property
    def answer_timeout(self) -> float:
        """Seconds a round of questions waits for its answers."""
        if self._answer_timeout is not None:
            return self._answer_timeout
        return self.shell.token_carrier.codec.ttl

    def serves(self, method: str) -> bool:
        """Whether a session request for ``method`` is dispatched (rather than answered ``-32601``)."""
        if method == "ping":
            return True
        if method not in self._methods:
            return False
        family = _FAMILIES.get(method.split("/", 1)[0])
        return family is None or self.catalog.offered(family)

    def capabilities(self) -> dict[str, Any]:
        """The ``ServerCapabilities`` an ``initialize`` answers with, from what is registered."""
        capabilities: dict[str, Any] = {}
        for family in ("tools", "prompts", "resources"):
            if self.catalog.offered(family):
                capabilities[family] = {"listChanged": True}
        if "resources" in capabilities:
            capabilities["resources"]["subscribe"] = True
        capabilities["logging"] = {}
        if self.catalog.offered("completion"):
            capabilities["completions"] = {}
        extensions = session_extensions(self.shell.capabilities())  # MCP Apps, from the one place both eras read
        if extensions:
            capabilities["extensions"] = extensions
        return capabilities

    # -- the session dispatcher ---------------------------------------------------------------

    async def initialize(self, message: Mapping[str, Any], *, outlet: Notify,
                         headers: Mapping[str, str] | None = None, auth: Any = None, client: str | None = None,
                         lasting: bool = False, on_end: Callable[[str], None] | None = None
                         ) -> tuple[Response, str | None]:
        """Serve ``initialize`` and open its session; see :class:`~mrtr.core.jsonrpc.SessionDispatcher`."""
        request_id: Any = message.get("id")
        try:
            self._authenticated(auth)
            params = message.get("params")
            params = params if isinstance(params, Mapping) else {}
            requested = params.get("protocolVersion")
            if not isinstance(requested, str):
                raise InvalidParams("Unsupported protocol version: initialize needs a string protocolVersion",
                                    data={"supported": list(LEGACY_VERSIONS), "requested": requested})
            declared = params.get("capabilities", {})
            if not isinstance(declared, Mapping):
                raise InvalidParams("initialize: capabilities must be an object")
            client_info = params.get("clientInfo")
            if client_info is not None and not (isinstance(client_info, Mapping)
                                                and isinstance(client_info.get("name"), str)
                                                and isinstance(client_info.get("version"), str)):
                raise InvalidParams("initialize: clientInfo needs string name and version")
            _bounded_declaration(declared, client_info)
            version = negotiate(requested)
            principal = await self.catalog.principal("initialize", params, headers or {}, auth)
            session = self.sessions.open(
                version=version, client_capabilities=session_capabilities(declared, version),
                client_info=dict(client_info) if client_info is not None else None, principal=principal,
                client=client, outlet=outlet, lasting=lasting)
            await self._record_new(session)
            await self._copied(session)
        except ProtocolError as error:
            return _refusal(request_id, self.catalog.shown(error), self._records is not None), None
        except Exception:
            log.exception("unexpected failure serving initialize")
            return _refusal(request_id, InternalError("Internal error")), None
        if on_end is not None:
            session.on_end(on_end)
        server_info = dict(self.shell.server_info)
        if version == "2025-03-26":
            server_info.pop("title", None)
        result: dict[str, Any] = {"protocolVersion": version, "capabilities": self.capabilities(),
                                  "serverInfo": server_info}
        if self.shell.instructions:
            result["instructions"] = self.shell.instructions
        log.info("opened a %s session for %s", version,
                 client_info.get("name") if client_info is not None else "a client without clientInfo")
        return Response(result_response(request_id, result)), session.id

    async def version_of(self, session_id: str, *, headers: Mapping[str, str] | None = None,
                         auth: Any = None) -> str | None:
        """The negotiated version of a live session this caller opened; ``None`` for any other id."""
        session = await self._session(session_id, "", {}, headers, auth)  # no request: the principal source sees ""
        return None if session is None else session.version

    async def respond(self, session_id: str | None, message: Mapping[str, Any], *, peer: Peer,
                      headers: Mapping[str, str] | None = None, notify: Notify | None = None,
                      run_sync: RunSync | None = None, auth: Any = None,
                      journal: CallJournal | None = None) -> Response:
        """Serve one request of a session; see :class:`~mrtr.core.jsonrpc.SessionDispatcher`."""
        request_id: Any = message.get("id")
        method = message.get("method")
        # A mounted server's middleware shares the request's notes too, so one with any makes them.
        shared = Shared() if self.catalog.middleware or self.catalog.mounts else None
        try:
            self._authenticated(auth)
            if not isinstance(method, str) or (method != "initialize" and not self.serves(method)):
                raise MethodNotFound(f"Method not found: {method}")
            if method == "ping":
                return Response(result_response(request_id, {}))
            params = message.get("params")
            params = params if isinstance(params, Mapping) else {}
            if method == "initialize":
                # A session's initialize goes to SessionDispatcher.initialize; here it is a second one.
                raise InvalidRequest("Invalid Request: this session is already initialized")
            if session_id is None:
                raise InvalidRequest(f"Invalid Request: {method} before initialize; a session starts with initialize")
            session = await self._session(session_id, method, params, headers, auth)
            if session is None:
                raise InvalidRequest("Invalid Request: unknown or expired session; initialize a new one")
            if self.shell.sync_handlers == "inline":
                run_sync = None
            call = _Call(method, params, session, request_id, peer, notify, run_sync, auth, headers or {},
                         shared=shared, journal=journal)
            if journal is not None and self._keeping is not None:
                self._keeping.touch(session, _record(session))
            records = self._records if method in _RUNS_HANDLERS and not session.lasting else None
            if records is not None and not await records.begin(session.id, self.sessions.idle_timeout):
                self.sessions.end(session.id, "expired")  # gone from Redis since it was read
                raise InvalidRequest("Invalid Request: unknown or expired session; initialize a new one")
            self.sessions.begin(session)
            try:
                result = await self._serve(call)
            finally:
                self.sessions.finish(session)
                if records is not None:  # busy on every node's view until now: never ended to make room
                    await records.finish(session.id, self.sessions.idle_timeout)
        except ProtocolError as error:
            refusal = _refusal(request_id, self.catalog.shown(error), self._records is not None)
            return refusal._replace(notes=shared.notes) if shared is not None and shared.notes else refusal
        except Exception:
            log.exception("unexpected failure serving %s in a legacy session", method)
            return _refusal(request_id, InternalError("Internal error"))
        if shared is not None and shared.notes:
            return Response(result_response(request_id, result), notes=shared.notes)
        return Response(result_response(request_id, result))

    async def notification(self, session_id: str | None, message: Mapping[str, Any], *,
                           headers: Mapping[str, str] | None = None, auth: Any = None) -> None:
        """Take one client notification of a session; see :class:`~mrtr.core.jsonrpc.SessionDispatcher`."""
        method = message.get("method")
        if session_id is None:
            log.debug("ignoring %s before initialize", method)
            return
        params = message.get("params")
        try:
            session = await self._session(session_id, str(method), params if isinstance(params, Mapping) else {},
                                          headers, auth)
        except Exception:
            log.debug("could not tell whose session a %s is for", method, exc_info=True)
            return
        if session is None:
            log.debug("ignoring %s for an unknown session", method)
            return
        self.sessions.touch(session)
        if not self.catalog.middleware:
            await self._take_notification(session, str(method))
            return
        view = self._view(str(method), params if isinstance(params, Mapping) else {}, session, auth, None,
                          is_notification=True)

        async def take(passed: Incoming) -> None:
            await self._take_notification(session, passed.method)

        try:
            await run_pipeline(self.catalog.middleware, view, take)
        except Exception:  # a notification has no answer to carry a failure: the log has it
            log.exception("a middleware failed on %s in a legacy session", method)

    async def _take_notification(self, session: Session, method: str) -> None:
        if method == "notifications/initialized":
            if not session.initialized:
                session.mark_initialized()
                try:
                    await self._record_changed(session)
                except ProtocolError:
                    log.warning("could not record that a session is initialized; its other nodes learn it "
                                "from its next request", exc_info=True)
        else:
            log.debug("%s in a legacy session", method)

    # -- middleware --------------------------------------------------------------------------

    def _view(self, method: str, params: Mapping[str, Any], session: Session, auth: Any, request_id: Any, *,
              is_notification: bool = False, shared: Shared | None = None) -> Incoming:
        return Incoming(method, params, principal=session.principal, auth=auth, era=LEGACY,
                        client_capabilities=session.client_capabilities, client_info=session.client_info,
                        session_id=session.id, client=session.client, request_id=request_id,
                        is_notification=is_notification, facts=self, version=session.version, shared=shared)

    def _serve(self, call: _Call) -> Awaitable[dict[str, Any]]:
        """Serve a request this era's catalogue holds, through its middleware when it has any."""
        if self.catalog.middleware:
            return self._through_middleware(call)
        return self._method(call)

    def _method(self, call: _Call) -> Awaitable[dict[str, Any]]:
        """The method that serves ``call``: this era's, or a mounted server's (its middleware inside ours)."""
        routed = self.catalog.route(call.method, call.params) if self.catalog.mounts else None
        if routed is None:
            return self._methods[call.method](call)
        namespace, params = routed
        return self._child(namespace)._serve(call.with_params(params))

    def _child(self, namespace: str) -> LegacyEra:
        """The era serving the server mounted as ``namespace`` in this one's sessions."""
        era = self._children.get(namespace)
        catalog = self.catalog.mounts[namespace]
        if era is None or era.catalog is not catalog:
            era = self._children[namespace] = LegacyEra(catalog, self.shell, self.sessions,
                                                        answer_timeout=self._answer_timeout, max_rounds=self.max_rounds,
                                                        subscriptions=self.subscriptions)
        return era

    def round_of(self, view: Incoming) -> int:
        """1: a legacy call is one request, its questions asked live inside it."""
        return 1

    def component_of(self, view: Incoming) -> Component | None:
        """What a request names as registered (see :attr:`Incoming.component`)."""
        return self.catalog.component(view.method, view.params)

    async def _through_middleware(self, call: _Call) -> dict[str, Any]:
        """Serve ``call`` through the server's middleware (:mod:`mrtr.server.pipeline`), then its method."""
        if call.shared is None:
            call.shared = Shared()
        shared = call.shared
        view = self._view(call.method, call.params, call.session, call.auth, call.id, shared=shared)
        if not isinstance(call.peer, _Watched):  # so the view knows when the client answered inside the call
            call.peer = _Watched(call.peer, shared)

        async def method(passed: Incoming) -> dict[str, Any]:
            served = call if passed.params is view.params else call.with_params(dict(passed.params), passed.method)
            return await self._method(served)

        result = await self.catalog.through_middleware(view, method)
        # What a middleware answered itself, or its failure as a tool's error, in this era's shape too.
        return _tool_result(result, call.session.version) if call.method == "tools/call" else result  # type: ignore[no-any-return]

    async def close(self, session_id: str, *, headers: Mapping[str, str] | None = None, auth: Any = None) -> bool:
        """End a session this caller opened; whether it was live."""
        session = await self._session(session_id, "", {}, headers, auth)
        if session is None:
            return False
        if self._records is not None and not session.lasting:
            await self._records.delete(session.id)
            if self._nodes is not None:
                self._nodes.send_all("ended", [session.id])  # every node ends its copy (this one too)
        closed = self.sessions.end(session.id, "closed by the client")
        if self._keeping is not None and not session.lasting:
            await self._keeping.closed(session.id)  # its recorded calls end with it
        return closed

    @property
    def owner(self) -> str:
        """The owner session ids are minted with (:class:`~mrtr.server.sessions.SessionRegistry`'s ``owner``)."""
        return self.sessions.owner

    def serve_as(self, owner: str) -> None:
        """Mint session ids naming ``owner`` (a worker) from now on; see :meth:`SessionRegistry.serve_as`."""
        self.sessions.serve_as(owner)

    def owner_of(self, session_id: str) -> str | None:
        """The owner a session id names (:func:`mrtr.server.sessions.owner_of`)."""
        return owner_of(session_id)

    # -- several nodes ----------------------------------------------------------------------

    def share(self, records: SessionRecords, nodes: NodeLink) -> Callable[[], None]:
        """Keep session records in ``records`` and tell the other nodes of changes through ``nodes``.

        From now on any node on the same store serves any session's request; returns
        what stops it (sessions opened meanwhile stay in the store until they expire).
        """
        self._records = records
        self._nodes = nodes
        self.sessions.shared = True  # the store bounds and expires sessions for every node
        nodes.handle("session", self._changed_elsewhere)
        nodes.handle("ended", self._ended_elsewhere)

        def stop() -> None:
            if self._records is records:
                self._records = None
                self._nodes = None
                self.sessions.shared = False

        return stop

    @property
    def nodes(self) -> NodeLink | None:
        """The link between the nodes serving the same sessions while :meth:`share` is on, else ``None``."""
        return self._nodes if self._records is not None else None

    def keep_calls(self, calls: Any) -> Callable[[], None]:
        """Record the calls of every session in the shared store through ``calls``
        (:class:`~mrtr.carriers.tasks.calls.Calls`), so another process can adopt them; returns what stops it.

        On SQLite, where sessions have no records of their own, a copy of each session
        is kept too (:class:`~mrtr.server.calls.CallKeeping`).
        """
        keeping = self._keeping = CallKeeping(calls, self.sessions)

        def stop() -> None:
            if self._keeping is keeping:
                self._keeping = None

        return stop

    @property
    def calls(self) -> RecordedCalls | None:
        """The calls recorded in the shared store while :meth:`keep_calls` is on, else ``None``."""
        return self._keeping.calls if self._keeping is not None else None

    def mark(self, text: str) -> str:
        """A mark of ``text`` only the server's key ring makes; see :class:`~mrtr.core.jsonrpc.SessionDispatcher`."""
        made = self.shell.token_carrier.codec.mark(_EVENT_MARK, text.encode("utf-8"))
        return base64.urlsafe_b64encode(made).rstrip(b"=").decode("ascii")

    def marked(self, text: str, mark: str) -> bool:
        """Whether ``mark`` is :meth:`mark` of ``text`` (under any key of the ring)."""
        if len(mark) != _MARK_CHARS or not mark.isascii():
            return False
        try:
            raw = base64.urlsafe_b64decode(mark + "=" * (-len(mark) % 4))
        except ValueError:
            return False
        return self.shell.token_carrier.codec.marked(_EVENT_MARK, text.encode("utf-8"), raw)

    def attach(self, session_id: str, *, outlet: Notify, on_end: Callable[[str], None],
               on_ready: Callable[[], None]) -> None:
        """Hold this node's copy of a session as if opened here; see :class:`~mrtr.core.jsonrpc.SessionDispatcher`."""
        session = self.sessions.peek(session_id)
        if session is None:
            on_end("expired")
            return
        session.outlet = outlet
        session.on_end(on_end)
        session.on_ready(on_ready)

    async def _record_new(self, session: Session) -> None:
        """Store a new session's record under the bounds every node shares, or end it and raise."""
        records = self._records
        if records is None or session.lasting:
            return
        registry = self.sessions
        try:
            admission = await records.create(session.id, _record(session), registry.idle_timeout,
                                             client=session.client, max_per_client=registry.max_per_client,
                                             max_sessions=registry.max_sessions)
        except ValueError:
            registry.end(session.id, "refused")
            raise InvalidParams("initialize: the client's capabilities and clientInfo are too large") from None
        except ProtocolError:
            registry.end(session.id, "refused")
            raise
        for ended, why in admission.ended:  # gone from Redis already: every node ends its copy
            self._end_everywhere(ended, _ENDED_BY_STORE.get(why, "expired"))
        if admission.stored:
            return
        registry.end(session.id, "refused")
        if admission.refused in ("client", "process"):
            limit = registry.max_per_client if admission.refused == "client" else registry.max_sessions
            raise SessionLimit.reached(admission.refused, limit)
        raise InternalError("Internal error: a new session id was already taken")  # 144 random bits: not by chance

    def _end_everywhere(self, session_id: str, reason: str) -> None:
        """End a session whose record is gone: this node's copy now, every other node's by a message."""
        self.sessions.end(session_id, reason)
        if self._nodes is not None:
            self._nodes.send_all("ended", [session_id, reason])

    async def _copied(self, session: Session) -> None:
        """On SQLite, keep a copy of a new session for the process that may replace this one."""
        keeping = self._keeping
        if keeping is None or not keeping.copies or session.lasting:
            return
        await keeping.keep(session, _record(session))
        session.on_end(lambda reason: keeping.ended(session.id))

    async def _record_changed(self, session: Session) -> None:
        """Write a session's changed state back and tell every node holding a copy."""
        if self._keeping is not None and self._keeping.copies and not session.lasting:
            await self._keeping.keep(session, _record(session))
        records = self._records
        if records is None or session.lasting:
            return
        try:
            live = await records.save(session.id, _record(session), self.sessions.idle_timeout)
        except ValueError:
            raise InvalidParams("this session's state would be over its bound; unsubscribe from some "
                                "resources first") from None
        if not live:
            self.sessions.end(session.id, "expired")
            raise InvalidRequest("Invalid Request: unknown or expired session; initialize a new one")
        if self._nodes is not None:
            self._nodes.send_all("session", [session.id, _changes(session)])

    def _changed_elsewhere(self, body: Any) -> None:
        session = self.sessions.peek(str(body[0]))
        if session is not None:
            _apply(session, dict(body[1]))
            for uri in list(session.watched or ()):  # unsubscribed through another node
                if not (session.subscriptions and uri in session.subscriptions):
                    self._unwatch(session, uri)

    def _ended_elsewhere(self, body: Any) -> None:
        reason = body[1] if len(body) > 1 and isinstance(body[1], str) else "closed by the client"
        self.sessions.end(str(body[0]), reason[:200])

    def publish(self, method: str, params: dict[str, Any]) -> None:
        """Hand a server-wide notification to every session that wants it; callable from any thread.

        List changes go to every session; a resource update to the sessions subscribed to
        its uri. Task notifications are modern and go nowhere here.
        """
        if method == "notifications/resources/updated":
            uri = params.get("uri")
            for session in self.sessions.sessions():
                if session.outlet is not None and session.subscriptions and uri in session.subscriptions:
                    session.outlet(method, dict(params))
        elif method.endswith("/list_changed"):
            family = method.split("/")[1]
            if self.catalog.offered(family):
                for session in self.sessions.sessions():
                    if session.outlet is not None:
                        session.outlet(method, {})

    # -- helpers ------------------------------------------------------------------------------

    def _authenticated(self, auth: Any) -> None:
        if self.catalog.auth is not None and auth is None:
            # Fail closed: a transport that cannot authenticate must not reach a protected server.
            raise InvalidRequest("Unauthorized: this server requires a verified bearer token")

    async def _session(self, session_id: str, method: str, params: Mapping[str, Any],
                       headers: Mapping[str, str] | None, auth: Any) -> Session | None:
        principal = await self.catalog.principal(method, params, headers or {}, auth)
        session = self.sessions.get(session_id, principal)
        records = self._records
        if session is None and records is None and self._keeping is not None and isinstance(session_id, str):
            return await self._from_copy(session_id, principal)
        if records is None or not isinstance(session_id, str) or (session is not None and session.lasting):
            return session
        now = self.sessions.clock()
        if session is not None and now - session.checked < _FRESH:
            return session  # read a moment ago (the same request's lookup): ends and changes come as messages
        # The record decides: it may have expired, been deleted or changed on another node.
        record = await records.load(session_id, self.sessions.idle_timeout)
        if record is None or record.get("v") != 1:
            if session is not None:
                self.sessions.end(session_id, "expired")
            return None
        if record.get("principal") != principal:
            return None
        if session is None:
            session = self.sessions.adopt(
                session_id, version=str(record["version"]), client_capabilities=dict(record["capabilities"]),
                client_info=record.get("info"), principal=principal, client=record.get("client"))
        _apply(session, record)
        session.checked = now
        return session

    async def _from_copy(self, session_id: str, principal: str | None) -> Session | None:
        """A session this process does not hold, made from its copy (the worker that held it was replaced)."""
        keeping = self._keeping
        record = await keeping.copy_of(session_id) if keeping is not None else None
        if record is None or record.get("v") != 1 or record.get("principal") != principal:
            return None
        session = self.sessions.adopt(
            session_id, version=str(record["version"]), client_capabilities=dict(record["capabilities"]),
            client_info=record.get("info"), principal=principal, client=record.get("client"))
        _apply(session, record)
        if keeping is not None:
            session.on_end(lambda reason: keeping.ended(session_id))
        log.info("serving session %s... from its copy (the process that held it stopped)", session_id[:8])
        return session

    def _context(self, call: _Call, arguments: Mapping[str, Any], target: str) -> Context:
        session = call.session
        meta = call.params.get("_meta")
        token = checked_progress_token(meta.get("progressToken") if isinstance(meta, Mapping) else None)
        return self.catalog.context(arguments, session.principal, session.client_capabilities, session.client_info,
                                    call.method, target, call.id, token, session.log_level or LOG_LEVELS[0],
                                    call.notify, call.auth)

    async def _execute(self, call: _Call, fn: Any, arguments: Mapping[str, Any], ctx: Context, *,
                       once: bool = False) -> Completed:
        journal = call.journal
        if journal is not None:
            if journal.resumed is not None and journal.principal != call.session.principal:
                raise InvalidRequest("Invalid Request: this call belongs to another principal")
            journal.principal = call.session.principal
        carrier = LiveCarrier(call.peer, version=call.session.version, answer_timeout=self.answer_timeout,
                              suspensions=self.sessions.waits_of(call.session), max_rounds=self.max_rounds,
                              notify=call.notify, journal=journal, once=once)
        return await carrier.execute(call.method, call.params, fn, arguments, ctx, run_sync=call.run_sync)

    async def _run_protocol_handler(self, call: _Call, fn: Any, arguments: Mapping[str, Any], ctx: Context,
                                    shape: Callable[[Any], dict[str, Any]], *, once: bool = False) -> dict[str, Any]:
        """A prompt's or resource's result, ``shape`` made of what its handler returned: every failure is a
        JSON-RPC error (they have no error result)."""
        try:
            return shape((await self._execute(call, fn, arguments, ctx, once=once)).result)
        except HandlerError as error:
            raise self.catalog.internal_error(call.method, ctx.target, error) from None
        except MissingRequiredClientCapability as error:
            raise InternalError(_capability_text(error), data=error.data) from None
        except LiveRequestFailed as error:
            log.info("%s %r: %s", call.method, ctx.target, error.message)
            raise

    # -- methods --------------------------------------------------------------------------------

    async def _set_level(self, call: _Call) -> dict[str, Any]:
        level = call.params.get("level")
        if level not in LOG_LEVELS:
            raise InvalidParams(f"logging/setLevel: level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
        call.session.log_level = level
        await self._record_changed(call.session)
        return {}

    async def _list(self, call: _Call) -> dict[str, Any]:
        items = await self._items(call)
        if call.unpaged:  # a mounted server's items, for its parent's listing
            return {"items": items}
        page = self.catalog.page(call.method, call.params, items)
        version = call.session.version
        for member, listed in page.items():
            if isinstance(listed, list):  # the items, beside the nextCursor
                page[member] = [_definition(item, version) for item in listed]
        return page

    async def _items(self, call: _Call) -> list[dict[str, Any]]:
        """Every item a list request shows this caller: this catalogue's, then each mounted server's, renamed."""
        items = self.catalog.items(call.method, call.auth)
        for namespace in self.catalog.mounts:
            listed = await self._child(namespace)._serve(call.with_params({}, unpaged=True))
            items += [mounted_definition(namespace, call.method, item) for item in listed["items"]]
        return items

    async def _call_tool(self, call: _Call) -> dict[str, Any]:
        catalog = self.catalog
        name, tool = catalog.tool(call.params, call.auth)
        version = call.session.version
        if tool.task == "required":
            return _failed_call(f'Tool "{name}" runs only as a task, which needs the MCP 2026-07-28 tasks '
                                "extension; a 2025 session cannot call it")
        arguments = catalog.tool_arguments(tool, call.params.get("arguments"))
        ctx = self._context(call, arguments, name)
        try:
            outcome = await self._execute(call, tool.fn, arguments, ctx, once=tool.once)
            shaped = shape_tool_result(outcome.result, tool.structured)
        except HandlerError as error:
            return _tool_result(catalog.tool_error(name, error), version)
        except MissingRequiredClientCapability as error:
            return _failed_call(_capability_text(error))
        except LiveRequestFailed as error:
            log.info("tools/call %r: %s", name, error.message)
            return _failed_call(error.message)
        return _tool_result(shaped, version)

    async def _get_prompt(self, call: _Call) -> dict[str, Any]:
        name, prompt, arguments = self.catalog.prompt(call.params)
        ctx = self._context(call, arguments, name)
        description = prompt.definition.get("description")
        shaped = await self._run_protocol_handler(call, prompt.fn, arguments, ctx,
                                                  lambda value: shape_prompt_result(value, description),
                                                  once=prompt.once)
        return _prompt_result(shaped, call.session.version)

    async def _read_resource(self, call: _Call) -> dict[str, Any]:
        uri, entry, arguments = self.catalog.resource(call.params)
        ctx = self._context(call, arguments, uri)
        mime_type = entry.mime_type
        return _plain(await self._run_protocol_handler(
            call, entry.fn, arguments, ctx, lambda value: shape_resource_result(value, uri, mime_type),
            once=entry.once))

    async def _subscribe(self, call: _Call) -> dict[str, Any]:
        uri = call.params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise InvalidParams('resources/subscribe needs a string "uri"')
        self.catalog.resource(call.params, "resources/subscribe")  # ResourceNotFound: this era's -32002
        session = call.session
        added = not (session.subscriptions and uri in session.subscriptions)
        session.subscribe(uri)
        try:
            if added:
                await self._watch(session, uri)  # a watcher may refuse it (a proxy past its bound, its upstream)
            await self._record_changed(session)
        except BaseException:
            if added:  # refused, or the record refused it (its bound) or could not be written: so does this copy
                session.unsubscribe(uri)
                self._unwatch(session, uri)
            raise
        return {}

    async def _unsubscribe(self, call: _Call) -> dict[str, Any]:
        uri = call.params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise InvalidParams('resources/unsubscribe needs a string "uri"')
        call.session.unsubscribe(uri)
        self._unwatch(call.session, uri)
        await self._record_changed(call.session)
        return {}

    async def _watch(self, session: Session, uri: str) -> None:
        """Tell the resource watchers that ``session`` wants ``uri``'s updates, once; undone when it ends."""
        if session.watched is not None and uri in session.watched:
            return
        await self.subscriptions.watch(uri, session.client)
        if session.watched is None:
            session.watched = set()
            session.on_end(lambda reason: self._unwatch_all(session))
        session.watched.add(uri)

    def _unwatch(self, session: Session, uri: str) -> None:
        if session.watched is not None and uri in session.watched:
            session.watched.discard(uri)
            self.subscriptions.unwatch(uri, session.client)

    def _unwatch_all(self, session: Session) -> None:
        watched, session.watched = session.watched or set(), set()
        for uri in watched:
            self.subscriptions.unwatch(uri, session.client)

    async def _complete(self, call: _Call) -> dict[str, Any]:
        return await self.catalog.complete(call.params)


def _changes(session: Session) -> dict[str, Any]:
    """What later requests of a session set, as its record and its ``session`` messages carry it."""
    return {"level": session.log_level, "subscriptions": sorted(session.subscriptions or ()),
            "initialized": session.initialized}


MAX_DECLARATION_BYTES = 16 * 1024
"""The most an ``initialize``'s ``capabilities`` and ``clientInfo`` may encode to, together (JSON)."""
MAX_DECLARATION_CONTAINERS = 256
"""The most objects and arrays they may hold, together: what a session keeps costs memory per container."""


def _bounded_declaration(capabilities: Any, client_info: Any) -> None:
    """Refuse an ``initialize`` whose declaration a session could not keep cheaply (``-32602``).

    A session keeps both for its life, on every node: real clients declare well under a
    kilobyte, so the bound is far from them and keeps a flood of sessions from pinning memory.
    """
    try:
        encoded = encode([capabilities, client_info])
    except (TypeError, msgspec.EncodeError):
        raise InvalidParams("initialize: capabilities and clientInfo must be JSON") from None
    containers = encoded.count(b"{") + encoded.count(b"[")  # an upper bound: brackets in strings count too
    if len(encoded) > MAX_DECLARATION_BYTES or containers > MAX_DECLARATION_CONTAINERS:
        raise InvalidParams(f"initialize: the client's capabilities and clientInfo are too large (at most "
                            f"{MAX_DECLARATION_BYTES} bytes of JSON and {MAX_DECLARATION_CONTAINERS} objects "
                            "and arrays together)")


def _record(session: Session) -> dict[str, Any]:
    """A session's record in the shared store (see :mod:`mrtr.carriers.tasks.sessions`)."""
    return {"v": 1, "version": session.version, "capabilities": dict(session.client_capabilities),
            "info": session.client_info, "principal": session.principal, "client": session.client,
            **_changes(session)}


def _apply(session: Session, record: Mapping[str, Any]) -> None:
    """Bring this node's copy of a session up to what the store (or another node) says."""
    level = record.get("level")
    session.log_level = level if level in LOG_LEVELS else None
    subscriptions = record.get("subscriptions")
    session.subscriptions = set(subscriptions[:MAX_SUBSCRIPTIONS]) if isinstance(subscriptions, list) and \
        subscriptions else None
    if record.get("initialized") is True:
        session.mark_initialized()


class _Watched:
    """A call's way to the client that marks, for its middleware, that the client answered inside the call."""

    __slots__ = ("peer", "shared")

    def __init__(self, peer: Peer, shared: Shared) -> None:
        self.peer = peer
        self.shared = shared

    async def request_all(self, requests: Any, *, timeout: float, sent: Any = None) -> list[dict[str, Any]]:
        self.shared.asked = True
        return await self.peer.request_all(requests, timeout=timeout, sent=sent)

    async def await_answers(self, questions: Any, *, timeout: float, answered: Any = None) -> list[dict[str, Any]]:
        self.shared.asked = True  # an adopted call's round went out before it came here: it asked all the same
        return await self.peer.await_answers(questions, timeout=timeout, answered=answered)


class _Call:
    """One request of a session, as the methods above read it."""

    __slots__ = ("method", "params", "session", "id", "peer", "notify", "run_sync", "auth", "headers", "unpaged",
                 "shared", "journal")

    def __init__(self, method: str, params: Mapping[str, Any], session: Session, request_id: Any, peer: Peer,
                 notify: Notify | None, run_sync: RunSync | None, auth: Any, headers: Mapping[str, str],
                 unpaged: bool = False, shared: Shared | None = None, journal: CallJournal | None = None) -> None:
        self.method = method
        self.params = params
        self.session = session
        self.id = request_id
        self.peer = peer
        self.notify = notify
        self.run_sync = run_sync
        self.auth = auth
        self.headers = headers
        self.unpaged = unpaged  # a mounted server's listing: every item, for its parent to page
        self.shared = shared  # what every middleware view of the call shares with respond
        self.journal = journal  # the call's record in a shared store, when one keeps them

    def with_params(self, params: Mapping[str, Any], method: str | None = None, *, unpaged: bool = False) -> _Call:
        """This request with other params (a mounted server's names, a middleware's change)."""
        return _Call(self.method if method is None else method, params, self.session, self.id, self.peer,
                     self.notify, self.run_sync, self.auth, self.headers, unpaged, self.shared,
                     self.journal)

