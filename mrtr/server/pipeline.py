"""Middleware: one pipeline every request of either era goes through, once, before it is dispatched.

A middleware is ``async def mw(request, call_next)`` (or an object whose ``__call__`` is
that), registered with ``@server.middleware``; the first registered is the outermost.
``request`` is an :class:`Incoming`: a read-only view of what arrived, the same in both
eras. ``await call_next(request)`` runs the rest of the pipeline and the method, and
returns its result (the JSON-RPC ``result`` object; ``None`` for a notification). A
middleware may return a result of its own without calling it, pass a changed request on
(:meth:`Incoming.replace`), or raise:

- a :class:`~mrtr.core.errors.ProtocolError` (``RateLimited``, ``InvalidParams``...) is the
  request's JSON-RPC error, with its status hint;
- :class:`~mrtr.core.errors.PublicError` refuses as a handler raising it does: a tool gets an
  error result carrying the message, anything else ``-32603`` with it;
- anything else is a handler failure: logged with a reference and masked as configured.

A middleware runs once per request, never inside the replay of a handler: in the modern
era each round of a conversation is a request of its own, and :attr:`Incoming.round` says
which it is. Nothing here does I/O; the eras (:mod:`mrtr.server.modern`,
:mod:`mrtr.server.legacy`) build the view and call :func:`run`.

Beyond the result, a middleware may add fields to the request's access line and trace
span (:meth:`Incoming.note`), read what the request names as registered
(:attr:`Incoming.component`), refuse in words meant for the caller without logging a failure
(:func:`refused`), and keep state in the server's store (a middleware with ``use_store``:
see :func:`uses_store`).
"""

from __future__ import annotations

import inspect
import math
import re
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, Protocol

from ..core.errors import HandlerError, InternalError, ProtocolError, PublicError

__all__ = ["CallNext", "Incoming", "Middleware", "InnerFailure", "Shared", "Component", "Facts", "MAX_NOTES",
           "checked_note_name", "middleware_failure", "refused", "run", "checked_middleware", "uses_store"]

CallNext = Callable[["Incoming"], Awaitable[Any]]
"""What a middleware calls to go on: the rest of the pipeline, then the method."""

