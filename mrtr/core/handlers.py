"""What the runtime knows of a handler function, derived once per function.

A :class:`HandlerSpec` says what shape a handler is (a sync or async generator, a
coroutine function, a plain function: :data:`SYNC_GEN`, :data:`ASYNC_GEN`,
:data:`CORO`, :data:`PLAIN`), which parameter receives the :class:`~mrtr.Context`,
and how to call it; :func:`handler_spec` derives it once per function object.
"""

from __future__ import annotations

import inspect
import typing
import weakref
from collections.abc import Mapping
from typing import Any

from .context import Context

__all__ = ["SYNC_GEN", "ASYNC_GEN", "CORO", "PLAIN", "CONTEXT_NAMES", "HandlerSpec", "handler_spec"]


SYNC_GEN, ASYNC_GEN, CORO, PLAIN = "sync generator", "async generator", "coroutine", "function"


class HandlerSpec:
    """What the runtime needs to know about a handler function, derived once."""

    __slots__ = ("fn", "shape", "wants_ctx", "ctx_name", "ctx_first", "name", "__weakref__")

    def __init__(self, fn: Any, facts: tuple[str, str | None, bool, str] | None = None) -> None:
        if facts is None:
            if not callable(fn):
                raise TypeError(f"a handler must be callable, got {type(fn).__name__}")
            facts = _facts_of(fn)
        self.fn = fn
        self.shape, self.ctx_name, self.ctx_first, self.name = facts
        self.wants_ctx = self.ctx_name is not None

    @property
    def facts(self) -> tuple[str, str | None, bool, str]:
        """What was derived from the function (its shape, context parameter and name), without the function."""
        return self.shape, self.ctx_name, self.ctx_first, self.name

    @property
    def is_async(self) -> bool:
        """True for async generators and coroutine functions."""
        return self.shape in (ASYNC_GEN, CORO)

    @property
    def can_pause(self) -> bool:
        """True for generators: the only handlers that can yield a request, so a round of them can pause."""
        return self.shape == SYNC_GEN or self.shape == ASYNC_GEN

    def invoke(self, ctx: Context, arguments: Mapping[str, Any]) -> Any:
        """Call the handler function (which, for a generator, runs none of its code yet)."""
        if self.ctx_name is None:
            return self.fn(**arguments)
        if self.ctx_first:
            return self.fn(ctx, **arguments)
        return self.fn(**arguments, **{self.ctx_name: ctx})


def _facts_of(fn: Any) -> tuple[str, str | None, bool, str]:
    if inspect.isasyncgenfunction(fn):
        shape = ASYNC_GEN
    elif inspect.isgeneratorfunction(fn):
        shape = SYNC_GEN
    elif inspect.iscoroutinefunction(fn):
        shape = CORO
    else:
        shape = PLAIN
    ctx_name, ctx_first = _context_parameter(fn)
    return shape, ctx_name, ctx_first, getattr(fn, "__qualname__", repr(fn))


CONTEXT_NAMES = ("ctx", "context")
"""Names that receive the context when the first parameter carries no annotation."""


def _is_context_annotation(annotation: Any, resolved: Any) -> bool:
    if isinstance(resolved, type) and issubclass(resolved, Context):
        return True
    if resolved is not inspect.Parameter.empty:
        return False
    # An annotation the hints could not resolve: judge its spelling.
    if isinstance(annotation, str):
        return annotation.replace(" ", "").removeprefix("mrtr.") in ("Context", "context.Context")
    return isinstance(annotation, type) and issubclass(annotation, Context)


def _context_parameter(fn: Any) -> tuple[str | None, bool]:
    """The parameter that receives the context, and whether it is the first one.

    A parameter annotated :class:`~mrtr.Context` (any name, any position) receives it;
    otherwise an unannotated first parameter named ``ctx`` or ``context`` does.
    """
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None, False
    if not parameters:
        return None, False
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    for index, parameter in enumerate(parameters):
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.annotation is inspect.Parameter.empty:
            continue
        if _is_context_annotation(parameter.annotation, hints.get(parameter.name, inspect.Parameter.empty)):
            if index and parameter.kind is parameter.POSITIONAL_ONLY:
                return None, False
            return parameter.name, index == 0
    first = parameters[0]
    if (first.kind in (first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD) and first.name in CONTEXT_NAMES
            and (first.annotation is inspect.Parameter.empty or hints.get(first.name) is Any)):
        return first.name, True
    return None, False


# What inspecting a handler found, per function object: a handler redefined (under the
# same name or not), a closure or a lambda is a new function with its own entry, and an
# entry goes with its function. The entries hold no reference to the function (a spec
# does, which is why specs are not what is kept), so nothing here keeps a handler alive.
_facts: weakref.WeakKeyDictionary[Any, tuple[str, str | None, bool, str]] = weakref.WeakKeyDictionary()


# A round asks for its handler's spec several times (the carrier, the driver): the last
# one is kept, strongly, so those are a comparison. One handler at most is held here.
_last_spec: HandlerSpec | None = None


def handler_spec(fn: Any) -> HandlerSpec:
    """The :class:`HandlerSpec` of ``fn``, derived once per function."""
    global _last_spec
    last = _last_spec
    if last is not None and last.fn is fn:
        return last
    if isinstance(fn, HandlerSpec):
        return fn
    try:
        facts = _facts.get(fn)
    except TypeError:  # not weak-referenceable
        return HandlerSpec(fn)
    if facts is None:
        spec = HandlerSpec(fn)
        _facts[fn] = spec.facts
    else:
        spec = HandlerSpec(fn, facts)
    _last_spec = spec
    return spec
