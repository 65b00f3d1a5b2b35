"""``Authorize``: one rule deciding what a caller may use, applied to listings and calls alike.

``Authorize(predicate)`` asks ``predicate(request, component)`` (sync or async) whether the
caller of ``request`` may use ``component`` (a :class:`~mrtr.server.pipeline.Component`: its
``kind``, ``name`` and ``definition``). The same rule is applied

- **to listings**: each item of a ``tools/list``, ``prompts/list``, ``resources/list``
  and ``resources/templates/list`` page is kept only if the rule allows it (``request``
  is then the list request), so a tool a caller may not call is not listed to it. A
  page may hold fewer items than the page size (empty, even), its ``nextCursor`` kept;
- **to what a request names**: ``tools/call``, ``prompts/get``, ``resources/read``,
  ``resources/subscribe`` and the prompt or template a ``completion/complete`` refers to
  (``request`` is then that request, with its arguments).

A refused request is refused as a handler raising ``PublicError`` would be, without a
failure in the log: a tool gets an error result, the rest ``-32603``, in words that do
not tell what exists: ``Tool "x" is not available``, the same for a name nothing is
registered under. A caller cannot tell a tool it may not use from one that does not
exist (with ``Authorize`` the unknown name is answered so too, not with ``-32602``).
Requests of the wrong shape (no ``name``) go on to the method, which refuses them.

Everything else (``server/discover``, task methods, notifications) passes: a task
belongs to the principal whose call created it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from .pipeline import CallNext, Incoming, Component, refused

__all__ = ["Authorize", "Predicate"]

Predicate = Callable[[Incoming, Component], "bool | Awaitable[bool]"]
"""``predicate(request, component)``: whether the caller of ``request`` may use ``component``."""

_LISTINGS = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources",
             "resources/templates/list": "resourceTemplates"}
_NAMED = frozenset({"tools/call", "prompts/get", "resources/read", "resources/subscribe", "completion/complete"})
_WORD_OF_METHOD = {"tools/call": "Tool", "prompts/get": "Prompt", "resources/read": "Resource",
                   "resources/subscribe": "Resource"}


class Authorize:
    """A middleware applying ``predicate(request, component)`` to listings (filtered) and calls (refused).

    See the module for what it covers and how it refuses::

        def may_use(request, component):
            tags = (component.definition.get("_meta") or {}).get("tags", [])
            return "admin" not in tags or request.principal in ADMINS

        server.middleware(Authorize(may_use))
    """

    def __init__(self, predicate: Predicate) -> None:
        if not callable(predicate):
            raise TypeError(f"Authorize needs a predicate(request, component), got {predicate!r}")
        self.predicate = predicate

    async def allows(self, request: Incoming, component: Component) -> bool:
        """Whether the rule lets the caller of ``request`` use ``component``; ``TypeError`` for an answer not a bool."""
        answer = self.predicate(request, component)
        if inspect.isawaitable(answer):
            answer = await answer
        if not isinstance(answer, bool):
            raise TypeError(f"an Authorize predicate returns True or False, got {type(answer).__name__}")
        return answer

    async def __call__(self, request: Incoming, call_next: CallNext) -> Any:
        """Filter a listing's page, refuse a request naming what the caller may not use, pass anything else."""
        method = request.method
        member = _LISTINGS.get(method)
        if member is not None:
            page = await call_next(request)
            items = page.get(member) if isinstance(page, dict) else None
            if not isinstance(items, list):
                return page
            kept = []
            for item in items:
                component = Component.listed(method, item) if isinstance(item, dict) else None
                if component is not None and await self.allows(request, component):
                    kept.append(item)
            return {**page, member: kept}
        if method not in _NAMED or request.is_notification:
            return await call_next(request)
        named = _named(request)
        if named is None:
            return await call_next(request)  # the wrong shape: the method says what is wrong
        component = request.component
        if component is not None and await self.allows(request, component):
            return await call_next(request)
        # In the caller's own words, the same whether it exists: a template's pattern is never shown.
        word, name = named
        shown = f'"{name}"' if word in ("Tool", "Prompt") else name
        return refused(request, f"{word} {shown} is not available")

    def __repr__(self) -> str:
        return f"Authorize({getattr(self.predicate, '__qualname__', self.predicate)!r})"


def _named(request: Incoming) -> tuple[str, str] | None:
    """What a request names, as the caller sent it and a refusal words it; ``None`` for a request naming nothing."""
    if request.method == "completion/complete":
        ref = request.params.get("ref")
        if not isinstance(ref, dict):
            return None
        if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            return "Prompt", ref["name"]
        if isinstance(ref.get("uri"), str):
            return "Resource template", ref["uri"]
        return None
    if request.name is None:
        return None
    return _WORD_OF_METHOD[request.method], request.name
