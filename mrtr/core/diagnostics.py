"""What a handler is told when it fails or breaks the idempotency contract: where, what, and the fix.

Every message names the handler, the line of the yield or call, and what to change:
the position a generator is suspended at (:func:`here`, read as a line only when a
message needs it: :func:`position_at`, :func:`yield_location`), a handler's failure
(:func:`handler_failed`, which recognises the content of a declined answer being read),
a replay mismatch (:func:`mismatch`: what the ledger recorded, what is asked now,
what changed and which kind of non-determinism that points at). Both drivers (the
replay and the live driver) use them; nothing here runs handler code.
"""

from __future__ import annotations

import inspect
import linecache
import os
import re
from types import GeneratorType
from typing import Any

import msgspec

from . import models
from .effects import Elicit, ElicitResult, NotYielded, NotYieldedUse, Request, Step
from .errors import HandlerError, PublicError, ReplayMismatch
from .handlers import HandlerSpec
from .kinds import KINDS, Kind
from .ledger import Slot, default_key
from .schema import Form, FormTypeError, RequestedSchema, schema_changes

__all__ = ["here", "position_at", "position_text", "yield_location", "fix_for", "handler_failed", "definition",
           "short", "mismatch"]


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


def position_text(position: tuple[str, int] | None) -> str:
    """``file:line`` of a position, or ``<unknown>``."""
    return "<unknown>" if position is None else f"{position[0]}:{position[1]}"


def here(gen: Any) -> tuple[Any, int] | None:
    """Where ``gen`` is suspended, raw: the innermost frame and its instruction offset.

    What :func:`_yield_position` reads, without reading the line yet: every yield of
    every replay records one, and only a diagnostic ever turns it into a line
    (:func:`position_at`). The offset is taken now, since the frame moves on.
    """
    if type(gen) is GeneratorType:
        inner = gen.gi_yieldfrom
        if inner is None:
            frame = gen.gi_frame
            return None if frame is None else (frame, frame.f_lasti)
    frame = _innermost_frame(gen)
    return None if frame is None else (frame, frame.f_lasti)


def position_at(raw: tuple[Any, int] | None) -> tuple[str, int] | None:
    """The file and line of a position :func:`here` recorded, as ``frame.f_lineno`` read then."""
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


def yield_location(gen: Any) -> str:
    """``file:line`` of the innermost frame suspended at a yield (follows ``yield from``)."""
    return position_text(_yield_position(gen))


def fix_for(yielded: Any) -> str:
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


def handler_failed(spec: HandlerSpec, exc: Exception) -> HandlerError:
    """The :class:`~mrtr.core.errors.HandlerError` handler code's exception ``exc`` becomes, located and explained.

    A :class:`~mrtr.core.errors.PublicError` keeps its message for the client; a form the
    rules refuse, an unyielded request and the content of a declined answer read are told
    with their fix; anything else as ``Type: message``, at the handler's own line.
    """
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


def definition(fn: Any) -> str:
    """``file:line`` where ``fn`` is defined, for diagnostics about the handler as a whole."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        code = getattr(getattr(fn, "__call__", None), "__code__", None)
    return "<unknown>" if code is None else f"{code.co_filename}:{code.co_firstlineno}"


def short(value: Any) -> str:
    """``repr(value)``, cut to 60 characters: a value shown inside a diagnostic."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_CONTRACT = (
    "Handlers must honour the idempotency contract: code before the last question re-runs on "
    "every round trip, so the Nth request or Step reached during a replay must ask exactly what "
    "the execution that recorded it asked. Move non-deterministic work (time, random ids, "
    "database reads) into a Step."
)


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
                captured = ", ".join(f"{name}={short(value)}" for name, value in bound.items())
                lines.append(
                    f"why: the Step's function is a closure or partial{defined} whose bound values differ from the "
                    f"recorded run (now {captured}); compute them from the arguments, answers or earlier Step "
                    "values, or move the clock or random read inside the Step"
                )
            else:
                lines.append(
                    f"why: the Step's arguments differ from the recorded run (now args={short(asked.args)}, "
                    f"kwargs={short(asked.kwargs)}); compute them from the arguments, answers or earlier Step values"
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


def mismatch(spec: HandlerSpec, ordinal: int, slot: Slot, asked: Request | Step, key: str, fingerprint: bytes,
             gen: Any) -> ReplayMismatch:
    """The replay mismatch at ``ordinal``: what the ledger recorded there, what ``asked`` is, what changed and why."""
    recorded_kind = Kind(slot.kind)
    if recorded_kind is Kind.PATCH:
        return _unpatched(spec, ordinal, slot, asked, gen)
    recorded_key = slot.wire_key(ordinal)
    lines = [
        f'MRTR replay mismatch at ordinal #{ordinal} (key "{recorded_key}"): the handler asked something '
        "other than what this ledger position recorded.",
        f"  at {yield_location(gen)} in handler {spec.name}",
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

def _unpatched(spec: HandlerSpec, ordinal: int, slot: Slot, asked: Request | Step, gen: Any) -> ReplayMismatch:
    change = slot.answer
    first = (f'MRTR replay mismatch at ordinal #{ordinal}: this ledger position holds the patch marker "{change}", '
             f'recorded by code that has `yield Patched("{change}")` here, and this code asks '
             f"{KINDS[asked.kind].label} instead.")
    why = ("  why: this node runs the code from before the patch while the conversation or task was recorded by a "
           "node that has it (finish the deploy before such rounds reach old nodes), or the patch was removed "
           "while conversations or tasks recorded under it were in flight (put it back; "
           f'`yield Patched("{change}", deprecated=True)` replays the marker and takes the new branch)')
    lines = [first.replace(f"asks {KINDS[asked.kind].label}", f"asks {asked.describe()}"),
             f"  at {yield_location(gen)} in handler {spec.name}", "  changed: patch", why]
    return ReplayMismatch(
        "\n".join(lines),
        data={"ordinal": ordinal, "key": default_key(Kind.PATCH, ordinal), "changed": ["patch"], "patch": change},
        brief="\n".join([first, "  changed: patch", why]),  # no path, no question text the handler built
    )
