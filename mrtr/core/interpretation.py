"""How a yielded value is read, whichever driver runs the handler.

The rules both drivers share (the replay, :mod:`mrtr.core.replay`, and the live
driver, :mod:`mrtr.core.live`), so nothing is implemented twice: what counts as a
request, a group, a Step or a result (:class:`Interpretation`); the capability gate,
checked for every member before anything is asked; ordinals, default and chosen keys
and their uniqueness; fingerprints; how an answer is checked and converted before the
handler sees it (:func:`delivered`), how a group's answers are handed back
(:func:`gathered`), and how a Step's value is recorded (:func:`recorded`) and read
back (:func:`step_value`). :meth:`Interpretation.interpret` answers each yield with an
operation: :data:`SEND` (resume with a value), :data:`STOP` (pause: the payload maps
keys to the pending requests), :data:`RUN_STEP` or :data:`RESULT` (an async
generator's final yield).
"""

from __future__ import annotations

import json
import typing
import weakref
from collections.abc import Callable, Mapping
from types import GeneratorType
from typing import Any

import msgspec

from . import models
from .context import Context
from .diagnostics import fix_for, here, mismatch, position_at, position_text, short, yield_location
from .effects import ElicitResult, ElicitURL, Patched, Request, Step
from .errors import AnswerRefused, HandlerError, InvalidParams, MissingRequiredClientCapability
from .handlers import HandlerSpec
from .kinds import KINDS, Kind, decode_input_response
from .ledger import ACTIONS, KEY_PREFIX, Ledger, Slot, decode_answer, default_key

__all__ = ["SEND", "STOP", "RUN_STEP", "RESULT", "PENDING", "Interpretation", "LedgerInterpretation",
           "missing_capability", "gathered",
           "delivered", "recorded", "step_value", "group_members"]


SEND, STOP, RUN_STEP, RESULT = range(4)


PENDING = object()


_MISSING = object()


