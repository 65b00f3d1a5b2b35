"""``mrtr.Client``: the client half of Multi Round-Trip Requests, on trio.

A call is a loop. The client sends the request with a full ``_meta`` (protocol
version, the capabilities it has answerers for, its name, a progress token when it
listens for progress). While the result says ``input_required`` it hands every
embedded request of that round to its answerer (concurrently), and sends the same
method and params again with a new id, a fresh ``_meta``, the answers under the keys
the server used, and the server's ``requestState`` echoed unchanged when there was
one. The loop's state lives in the call, so calls in parallel never see each other's
answers or state. A round cap stops a server that never finishes.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import itertools
import math
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

import msgspec
import trio

from ..core import wire
from ..core.answers import roots as _roots
from ..core.apps import UI_EXTENSION, ui_declaration
from ..core.answers import sampled as _sampled
from ..core.eras import (LATEST_LEGACY_VERSION, LEGACY, LEGACY_VERSIONS, MODERN, MODERN_ERRORS, MODERN_VERSIONS, Era,
                         InitializeResult, is_modern_error)
from ..core.errors import (HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
                           STATE_UNREADABLE, UNSUPPORTED_PROTOCOL_VERSION)
from ..core.jsonrpc import JSONRPC_VERSION, Dispatcher, notification, request, result_response
from ..core.kinds import KINDS, REQUEST_KINDS, Kind, RequestKind, decode_input_response, kind_of
from ..core.mirroring import InvalidHeaderSchema, mirrored_parameters
from .apps import ToolInfo, UiResource, read_ui
from .callbacks import maybe_await
from .errors import ClientError, ConnectionFailed, RoundLimitExceeded, StateLost, Unreadable
from .requests import ElicitationRequest, InputRequest, RootsRequest, SamplingRequest
from .results import PromptResult, ResourceResult, ToolResult, checked, read_tool_result
from .targets import HTTPTarget, InProcessTarget, OnRequest, StdioTarget, Target, log
from .tasks import TaskHandle, TaskStatus

__all__ = ["CLIENT_DEADLINE", "DEFAULT_DEADLINE", "DEFAULT_MAX_ROUNDS", "PROBE_TIMEOUT", "Client", "EraMemory",
           "PromptResult", "ResourceResult", "ToolResult"]

DEFAULT_MAX_ROUNDS = 10
"""How many ``input_required`` rounds a call answers before giving up (other SDKs use 10 too)."""

DEFAULT_DEADLINE = 300.0
"""Seconds one exchange (a request and its whole response) may take, however the server paces it.

