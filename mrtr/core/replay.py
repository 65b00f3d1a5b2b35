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

import typing
from collections.abc import Callable, Mapping
from typing import Any

from .context import Context
from .diagnostics import handler_failed, mismatch
from .driving import (DONE, aadvance, aclose_handler, aclose_quietly, advance, check_result, close_handler,
                      close_quietly, start_handler)
from .effects import ElicitResult, ElicitURL, Patched, Request, Step
from .errors import ProtocolError
from .handlers import ASYNC_GEN, CORO, CONTEXT_NAMES, SYNC_GEN, HandlerSpec, handler_spec
from .interpretation import PENDING, RESULT, RUN_STEP, SEND, STOP, Interpretation, delivered, recorded, step_value
from .kinds import Kind
from .ledger import Ledger, Slot, decode_answer
from .outcomes import Completed, Detached, InputRequired

__all__ = ["Completed", "InputRequired", "Detached", "HandlerSpec", "handler_spec", "CONTEXT_NAMES", "Execution",
           "replay", "replay_async"]


_MISSING = object()


class Execution(Interpretation):
    """The bookkeeping of one run of a handler against a ledger."""

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


_EMPTY = Ledger()  # immutable: every run without a ledger starts from this one


def drive(gen: Any, execution: Execution) -> Completed | InputRequired | Detached:
    """Run a started sync generator against ``execution``'s ledger to its outcome, closing it if it paused."""
    try:
        operation, payload = advance(gen, execution, None, None)
        if operation == DONE:
            return payload  # type: ignore[no-any-return]
        outcome: InputRequired | Detached = (InputRequired(payload, execution.ledger()) if operation == STOP
                                             else Detached(execution.snapshot()))
    except BaseException:
        close_quietly(gen)
        raise
    close_handler(gen, execution.spec)
    return outcome


async def adrive(agen: Any, execution: Execution) -> Completed | InputRequired | Detached:
    """:func:`drive` for an async generator."""
    try:
        operation, payload = await aadvance(agen, execution, None, None)
        outcome: Completed | InputRequired | Detached
        if operation == STOP:
            outcome = InputRequired(payload, execution.ledger())
        elif operation == RESULT:
            outcome = Completed(payload)
        else:
            outcome = Detached(execution.snapshot())
    except BaseException:
        await aclose_quietly(agen)
        raise
    await aclose_handler(agen, execution.spec)
    return outcome


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
    if spec.shape == SYNC_GEN:
        execution = Execution(spec, ctx, ledger if ledger is not None else _EMPTY, unmatched, on_step, until_step)
        return drive(start_handler(spec, ctx, arguments or {}), execution)
    # A plain function yields nothing: no ledger position is read, so no bookkeeping is built.
    ctx.is_replaying = ledger is not None and len(ledger.slots) > 0
    return check_result(spec, start_handler(spec, ctx, arguments or {}))


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
    if shape == ASYNC_GEN or shape == SYNC_GEN:
        execution = Execution(spec, ctx, ledger if ledger is not None else _EMPTY, unmatched, on_step, until_step)
        started = start_handler(spec, ctx, arguments or {})
        if shape == ASYNC_GEN:
            return await adrive(started, execution)
        return drive(started, execution)
    # A function or coroutine function yields nothing: no ledger position is read, so no
    # bookkeeping is built (the common tool that asks nothing pays for none).
    ctx.is_replaying = ledger is not None and len(ledger.slots) > 0
    started = start_handler(spec, ctx, arguments or {})
    if shape == CORO:
        try:
            result = await started
        except ProtocolError:
            raise
        except Exception as exc:
            raise handler_failed(spec, exc) from exc
        return check_result(spec, result)
    return check_result(spec, started)
