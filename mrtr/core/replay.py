"""The replay core: run a handler from the top against a ledger of recorded answers.

This module is sans-IO. Given a handler, its arguments, a :class:`~mrtr.Context` and
a :class:`~mrtr.core.ledger.Ledger`, :func:`replay` (sync handlers) or :func:`replay_async`
(any handler) returns :class:`Completed` or :class:`InputRequired` (or, asked to stop
before a Step, :class:`Detached`), or raises a typed :class:`~mrtr.core.errors.ProtocolError`.
Every carrier (:mod:`mrtr.carriers`: the token carrier and the tasks carrier) calls it, so
ordinals, fingerprints and error mapping exist exactly once.

Pausing is the runtime not resuming the generator: nothing is thrown through handler
code, so a ``try: ... except Exception:`` around a ``yield`` cannot swallow it. The
runtime closes a paused generator at once so ``finally`` blocks run once per round.
"""

from __future__ import annotations

import inspect
import json
import linecache
import logging
import os
import re
import sys
import types
import typing
import weakref
from collections.abc import Callable, Mapping
from types import GeneratorType
from typing import Any

import msgspec

from .context import Context
from . import models
from .effects import Elicit, ElicitResult, ElicitURL, NotYielded, NotYieldedUse, Patched, Request, Step
from .errors import (AnswerRefused, HandlerError, InvalidParams, MissingRequiredClientCapability, ProtocolError,
                     PublicError, ReplayMismatch)
from .kinds import KINDS, Kind, decode_input_response
from .ledger import _KEY_PREFIX, ACTIONS, Ledger, Slot, decode_answer, default_key
from .schema import Form, FormTypeError, RequestedSchema, schema_changes

__all__ = ["Completed", "InputRequired", "Detached", "HandlerSpec", "replay", "replay_async"]


class Completed:
    """The handler finished; ``result`` is what it returned (or, for an async generator, yielded last)."""

    __slots__ = ("result",)

    def __init__(self, result: Any) -> None:
        self.result = result

    def __repr__(self) -> str:
        return f"Completed({self.result!r})"


class InputRequired:
    """The handler needs answers: ``requests`` maps wire keys to the pending requests.

    ``ledger`` is the ledger to carry into the next round: every slot reached so far,
    with the new pending ones appended and this round's answers and Step results kept.
    """

    __slots__ = ("requests", "ledger")

    def __init__(self, requests: dict[str, Request], ledger: Ledger) -> None:
        self.requests = requests
        self.ledger = ledger

    def to_wire(self) -> dict[str, dict[str, Any]]:
        """The ``inputRequests`` object for these requests."""
        return {key: request.to_wire() for key, request in self.requests.items()}

    def __repr__(self) -> str:
        return f"InputRequired({self.requests!r})"


_SYNC_GEN, _ASYNC_GEN, _CORO, _PLAIN = "sync generator", "async generator", "coroutine", "function"


class Detached:
    """The handler reached a Step that has not run yet and the caller asked to stop there.

    ``ledger`` holds every answer and Step result so far, plus the Step's position,
    pending: a carrier that runs the rest elsewhere (a task) replays from it.
    """

    __slots__ = ("ledger",)

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def __repr__(self) -> str:
        return f"Detached({self.ledger!r})"


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
        return self.shape in (_ASYNC_GEN, _CORO)

    @property
    def can_pause(self) -> bool:
        """True for generators: the only handlers that can yield a request, so a round of them can pause."""
        return self.shape == _SYNC_GEN or self.shape == _ASYNC_GEN

    def invoke(self, ctx: Context, arguments: Mapping[str, Any]) -> Any:
        """Call the handler function (which, for a generator, runs none of its code yet)."""
        if self.ctx_name is None:
            return self.fn(**arguments)
        if self.ctx_first:
            return self.fn(ctx, **arguments)
        return self.fn(**arguments, **{self.ctx_name: ctx})


def _facts_of(fn: Any) -> tuple[str, str | None, bool, str]:
    if inspect.isasyncgenfunction(fn):
        shape = _ASYNC_GEN
    elif inspect.isgeneratorfunction(fn):
        shape = _SYNC_GEN
    elif inspect.iscoroutinefunction(fn):
        shape = _CORO
    else:
        shape = _PLAIN
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


# -- locating the handler's yield, for diagnostics ---------------------------------------


def _innermost_frame(gen: Any) -> Any:
    """The innermost frame of ``gen`` suspended at a yield (follows ``yield from``), or ``None``."""
    frame = None
    while gen is not None:
        current = getattr(gen, "gi_frame", None) or getattr(gen, "ag_frame", None)
        if current is None:
            break
        frame = current
        gen = getattr(gen, "gi_yieldfrom", None)
    return frame


def _yield_position(gen: Any) -> tuple[str, int] | None:
    """File and line of the innermost frame suspended at a yield (follows ``yield from``)."""
    frame = _innermost_frame(gen)
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)


def _location(position: tuple[str, int] | None) -> str:
    return "<unknown>" if position is None else f"{position[0]}:{position[1]}"


def _here(gen: Any) -> tuple[Any, int] | None:
    """Where ``gen`` is suspended, raw: the innermost frame and its instruction offset.

    What :func:`_yield_position` reads, without reading the line yet: every yield of
    every replay records one, and only a diagnostic ever turns it into a line
    (:func:`_position_at`). The offset is taken now, since the frame moves on.
    """
    if type(gen) is GeneratorType:
        inner = gen.gi_yieldfrom
        if inner is None:
            frame = gen.gi_frame
            return None if frame is None else (frame, frame.f_lasti)
    frame = _innermost_frame(gen)
    return None if frame is None else (frame, frame.f_lasti)


def _position_at(raw: tuple[Any, int] | None) -> tuple[str, int] | None:
    """The file and line of a position :func:`_here` recorded, as ``frame.f_lineno`` read then."""
    if raw is None:
        return None
    frame, offset = raw
    code = frame.f_code
    line = code.co_firstlineno
    if offset >= 0:
        line = None
        for start, end, number in code.co_lines():
            if start <= offset < end:
                line = number
                break
    return code.co_filename, line


def _fix_for(yielded: Any) -> str:
    """The fix for a yield of something that asks nothing: what the handler most likely meant."""
    if isinstance(yielded, (Form, RequestedSchema)):
        return 'to ask the user to fill in a form, yield Elicit("your question", Form()...)'
    if isinstance(yielded, type) and (issubclass(yielded, msgspec.Struct) or _is_model(yielded)):
        return f'to ask the user to fill in a {yielded.__qualname__}, yield Elicit("your question", {yielded.__qualname__})'
    return "a sync generator returns its result with `return`"


