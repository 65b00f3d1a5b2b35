"""Resuming a handler's generator, running its Steps, and closing it: the loop both drivers share.

:func:`advance` (sync generators) and :func:`aadvance` (async ones) resume a generator
and hand each yield to an :class:`~mrtr.core.interpretation.Interpretation` until the
runtime must stop: the handler returned (:data:`DONE`), asked what has no answer yet
(:data:`~mrtr.core.interpretation.STOP`) or reached a Step it detaches at
(:data:`DETACHED`; never a :class:`~mrtr.core.effects.RoundStep`). :func:`start_handler` calls the handler, :func:`check_result` reads
what a plain one returned, and :func:`close_handler` closes a paused generator, telling
a handler that swallows ``GeneratorExit`` what it did (and keeping Python's own report
of that one error off stderr).
"""

from __future__ import annotations

import inspect
import logging
import sys
import types
from collections.abc import Mapping
from typing import Any

from .context import Context
from .diagnostics import definition, handler_failed, yield_location
from .effects import Request, Step
from .errors import HandlerError, ProtocolError
from .handlers import PLAIN, HandlerSpec
from .interpretation import RESULT, SEND, STOP, Interpretation
from .outcomes import Completed

__all__ = ["DONE", "DETACHED", "advance", "aadvance", "start_handler", "check_result", "close_handler",
           "aclose_handler", "close_quietly", "aclose_quietly"]


DONE, DETACHED = 4, 5


def advance(gen: Any, execution: Interpretation, send: Any, throw: BaseException | None) -> tuple[int, Any]:
    """Resume a sync generator until the runtime must stop it, whichever driver runs it.

    Returns ``(DONE, Completed)`` when the handler returned, ``(STOP, pending)`` when it
    asked what has no answer yet (the generator is then suspended at that yield), or
    ``(DETACHED, None)`` when it reached a Step the execution detaches at (a
    :class:`~mrtr.core.effects.RoundStep` runs instead). Raises what
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
            return DONE, check_result(spec, stop.value)
        except ProtocolError:
            raise
        except Exception as exc:
            raise handler_failed(spec, exc) from exc
        operation, payload = execution.interpret(yielded, gen, False)
        if operation == SEND:
            send = payload
        elif operation == STOP:
            return STOP, payload
        elif execution.detach and not payload.in_round:  # a RoundStep runs in the round
            return DETACHED, None
        else:  # RUN_STEP
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
                    location=yield_location(gen),
                )
            send = execution.record_step(payload, result, gen)
            if execution.on_step is not None:
                execution.on_step(execution.snapshot())


async def aadvance(agen: Any, execution: Interpretation, send: Any, throw: BaseException | None) -> tuple[int, Any]:
    """:func:`advance` for an async generator; ``(RESULT, value)`` when it yielded its result."""
    spec = execution.spec
    while True:
        try:
            if throw is None:
                yielded = await agen.asend(send)
            else:
                error, throw = throw, None
                yielded = await agen.athrow(error)
        except StopAsyncIteration:
            location = definition(spec.fn)
            raise HandlerError(
                f"async generator handler {spec.name} at {location} ended without yielding a result: an async "
                "generator cannot `return` a value, so it ends by yielding it (`yield result`; `yield None` for "
                "an empty one). A bare `return` or falling off the end leaves the client with nothing",
                location=location,
            ) from None
        except ProtocolError:
            raise
        except Exception as exc:
            raise handler_failed(spec, exc) from exc
        operation, payload = execution.interpret(yielded, agen, True)
        if operation == SEND:
            send = payload
        elif operation in (STOP, RESULT):
            return operation, payload
        elif execution.detach and not payload.in_round:  # a RoundStep runs in the round
            return DETACHED, None
        else:  # RUN_STEP
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


def close_handler(gen: Any, spec: HandlerSpec) -> None:
    """Close a paused sync generator (its ``finally`` runs); its cleanup's failure is the handler's."""
    try:
        gen.close()
    except RuntimeError as exc:
        if "ignored GeneratorExit" in str(exc):
            error = _swallowed_exit(spec, gen)
            _quiet_finalizer(gen)
            raise error from None
        raise handler_failed(spec, exc) from exc
    except Exception as exc:
        raise handler_failed(spec, exc) from exc


async def aclose_handler(agen: Any, spec: HandlerSpec) -> None:
    """:func:`close_handler` for an async generator."""
    try:
        await agen.aclose()
    except RuntimeError as exc:
        if "ignored GeneratorExit" in str(exc):
            error = _swallowed_exit(spec, agen)
            _quiet_finalizer(agen)
            raise error from None
        raise handler_failed(spec, exc) from exc
    except Exception as exc:
        raise handler_failed(spec, exc) from exc


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
    location = yield_location(gen)
    return HandlerError(
        f"handler {spec.name} ignored GeneratorExit and yielded again at {location}: the runtime closes a "
        "paused handler at once, so a bare `except:` or `except BaseException:` around a yield must re-raise",
        location=location,
    )


def close_quietly(gen: Any) -> None:
    """Close a generator whose run already fails with a better error, dropping what its cleanup raises."""
    try:
        gen.close()
    except BaseException:  # already failing with a better error
        pass


async def aclose_quietly(agen: Any) -> None:
    """:func:`close_quietly` for an async generator."""
    try:
        await agen.aclose()
    except Exception:  # already failing with a better error
        pass


def start_handler(spec: HandlerSpec, ctx: Context, arguments: Mapping[str, Any]) -> Any:
    """Call the handler: a generator for a generator function (none of its code run yet), else what it returned.

    A plain function that returned a generator or coroutine (delegation without
    ``yield from`` or ``await``) is a handler error naming the fix.
    """
    try:
        started = spec.invoke(ctx, arguments)
    except ProtocolError:
        raise
    except Exception as exc:
        raise handler_failed(spec, exc) from exc
    # Generators, async generators and coroutines are final types: their class says it all,
    # and a plain value (the usual result) is refused nothing after one set lookup.
    if started.__class__ in _DELEGATED and spec.shape == PLAIN:
        _refuse_delegation(spec, started)
    return started


_DELEGATED = frozenset({types.GeneratorType, types.AsyncGeneratorType, types.CoroutineType})


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
    location = definition(spec.fn)
    raise HandlerError(
        f"handler {spec.name} at {location} is a plain function that returned {what} "
        f"({getattr(started, '__qualname__', type(started).__name__)}); the runtime only drives a handler that is "
        f"itself a generator or coroutine function: {fix}",
        location=location,
    )


def check_result(spec: HandlerSpec, result: Any) -> Completed:
    """What a handler returned, as :class:`Completed`; a request or Step returned instead of yielded is an error."""
    if isinstance(result, (Request, Step)):
        location = definition(spec.fn)
        raise HandlerError(
            f"handler {spec.name} at {location} returned {result.describe_call()} instead of yielding it: did you "
            f"forget `yield`? Write `answer = yield {result.describe_call()}` and return a result built from the answer",
            location=location,
        )
    return Completed(result)
