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
from .diagnostics import handler_failed
from .driving import (DONE, aadvance, aclose_handler, aclose_quietly, advance, check_result, close_handler,
                      close_quietly, start_handler)
from .errors import ProtocolError
from .handlers import ASYNC_GEN, CORO, CONTEXT_NAMES, SYNC_GEN, HandlerSpec, handler_spec
from .interpretation import RESULT, STOP, LedgerInterpretation
from .ledger import Ledger
from .outcomes import Completed, Detached, InputRequired

__all__ = ["Completed", "InputRequired", "Detached", "HandlerSpec", "handler_spec", "CONTEXT_NAMES", "Execution",
           "replay", "replay_async"]


class Execution(LedgerInterpretation):
    """The bookkeeping of one run of a replay driver against a ledger (see :class:`LedgerInterpretation`)."""

    __slots__ = ()


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
    elsewhere (as a task). A :class:`~mrtr.core.effects.RoundStep` is run and recorded
    instead, and the rounds go on after it.
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