def _is_model(cls: type) -> bool:
    try:
        return models.is_model(cls)
    except TypeError:  # a pydantic 1 model: still what the handler meant to ask with
        return True


def _yield_location(gen: Any) -> str:
    """``file:line`` of the innermost frame suspended at a yield (follows ``yield from``)."""
    return _location(_yield_position(gen))


_CORE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _handler_frame(exc: BaseException) -> Any:
    """The innermost traceback entry outside this package's core: where handler code made the call that failed.

    An error raised inside the core on the handler's behalf (building an ``Elicit``
    from a Struct the form rules refuse) is the handler's line, not ``schema.py``'s.
    """
    tb = exc.__traceback__
    found = innermost = None
    while tb is not None:
        innermost = tb
        if not tb.tb_frame.f_code.co_filename.startswith(_CORE):
            found = tb
        tb = tb.tb_next
    return found or innermost


def _traceback_location(exc: BaseException) -> str | None:
    tb = _handler_frame(exc)
    return None if tb is None else f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"


def _handler_failed(spec: HandlerSpec, exc: Exception) -> HandlerError:
    if isinstance(exc, (NotYielded, NotYieldedUse)):
        # The message already names the function, the line and the fix.
        mistake = HandlerError(str(exc), location=exc.location)
        mistake.__cause__ = exc
        return mistake
    location = _traceback_location(exc)
    if isinstance(exc, PublicError):
        error = HandlerError(exc.message, location=location, public=True)
    elif isinstance(exc, FormTypeError):
        error = HandlerError(
            f"handler {spec.name} asked at {location or '<unknown>'} with a form that cannot be expressed: {exc}; "
            "an elicitation form is flat (see docs/handlers.md, Schemas)",
            location=location,
        )
    else:
        error = HandlerError(_unanswered_use(spec, exc, location) or (f"{type(exc).__name__}: {exc}" if str(exc)
                             else type(exc).__name__), location=location)
    error.__cause__ = exc
    return error


# What using the content of an answer that has none looks like, in Python's words.
_NONE_USES = ("'NoneType' object is not subscriptable", "'NoneType' object has no attribute",
              "'NoneType' object is not iterable", "argument of type 'NoneType' is not")


def _unanswered_results(name: str, value: Any) -> list[tuple[str, ElicitResult]]:
    """The declined or cancelled answers a local variable holds (itself, or a group's answers)."""
    if isinstance(value, ElicitResult):
        return [] if value.accepted or value.question is None else [(name, value)]
    members: Any = None
    if isinstance(value, tuple) and value and len(value) <= 64:
        members = enumerate(value)
    elif isinstance(value, dict) and value and len(value) <= 64:
        members = value.items()
    if members is None:
        return []
    return [(f"{name}[{key!r}]", member) for key, member in members
            if isinstance(member, ElicitResult) and not member.accepted and member.question is not None]


def _unanswered_use(spec: HandlerSpec, exc: Exception, location: str | None) -> str | None:
    """A handler read the content of a declined or cancelled answer: say which question, where, and the fix."""
    if not isinstance(exc, (TypeError, AttributeError)) or not any(use in str(exc) for use in _NONE_USES):
        return None
    tb = _handler_frame(exc)
    if tb is None:
        return None
    frame = tb.tb_frame
    line = linecache.getline(frame.f_code.co_filename, tb.tb_lineno)
    candidates = [found for name, value in frame.f_locals.items() for found in _unanswered_results(name, value)]
    if not candidates:
        return None
    scores = [_spelled(path, line) for path, _ in candidates]
    best = max(scores)
    if best == 0 and len(candidates) != 1:
        return None
    path, result = candidates[scores.index(best)]
    assert result.question is not None
    key, question = result.question
    variable, _, member = path.partition("[")
    near = (rf"\b{re.escape(variable)}\s*\[\s*['\"]?{re.escape(member[:-1].strip(chr(39)))}['\"]?\s*\]" if member
            else rf"\b{re.escape(variable)}")
    used = re.search(near + r"\s*\.\s*(content|value)\b", line) or re.search(r"\.\s*(content|value)\b", line)
    attribute = used.group(1) if used else "content"
    what = "declined" if result.action == "decline" else "cancelled"
    return (
        f"handler {spec.name} used `.{attribute}` of the answer to {question} (key \"{key}\"), which the user "
        f"{what}, at {location or '<unknown>'} ({type(exc).__name__}: {exc}): a declined or cancelled answer has "
        f"no content (`.content` and `.value` are None); check `{path}.accepted` first and handle decline and "
        "cancel, which are answers too and are never asked again"
    )


def _spelled(path: str, line: str) -> int:
    """How surely ``line`` uses the answer at ``path``: 2 names it exactly, 1 names its variable, 0 neither."""
    variable, _, member = path.partition("[")
    if not re.search(rf"\b{re.escape(variable)}\b", line):
        return 0
    if not member:
        return 2 if re.search(rf"\b{re.escape(variable)}\s*\.\s*(content|value)\b", line) else 1
    member = member[:-1]
    return 2 if member in line or member.replace("'", '"') in line else 1


# -- Step values ------------------------------------------------------------------------

_return_types: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_NO_TYPE = object()


def _step_return_type(fn: Any) -> Any:
    try:
        cached = _return_types.get(fn, None)
    except TypeError:
        cached = None
    if cached is not None:
        return cached
    target = getattr(fn, "func", fn)  # functools.partial
    try:
        hint = typing.get_type_hints(target).get("return", _NO_TYPE)
    except Exception:
        hint = _NO_TYPE
    if hint is type(None):
        hint = _NO_TYPE
    try:
        _return_types[fn] = hint
    except TypeError:
        pass
    return hint