Middleware = Callable[["Incoming", CallNext], Awaitable[Any]]
"""``async def mw(request, call_next)``: one stage of the pipeline."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_TARGET_MEMBER = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                  "resources/subscribe": "uri", "resources/unsubscribe": "uri", "tasks/get": "taskId",
                  "tasks/update": "taskId", "tasks/cancel": "taskId"}


MAX_NOTES = 16
"""The most fields the middleware of one request may add to its access line (:meth:`Incoming.note`)."""

_NOTE_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}\Z")
# The access record's own fields (and the JSON format's), which a note may not replace.
_RESERVED_NOTES = frozenset({"transport", "method", "target", "result", "duration_ms", "http_method", "path", "code",
                             "status", "round", "time", "level", "logger", "message", "traceback"})
_NOTE_TEXT_LIMIT = 200  # a noted string is often client input: keep one from flooding the log
_KIND_OF_LISTING = {"tools/list": ("tool", "name"), "prompts/list": ("prompt", "name"),
                    "resources/list": ("resource", "uri"), "resources/templates/list": ("template", "uriTemplate")}


class Component:
    """What a request names, as the server registered it (or as a listing lists it): read-only.

    ``kind`` is ``"tool"``, ``"prompt"``, ``"resource"`` (a static resource) or
    ``"template"`` (a resource template); ``name`` the tool's or prompt's name, the
    resource's uri or the template's ``uriTemplate``; ``definition`` the definition a
    listing shows (``annotations``, ``_meta``, ``title``...), read-only. A rule written on
    ``kind`` and ``name`` reads the same on a call and on the listing of what it calls.
    """

    __slots__ = ("kind", "name", "definition")

    def __init__(self, kind: Literal["tool", "prompt", "resource", "template"], name: str,
                 definition: Mapping[str, Any]) -> None:
        self.kind = kind
        self.name = name
        self.definition: Mapping[str, Any] = MappingProxyType(definition)  # type: ignore[arg-type]

    @classmethod
    def listed(cls, method: str, item: Mapping[str, Any]) -> Component | None:
        """The component an item of a listing (``tools/list``... ``resources/templates/list``) stands for."""
        found = _KIND_OF_LISTING.get(method)
        if found is None:
            return None
        kind, member = found
        name = item.get(member)
        return cls(kind, name, item) if isinstance(name, str) else None  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"<Component {self.kind} {self.name!r}>"


class Shared:
    """What every view of one request shares with its era: the fields noted for its access line, and
    whether the client answered questions inside it (a legacy call that asked live)."""

    __slots__ = ("notes", "asked")

    def __init__(self) -> None:
        self.notes: dict[str, Any] = {}
        self.asked = False


class Facts(Protocol):
    """What an era tells a view lazily, only when a middleware reads it."""

    def round_of(self, view: Incoming) -> int:
        """The 1-based round of the conversation ``view`` is."""
        ...

    def component_of(self, view: Incoming) -> Component | None:
        """What ``view`` names as registered, or ``None``."""
        ...


_UNSET: Any = object()


class Incoming:
    """A request (or a client notification) as a middleware sees it: read-only, the same in both eras.

    ``method`` and ``params`` (the raw JSON-RPC params, read-only); ``name``, what it is
    about (the tool or prompt name, the resource uri, the task id; ``None`` for the rest);
    ``arguments``, the tool's or prompt's arguments as sent (``{}`` for other methods);
    ``principal`` and ``auth`` (the verified access token on a protected server), as a
    handler's ``ctx`` has them; ``era``, ``"modern"`` or ``"legacy"``; ``round``, the
    1-based round of a modern conversation (1 in a legacy session, and for a request
    whose ``requestState`` does not open); ``is_task``, whether the request creates or
    reaches a task; ``client_capabilities`` and ``client_info``, from the request's
    ``_meta`` (modern) or the session (legacy); ``session_id`` (legacy); ``client``, the
    transport's name for the peer (its remote address on HTTP, ``"stdio:<pid>"`` on stdio,
    the serving process's id) when it gives one; ``version``, the protocol version the
    request speaks (the session's negotiated one in a legacy session); ``request_id``;
    ``is_notification``.
    :attr:`component` is what the request names as registered, :attr:`carries_answers` whether
    the client's answers are part of it, and :meth:`note` adds a field to its access line.
    """

    __slots__ = ("method", "params", "name", "arguments", "principal", "auth", "era", "client_capabilities",
                 "client_info", "session_id", "client", "version", "request_id", "is_notification", "is_task",
                 "_round", "_facts", "_shared", "_component")

    def __init__(self, method: str, params: Mapping[str, Any], *, principal: str | None, auth: Any,
                 era: Literal["modern", "legacy"], client_capabilities: Mapping[str, Any],
                 client_info: Mapping[str, Any] | None = None, session_id: str | None = None,
                 client: str | None = None, request_id: Any = None, is_notification: bool = False,
                 is_task: bool = False, facts: Facts | None = None, version: str | None = None,
                 shared: Shared | None = None) -> None:
        self.method = method
        self.params = MappingProxyType(dict(params))
        member = _TARGET_MEMBER.get(method)
        target = params.get(member) if member is not None else None
        self.name: str | None = target if isinstance(target, str) else None
        arguments = params.get("arguments") if method in ("tools/call", "prompts/get") else None
        self.arguments: Mapping[str, Any] = MappingProxyType(dict(arguments)) if isinstance(arguments, dict) \
            else _EMPTY
        self.principal = principal
        self.auth = auth
        self.era = era
        self.client_capabilities = MappingProxyType(dict(client_capabilities))
        self.client_info = client_info
        self.session_id = session_id
        self.client = client
        self.request_id = request_id
        self.is_notification = is_notification
        self.is_task = is_task
        self.version = version
        self._round: int | None = None
        # What the era tells lazily (the round, inside a sealed token): asked only when a middleware reads it.
        self._facts = facts
        self._shared = shared if shared is not None else Shared()
        self._component: Any = _UNSET

    @property
    def round(self) -> int:
        """The 1-based round of a modern conversation this request is (1 in a legacy session)."""
        if self._round is None:
            self._round = 1 if self._facts is None else self._facts.round_of(self)
        return self._round

    @property
    def component(self) -> Component | None:
        """What the request names, as registered: the tool of a ``tools/call``, the prompt of a ``prompts/get``, the
        resource or template serving a ``resources/read`` (or ``resources/subscribe``), the prompt or template a
        ``completion/complete`` refers to; ``None`` for any other request and for a name nothing is registered under.
        """
        if self._component is _UNSET:
            self._component = None if self._facts is None else self._facts.component_of(self)
        return self._component  # type: ignore[no-any-return]

    @property
    def carries_answers(self) -> bool:
        """Whether the client's answers are part of this request.

        A modern round carrying ``requestState`` or ``inputResponses`` (known at once;
        ``tasks/update`` too); a legacy call whose handler asked the client live, from its
        first question on (so read it again after ``call_next`` returned). What such a
        request answers depends on what the user said: never reuse it for another.
        """
        params = self.params
        return "requestState" in params or "inputResponses" in params or self._shared.asked

    def note(self, name: str, value: str | int | float | bool) -> None:
        """Add ``name=value`` to this request's access line (and ``mrtr.<name>`` to its trace span).

        ``name`` is a lower-case identifier (``[a-z][a-z0-9_]*``, at most 40 characters)
        that none of the line's own fields use; ``value`` a string (cut at 200
        characters), a boolean or a finite number. Noting a name again replaces its value;
        a request holds at most :data:`MAX_NOTES`. Every view of the request (those
        :meth:`replace` made) notes on the same line; a request with no access line (one
        served in process) keeps them nowhere. ``ValueError`` for a name or value it
        cannot take.
        """
        checked_note_name(name)
        if isinstance(value, str):
            value = value[:_NOTE_TEXT_LIMIT]
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"note {name!r}: a number must be finite, got {value!r}")
        elif not isinstance(value, int):  # bool is an int
            raise ValueError(f"note {name!r}: a value is a str, a bool or a number, got {type(value).__name__}")
        notes = self._shared.notes
        if name not in notes and len(notes) >= MAX_NOTES:
            raise ValueError(f"a request takes at most {MAX_NOTES} notes; {name!r} is one more")
        notes[name] = value

    def replace(self, *, arguments: Mapping[str, Any] | None = None,
                params: Mapping[str, Any] | None = None) -> Incoming:
        """This request with other ``arguments`` (a tool's or prompt's) or other ``params``, to pass on.

        What the method then reads is the changed request; the view a middleware was given
        stays as it was.
        """
        changed = dict(self.params if params is None else params)
        if arguments is not None:
            if self.method not in ("tools/call", "prompts/get"):
                raise ValueError(f"{self.method} has no arguments to replace")
            changed["arguments"] = dict(arguments)
        other = Incoming(self.method, changed, principal=self.principal, auth=self.auth, era=self.era,
                         client_capabilities=self.client_capabilities, client_info=self.client_info,
                         session_id=self.session_id, client=self.client, request_id=self.request_id,
                         is_notification=self.is_notification, is_task=self.is_task, facts=self._facts,
                         version=self.version, shared=self._shared)
        other._round = self._round
        return other

    def __repr__(self) -> str:
        about = f" {self.name!r}" if self.name is not None else ""
        return f"<Incoming {self.era} {self.method}{about} round={self._round or '?'}>"


class InnerFailure(Exception):
    """What the method behind the pipeline raised that is not a protocol error, carried through the middleware.

    So a failure of the method is told from one of a middleware's own: the eras re-raise
    ``cause`` where they would have met it without middleware.
    """

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def checked_middleware(middleware: Any) -> Middleware:
    """``middleware`` if it can be a stage of the pipeline; ``TypeError`` naming the fix otherwise."""
    target = middleware if inspect.isfunction(middleware) or inspect.ismethod(middleware) \
        else getattr(middleware, "__call__", None)
    if target is None or not callable(middleware):
        raise TypeError(f"a middleware is `async def mw(request, call_next)` or an object whose __call__ is; "
                        f"got {middleware!r}")
    if not inspect.iscoroutinefunction(target):
        raise TypeError(f"middleware {_name(middleware)} must be async: `async def mw(request, call_next)`")
    try:
        inspect.signature(target).bind(None, None)
    except TypeError:
        raise TypeError(f"middleware {_name(middleware)} must take two arguments, (request, call_next)") from None
    return middleware  # type: ignore[no-any-return]


async def run(middleware: Sequence[Middleware], request: Incoming, method: CallNext) -> Any:
    """Run ``request`` through ``middleware`` (the first outermost) and then ``method``; what comes back.

    ``method`` serves the request the last middleware passed on. Its own failures that are
    not protocol errors come back out as :class:`InnerFailure`; a middleware's own failure
    propagates as it was raised (see :func:`middleware_failure`).
    """
    async def inner(passed: Incoming) -> Any:
        try:
            return await method(passed)
        except (ProtocolError, InnerFailure):
            raise
        except Exception as exc:
            raise InnerFailure(exc) from exc

    call: CallNext = inner
    for stage in reversed(middleware):
        call = _stage(stage, call)
    return await call(request)


def _stage(stage: Middleware, following: CallNext) -> CallNext:
    async def call(passed: Incoming) -> Any:
        if not isinstance(passed, Incoming):
            raise TypeError(f"middleware {_name(stage)} passed {type(passed).__name__} to call_next; pass the "
                            "request it was given, or request.replace(...)")
        return await stage(passed, following)
    return call


def checked_note_name(name: str) -> str:
    """``name`` if :meth:`Incoming.note` takes it: ``ValueError`` saying why otherwise (for a middleware's settings)."""
    if not isinstance(name, str) or not _NOTE_NAME.match(name) or name in _RESERVED_NOTES:
        raise ValueError(f"a note's name is a lower-case identifier of at most 40 characters that the access line "
                         f"does not use itself ({', '.join(sorted(_RESERVED_NOTES))}); got {name!r}")
    return name


def refused(request: Incoming, message: str) -> dict[str, Any]:
    """Refuse ``request`` in words meant for the caller, as a handler raising ``PublicError(message)`` would.

    A ``tools/call`` gets the error result carrying ``message`` (in its era's shape),
    which a middleware returns; any other request raises the ``-32603`` carrying it.
    Unlike a :class:`~mrtr.core.errors.PublicError`, which the server logs as a failed
    handler with its traceback, a refusal is no failure: nothing is logged.
    """
    if not isinstance(message, str) or not message:
        raise TypeError(f"a refusal needs the message for the caller, a non-empty str, got {message!r}")
    if request.method == "tools/call":
        result: dict[str, Any] = {"content": [{"type": "text", "text": message}], "isError": True}
        return {"resultType": "complete", **result} if request.era == "modern" else result
    raise InternalError(message)


def uses_store(middleware: Any) -> bool:
    """Whether ``middleware`` keeps state in the server's store (a ``RateLimit``): it has ``use_store(store)``.

    While the server is :meth:`~mrtr.server.Server.running`, it opens its store (as it does
    for handlers declared ``once=True``) and hands it over with ``use_store(store)``, then
    ``use_store(None)`` when it stops. The store is a
    :class:`~mrtr.carriers.tasks.store.TaskStore`: the same memory, SQLite or Redis every
    node of the server shares.
    """
    return callable(getattr(middleware, "use_store", None))


def middleware_failure(error: Exception) -> HandlerError:
    """A middleware's own failure as the handler failure it is told as (public for a ``PublicError``)."""
    if isinstance(error, PublicError):
        failure = HandlerError(error.message, location=_location(error), public=True)
    else:
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        failure = HandlerError(f"middleware failed: {text}", location=_location(error))
    failure.__cause__ = error
    return failure


def _location(error: BaseException) -> str | None:
    frames = traceback.extract_tb(error.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def _name(middleware: Any) -> str:
    return getattr(middleware, "__qualname__", None) or type(middleware).__qualname__