Five times the default read ``timeout``: room for a tool that works for minutes and says
so with progress, not for one that trickles bytes forever. It covers one round, not the
time an answerer (a person) takes between rounds.
"""


class _Default(enum.Enum):
    CLIENT = "the client's deadline"


CLIENT_DEADLINE = _Default.CLIENT
"""The ``deadline=`` of a method call that means: the one the Client was given."""

Answerer = Callable[[Any], Any]
"""A sync or async callable given a request object and returning the answer in wire shape."""

ProgressCallback = Callable[[float, float | None, str | None], Any]
"""``on_progress(progress, total, message)``, sync or async."""

_STATE_ONLY_BACKOFF = (0.05, 0.25)  # first and longest pause before a retry with nothing to answer

PROBE_TIMEOUT = 5.0
"""Seconds the era probe (``server/discover``) waits before taking a silent server for a legacy one."""

STANDALONE_WAIT = 1.0
"""Seconds a new 2025 session over HTTP waits for the server to answer its standalone ``GET``."""


LogCallback = Callable[[str, str | None, Any], Any]
"""``on_log(level, logger, data)``, sync or async."""

ListChangedCallback = Callable[[str], Any]
"""``on_list_changed(what)`` with ``"tools"``, ``"prompts"`` or ``"resources"``, sync or async."""

ResourceUpdatedCallback = Callable[[str], Any]
"""``on_resource_updated(uri)`` for a resource the client subscribed to, sync or async."""



class EraMemory:
    """The era each HTTP endpoint answered a probe in, for the clients given it.

    Each :class:`Client` keeps its own by default; clients given one memory
    (``Client(url, eras=memory)``) probe an endpoint once between them, and any of
    them that finds a remembered era no longer holds forgets it for all.
    """

    def __init__(self) -> None:
        self._eras: dict[str, Era] = {}

    def get(self, url: str) -> Era | None:
        """The era ``url`` answered in, if remembered."""
        return self._eras.get(url)

    def remember(self, url: str, era: Era) -> None:
        """Remember that ``url`` answers in ``era``."""
        self._eras[url] = era

    def forget(self, url: str) -> None:
        """Forget what ``url`` answered in (the next client probes it again)."""
        self._eras.pop(url, None)

_LIST_CHANGED = {f"notifications/{what}/list_changed": what for what in ("tools", "prompts", "resources")}
_STATE_LOST = "requestState failed authentication"  # what a server of an earlier release says instead of data.reason
RESULT_TYPE_TASK = "task"


def _state_unreadable(error: ClientError) -> bool:
    """Whether the server said it cannot open the ``requestState`` it issued (``data.reason``)."""
    data = error.data
    if isinstance(data, dict) and "reason" in data:
        return data["reason"] == STATE_UNREADABLE
    return _STATE_LOST in error.message


async def _held_in(scope: trio.CancelScope, run: Callable[..., Awaitable[Any]], *args: Any) -> None:
    """``run(*args)`` inside ``scope``, so that whoever holds the scope can end it alone."""
    with scope:
        await run(*args)


def _checked_item(item: Any, shape: type[Any], where: str) -> None:
    try:
        msgspec.convert(item, shape)
    except msgspec.ValidationError as exc:
        name = item.get("name") if isinstance(item, dict) else None
        named = f" ({name!r})" if isinstance(name, str) else ""
        raise ClientError(INVALID_REQUEST, f"Invalid {where}{named} from the server: {exc}") from None


def _unwrapped(group: BaseExceptionGroup[Any]) -> BaseException:
    # A nursery of one failing task should fail like that task, not with a group around it.
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _checked_deadline(deadline: Any) -> float | None:
    if deadline is None:
        return None
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)):
        raise TypeError(f"a deadline is a number of seconds or None, not {type(deadline).__name__}")
    if not deadline > 0:  # NaN included
        raise ValueError(f"a deadline must be more than 0 seconds, not {deadline!r}")
    return float(deadline)


def _error_response(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "error": {"code": code, "message": message}}


class _ResourceStream:
    """One ``subscriptions/listen`` stream for the resources a modern-era client subscribed to.

    ``uris`` is what it asks to hear of; ``agreed`` what the server's acknowledgement
    agreed to (``None`` before it); ``failure`` why it never was acknowledged.
    """

    __slots__ = ("uris", "scope", "acknowledged", "agreed", "failure")

    def __init__(self, uris: list[str]) -> None:
        self.uris = uris
        self.scope = trio.CancelScope()
        self.acknowledged = trio.Event()
        self.agreed: list[str] | None = None
        self.failure: ClientError | None = None


class Client:
    """An MCP 2026-07-28 client that answers the server's questions and retries for you.

    ``target`` is a URL (Streamable HTTP), a server object implementing
    :class:`~mrtr.core.jsonrpc.Dispatcher` (an :class:`mrtr.server.Server`, served in
    process with no sockets), or a target built elsewhere; :meth:`stdio` starts a
    subprocess. Use the client in ``async with``.

    Answerers, each sync or async, get a request object and return the answer in wire
    shape (or through :func:`mrtr.accept`, :func:`mrtr.decline`, :func:`mrtr.cancel`):

    - ``on_elicit(ElicitationRequest)``: ``{"action": "accept", "content": {...}}`` etc.
      ``elicitation_modes`` says which modes it handles (``"form"``, ``"url"``).
    - ``on_sample(SamplingRequest)``: a ``CreateMessageResult`` dict, or a string (the reply text).
    - ``on_roots(RootsRequest)``: a ``ListRootsResult`` dict, or a list of ``file://`` URIs.

    The client declares exactly these capabilities on every request. An answerer that
    raises abandons the call (the protocol has no way to say "this question failed").
    ``on_progress(progress, total, message)`` receives progress notifications.
    ``max_rounds`` caps the ``input_required`` rounds of one call.

    ``timeout`` bounds connecting and each read (over stdio, the wait for an answer,
    restarted by progress). ``deadline`` bounds each exchange, a request and its whole
    response, however the server paces it (default :data:`DEFAULT_DEADLINE`; ``None``
    for none); the time an answerer takes between rounds is not counted. A method's own
    ``deadline=`` overrides it for that call.

    ``era`` is ``"auto"`` (probe the server once with ``server/discover`` and speak
    whichever era it answers in), ``"modern"`` (2026-07-28 only) or ``"legacy"`` (the
    2025 ``initialize`` session). Answerers, progress, ``on_log(level, logger, data)``
    and ``on_list_changed(what)`` work the same in both, and so does
    ``on_resource_updated(uri)`` for the resources :meth:`subscribe` named. ``tasks`` declares the tasks
    extension (a task tool's call then returns when its task ends; see
    :meth:`start_task`). ``auth`` (a :class:`mrtr.client.oauth.OAuth`) authorizes
    requests to a protected server over HTTP. ``ui`` declares the MCP Apps extension
    (the caller renders interfaces; see :meth:`read_ui`). ``eras`` is the :class:`EraMemory`
    the client keeps what it probed in: its own by default; give several clients one to
    probe an endpoint once between them.
    """

    def __init__(
        self,
        target: str | Dispatcher | Target,
        *,
        on_elicit: Answerer | None = None,
        on_sample: Answerer | None = None,
        on_roots: Answerer | None = None,
        on_progress: ProgressCallback | None = None,
        elicitation_modes: Collection[str] = ("form",),
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        client_info: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = 60.0,
        deadline: float | None = DEFAULT_DEADLINE,
        era: str = "auto",
        tasks: bool = True,
        on_log: LogCallback | None = None,
        log_level: str = "info",
        on_list_changed: ListChangedCallback | None = None,
        on_resource_updated: ResourceUpdatedCallback | None = None,
        auth: Any = None,
        ui: bool = False,
        eras: EraMemory | None = None,
    ) -> None:
        if era not in ("auto", "modern", "legacy"):
            raise ValueError(f'era must be "auto", "modern" or "legacy", not {era!r}')
        if isinstance(target, str):
            self.target: Target = HTTPTarget(target, headers=headers, timeout=timeout, auth=auth)
        elif auth is not None:
            raise ValueError("auth= authorizes HTTP requests: give the server's URL (over stdio a server takes its "
                             "credentials from its environment)")
        elif hasattr(target, "send") and hasattr(target, "open"):
            self.target = target  # type: ignore[assignment]
        elif hasattr(target, "handle"):
            self.target = InProcessTarget(target)  # type: ignore[arg-type]
        else:
            raise TypeError(f"a Client target is a URL, a server object or a target, not {type(target).__name__}")
        unknown = set(elicitation_modes) - set(KINDS[Kind.ELICIT].features)
        if unknown:
            raise ValueError(f"unknown elicitation modes {sorted(unknown)}: use 'form' and/or 'url'")
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        from .._version import __version__

        self.on_elicit = on_elicit
        self.on_sample = on_sample
        self.on_roots = on_roots
        self.on_progress = on_progress
        self.elicitation_modes = frozenset(elicitation_modes)
        self.max_rounds = max_rounds
        self.deadline = _checked_deadline(deadline)
        self.client_info = dict(client_info or {"name": "mrtr", "version": __version__})
        self.tasks = tasks
        self.on_log = on_log
        self.log_level = log_level
        self.on_list_changed = on_list_changed
        self.on_resource_updated = on_resource_updated
        self.ui = bool(ui)
        self.era_choice = era
        self.eras = EraMemory() if eras is None else eras
        self._ids = itertools.count(1)
        self._tools: dict[str, dict[str, Any]] | None = None
        self._nursery: trio.Nursery | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._era: Era | None = MODERN if isinstance(self.target, InProcessTarget) or era == "modern" else None
        self._era_lock = trio.Lock()
        # A new 2025 session's standalone GET: the event set once the server answered it, and the
        # trio time until which requests wait for that (see _initialize).
        self._standalone_wait: tuple[trio.Event, float] | None = None
        self._standalone_scope: trio.CancelScope | None = None  # the 2025 session's standalone stream
        self._era_cached = False  # the era came from another client's probe of the same endpoint
        self._discovered: dict[str, Any] | None = None
        self._notes: trio.MemorySendChannel[dict[str, Any]] | None = None
        self.listening = False
        """Whether the server acknowledged the stream ``on_list_changed`` is fed from (modern era)."""
        self._subscribed: dict[str, None] = {}  # the resources subscribed to, in order
        self._subscribing = trio.Lock()
        self._resource_stream: _ResourceStream | None = None
        self._resource_streams: set[_ResourceStream] = set()  # every one started, agreed or not yet
        self._streams_stopped = False  # the client is closing: a stream started now ends at once
        self.server: InitializeResult | None = None
        """What a legacy server answered to ``initialize`` (``None`` in the modern era)."""
        if hasattr(self.target, "on_request"):
            self.target.on_request = self._answer_server_request  # type: ignore[attr-defined]
            self.target.on_notification = self._session_notification  # type: ignore[attr-defined]

    @property
    def era(self) -> Era | None:
        """The era this client speaks to its server in, once it knows (after the first request)."""
        return self._era

    @classmethod
    def stdio(cls, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
              stderr: int | None = None, **options: Any) -> Client:
        """A client for a server started as ``argv`` and spoken to over its stdin/stdout.

        ``stderr`` is where the server's log goes (default: this process's stderr;
        ``subprocess.DEVNULL`` to drop it). Other options are the constructor's.
        """
        timeout = options.pop("timeout", 60.0)
        return cls(StdioTarget(argv, env=env, cwd=cwd, stderr=stderr, timeout=timeout), **options)

    async def __aenter__(self) -> Client:
        try:
            async with contextlib.AsyncExitStack() as stack:
                nursery = await stack.enter_async_context(trio.open_nursery())
                # Unwound last-in first-out: close the target, then stop background tasks.
                stack.callback(nursery.cancel_scope.cancel)
                stack.push_async_callback(self.target.aclose)
                # Before the target closes: a resource stream it ended would be sent again on a closed one.
                stack.callback(self._stop_resource_streams)
                self._notes, notes = trio.open_memory_channel[dict[str, Any]](math.inf)
                nursery.start_soon(self._handle_notes, notes)
                await self.target.open(nursery)
                serving = getattr(self.target, "serving", None)  # an in-process server's lifespan
                if serving is not None:
                    await stack.enter_async_context(serving())
                self._nursery = nursery
                if self.on_list_changed is not None:
                    nursery.start_soon(self._listen)
                self._stack = stack.pop_all()
        except BaseExceptionGroup as group:
            raise _unwrapped(group) from None
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        stack, self._stack, self._nursery = self._stack, None, None
        assert stack is not None, "the Client was not entered"
        try:
            return await stack.__aexit__(*exc_info)
        except BaseExceptionGroup as group:
            # The body's own exception comes back wrapped by the client's nursery: let it
            # leave the block as it was raised.
            if len(group.exceptions) == 1 and group.exceptions[0] is exc_info[1]:
                return False
            raise _unwrapped(group) from None

    # -- what the client declares ---------------------------------------------------------

    def _answerers(self) -> dict[Kind, Answerer | None]:
        """Which constructor argument answers each kind a server can ask."""
        return {Kind.ELICIT: self.on_elicit, Kind.SAMPLE: self.on_sample, Kind.ROOTS: self.on_roots}

    def capabilities(self) -> dict[str, Any]:
        """The ``clientCapabilities`` sent on every request: one entry per answerer."""
        capabilities: dict[str, Any] = {}
        answerers = self._answerers()
        for row in REQUEST_KINDS:
            if answerers[row.kind] is None or row.capability is None:
                continue
            if row.kind is Kind.ELICIT:
                if self.elicitation_modes:  # one member per mode it renders
                    capabilities[row.capability] = {mode: {} for mode in sorted(self.elicitation_modes)}
            else:
                capabilities[row.capability] = {}
        if self.tasks and self._era != LEGACY:
            capabilities["extensions"] = {wire.TASKS_EXTENSION: {}}
        if self.ui:  # MCP Apps, in both eras
            capabilities["extensions"] = {**capabilities.get("extensions", {}), UI_EXTENSION: ui_declaration()}
        return capabilities

    def _meta(self, request_id: int) -> dict[str, Any]:
        if self._era == LEGACY:
            # A legacy request's context is its session's; only the progress token travels with it.
            return {wire.META_PROGRESS_TOKEN: request_id} if self.on_progress is not None else {}
        meta: dict[str, Any] = {
            wire.META_PROTOCOL_VERSION: wire.PROTOCOL_VERSION,
            wire.META_CLIENT_CAPABILITIES: self.capabilities(),
            wire.META_CLIENT_INFO: self.client_info,
        }
        if self.on_progress is not None:
            meta[wire.META_PROGRESS_TOKEN] = request_id  # unique among requests in flight
        if self.on_log is not None:
            meta[wire.META_LOG_LEVEL] = self.log_level
        return meta

    # -- which era -------------------------------------------------------------------------------

    async def _settle_era(self) -> None:
        """Probe the server once (unless the era is fixed or known) and open a legacy session if it needs one."""
        if self._era == MODERN:
            return
        if self._era == LEGACY and self.server is not None:
            if self._standalone_wait is not None:  # a request that came while the session was opening
                await self._standalone_answered()
            return
        async with self._era_lock:
            if self._era is None:
                key = getattr(self.target, "url", None)
                cached = self.eras.get(key) if key is not None else None
                self._era = LEGACY if self.era_choice == "legacy" else cached or await self._probe()
                self._era_cached = cached is not None and self.era_choice == "auto"
                if key is not None:
                    self.eras.remember(key, self._era)
            if self._era == LEGACY and self.server is None:
                try:
                    await self._initialize()
                except ClientError as error:
                    if key is not None:
                        self.eras.forget(key)  # re-probe next time: the cached era may be what failed
                    if self.era_choice == "auto" and error.code in MODERN_ERRORS:
                        # The server refused initialize the way only a modern one does: speak modern.
                        log.info("%s refused initialize with a modern error: a modern server", self._where())
                        self._era = self.target.era = MODERN  # type: ignore[attr-defined]
                        return
                    if self._era_cached and not isinstance(error, ConnectionFailed):
                        # What this process remembered of the endpoint no longer holds: ask it.
                        self._era_cached = False
                        self.target.era = MODERN  # type: ignore[attr-defined]
                        self._era = await self._probe()
                        if key is not None:
                            self.eras.remember(key, self._era)
                        if self._era == LEGACY:
                            await self._initialize()
                        return
                    raise

    async def _probe(self) -> Era:
        """``server/discover``, judged as the 2026-07-28 backward-compatibility rules say."""
        request_id = next(self._ids)
        message = request(request_id, "server/discover", {"_meta": self._meta(request_id)})
        # Over stdio a legacy server may stay silent on a request before initialize; over
        # HTTP every request gets an answer, so silence there is only a slow server.
        stdio = isinstance(getattr(self.target, "inner", self.target), StdioTarget)
        limit = self.deadline if self.deadline is not None else math.inf
        if stdio:
            limit = min(limit, PROBE_TIMEOUT)
        try:
            with trio.move_on_after(limit):
                result = await self.target.send(message, lambda note: None, None)
                try:
                    msgspec.convert(result, wire.DiscoverResult)
                except msgspec.ValidationError:
                    log.info("%s answered server/discover with something else: a legacy server", self._where())
                    return LEGACY
                self._discovered = result
                return MODERN
            if not stdio:
                raise ClientError(INTERNAL_ERROR, f"no complete answer to server/discover within the "
                                                  f"{limit:g} s deadline")
            log.info("%s did not answer server/discover within %g s: a legacy server", self._where(), limit)
            return LEGACY
        except (ConnectionFailed, Unreadable):
            raise  # no answer to judge: the server is unreachable, or what it sent cannot be read
        except ClientError as error:
            if error.status in (401, 403):
                raise  # an authorization problem says nothing about the era
            if is_modern_error(error.code, "server/discover"):
                supported = error.data.get("supported") if isinstance(error.data, dict) else None
                if error.code == UNSUPPORTED_PROTOCOL_VERSION and isinstance(supported, list) \
                        and not set(supported) & set(MODERN_VERSIONS) and set(supported) & set(LEGACY_VERSIONS):
                    return LEGACY  # a modern error naming only handshake versions: initialize
                return MODERN
            log.info("%s refused server/discover (%s): a legacy server", self._where(), error)
            return LEGACY

    def _where(self) -> str:
        return str(getattr(self.target, "url", None) or " ".join(getattr(self.target, "argv", [])) or "the server")

    def _legacy_capabilities(self) -> dict[str, Any]:
        capabilities = self.capabilities()
        if "roots" in capabilities:
            capabilities["roots"] = {"listChanged": False}
        return capabilities

    async def _initialize(self) -> None:
        """The 2025 lifecycle: ``initialize``, version check, ``notifications/initialized``, the standalone stream."""
        self.target.era = LEGACY  # type: ignore[attr-defined]
        params = {"protocolVersion": LATEST_LEGACY_VERSION, "capabilities": self._legacy_capabilities(),
                  "clientInfo": self.client_info}
        message = request(next(self._ids), "initialize", params)
        result: dict[str, Any] | None = None
        with trio.move_on_after(self.deadline if self.deadline is not None else math.inf):
            result = await self.target.send(message, lambda note: None, None)
        if result is None:
            raise ClientError(INTERNAL_ERROR, f"{self._where()} did not answer initialize within the "
                                              f"{self.deadline:g} s deadline")
        try:
            answered = msgspec.convert(result, InitializeResult)
        except msgspec.ValidationError as exc:
            raise ClientError(INVALID_REQUEST, f"Invalid InitializeResult from the server: {exc}") from None
        if answered.protocol_version not in LEGACY_VERSIONS:
            raise ClientError(INVALID_REQUEST, f"the server answered initialize with protocol version "
                                               f"{answered.protocol_version!r}, which this client does not speak "
                                               f"(it speaks {', '.join(LEGACY_VERSIONS + MODERN_VERSIONS)})")
        if hasattr(self.target, "protocol_version"):
            self.target.protocol_version = answered.protocol_version  # type: ignore[attr-defined]
        await self.target.notify(notification("notifications/initialized"))  # type: ignore[attr-defined]
        self.server = answered
        listen = getattr(self.target, "listen", None)
        if listen is not None and self._nursery is not None:
            # A server sends what belongs to no request (a question asked outside the call's own
            # stream, a list change) on this stream, and may drop it while the stream is not open:
            # every request waits for the server's answer to the GET, for a second at most (a server
            # that holds the head back until its first event is not waited for any longer) and never
            # past the client's deadline.
            stream_answered = trio.Event()
            wait = STANDALONE_WAIT if self.deadline is None else min(STANDALONE_WAIT, self.deadline)
            self._standalone_wait = (stream_answered, trio.current_time() + wait)
            self._standalone_scope = trio.CancelScope()
            self._nursery.start_soon(_held_in, self._standalone_scope, listen, stream_answered)
            await self._standalone_answered()
        if self.on_log is not None and "logging" in answered.capabilities:
            await self.call_once("logging/setLevel", {"level": self.log_level})
        if self._subscribed and self._nursery is not None:
            # A session started again (the server forgot the last one): its subscriptions went with it.
            self._nursery.start_soon(self._subscribe_again)

    def _drop_session(self) -> None:
        """Forget the 2025 session the server no longer knows, before another opens.

        Its standalone stream ends now: left open, it would reconnect naming the next
        session's id and hold that session's one stream itself.
        """
        if self._standalone_scope is not None:
            self._standalone_scope.cancel()
            self._standalone_scope = None
        self.server = None
        if hasattr(self.target, "session_id"):
            self.target.session_id = None

    async def _standalone_answered(self) -> None:
        """Wait until the server answered the legacy session's standalone GET, or the wait's end."""
        waiting = self._standalone_wait
        if waiting is None:
            return
        answered, until = waiting
        with trio.move_on_at(until):
            await answered.wait()
        if self._standalone_wait is waiting:
            self._standalone_wait = None  # answered or given up on: later requests do not wait

    async def _listen(self) -> None:
        """Keep a ``subscriptions/listen`` stream open for the list changes the server announces (modern era).

        A legacy server sends its list changes on its own (the session's stream), so
        nothing is asked of it. A stream the server ends is opened again.
        """
        pause = 1.0
        while True:
            try:
                await self._settle_era()
                if self._era != MODERN:
                    return
                capabilities = (await self.discover()).get("capabilities") or {}
                wanted = {f"{what}ListChanged": True for what in ("tools", "prompts", "resources")
                          if isinstance(capabilities.get(what), dict) and capabilities[what].get("listChanged")}
                if not wanted:
                    return
                request_id = next(self._ids)
                message = request(request_id, "subscriptions/listen",
                                  {"notifications": wanted, "_meta": self._meta(request_id)})
                await self.target.send(message, self._session_notification, None,  # type: ignore[call-arg]
                                       patient=True)
                self.listening = False
                pause = 1.0
            except ClientError as error:
                log.warning("the list-changes stream of %s failed: %s", self._where(), error)
                pause = min(pause * 2, 30.0)
            await trio.sleep(pause)

    # -- what a legacy server asks and tells ------------------------------------------------------

    async def _answer_server_request(self, message: dict[str, Any], rounds: list[int] | None = None
                                     ) -> dict[str, Any]:
        """The response to a request a legacy server sent, from the same answerers a modern round uses."""
        request_id, method = message["id"], message["method"]
        if method == "ping":
            return result_response(request_id, {})
        try:
            row = kind_of(method)
        except KeyError:
            return _error_response(request_id, METHOD_NOT_FOUND, f"Method not found: {method}")
        try:
            item = self._request_object(str(request_id), {"method": method, "params": message.get("params") or {}})
            answerer, row = self._answerer(item)
        except ClientError as error:
            log.warning("refusing a %s request from the server: %s", method, error.message)
            code = INVALID_PARAMS if row.kind is Kind.ELICIT else METHOD_NOT_FOUND
            return _error_response(request_id, code, error.message)
        if rounds is not None:
            rounds[0] += 1
            if rounds[0] > self.max_rounds:
                raise RoundLimitExceeded(INTERNAL_ERROR, f"the server was still asking after {self.max_rounds} "
                                                         "questions", {"rounds": self.max_rounds,
                                                                       "lastKeys": [item.key]})
        answers: dict[str, Any] = {}
        self._store(item, row, await maybe_await(answerer(item)), answers)
        return result_response(request_id, answers[item.key])

    def _session_notification(self, note: dict[str, Any]) -> None:
        """A notification that belongs to no call: logging and list changes, handled in order of arrival."""
        if self._notes is not None:
            self._notes.send_nowait(note)

    async def _handle_notes(self, receiver: trio.MemoryReceiveChannel[dict[str, Any]]) -> None:
        async for note in receiver:
            try:
                await self._notified(note)
            except Exception:  # a callback's failure must not end the session's other notifications
                log.exception("on_log, on_list_changed or on_resource_updated failed")

    async def _notified(self, note: dict[str, Any]) -> None:
        method = note.get("method")
        params = note.get("params") or {}
        if method == "notifications/subscriptions/acknowledged":
            self.listening = True
        elif method == "notifications/message" and self.on_log is not None:
            await self._log(params)
        elif method in _LIST_CHANGED:
            if method == "notifications/tools/list_changed":
                self._tools = None  # the header annotations may have changed with the tools
            if self.on_list_changed is not None:
                await maybe_await(self.on_list_changed(_LIST_CHANGED[method]))
        elif method == "notifications/resources/updated":
            uri = params.get("uri")
            if isinstance(uri, str) and uri in self._subscribed and self.on_resource_updated is not None:
                await maybe_await(self.on_resource_updated(uri))

    async def _log(self, params: Mapping[str, Any]) -> None:
        try:
            decoded = msgspec.convert(params, wire.LoggingMessageNotificationParams)
        except msgspec.ValidationError as exc:
            log.warning("ignoring a malformed notifications/message from the server: %s", exc)
            return
        assert self.on_log is not None
        await maybe_await(self.on_log(decoded.level, decoded.logger, decoded.data))

    # -- one request ---------------------------------------------------------------------------

    async def _send(self, message: dict[str, Any], parameters: Mapping[str, tuple[str, ...]] | None) -> dict[str, Any]:
        extra: dict[str, OnRequest] = {}
        # Notifications not yet handed to their callback: a legacy server's question waits for
        # them, so progress and logs sent before a question reach their callbacks before it.
        backlog = [0]
        handed = trio.Event()
        if self._era == LEGACY:
            asked = [0]  # the server's questions during this call, capped like MRTR rounds

            async def on_request(server_request: dict[str, Any]) -> dict[str, Any]:
                while backlog[0]:
                    await handed.wait()
                return await self._answer_server_request(server_request, asked)

            extra["on_request"] = on_request
        on_progress = self.on_progress
        if on_progress is None and self.on_log is None:
            return await self.target.send(message, lambda note: None, parameters, **extra)  # type: ignore[call-arg]
        # Progress and log messages are handed over in order and every callback, sync or
        # async, has run before the call returns.
        sender, receiver = trio.open_memory_channel[dict[str, Any]](math.inf)

        async def report() -> None:
            nonlocal handed
            async for note in receiver:
                try:
                    await self._report(note, on_progress)
                finally:
                    backlog[0] -= 1
                    handed.set()
                    handed = trio.Event()

        def notified(note: dict[str, Any]) -> None:
            if note.get("method") == "notifications/progress" or (
                    note.get("method") == "notifications/message" and self.on_log is not None):
                backlog[0] += 1
                sender.send_nowait(note)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(report)
                with sender:
                    result = await self.target.send(message, notified, parameters, **extra)  # type: ignore[call-arg]
        except BaseExceptionGroup as group:
            raise _unwrapped(group) from None
        return result

    async def _report(self, note: dict[str, Any], on_progress: ProgressCallback | None) -> None:
        """Hand one progress or log notification of a call to its callback."""
        if note.get("method") == "notifications/message":
            await self._log(note.get("params") or {})
            return
        try:
            params = msgspec.convert(note.get("params") or {}, wire.ProgressNotificationParams)
        except msgspec.ValidationError as exc:
            raise ClientError(INVALID_REQUEST, f"Invalid notifications/progress from the server: {exc}") from None
        if on_progress is not None:
            await maybe_await(on_progress(params.progress, params.total, params.message))

    async def _parameters(self, method: str, params: Mapping[str, Any]) -> dict[str, tuple[str, ...]] | None:
        if method != "tools/call" or not self.target.mirrors_headers:
            return None
        name = params.get("name")
        if self._tools is None or name not in self._tools:
            await self.list_tools()
        tool = (self._tools or {}).get(name)  # type: ignore[arg-type]
        return mirrored_parameters(tool) if tool is not None else None

    async def _exchange(self, message: dict[str, Any], parameters: Mapping[str, tuple[str, ...]] | None,
                        deadline: float | None) -> dict[str, Any]:
        # Leaving the scope cancels the request as the caller's own cancel would: the HTTP
        # stream is closed, a stdio server is sent notifications/cancelled.
        with trio.move_on_after(math.inf if deadline is None else deadline) as scope:
            return await self._send(message, parameters)
        assert scope.cancelled_caught
        raise ClientError(INTERNAL_ERROR, f"no complete answer to {message['method']} within the {deadline:g} s "
                                          "deadline")

    def _deadline(self, deadline: float | None | _Default) -> float | None:
        return self.deadline if deadline is CLIENT_DEADLINE else _checked_deadline(deadline)

    async def call_once(self, method: str, params: Mapping[str, Any] | None = None, *,
                        deadline: float | None | _Default = CLIENT_DEADLINE) -> dict[str, Any]:
        """Send one request (one round) with a fresh id and ``_meta``; return its raw result.

        One error is retried once, with a new id: ``-32020`` over HTTP after fetching
        ``tools/list`` again (a tool's ``x-mcp-header`` annotations may have changed), and
        ``-32022`` when the server lists this client's protocol version as supported.

        ``params`` may carry ``inputResponses`` and ``requestState`` for callers that drive
        the rounds themselves; an ``input_required`` result is returned as it came.
        Raises :class:`ClientError` for an error response, and when the exchange takes
        longer than ``deadline`` seconds (default: the client's).
        """
        if self._nursery is None:
            raise RuntimeError("use the Client in 'async with' before calling it")
        seconds = self._deadline(deadline)
        params = dict(params or {})
        await self._settle_era()
        parameters = await self._parameters(method, params)
        for attempt in (1, 2):
            request_id = next(self._ids)
            meta = self._meta(request_id)
            message = request(request_id, method, {**params, "_meta": meta} if meta else params)
            session = getattr(self.target, "session_id", None)  # the 2025 session it goes out in, if any
            try:
                result = await self._exchange(message, parameters, seconds)
                self._era_cached = False
                return result
            except ClientError as error:
                if self._era_cached and error.status in (400, 404, 405) and not is_modern_error(error.code, method):
                    # The era this process remembered for the endpoint no longer holds: probe again.
                    self._era_cached = False
                    self.eras.forget(getattr(self.target, "url", ""))
                    self._drop_session()
                    self._era = None
                    self.target.era = MODERN  # type: ignore[attr-defined]
                    await self._settle_era()
                    parameters = await self._parameters(method, params)
                    continue
                if attempt == 2 or not self._worth_retrying(error, session):
                    raise
                if session is not None:
                    # The session is gone (404): a new one, as the 2025 transport says, then once more.
                    # Calls in flight in it read the same 404: the first starts the next session, and
                    # the others go on in that one (dropping it would end its standalone stream).
                    if getattr(self.target, "session_id", None) == session:
                        log.info("%s ended the session; starting a new one", self._where())
                        self._drop_session()
                    await self._settle_era()
                    parameters = await self._parameters(method, params)
                elif error.code == HEADER_MISMATCH:
                    # A tool's header annotations may have changed since tools/list: refetch.
                    self._tools = None
                    parameters = await self._parameters(method, params)
        raise AssertionError("unreachable")

    def _worth_retrying(self, error: ClientError, session: str | None) -> bool:
        """Whether ``error`` is worth one more try; ``session`` is the 2025 session the request went out in."""
        if session is not None:
            return error.status == 404
        if self._era == LEGACY:
            return False
        if error.code == HEADER_MISMATCH:
            return self.target.mirrors_headers
        if error.code == UNSUPPORTED_PROTOCOL_VERSION:
            # This client speaks one version; try once more only if the server says it supports it.
            supported = error.data.get("supported") if isinstance(error.data, dict) else None
            return isinstance(supported, list) and wire.PROTOCOL_VERSION in supported
        return False

    async def request(self, method: str, params: Mapping[str, Any] | None = None, *,
                      deadline: float | None | _Default = CLIENT_DEADLINE) -> dict[str, Any]:
        """Send ``method`` and answer ``input_required`` rounds until the final result, which is returned.

        ``deadline`` bounds each round's exchange (default: the client's), not the whole
        conversation: answering takes the time it takes. A retry whose ``requestState``
        the server can no longer open raises :class:`~mrtr.client.errors.StateLost`.
        """
        return await self._rounds(method, params, deadline=deadline)

    async def _rounds(self, method: str, params: Mapping[str, Any] | None = None, *,
                      deadline: float | None | _Default = CLIENT_DEADLINE, allow_task: bool = False
                      ) -> dict[str, Any]:
        original = dict(params or {})
        responses: dict[str, Any] | None = None
        state: str | None = None
        rounds = 0
        pause = _STATE_ONLY_BACKOFF[0]
        while True:
            sent = dict(original)
            if responses is not None:
                sent["inputResponses"] = responses
            if state is not None:
                sent["requestState"] = state
            try:
                result = await self.call_once(method, sent, deadline=deadline)
            except ClientError as error:
                if state is not None and error.code == INVALID_PARAMS and _state_unreadable(error):
                    raise StateLost(error.code, f"{error.message}. The server could not open the state it issued "
                                                "for this conversation: most likely it restarted without a fixed "
                                                "MRTR_SECRET (or the retry reached a node with another key). The "
                                                "conversation must start again.", error.data,
                                    status=error.status) from None
                raise
            result_type = result.get("resultType", wire.RESULT_TYPE_COMPLETE)
            if result_type == wire.RESULT_TYPE_COMPLETE or (allow_task and result_type == RESULT_TYPE_TASK):
                return result
            if result_type != wire.RESULT_TYPE_INPUT_REQUIRED:
                raise ClientError(INVALID_REQUEST, f"Invalid result: unknown resultType {result_type!r}")
            requests = result.get("inputRequests")
            state = result.get("requestState")
            if (requests is not None and not isinstance(requests, dict)) or (
                    state is not None and not isinstance(state, str)):
                raise ClientError(INVALID_REQUEST, "Invalid InputRequiredResult: inputRequests must be an object "
                                                   "and requestState a string")
            if not requests and state is None:
                raise ClientError(INVALID_REQUEST, "Invalid InputRequiredResult: neither inputRequests nor "
                                                   "requestState")
            rounds += 1
            if rounds > self.max_rounds:
                raise RoundLimitExceeded(
                    INTERNAL_ERROR, f"{method} still asked for input after {self.max_rounds} rounds",
                    {"rounds": self.max_rounds, "lastKeys": list(requests or {})})
            if requests:
                responses = await self.answer_round(requests)
                pause = _STATE_ONLY_BACKOFF[0]
            else:
                # Load shedding: nothing to answer, the server wants the state back. Pause a
                # little, longer each time, so a server that keeps doing it is not hammered.
                responses = None
                await trio.sleep(pause)
                pause = min(pause * 2, _STATE_ONLY_BACKOFF[1])

    # -- answering a round -------------------------------------------------------------------------

    def _request_object(self, key: str, embedded: Any) -> InputRequest:
        try:
            decoded = msgspec.convert(embedded, wire.InputRequest)
        except msgspec.ValidationError as exc:
            raise ClientError(INVALID_REQUEST, f"Invalid inputRequests[{key!r}]: {exc}") from None
        raw = dict(embedded.get("params") or {})
        if isinstance(decoded, wire.ElicitRequest):
            params = decoded.params
            if isinstance(params, wire.ElicitRequestURLParams):
                return ElicitationRequest(key, params.message, "url", url=params.url, raw=raw)
            return ElicitationRequest(key, params.message, "form", requested_schema=params.requested_schema, raw=raw)
        if isinstance(decoded, wire.CreateMessageRequest):
            return SamplingRequest(key, list(raw.get("messages") or []), decoded.params.max_tokens,
                                   system_prompt=decoded.params.system_prompt,
                                   model_preferences=raw.get("modelPreferences"), raw=raw)
        return RootsRequest(key, raw=raw)

    def _answerer(self, item: InputRequest) -> tuple[Answerer, RequestKind]:
        row = KINDS[item.kind]
        answerer = self._answerers()[item.kind]
        declared = answerer is not None
        what = row.capability
        if isinstance(item, ElicitationRequest):
            declared = declared and item.mode in self.elicitation_modes
            what = f"{item.mode}-mode elicitation"
        if answerer is None or not declared:
            raise ClientError(INVALID_REQUEST, f"the server asked for {what} ({item.key!r}), which this client did "
                                               "not declare")
        return answerer, row

    def _store(self, item: InputRequest, row: RequestKind, value: Any, answers: dict[str, Any]) -> None:
        if isinstance(value, msgspec.Struct):
            value = msgspec.to_builtins(value)
        elif row.kind is Kind.SAMPLE and isinstance(value, str):
            value = _sampled(value, model="mrtr-client")
        elif row.kind is Kind.ROOTS and isinstance(value, (list, tuple)):
            value = _roots(*value)
        try:
            answers[item.key] = wire.to_builtins(decode_input_response(row, value))
        except msgspec.ValidationError as exc:
            raise TypeError(f"the answer to {item.key!r} is not a valid {row.method} answer: {exc}") from None

    async def answer_round(self, requests: Mapping[str, Any]) -> dict[str, Any]:
        """The answers to one round of questions (``inputRequests`` in wire shape, by key), from the answerers.

        What a call does between rounds, and what a task handle does for an ``input_required``
        task; an answerer the client lacks for a question's kind is a :class:`ClientError`.
        """
        items = [self._request_object(key, embedded) for key, embedded in requests.items()]
        chosen = [(item, *self._answerer(item)) for item in items]  # refuse an undeclared kind before asking
        answers: dict[str, Any] = {}

        async def finish(item: InputRequest, row: RequestKind, pending: Any) -> None:
            self._store(item, row, await pending, answers)

        try:
            async with trio.open_nursery() as nursery:
                # Answerers are called in the server's order: a sync one (a person at a
                # terminal) answers before the next is asked; async ones run concurrently.
                for item, answerer, row in chosen:
                    value = answerer(item)
                    if inspect.isawaitable(value):
                        nursery.start_soon(finish, item, row, value)
                    else:
                        self._store(item, row, value, answers)
        except BaseExceptionGroup as group:
            raise _unwrapped(group) from None
        return {key: answers[key] for key in requests}

    # -- the methods ----------------------------------------------------------------------------

    async def discover(self) -> dict[str, Any]:
        """``server/discover``: the server's versions, capabilities, info and instructions.

        From a legacy server, the same shape built from its ``initialize`` answer
        (``supportedVersions`` is the negotiated version).
        """
        if self._nursery is None:
            raise RuntimeError("use the Client in 'async with' before calling it")
        await self._settle_era()
        if self.server is not None:
            return {"resultType": wire.RESULT_TYPE_COMPLETE, "supportedVersions": [self.server.protocol_version],
                    "capabilities": dict(self.server.capabilities), "ttlMs": 0, "cacheScope": "private",
                    **({"instructions": self.server.instructions} if self.server.instructions else {}),
                    "_meta": {wire.META_SERVER_INFO: msgspec.to_builtins(self.server.server_info)}}
        result, self._discovered = self._discovered, None  # the probe's answer, used once
        if result is None:
            result = await self.request("server/discover")
        checked(result, wire.DiscoverResult, "DiscoverResult")
        return result

    async def _all_pages(self, method: str, member: str, shape: type[Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            result = await self.request(method, {"cursor": cursor} if cursor is not None else None)
            page = result.get(member)
            if not isinstance(page, list):
                raise ClientError(INVALID_REQUEST, f"Invalid {method} result: {member!r} must be a list")
            for item in page:
                _checked_item(item, shape, f"{method} result: {member}[{len(items)}]")
                items.append(item)
            cursor = result.get("nextCursor")
            if cursor is None:
                return items
            if not isinstance(cursor, str) or cursor in seen:
                raise ClientError(INVALID_REQUEST, f"Invalid {method} result: nextCursor {cursor!r} repeats or is "
                                                   "not a string")
            seen.add(cursor)

    def listed_tool(self, name: str) -> dict[str, Any] | None:
        """Tool ``name`` as the last ``tools/list`` of this client gave it (``None``: not listed, or never listed)."""
        return None if self._tools is None else self._tools.get(name)

    async def list_tools(self) -> list[ToolInfo]:
        """Every tool (all pages), as ``Tool`` dicts (:class:`~mrtr.client.apps.ToolInfo`: with its interface).

        Over HTTP a tool whose ``x-mcp-header`` annotations break the rules is left out
        (it could not be called correctly), with a warning in the ``mrtr.client`` log.
        """
        tools = await self._all_pages("tools/list", "tools", wire.Tool)
        usable: dict[str, ToolInfo] = {}
        for tool in tools:
            if self.target.mirrors_headers:
                try:
                    mirrored_parameters(tool)
                except InvalidHeaderSchema as exc:
                    from .targets import log

                    log.warning("leaving out tool %r: %s", tool["name"], exc)
                    continue
            usable[tool["name"]] = ToolInfo(tool)
        self._tools = dict(usable)
        return list(usable.values())

    async def list_prompts(self) -> list[dict[str, Any]]:
        """Every prompt (all pages), as ``Prompt`` dicts."""
        return await self._all_pages("prompts/list", "prompts", wire.Prompt)

    async def list_resources(self) -> list[dict[str, Any]]:
        """Every resource (all pages), as ``Resource`` dicts."""
        return await self._all_pages("resources/list", "resources", wire.Resource)

    async def list_resource_templates(self) -> list[dict[str, Any]]:
        """Every resource template (all pages), as ``ResourceTemplate`` dicts."""
        return await self._all_pages("resources/templates/list", "resourceTemplates", wire.ResourceTemplate)

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, *,
                        deadline: float | None | _Default = CLIENT_DEADLINE) -> ToolResult:
        """Call a tool, answering its questions, and return its final result (``deadline``: per round).

        When the server runs the call as a task, this waits for the task (polling,
        answering its questions, reporting its status to ``on_progress``) and returns
        the task's result; cancelling the call cancels the task (``tasks/cancel``).
        """
        handle = await self.start_task(name, arguments, deadline=deadline)
        if handle.id is None:
            return await handle.wait()
        try:
            return await handle.wait()
        except trio.Cancelled:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                try:
                    await handle.cancel()
                except ClientError as error:
                    log.warning("could not cancel task %s: %s", handle.id, error)
            raise

    async def start_task(self, name: str, arguments: Mapping[str, Any] | None = None, *,
                         deadline: float | None | _Default = CLIENT_DEADLINE) -> TaskHandle:
        """Call a tool up to the point where the server makes it a task; return the task's handle.

        The questions asked before the task exists are answered as for any call. A
        server that answers with the result instead (a tool that is no task tool, a
        server without the extension) gives a handle with ``id`` ``None`` holding it.
        """
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        result = await self._rounds("tools/call", params, deadline=deadline, allow_task=self.tasks)
        if result.get("resultType") == RESULT_TYPE_TASK:
            if "requestState" in result:
                raise ClientError(INVALID_REQUEST, "Invalid CreateTaskResult: a task carries no requestState")
            status = TaskStatus.of(result)
            return TaskHandle(self, status.task_id, first=result)
        return TaskHandle(self, None, result=read_tool_result(result))

    def task(self, task_id: str) -> TaskHandle:
        """The handle of a task started before (by this process or another), by its id."""
        if not isinstance(task_id, str) or not task_id:
            raise ValueError("a task id is a non-empty string")
        return TaskHandle(self, task_id)

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None, *,
                         deadline: float | None | _Default = CLIENT_DEADLINE) -> PromptResult:
        """Get a prompt, answering its questions, and return its messages (``deadline``: per round)."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        result = await self.request("prompts/get", params, deadline=deadline)
        checked(result, wire.GetPromptResult, "GetPromptResult")
        return PromptResult(list(result["messages"]), result.get("description"), result)

    async def read_resource(self, uri: str, *,
                            deadline: float | None | _Default = CLIENT_DEADLINE) -> ResourceResult:
        """Read a resource, answering its questions, and return its contents (``deadline``: per round)."""
        result = await self.request("resources/read", {"uri": uri}, deadline=deadline)
        checked(result, wire.ReadResourceResult, "ReadResourceResult")
        return ResourceResult(list(result["contents"]), result)

    async def subscribe(self, uri: str) -> None:
        """Hear of every change of resource ``uri``: ``on_resource_updated(uri)`` each time the server says so.

        In a 2025 session, ``resources/subscribe``. In the modern era, the client's one
        ``subscriptions/listen`` stream for resources is opened again naming ``uri`` too;
        the new stream is acknowledged before the one it replaces is closed, so no
        update is lost between them (one may come twice). Returns once the server agreed;
        raises :class:`ClientError` when it refuses (its error, or, in the modern era, an
        acknowledgement that leaves ``uri`` out). A stream the server ends or the
        connection loses is opened again, and each of its resources is then reported
        updated (what changed meanwhile was not heard); a 2025 session started again
        subscribes again, reporting the same.
        """
        if not isinstance(uri, str) or not uri:
            raise ValueError(f"subscribe needs a resource uri, got {uri!r}")
        if self._nursery is None:
            raise RuntimeError("use the Client in 'async with' before calling it")
        await self._settle_era()
        async with self._subscribing:
            if uri in self._subscribed:
                return
            if self._era == LEGACY:
                await self.call_once("resources/subscribe", {"uri": uri})
            else:
                await self._stream_resources([*self._subscribed, uri])
            self._subscribed[uri] = None

    async def unsubscribe(self, uri: str) -> None:
        """Stop hearing of resource ``uri`` (nothing for a uri not subscribed to).

        ``on_resource_updated`` is not called for it from now on, whatever the server
        still sends. In a 2025 session, ``resources/unsubscribe``; in the modern era the
        resources stream is opened again without it (closed when none is left).
        """
        if self._nursery is None:
            raise RuntimeError("use the Client in 'async with' before calling it")
        async with self._subscribing:
            if uri not in self._subscribed:
                return
            del self._subscribed[uri]
            if self._era == LEGACY:
                await self.call_once("resources/unsubscribe", {"uri": uri})
            else:
                await self._stream_resources(list(self._subscribed))

    @property
    def subscribed(self) -> list[str]:
        """The resources this client subscribed to, in order."""
        return list(self._subscribed)

    async def _stream_resources(self, uris: list[str]) -> None:
        """Replace the resources stream by one naming ``uris`` (none: close it), once the new one is agreed."""
        old = self._resource_stream
        if not uris:
            self._resource_stream = None
            if old is not None:
                old.scope.cancel()
            return
        assert self._nursery is not None
        stream = _ResourceStream(uris)
        self._resource_streams.add(stream)  # now, not when its task starts: the client may close before that
        self._nursery.start_soon(self._hold_resource_stream, stream)
        with trio.move_on_after(self.deadline if self.deadline is not None else math.inf):
            await stream.acknowledged.wait()
        if not stream.acknowledged.is_set():
            stream.scope.cancel()
            raise ClientError(INTERNAL_ERROR, f"{self._where()} did not acknowledge subscriptions/listen within the "
                                              f"{self.deadline:g} s deadline")
        if stream.failure is not None:
            raise stream.failure
        refused = [uri for uri in uris if uri not in (stream.agreed or ())]
        if refused:
            stream.scope.cancel()
            raise ClientError(INVALID_PARAMS, f"{self._where()} did not agree to send updates of "
                                              f"{', '.join(refused)}", {"uris": refused})
        self._resource_stream = stream
        if old is not None:
            old.scope.cancel()

    def _stop_resource_streams(self) -> None:
        """End every resource stream, and any started from now on: the client is closing."""
        self._streams_stopped = True
        for stream in self._resource_streams:
            stream.scope.cancel()

    async def _hold_resource_stream(self, stream: _ResourceStream) -> None:
        """Keep ``stream`` open until it is replaced or the client closes; opened again when it ends."""
        if self._streams_stopped:
            stream.scope.cancel()  # the client closed before this task started: it sends nothing
        try:
            await self._keep_resource_stream(stream)
        finally:
            self._resource_streams.discard(stream)
            if not stream.acknowledged.is_set():  # ended unheard (the client closed): its subscriber waits no more
                stream.failure = stream.failure or ClientError(INTERNAL_ERROR, f"{self._where()}: the client closed "
                                                                               "before subscriptions/listen was agreed")
                stream.acknowledged.set()

    async def _keep_resource_stream(self, stream: _ResourceStream) -> None:
        pause = 1.0

        def noted(note: dict[str, Any]) -> None:
            if stream.scope.cancel_called:
                # Replaced or closed: a server that has not yet seen it go (a cancellation over
                # stdio is a message of its own) may still send on it; the stream that replaced
                # it carries those updates.
                return
            if note.get("method") != "notifications/subscriptions/acknowledged":
                self._session_notification(note)
                return
            wanted = (note.get("params") or {}).get("notifications")
            agreed = wanted.get("resourceSubscriptions") if isinstance(wanted, dict) else None
            stream.agreed = [uri for uri in agreed if isinstance(uri, str)] if isinstance(agreed, list) else []
            if stream.acknowledged.is_set():
                # Opened again after it ended: what changed meanwhile was not heard, so each may have.
                for uri in stream.agreed:
                    self._session_notification({"method": "notifications/resources/updated", "params": {"uri": uri}})
            stream.acknowledged.set()

        with stream.scope:
            while not stream.scope.cancel_called:  # a target refuses a send before any checkpoint could cancel it
                request_id = next(self._ids)
                message = request(request_id, "subscriptions/listen",
                                  {"notifications": {"resourceSubscriptions": stream.uris},
                                   "_meta": self._meta(request_id)})
                try:
                    await self.target.send(message, noted, None, patient=True)  # type: ignore[call-arg]
                    pause = 1.0
                except ClientError as error:
                    if stream.scope.cancel_called:
                        return  # replaced or closed: the connection it used went with it, nothing failed
                    if not stream.acknowledged.is_set():
                        stream.failure = error
                        stream.acknowledged.set()
                        return
                    log.warning("the resource updates stream of %s failed: %s", self._where(), error)
                    pause = min(pause * 2, 30.0)
                if not stream.acknowledged.is_set():
                    stream.failure = ClientError(INTERNAL_ERROR, f"{self._where()} ended subscriptions/listen "
                                                                 "without acknowledging it")
                    stream.acknowledged.set()
                    return
                await trio.sleep(pause)

    async def _subscribe_again(self) -> None:
        """A new 2025 session: subscribe again to what the client had, and report each as updated."""
        for uri in list(self._subscribed):
            try:
                await self.call_once("resources/subscribe", {"uri": uri})
            except ClientError as error:
                log.warning("could not subscribe to %s again in the new session: %s", uri, error)
                continue
            self._session_notification({"method": "notifications/resources/updated", "params": {"uri": uri}})

    async def read_ui(self, tool: str | Mapping[str, Any], *,
                      deadline: float | None | _Default = CLIENT_DEADLINE) -> UiResource:
        """The interface (MCP Apps) of ``tool``, a tool's name or a tool as :meth:`list_tools` gave it.

        Reads its ``ui://`` resource and returns the HTML with its ``_meta.ui``; a tool
        without an interface, or a resource that is not ``text/html;profile=mcp-app``, is
        a :class:`ClientError`. See ``docs/apps.md``.
        """
        return await read_ui(self, tool, deadline=deadline)

    async def complete(self, argument: str, value: str, *, prompt: str | None = None,
                       resource_template: str | None = None, context: Mapping[str, str] | None = None,
                       deadline: float | None | _Default = CLIENT_DEADLINE) -> dict[str, Any]:
        """``completion/complete`` for one argument of a prompt or resource template.

        Returns the ``completion`` object (``values``, and ``total``/``hasMore`` when given).
        """
        if (prompt is None) == (resource_template is None):
            raise ValueError("complete() needs exactly one of prompt= and resource_template=")
        ref = {"type": "ref/prompt", "name": prompt} if prompt is not None else \
            {"type": "ref/resource", "uri": resource_template}
        params: dict[str, Any] = {"ref": ref, "argument": {"name": argument, "value": value}}
        if context is not None:
            params["context"] = {"arguments": dict(context)}
        result = await self.request("completion/complete", params, deadline=deadline)
        checked(result, wire.CompleteResult, "CompleteResult")
        completion: dict[str, Any] = result["completion"]
        return completion


