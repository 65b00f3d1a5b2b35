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
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

from ..core.errors import HandlerError, ProtocolError, PublicError

__all__ = ["CallNext", "Incoming", "Middleware", "InnerFailure", "middleware_failure", "run", "checked_middleware"]

CallNext = Callable[["Incoming"], Awaitable[Any]]
"""What a middleware calls to go on: the rest of the pipeline, then the method."""

Middleware = Callable[["Incoming", CallNext], Awaitable[Any]]
"""``async def mw(request, call_next)``: one stage of the pipeline."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_TARGET_MEMBER = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                  "resources/subscribe": "uri", "resources/unsubscribe": "uri", "tasks/get": "taskId",
                  "tasks/update": "taskId", "tasks/cancel": "taskId"}


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
    transport's name for the peer (a remote address) when it gives one; ``request_id``;
    ``is_notification``.
    """

    __slots__ = ("method", "params", "name", "arguments", "principal", "auth", "era", "client_capabilities",
                 "client_info", "session_id", "client", "request_id", "is_notification", "is_task", "_round",
                 "_facts")

    def __init__(self, method: str, params: Mapping[str, Any], *, principal: str | None, auth: Any,
                 era: Literal["modern", "legacy"], client_capabilities: Mapping[str, Any],
                 client_info: Mapping[str, Any] | None = None, session_id: str | None = None,
                 client: str | None = None, request_id: Any = None, is_notification: bool = False,
                 is_task: bool = False, facts: Any = None) -> None:
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
        self._round: int | None = None
        # What the era tells lazily (the round, inside a sealed token): asked only when a middleware reads it.
        self._facts = facts

    @property
    def round(self) -> int:
        """The 1-based round of a modern conversation this request is (1 in a legacy session)."""
        if self._round is None:
            self._round = 1 if self._facts is None else self._facts.round_of(self)
        return self._round

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
                         is_notification=self.is_notification, is_task=self.is_task, facts=self._facts)
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