class Interpretation:
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
        return step_value(step, recorded(step, result, gen), gen)

    def snapshot(self) -> Ledger:
        """The ledger so far, for ``on_step`` and a detached execution (none without a ledger)."""
        return Ledger()

    # The runtime's answer to one yielded value: (operation, payload).
    def interpret(self, yielded: Any, gen: Any, result_allowed: bool) -> tuple[int, Any]:
        """The runtime's answer to one yielded value: ``(operation, payload)`` (see the module).

        ``result_allowed`` says a value that asks nothing is the handler's result (an async
        generator's last yield) rather than a mistake.
        """
        try:
            if isinstance(yielded, Request):
                # One request, the yield every replay meets most: the gate and the member,
                # with no group built around it.
                missing = yielded.missing_capability(self.ctx.client_capabilities)
                if missing is not None:
                    raise missing_capability(yielded, missing)
                key, answer = self._member(yielded.key, yielded, gen)
                outcome = (STOP, {key: yielded}) if answer is PENDING else (SEND, answer)
            elif isinstance(yielded, Step):
                outcome = self._step(yielded, gen)
            elif isinstance(yielded, Patched):
                outcome = (SEND, self._patched(yielded))
            else:
                members = group_members(yielded, self.spec, gen)
                if members is None:
                    if result_allowed:
                        return RESULT, yielded
                    raise HandlerError(
                        f"handler {self.spec.name} yielded {type(yielded).__name__} {short(yielded)}, which is not "
                        f"a request, a group of requests or a Step; {fix_for(yielded)}",
                        location=yield_location(gen),
                    )
                answers, pending = self._ask(members, gen)
                outcome = (STOP, pending) if pending else (SEND, gathered(yielded, members, answers))
        finally:
            if self.recorded >= 0:
                self.ctx.is_replaying = self.cursor < self.recorded
        return outcome

    def _claim(self, key: str, ordinal: int, gen: Any) -> None:
        # Every yield passes here on every replay: keep the position raw, read its line only on error.
        earlier = self.keys.get(key)
        if earlier is not None:
            raise self._duplicate(key, earlier, ordinal, gen)
        self.keys[key] = (ordinal, here(gen))

    def _duplicate(self, key: str, earlier: tuple[int, Any], ordinal: int, gen: Any) -> HandlerError:
        location = yield_location(gen)
        return HandlerError(
            f'handler {self.spec.name} used the key "{key}" twice in one execution: ordinal #{earlier[0]} '
            f"at {position_text(position_at(earlier[1]))} and ordinal #{ordinal} at {location}; keys must be unique",
            location=location,
        )

    def _member(self, explicit_key: str | None, request: Request, gen: Any) -> tuple[str, Any]:
        """One request of a yield: its ordinal, key, claim and answer (``PENDING`` when it has none yet)."""
        self.cursor += 1
        ordinal = self.cursor
        standard = KEY_PREFIX[request.kind] + str(ordinal)  # default_key, inlined: every yield passes here
        key = standard if explicit_key is None else explicit_key
        # _claim, inlined for the same reason, and here's common case with it
        keys = self.keys
        earlier = keys.get(key)
        if earlier is not None:
            raise self._duplicate(key, earlier, ordinal, gen)
        if type(gen) is GeneratorType and gen.gi_yieldfrom is None and gen.gi_frame is not None:
            frame = gen.gi_frame
            keys[key] = (ordinal, (frame, frame.f_lasti))
        else:
            keys[key] = (ordinal, here(gen))
        return key, self._answer(ordinal, key, key == standard, request, request.fingerprint(), gen)

    def _ask(self, members: Any, gen: Any) -> tuple[list[Any], dict[str, Request]]:
        capabilities = self.ctx.client_capabilities
        for _, request in members:
            missing = request.missing_capability(capabilities)
            if missing is not None:
                raise missing_capability(request, missing)
        answers: list[Any] = []
        pending: dict[str, Request] = {}
        for explicit_key, request in members:
            key, answer = self._member(explicit_key, request, gen)
            if answer is PENDING:
                pending[key] = request
                answers.append(None)
            else:
                answers.append(answer)
        return answers, pending

    def _answer(self, ordinal: int, key: str, standard: bool, request: Request, fingerprint: bytes, gen: Any) -> Any:
        """The answer to the request at ``ordinal`` as the handler receives it, or ``PENDING``."""
        raise NotImplementedError

    def _step(self, step: Step, gen: Any) -> tuple[int, Any]:
        self.cursor += 1
        ordinal = self.cursor
        key = default_key(Kind.STEP, ordinal)
        self._claim(key, ordinal, gen)
        return self._step_answer(ordinal, key, step, step.fingerprint(), gen)

    def _step_answer(self, ordinal: int, key: str, step: Step, fingerprint: bytes, gen: Any) -> tuple[int, Any]:
        """``(SEND, value)`` for a Step whose value is known, else ``(RUN_STEP, step)``."""
        raise NotImplementedError

    def _patched(self, patch: Patched) -> bool:
        """Which side of a code change this run is on: a run with nothing recorded is on the new side.

        The marker takes an ordinal (unless deprecated), as a fresh replay's does, so the
        keys after it are the same whichever driver runs the handler.
        """
        if not patch.deprecated:
            self.cursor += 1
        return True