def _step_value(step: Step, stored: Any, gen: Any) -> Any:
    """The recorded value of a Step as the handler receives it: converted to its function's return annotation."""
    hint = _step_return_type(step.fn)
    if hint is _NO_TYPE or hint is Any:
        return stored
    try:
        if models.is_model(hint):
            return hint.model_validate(stored)
        return msgspec.convert(stored, hint, strict=False)
    except (msgspec.ValidationError, ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        raise HandlerError(
            f"{step.describe()} returned a value that does not convert to its return annotation "
            f"{getattr(hint, '__name__', hint)!s} ({exc}); return what the annotation says, or change it",
            location=_yield_location(gen),
        ) from None


# -- one execution ------------------------------------------------------------------------

_SEND, _STOP, _RUN_STEP, _RESULT = range(4)
_MISSING = object()

_CONTRACT = (
    "Handlers must honour the idempotency contract: code before the last question re-runs on "
    "every round trip, so the Nth request or Step reached during a replay must ask exactly what "
    "the execution that recorded it asked. Move non-deterministic work (time, random ids, "
    "database reads) into a Step."
)


class _Interpretation:
    """How a yielded value is read, whichever driver runs the handler.

    The replay drivers (below) and the live driver (:mod:`mrtr.core.live`) share it:
    what counts as a request, a group, a Step or a result; the capability gate, checked
    for every member before anything is asked; ordinals, default and chosen keys and
    their uniqueness; fingerprints; and how an answer is checked and converted before
    the handler sees it. A subclass says only where answers come from
    (:meth:`_answer`, :meth:`_step_answer`).
    """

    __slots__ = ("spec", "ctx", "cursor", "keys", "on_step", "detach", "recorded")

    def __init__(self, spec: HandlerSpec, ctx: Context, on_step: Callable[[Ledger], Any] | None = None,
                 detach: bool = False) -> None:
        self.spec = spec
        self.ctx = ctx
        self.cursor = 0
        self.keys: dict[str, tuple[int, tuple[Any, int] | None]] = {}
        self.on_step = on_step
        self.detach = detach
        # How many positions a ledger recorded before this run; -1 with no ledger (a live
        # run, which never replays). After each yield the context says whether the run is
        # still inside what earlier rounds ran.
        self.recorded = -1

    def record_step(self, step: Step, result: Any, gen: Any) -> Any:
        """What a Step's function returned, as the handler receives it (a ledger records it too)."""
        return _step_value(step, recorded(step, result, gen), gen)

    def snapshot(self) -> Ledger:
        """The ledger so far, for ``on_step`` and a detached execution (none without a ledger)."""
        return Ledger()

    # The runtime's answer to one yielded value: (operation, payload).
    def interpret(self, yielded: Any, gen: Any, result_allowed: bool) -> tuple[int, Any]:
        try:
            if isinstance(yielded, Request):
                # One request, the yield every replay meets most: the gate and the member,
                # with no group built around it.
                missing = yielded.missing_capability(self.ctx.client_capabilities)
                if missing is not None:
                    raise _missing_capability(yielded, missing)
                key, answer = self._member(yielded.key, yielded, gen)
                outcome = (_STOP, {key: yielded}) if answer is _PENDING else (_SEND, answer)
            elif isinstance(yielded, Step):
                outcome = self._step(yielded, gen)
            elif isinstance(yielded, Patched):
                outcome = (_SEND, self._patched(yielded))
            else:
                members = _group_members(yielded, self.spec, gen)
                if members is None:
                    if result_allowed:
                        return _RESULT, yielded
                    raise HandlerError(
                        f"handler {self.spec.name} yielded {type(yielded).__name__} {_short(yielded)}, which is not "
                        f"a request, a group of requests or a Step; {_fix_for(yielded)}",
                        location=_yield_location(gen),
                    )
                answers, pending = self._ask(members, gen)
                outcome = (_STOP, pending) if pending else (_SEND, gathered(yielded, members, answers))
        finally:
            if self.recorded >= 0:
                self.ctx.is_replaying = self.cursor < self.recorded
        return outcome

    def _claim(self, key: str, ordinal: int, gen: Any) -> None:
        # Every yield passes here on every replay: keep the position raw, read its line only on error.
        earlier = self.keys.get(key)
        if earlier is not None:
            raise self._duplicate(key, earlier, ordinal, gen)
        self.keys[key] = (ordinal, _here(gen))

    def _duplicate(self, key: str, earlier: tuple[int, Any], ordinal: int, gen: Any) -> HandlerError:
        location = _yield_location(gen)
        return HandlerError(
            f'handler {self.spec.name} used the key "{key}" twice in one execution: ordinal #{earlier[0]} '
            f"at {_location(_position_at(earlier[1]))} and ordinal #{ordinal} at {location}; keys must be unique",
            location=location,
        )

    def _member(self, explicit_key: str | None, request: Request, gen: Any) -> tuple[str, Any]:
        """One request of a yield: its ordinal, key, claim and answer (``_PENDING`` when it has none yet)."""
        self.cursor += 1
        ordinal = self.cursor
        standard = _KEY_PREFIX[request.kind] + str(ordinal)  # default_key, inlined: every yield passes here
        key = standard if explicit_key is None else explicit_key
        # _claim, inlined for the same reason, and _here's common case with it
        keys = self.keys
        earlier = keys.get(key)
        if earlier is not None:
            raise self._duplicate(key, earlier, ordinal, gen)
        if type(gen) is GeneratorType and gen.gi_yieldfrom is None and gen.gi_frame is not None:
            frame = gen.gi_frame
            keys[key] = (ordinal, (frame, frame.f_lasti))
        else:
            keys[key] = (ordinal, _here(gen))
        return key, self._answer(ordinal, key, key == standard, request, request.fingerprint(), gen)

    def _ask(self, members: Any, gen: Any) -> tuple[list[Any], dict[str, Request]]:
        capabilities = self.ctx.client_capabilities
        for _, request in members:
            missing = request.missing_capability(capabilities)
            if missing is not None:
                raise _missing_capability(request, missing)
        answers: list[Any] = []
        pending: dict[str, Request] = {}
        for explicit_key, request in members:
            key, answer = self._member(explicit_key, request, gen)
            if answer is _PENDING:
                pending[key] = request
                answers.append(None)
            else:
                answers.append(answer)
        return answers, pending

    def _answer(self, ordinal: int, key: str, standard: bool, request: Request, fingerprint: bytes, gen: Any) -> Any:
        """The answer to the request at ``ordinal`` as the handler receives it, or ``_PENDING``."""
        raise NotImplementedError

    def _step(self, step: Step, gen: Any) -> tuple[int, Any]:
        self.cursor += 1
        ordinal = self.cursor
        key = default_key(Kind.STEP, ordinal)
        self._claim(key, ordinal, gen)
        return self._step_answer(ordinal, key, step, step.fingerprint(), gen)

    def _step_answer(self, ordinal: int, key: str, step: Step, fingerprint: bytes, gen: Any) -> tuple[int, Any]:
        """``(_SEND, value)`` for a Step whose value is known, else ``(_RUN_STEP, step)``."""
        raise NotImplementedError

    def _patched(self, patch: Patched) -> bool:
        """Which side of a code change this run is on: a run with nothing recorded is on the new side.

        The marker takes an ordinal (unless deprecated), as a fresh replay's does, so the
        keys after it are the same whichever driver runs the handler.
        """
        if not patch.deprecated:
            self.cursor += 1
        return True


def _missing_capability(request: Request, missing: dict[str, Any]) -> MissingRequiredClientCapability:
    return MissingRequiredClientCapability(
        f"Client did not declare the {next(iter(missing))} capability this request needs "
        f"({request.method}); declare it in io.modelcontextprotocol/clientCapabilities",
        missing,
    )


def gathered(yielded: Any, members: Any, answers: list[Any]) -> Any:
    """What the handler receives for a yield whose ``members`` got ``answers``: one answer, a tuple or a dict."""
    if isinstance(yielded, Request):
        return answers[0]
    if isinstance(yielded, dict):
        return {key: answer for (key, _), answer in zip(members, answers)}
    return tuple(answers)


_ELICIT = Kind.ELICIT


def delivered(kind: int, answer: Any, request: Request, key: str, *, check: bool, ordinal: int = 0) -> Any:
    """An answer in its stored form (:func:`~mrtr.core.ledger.decode_answer`), as the handler receives it.

    ``kind`` is the slot's kind (a :class:`~mrtr.core.kinds.Kind` or the code a ledger
    stores). ``check`` validates accepted form content against the schema that was
    asked (an answer that arrived with this request); one from a sealed token was
    checked when it was first used. An accepted form answer that the schema, or the
    Struct or model asked with, refuses raises :class:`~mrtr.core.errors.AnswerRefused`
    naming ``key`` and ``ordinal`` (the slot's 1-based position).
    """
    if kind == _ELICIT:
        code, content = answer
        if code or isinstance(request, ElicitURL):  # URL mode answers carry no content
            result = ElicitResult(ACTIONS[code])
            result.question = (key, request.describe_call())
            return result
        compiled = request._compiled  # type: ignore[attr-defined]  # Elicit.requested, without the property's call
        try:
            if check:
                content = compiled.validate(content)
            elif content is None:
                # Accepted without content when it arrived, which only a form without required fields
                # takes, as {} (what validate gave then): every later round reads what the first read.
                content = {}
            elif compiled._integers:
                content = compiled.as_read(content)  # 5.0 from the token is the 5 validate gave then
            # A Form's answer is its content (RequestedSchema.convert's first case, without its call)
            return ElicitResult("accept", content, content if compiled.struct_type is None and content is not None
                                else compiled.convert(content))
        except InvalidParams as exc:  # the schema refused it, or the Struct or model asked with did
            raise AnswerRefused(f'inputResponses key "{key}": {exc.message}', key=key, ordinal=ordinal,
                                request=request, data=exc.data) from None
    # Fresh answers are already Structs; answers from a token come back as builtins.
    return decode_input_response(KINDS[request.kind], answer)


_json_decode = msgspec.json.Decoder().decode
_pack = msgspec.msgpack.Encoder().encode


def recorded(step: Step, result: Any, gen: Any) -> Any:
    """What a Step's function returned, in the form a ledger records: its JSON data model.

    Objects with string keys, arrays as lists, bytes as Base64 text, dates as ISO text, a
    pydantic model as its JSON form: what every ledger gives back (a token's MessagePack,
    a task record's JSON), so the run that records a value sees what every later run sees.
    A return annotation converts it back (:func:`_step_value`). Integers must fit in 64
    bits, as a token carries them, and floats be finite, as JSON has no NaN or infinity.
    """
    try:
        # builtins with string keys (bytes as Base64, dates as text), then JSON text, which refuses
        # NaN and infinities (msgspec would write them as null) and makes every array a list
        stored = _json_decode(json.dumps(msgspec.to_builtins(result, str_keys=True, enc_hook=models.enc_hook),
                                         allow_nan=False, separators=(",", ":")))
        _pack(stored)  # what a token cannot carry (an integer past 64 bits) fails here, not at sealing
        return stored
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as exc:
        raise HandlerError(
            f"{step.describe()} returned {type(result).__name__}, which cannot be recorded in the ledger "
            f"({exc}); a Step must return msgspec-encodable data (JSON values, with integers within 64 bits)",
            location=_yield_location(gen),
        ) from None


_PENDING = object()


class _Execution(_Interpretation):
    """The bookkeeping of one run of a handler against a ledger."""

    __slots__ = ("slots", "fresh", "unmatched", "step_at")

    def __init__(self, spec: HandlerSpec, ctx: Context, ledger: Ledger, unmatched: Mapping[str, Any] | None,
                 on_step: Callable[[Ledger], Any] | None = None, detach: bool = False) -> None:
        _Interpretation.__init__(self, spec, ctx, on_step, detach)
        self.slots = list(ledger.slots)
        self.recorded = len(self.slots)
        self.fresh = set(ledger.fresh)
        self.unmatched = dict(unmatched) if unmatched else None
        self.step_at: tuple[int, bytes] | None = None
        ctx.is_replaying = self.recorded > 0

    def _answer(self, ordinal: int, key: str, standard: bool, request: Request, fingerprint: bytes, gen: Any) -> Any:
        kind = request.kind
        index = ordinal - 1
        stored_key = None if standard else key
        slots = self.slots
        if index < len(slots):
            slot = slots[index]
            # slot.key is None exactly when the slot travels under its standard key
            if slot.kind != kind or slot.fingerprint != fingerprint or slot.key != stored_key:
                raise self._mismatch(ordinal, slot, request, key, fingerprint, gen)
            if not slot.answered:
                raw = self.unmatched.pop(key, _MISSING) if self.unmatched else _MISSING
                if raw is _MISSING:
                    return _PENDING
                slot = slots[index] = Slot(kind, fingerprint, slot.key, True, decode_answer(kind, key, raw))
                self.fresh.add(index)
        else:
            raw = self.unmatched.pop(key, _MISSING) if self.unmatched else _MISSING
            if raw is _MISSING:
                slots.append(Slot(kind, fingerprint, stored_key))
                return _PENDING
            slot = Slot(kind, fingerprint, stored_key, True, decode_answer(kind, key, raw))
            slots.append(slot)
            self.fresh.add(index)
        # Delivered from one place, whichever way the answer came (token, this request, set aside).
        fresh = self.fresh
        check = index in fresh
        value = delivered(kind, slot.answer, request, key, check=check, ordinal=ordinal)
        if check and value.__class__ is ElicitResult and value.action == "accept" and not isinstance(request, ElicitURL):
            fresh.discard(index)  # checked against its form now; a later execution trusts it
        return value

    def _step_answer(self, ordinal: int, key: str, step: Step, fingerprint: bytes, gen: Any) -> tuple[int, Any]:
        index = ordinal - 1
        if index < len(self.slots):
            slot = self.slots[index]
            if slot.kind != Kind.STEP or slot.fingerprint != fingerprint:
                raise self._mismatch(ordinal, slot, step, key, fingerprint, gen)
            if slot.answered:
                return _SEND, _step_value(step, slot.answer, gen)
        else:
            # Hold the position even if the function fails: later ordinals must not shift.
            self.slots.append(Slot(Kind.STEP, fingerprint))
        self.step_at = (index, fingerprint)
        return _RUN_STEP, step

    def _patched(self, patch: Patched) -> bool:
        """Which side of a code change this conversation is on (see :class:`~mrtr.core.effects.Patched`)."""
        index = self.cursor
        if index < len(self.slots):
            slot = self.slots[index]
            if slot.kind == Kind.PATCH and slot.answer == patch.change_id:
                self.cursor += 1
                return True
            # Recorded past this point by code without the patch: the old branch, and the gate
            # takes no ordinal, so the old branch's yields meet the positions they recorded.
            return patch.deprecated
        if not patch.deprecated:
            self.cursor += 1
            self.slots.append(Slot(Kind.PATCH, b"", None, True, patch.change_id))
        return True

    def record_step(self, step: Step, result: Any, gen: Any) -> Any:
        """Record what a Step's function returned and give back the value to send."""
        assert self.step_at is not None
        index, fingerprint = self.step_at
        self.step_at = None
        stored = recorded(step, result, gen)
        self.slots[index] = Slot(Kind.STEP, fingerprint, None, True, stored)
        return _step_value(step, stored, gen)

    def _mismatch(self, ordinal: int, slot: Slot, asked: Request | Step, key: str, fingerprint: bytes, gen: Any) -> ReplayMismatch:
        recorded_kind = Kind(slot.kind)
        if recorded_kind is Kind.PATCH:
            return self._unpatched(ordinal, slot, asked, gen)
        recorded_key = slot.wire_key(ordinal)
        lines = [
            f'MRTR replay mismatch at ordinal #{ordinal} (key "{recorded_key}"): the handler asked something '
            "other than what this ledger position recorded.",
            f"  at {_yield_location(gen)} in handler {self.spec.name}",
            f'  recorded: {KINDS[recorded_kind].label}, key "{recorded_key}", fingerprint {slot.fingerprint.hex()}',
            f'  asked now: {asked.describe()}, key "{key}", fingerprint {fingerprint.hex()}',
        ]
        changed = []
        if recorded_kind != asked.kind:
            changed.append(f"kind {KINDS[recorded_kind].label} -> {KINDS[asked.kind].label}")
        else:
            if recorded_key != key:
                changed.append(f'key "{recorded_key}" -> "{key}"')
            first, second = asked.parts
            if slot.fingerprint[:8] != fingerprint[:8]:
                changed.append(first)
            if slot.fingerprint[8:] != fingerprint[8:]:
                changed.append(second)
        lines.append(f"  changed: {', '.join(changed) or 'nothing visible'}")
        if isinstance(asked, Elicit) and "requestedSchema" in changed:
            lines.extend(f"  {line}" for line in _schema_lines(slot.fingerprint[8:], asked))
        if recorded_kind == asked.kind and changed:
            lines.extend(f"  {line}" for line in _why(asked, changed))
        lines.append(_CONTRACT)
        # What a client of a server that masks errors sees: the position and what changed, by name.
        brief = "\n".join([lines[0], f"  changed: {', '.join(changed) or 'nothing visible'}", _CONTRACT])
        return ReplayMismatch("\n".join(lines), data={"ordinal": ordinal, "key": recorded_key, "changed": changed},
                              brief=brief)

    def _unpatched(self, ordinal: int, slot: Slot, asked: Request | Step, gen: Any) -> ReplayMismatch:
        change = slot.answer
        first = (f'MRTR replay mismatch at ordinal #{ordinal}: this ledger position holds the patch marker "{change}", '
                 f'recorded by code that has `yield Patched("{change}")` here, and this code asks '
                 f"{KINDS[asked.kind].label} instead.")
        why = ("  why: this node runs the code from before the patch while the conversation or task was recorded by a "
               "node that has it (finish the deploy before such rounds reach old nodes), or the patch was removed "
               "while conversations or tasks recorded under it were in flight (put it back; "
               f'`yield Patched("{change}", deprecated=True)` replays the marker and takes the new branch)')
        lines = [first.replace(f"asks {KINDS[asked.kind].label}", f"asks {asked.describe()}"),
                 f"  at {_yield_location(gen)} in handler {self.spec.name}", "  changed: patch", why]
        return ReplayMismatch(
            "\n".join(lines),
            data={"ordinal": ordinal, "key": default_key(Kind.PATCH, ordinal), "changed": ["patch"], "patch": change},
            brief="\n".join([first, "  changed: patch", why]),  # no path, no question text the handler built
        )

    def ledger(self) -> Ledger:
        return Ledger(tuple(self.slots))

    def snapshot(self) -> Ledger:
        # Answers merged but not reached yet keep their "fresh" mark, so they are still
        # checked against their schema when a later execution reaches them.
        return Ledger(tuple(self.slots), frozenset(self.fresh))


def _why(asked: Request | Step, changed: list[str]) -> list[str]:
    """Say which kind of non-determinism a mismatch points at, and the fix."""
    if isinstance(asked, Step):
        where = asked.where()
        defined = f" (defined at {where})" if where else ""
        lines = []
        if "function" in changed:
            if "<lambda>" in asked.name:
                lines.append(
                    f"why: the Step's function is a lambda{defined}, and a different lambda or function reached "
                    "this ordinal than in the recorded run; give the Step a named function and reach it on every run"
                )
            else:
                lines.append(
                    f"why: a different Step function reached this ordinal than in the recorded run, now "
                    f"{asked.name}{defined}"
                )
        if "arguments" in changed:
            bound = asked.bound()
            if bound:
                captured = ", ".join(f"{name}={_short(value)}" for name, value in bound.items())
                lines.append(
                    f"why: the Step's function is a closure or partial{defined} whose bound values differ from the "
                    f"recorded run (now {captured}); compute them from the arguments, answers or earlier Step "
                    "values, or move the clock or random read inside the Step"
                )
            else:
                lines.append(
                    f"why: the Step's arguments differ from the recorded run (now args={_short(asked.args)}, "
                    f"kwargs={_short(asked.kwargs)}); compute them from the arguments, answers or earlier Step values"
                )
        return lines
    lines = []
    if "message" in changed:
        lines.append(
            "why: the question's text differs from the recorded run (see \"asked now\"); build it from the "
            "arguments, answers or Step values: text built from the clock, random values or reads outside a "
            "Step changes between rounds"
        )
    for part, plural in (("requestedSchema", False), ("url", False), ("messages", True), ("parameters", True)):
        if part in changed:
            lines.append(
                f"why: the request's {part} {'differ' if plural else 'differs'} from the recorded run; build "
                f"{'them' if plural else 'it'} from the arguments, answers or Step values, not from data that "
                "changes between rounds (a choice list read outside a Step, say)"
            )
    return lines


def _schema_lines(recorded: bytes, asked: Elicit) -> list[str]:
    """Which properties and keywords of the form changed, old and new, when this process saw the old one."""
    changes = schema_changes(recorded, asked.requested)
    if changes is None:
        return [f"requestedSchema now: {_short_schema(asked)} (the recorded one was compiled in another process, "
                "and a token keeps only its fingerprint)"]
    return [f"requestedSchema: {change}" for change in changes]


def _short_schema(asked: Elicit) -> str:
    text = asked.requested.canonical.decode()
    return text if len(text) <= 200 else text[:197] + "..."


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _group_members(yielded: Any, spec: HandlerSpec | None = None, gen: Any = None
                   ) -> list[tuple[str | None, Request]] | None:
    """The members of a group yield, or ``None`` when ``yielded`` is not a group.

    A group mixing requests with anything else is a handler error naming what the
    handler put in it and, with ``spec`` and ``gen``, the handler and the yield's line.
    """
    if isinstance(yielded, (tuple, list)):
        if not yielded:
            return None
        flags = [isinstance(member, Request) for member in yielded]
        if all(flags):
            return [(member.key, member) for member in yielded]
        if any(flags) or any(isinstance(member, (Step, Patched)) for member in yielded):
            odd = flags.index(False)
            raise _not_a_group(yielded, f"member #{odd + 1}", yielded[odd], spec, gen)
        return None
    if isinstance(yielded, dict) and yielded:
        values = list(yielded.values())
        flags = [isinstance(member, Request) for member in values]
        if all(flags):
            members: list[tuple[str | None, Request]] = []
            for key, request in yielded.items():
                if not isinstance(key, str) or not key:
                    raise _group_error(f"a keyed group needs non-empty string keys, got {key!r}", spec, gen)
                if request.key is not None and request.key != key:
                    raise _group_error(
                        f'a keyed group names a request "{key}" that was built with key="{request.key}"', spec, gen)
                members.append((key, request))
            return members
        if any(flags) or any(isinstance(member, (Step, Patched)) for member in values):
            odd = flags.index(False)
            key = list(yielded)[odd]
            raise _not_a_group(yielded, f"member {key!r}", values[odd], spec, gen)
    return None


def _group_error(message: str, spec: HandlerSpec | None, gen: Any) -> HandlerError:
    if spec is None:
        return HandlerError(message)
    location = _yield_location(gen)
    return HandlerError(f"handler {spec.name} at {location}: {message}", location=location)


def _not_a_group(group: Any, which: str, member: Any, spec: HandlerSpec | None, gen: Any) -> HandlerError:
    if isinstance(member, (Step, Patched)):
        name = "a Step" if isinstance(member, Step) else "a Patched gate"
        what = f"{member.describe_call()}: {name} cannot be a group member; yield it on its own, before the group"
    else:
        what = (f"{type(member).__name__} {_short(member)}, which is not a request; build each member with "
                "Elicit, ElicitURL, Sample or ListRoots")
    return _group_error(
        f"a group yield ({type(group).__name__} of {len(group)}) may only hold requests, and its {which} is {what}",
        spec, gen)


# -- drivers ------------------------------------------------------------------------------


def _close(gen: Any, spec: HandlerSpec) -> None:
    try:
        gen.close()
    except RuntimeError as exc:
        if "ignored GeneratorExit" in str(exc):
            error = _swallowed_exit(spec, gen)
            _quiet_finalizer(gen)
            raise error from None
        raise _handler_failed(spec, exc) from exc
    except Exception as exc:
        raise _handler_failed(spec, exc) from exc


async def _aclose(agen: Any, spec: HandlerSpec) -> None:
    try:
        await agen.aclose()
    except RuntimeError as exc:
        if "ignored GeneratorExit" in str(exc):
            error = _swallowed_exit(spec, agen)
            _quiet_finalizer(agen)
            raise error from None
        raise _handler_failed(spec, exc) from exc
    except Exception as exc:
        raise _handler_failed(spec, exc) from exc


# Handler code already reported for ignoring GeneratorExit. Such a generator stays suspended
# after the failed close; when it is collected Python closes it again, it yields again, and
# Python prints "Exception ignored ... generator ignored GeneratorExit" on stderr beside the
# handler error that already said so. Nothing can end a generator that catches every
# exception, so the collector's report of that one error is dropped, and only that one.
_REPORTED: set[Any] = set()
_REPORTED_MAX = 1024
_next_hook: Any = None
_in_hook = False


def _quiet_finalizer(gen: Any) -> None:
    global _next_hook
    code = getattr(gen, "gi_code", None) or getattr(gen, "ag_code", None)
    if code is None or len(_REPORTED) >= _REPORTED_MAX:
        return
    _REPORTED.add(code)
    if hasattr(gen, "ag_code"):
        # An event loop finalizes async generators itself and logs what fails there (trio
        # on this logger, naming the generator "module.qualname").
        frame = getattr(gen, "ag_frame", None)
        module = frame.f_globals.get("__name__", "?") if frame is not None else "?"
        _REPORTED_NAMES.add(f"{module}.{gen.__qualname__}")
        if not _REPORTED_NAMES_FILTERED:
            _REPORTED_NAMES_FILTERED.append(True)
            logging.getLogger("trio.async_generator_errors").addFilter(_LoopFinalizerFilter())
    if sys.unraisablehook is not _unraisable:
        _next_hook = sys.unraisablehook
        sys.unraisablehook = _unraisable


_REPORTED_NAMES: set[str] = set()
_REPORTED_NAMES_FILTERED: list[bool] = []


class _LoopFinalizerFilter(logging.Filter):
    """Drops an event loop's report of finalizing an async handler already reported for ignoring GeneratorExit."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (args and str(args[0]) in _REPORTED_NAMES)


def _unraisable(unraisable: Any) -> None:
    global _in_hook
    source = unraisable.object
    code = getattr(source, "gi_code", None) or getattr(source, "ag_code", None)
    if (code in _REPORTED and isinstance(unraisable.exc_value, RuntimeError)
            and "ignored GeneratorExit" in str(unraisable.exc_value)):
        return
    forward = _next_hook if _next_hook is not None and not _in_hook else sys.__unraisablehook__
    _in_hook = True
    try:
        forward(unraisable)
    finally:
        _in_hook = False


def _swallowed_exit(spec: HandlerSpec, gen: Any) -> HandlerError:
    location = _yield_location(gen)
    return HandlerError(
        f"handler {spec.name} ignored GeneratorExit and yielded again at {location}: the runtime closes a "
        "paused handler at once, so a bare `except:` or `except BaseException:` around a yield must re-raise",
        location=location,
    )


def _close_quietly(gen: Any) -> None:
    try:
        gen.close()
    except BaseException:  # already failing with a better error
        pass


async def _aclose_quietly(agen: Any) -> None:
    try:
        await agen.aclose()
    except Exception:  # already failing with a better error
        pass


_DONE, _DETACHED = 4, 5


def _advance(gen: Any, execution: _Interpretation, send: Any, throw: BaseException | None) -> tuple[int, Any]:
    """Resume a sync generator until the runtime must stop it, whichever driver runs it.

    Returns ``(_DONE, Completed)`` when the handler returned, ``(_STOP, pending)`` when it
    asked what has no answer yet (the generator is then suspended at that yield), or
    ``(_DETACHED, None)`` when it reached a Step the execution detaches at. Raises what
    the handler or the interpretation raises; the caller closes the generator.
    """
    spec = execution.spec
    while True:
        try:
            if throw is None:
                yielded = gen.send(send)
            else:
                error, throw = throw, None
                yielded = gen.throw(error)
        except StopIteration as stop:
            return _DONE, _check_result(spec, stop.value)
        except ProtocolError:
            raise
        except Exception as exc:
            raise _handler_failed(spec, exc) from exc
        operation, payload = execution.interpret(yielded, gen, False)
        if operation == _SEND:
            send = payload
        elif operation == _STOP:
            return _STOP, payload
        elif execution.detach:
            return _DETACHED, None
        else:  # _RUN_STEP
            try:
                result = payload.fn(*payload.args, **payload.kwargs)
            except Exception as exc:
                throw, send = exc, None
                continue
            if inspect.isawaitable(result):
                getattr(result, "close", lambda: None)()
                raise HandlerError(
                    f"{payload.describe()} is async, but handler {spec.name} is a sync generator; "
                    "use an async handler for async steps",
                    location=_yield_location(gen),
                )
            send = execution.record_step(payload, result, gen)
            if execution.on_step is not None:
                execution.on_step(execution.snapshot())


async def _aadvance(agen: Any, execution: _Interpretation, send: Any, throw: BaseException | None) -> tuple[int, Any]:
    """:func:`_advance` for an async generator; ``(_RESULT, value)`` when it yielded its result."""
    spec = execution.spec
    while True:
        try:
            if throw is None:
                yielded = await agen.asend(send)
            else:
                error, throw = throw, None
                yielded = await agen.athrow(error)
        except StopAsyncIteration:
            location = _definition(spec.fn)
            raise HandlerError(
                f"async generator handler {spec.name} at {location} ended without yielding a result: an async "
                "generator cannot `return` a value, so it ends by yielding it (`yield result`; `yield None` for "
                "an empty one). A bare `return` or falling off the end leaves the client with nothing",
                location=location,
            ) from None
        except ProtocolError:
            raise
        except Exception as exc:
            raise _handler_failed(spec, exc) from exc
        operation, payload = execution.interpret(yielded, agen, True)
        if operation == _SEND:
            send = payload
        elif operation in (_STOP, _RESULT):
            return operation, payload
        elif execution.detach:
            return _DETACHED, None
        else:  # _RUN_STEP
            try:
                result = payload.fn(*payload.args, **payload.kwargs)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as exc:
                throw, send = exc, None
                continue
            send = execution.record_step(payload, result, agen)
            if execution.on_step is not None:
                saved = execution.on_step(execution.snapshot())
                if inspect.isawaitable(saved):
                    await saved


def _drive(gen: Any, execution: _Execution) -> Completed | InputRequired | Detached:
    try:
        operation, payload = _advance(gen, execution, None, None)
        if operation == _DONE:
            return payload  # type: ignore[no-any-return]
        outcome: InputRequired | Detached = (InputRequired(payload, execution.ledger()) if operation == _STOP
                                             else Detached(execution.snapshot()))
    except BaseException:
        _close_quietly(gen)
        raise
    _close(gen, execution.spec)
    return outcome


async def _adrive(agen: Any, execution: _Execution) -> Completed | InputRequired | Detached:
    try:
        operation, payload = await _aadvance(agen, execution, None, None)
        outcome: Completed | InputRequired | Detached
        if operation == _STOP:
            outcome = InputRequired(payload, execution.ledger())
        elif operation == _RESULT:
            outcome = Completed(payload)
        else:
            outcome = Detached(execution.snapshot())
    except BaseException:
        await _aclose_quietly(agen)
        raise
    await _aclose(agen, execution.spec)
    return outcome


def _start(spec: HandlerSpec, ctx: Context, arguments: Mapping[str, Any]) -> Any:
    try:
        started = spec.invoke(ctx, arguments)
    except ProtocolError:
        raise
    except Exception as exc:
        raise _handler_failed(spec, exc) from exc
    # Generators, async generators and coroutines are final types: their class says it all,
    # and a plain value (the usual result) is refused nothing after one set lookup.
    if started.__class__ in _DELEGATED and spec.shape == _PLAIN:
        _refuse_delegation(spec, started)
    return started


_DELEGATED = frozenset({types.GeneratorType, types.AsyncGeneratorType, types.CoroutineType})
_EMPTY = Ledger()  # immutable: every run without a ledger starts from this one


def _definition(fn: Any) -> str:
    """``file:line`` where ``fn`` is defined, for diagnostics about the handler as a whole."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        code = getattr(getattr(fn, "__call__", None), "__code__", None)
    return "<unknown>" if code is None else f"{code.co_filename}:{code.co_firstlineno}"


def _refuse_delegation(spec: HandlerSpec, started: Any) -> None:
    # A plain function that hands back a generator or coroutine delegated without
    # `yield from` / `await`: the runtime would otherwise try to send the object itself.
    helper = getattr(started, "__name__", "helper")
    if inspect.isgenerator(started):
        started.close()
        fix = f"delegate with `return (yield from {helper}(...))` so the handler is itself a generator, or register the generator function directly"
        what = "a generator"
    elif inspect.isasyncgen(started):
        fix = "register the async generator function directly, or make the handler an async generator that re-yields what the helper yields"
        what = "an async generator"
    elif inspect.iscoroutine(started):
        started.close()
        fix = f"declare the handler `async def` and `return await {helper}(...)`"
        what = "a coroutine"
    else:
        return
    if inspect.unwrap(spec.fn) is not spec.fn:
        fix += "; a decorator around a generator handler must be a generator too (`return (yield from fn(*args, **kwargs))`)"
    location = _definition(spec.fn)
    raise HandlerError(
        f"handler {spec.name} at {location} is a plain function that returned {what} "
        f"({getattr(started, '__qualname__', type(started).__name__)}); the runtime only drives a handler that is "
        f"itself a generator or coroutine function: {fix}",
        location=location,
    )


def _check_result(spec: HandlerSpec, result: Any) -> Completed:
    if isinstance(result, (Request, Step)):
        location = _definition(spec.fn)
        raise HandlerError(
            f"handler {spec.name} at {location} returned {result.describe_call()} instead of yielding it: did you "
            f"forget `yield`? Write `answer = yield {result.describe_call()}` and return a result built from the answer",
            location=location,
        )
    return Completed(result)


@typing.overload
def replay(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger | None = None,
           unmatched: Mapping[str, Any] | None = None, *, on_step: Callable[[Ledger], Any] | None = None,
           until_step: typing.Literal[False] = False) -> Completed | InputRequired: ...
@typing.overload
def replay(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger | None = None,
           unmatched: Mapping[str, Any] | None = None, *, on_step: Callable[[Ledger], Any] | None = None,
           until_step: bool) -> Completed | InputRequired | Detached: ...


def replay(
    handler: Any,
    arguments: Mapping[str, Any] | None,
    ctx: Context,
    ledger: Ledger | None = None,
    unmatched: Mapping[str, Any] | None = None,
    *,
    on_step: Callable[[Ledger], Any] | None = None,
    until_step: bool = False,
) -> Completed | InputRequired | Detached:
    """Run a sync handler (generator or plain function) against ``ledger``.

    ``unmatched`` holds answers that matched no ledger slot (the lenient policy): one
    is used when the handler asks a question under its key in this very execution.
    ``on_step``, when given, is called with the ledger each time a Step's result has
    been recorded, before the handler resumes: a carrier that keeps the ledger in a
    store saves it there, so a Step that finished is never run again after a crash.
    Its exceptions propagate to the caller and are never thrown into handler code.
    ``until_step`` stops before running any Step that has not run yet and returns
    :class:`Detached`: the questions a handler asks before its first Step are answered
    in rounds on the request itself, and what comes from that Step on can run
    elsewhere (as a task).
    Raises :class:`~mrtr.core.errors.ProtocolError` subclasses for runtime conditions
    (replay mismatch, missing client capability, malformed answers) and
    :class:`~mrtr.core.errors.HandlerError` when handler code fails.
    """
    spec = handler_spec(handler)
    if spec.is_async:
        raise TypeError(f"handler {spec.name} is async; use replay_async")
    if spec.shape == _SYNC_GEN:
        execution = _Execution(spec, ctx, ledger if ledger is not None else _EMPTY, unmatched, on_step, until_step)
        return _drive(_start(spec, ctx, arguments or {}), execution)
    # A plain function yields nothing: no ledger position is read, so no bookkeeping is built.
    ctx.is_replaying = ledger is not None and len(ledger.slots) > 0
    return _check_result(spec, _start(spec, ctx, arguments or {}))


@typing.overload
async def replay_async(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger | None = None,
                       unmatched: Mapping[str, Any] | None = None, *, on_step: Callable[[Ledger], Any] | None = None,
                       until_step: typing.Literal[False] = False) -> Completed | InputRequired: ...
@typing.overload
async def replay_async(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger | None = None,
                       unmatched: Mapping[str, Any] | None = None, *, on_step: Callable[[Ledger], Any] | None = None,
                       until_step: bool) -> Completed | InputRequired | Detached: ...


async def replay_async(
    handler: Any,
    arguments: Mapping[str, Any] | None,
    ctx: Context,
    ledger: Ledger | None = None,
    unmatched: Mapping[str, Any] | None = None,
    *,
    on_step: Callable[[Ledger], Any] | None = None,
    until_step: bool = False,
) -> Completed | InputRequired | Detached:
    """Run any handler (sync or async) against ``ledger``; see :func:`replay`.

    ``on_step`` may return an awaitable, which is awaited before an async handler
    resumes; for a sync generator handler it must be a plain function.
    """
    spec = handler_spec(handler)
    shape = spec.shape
    if shape == _ASYNC_GEN or shape == _SYNC_GEN:
        execution = _Execution(spec, ctx, ledger if ledger is not None else _EMPTY, unmatched, on_step, until_step)
        started = _start(spec, ctx, arguments or {})
        if shape == _ASYNC_GEN:
            return await _adrive(started, execution)
        return _drive(started, execution)
    # A function or coroutine function yields nothing: no ledger position is read, so no
    # bookkeeping is built (the common tool that asks nothing pays for none).
    ctx.is_replaying = ledger is not None and len(ledger.slots) > 0
    started = _start(spec, ctx, arguments or {})
    if shape == _CORO:
        try:
            result = await started
        except ProtocolError:
            raise
        except Exception as exc:
            raise _handler_failed(spec, exc) from exc
        return _check_result(spec, result)
    return _check_result(spec, started)