class LedgerInterpretation(Interpretation):
    """The bookkeeping of one run of a handler against a ledger, whichever driver runs it.

    Recorded ordinals are answered from ``ledger`` (their kind, key and fingerprint
    checked against what the handler asks now: a replay mismatch otherwise), a recorded
    Step feeds its value without running, a recorded ``Patched`` gate keeps its side;
    the first ordinal with no answer is ``PENDING`` (its slot appended, unanswered, when
    it is new) and a Step with no value runs and is recorded. The replay drivers
    (:class:`mrtr.core.replay.Execution`) then close the generator; the live driver
    (:mod:`mrtr.core.live`) keeps it suspended there, so a live call can start from a
    recorded ledger. ``unmatched`` holds answers that matched no slot (the lenient
    policy), used when the handler asks under their key in this very run.
    """

    __slots__ = ("slots", "fresh", "unmatched", "step_at")

    def __init__(self, spec: HandlerSpec, ctx: Context, ledger: Ledger, unmatched: Mapping[str, Any] | None,
                 on_step: Callable[[Ledger], Any] | None = None, detach: bool = False) -> None:
        Interpretation.__init__(self, spec, ctx, on_step, detach)
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
                raise mismatch(self.spec, ordinal, slot, request, key, fingerprint, gen)
            if not slot.answered:
                raw = self.unmatched.pop(key, _MISSING) if self.unmatched else _MISSING
                if raw is _MISSING:
                    return PENDING
                slot = slots[index] = Slot(kind, fingerprint, slot.key, True, decode_answer(kind, key, raw))
                self.fresh.add(index)
        else:
            raw = self.unmatched.pop(key, _MISSING) if self.unmatched else _MISSING
            if raw is _MISSING:
                slots.append(Slot(kind, fingerprint, stored_key))
                return PENDING
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
                raise mismatch(self.spec, ordinal, slot, step, key, fingerprint, gen)
            if slot.answered:
                return SEND, step_value(step, slot.answer, gen)
        else:
            # Hold the position even if the function fails: later ordinals must not shift.
            self.slots.append(Slot(Kind.STEP, fingerprint))
        self.step_at = (index, fingerprint)
        return RUN_STEP, step

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
        return step_value(step, stored, gen)

    def ledger(self) -> Ledger:
        """The ledger to carry into the next round: every slot reached so far."""
        return Ledger(tuple(self.slots))

    def snapshot(self) -> Ledger:
        """The ledger now, answers merged but not reached yet still marked fresh."""
        # Answers merged but not reached yet keep their "fresh" mark, so they are still
        # checked against their schema when a later execution reaches them.
        return Ledger(tuple(self.slots), frozenset(self.fresh))


def missing_capability(request: Request, missing: dict[str, Any]) -> MissingRequiredClientCapability:
    """The error for ``request`` when the client did not declare ``missing`` (the capability it needs)."""
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


def delivered(kind: int, answer: Any, request: Request, key: str, *, check: bool, ordinal: int = 0,
              named: str | None = None) -> Any:
    """An answer in its stored form (:func:`~mrtr.core.ledger.decode_answer`), as the handler receives it.

    ``kind`` is the slot's kind (a :class:`~mrtr.core.kinds.Kind` or the code a ledger
    stores). ``check`` validates accepted form content against the schema that was
    asked (an answer that arrived with this request); one from a sealed token was
    checked when it was first used. An accepted form answer that the schema, or the
    Struct or model asked with, refuses raises :class:`~mrtr.core.errors.AnswerRefused`
    naming ``key`` and ``ordinal`` (the slot's 1-based position), its message naming the
    answer as ``named`` says (see :func:`~mrtr.core.ledger.decode_answer`).
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
            else:
                content = compiled.as_read(content)  # 5.0 from the token is the 5 validate gave then
            # A Form's answer is its content (RequestedSchema.convert's first case, without its call)
            return ElicitResult("accept", content, content if compiled.struct_type is None and content is not None
                                else compiled.convert(content))
        except InvalidParams as exc:  # the schema refused it, or the Struct or model asked with did
            named = named or f'inputResponses key "{key}"'
            raise AnswerRefused(f"{named}: {exc.message}", key=key, ordinal=ordinal,
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
    A return annotation converts it back (:func:`step_value`). Integers must fit in 64
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
            location=yield_location(gen),
        ) from None


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


def step_value(step: Step, stored: Any, gen: Any) -> Any:
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
            location=yield_location(gen),
        ) from None


def group_members(yielded: Any, spec: HandlerSpec | None = None, gen: Any = None
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
    location = yield_location(gen)
    return HandlerError(f"handler {spec.name} at {location}: {message}", location=location)


def _not_a_group(group: Any, which: str, member: Any, spec: HandlerSpec | None, gen: Any) -> HandlerError:
    if isinstance(member, (Step, Patched)):
        name = "a Step" if isinstance(member, Step) else "a Patched gate"
        what = f"{member.describe_call()}: {name} cannot be a group member; yield it on its own, before the group"
    else:
        what = (f"{type(member).__name__} {short(member)}, which is not a request; build each member with "
                "Elicit, ElicitURL, Sample or ListRoots")
    return _group_error(
        f"a group yield ({type(group).__name__} of {len(group)}) may only hold requests, and its {which} is {what}",
        spec, gen)
