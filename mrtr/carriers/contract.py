"""The carrier contract: where a conversation's ledger lives between rounds.

The replay core (:mod:`mrtr.core.replay`) runs a handler against a ledger and returns
``Completed`` or ``InputRequired``; it does not care where the ledger came from. A
carrier does: it restores the ledger for a request, runs the core, and keeps what the
core returns. Three carriers implement :class:`Carrier`:

- the token carrier, :class:`mrtr.carriers.sealed.TokenCarrier`: the ledger travels in
  the sealed ``requestState`` token the client echoes (stateless; any worker serves any
  round). It serves every modern ``tools/call``, ``prompts/get`` and ``resources/read``
  that no other carrier claims;
- the tasks carrier, :class:`mrtr.carriers.tasks.TaskCarrier`: the ledger lives in a
  task record in a store, for a ``tools/call`` to a task tool from a client that
  declared the tasks extension. The call's rounds before the handler's first Step go
  through the token carrier; from that Step on the handler runs as a task;
- the live carrier, :class:`mrtr.carriers.live.LiveCarrier`: no ledger at all, the
  generator itself waits at its ``yield`` while the question goes to the client as a
  request of the server's own, in a legacy (2025-era) session.

Every carrier's :meth:`Carrier.execute` returns a :data:`CarrierOutcome`: the handler's value
(:class:`~mrtr.core.replay.Completed`), which the server shapes, or an :class:`Interim`
result the server sends as it is.

Every carrier decides where handler code runs by :func:`runs_in_thread` (the replaying
ones through :func:`run_handler`, or :func:`run_on_loop` first for a handler that can run
at once), the one place that decides whether a sync handler runs in a worker thread, so
the server's ``sync_handlers`` setting and a handler's own ``thread=True`` (its
:class:`Placement`) mean the same whichever carrier holds the conversation. Both name
once, in a warning, a sync handler left on the event loop that holds it longer than the
placement's ``stall_warning``.

A round that must not run twice (a handler declared ``once=True``, the round that
creates a task) is keyed by :class:`RoundKey` and run through :class:`RoundRecords`,
which records its response in the server's store so a retry gets that response instead
of a second run.
"""

from __future__ import annotations

import inspect
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, NamedTuple, Protocol, overload

from ..core.context import Context
from ..core.errors import HandlerError, ProtocolError
from ..core.jsonrpc import RunSync
from ..core.ledger import Ledger
from ..core.replay import Completed, Detached, InputRequired, handler_spec, replay, replay_async

__all__ = [
    "Carrier",
    "Interim",
    "CarrierOutcome",
    "Placement",
    "STALL_WARNING",
    "StepStore",
    "RoundKey",
    "RoundRun",
    "RoundRecords",
    "TaskAccess",
    "TaskHost",
    "ToolBinding",
    "TASKS_EXTENSION",
    "run_handler",
    "run_on_loop",
    "runs_in_thread",
]

from ..core.wire import TASKS_EXTENSION  # noqa: E402 - re-exported: the one id the server and the client share

STALL_WARNING = 0.1
"""Seconds a sync handler running on the event loop may hold it before it is named in a warning."""

log = logging.getLogger("mrtr")


class Placement(NamedTuple):
    """Where the server runs one handler's sync code, as it decided for that handler.

    ``thread``: in a worker thread (through the ``run_sync`` the transport gives), because
    the handler was registered with ``thread=True`` or the server runs every sync handler
    so. Otherwise on the event loop, and one that holds the loop longer than
    ``stall_warning`` seconds is named once in a warning (``None``: never).
    """

    thread: bool = False
    stall_warning: float | None = STALL_WARNING


class Interim(NamedTuple):
    """A result the server sends as it is while the handler has not completed.

    ``result`` is the result object in wire shape: an ``InputRequiredResult`` from the
    token carrier, a ``CreateTaskResult`` from the tasks carrier.
    """

    result: dict[str, Any]


CarrierOutcome = Completed | Interim
"""What :meth:`Carrier.execute` returns: the handler's value, or a result to send as it is."""


class Carrier(Protocol):
    """Runs one handler invocation for ``tools/call``, ``prompts/get`` or ``resources/read``."""

    async def execute(
        self,
        method: str,
        params: Mapping[str, Any],
        handler: Any,
        arguments: Mapping[str, Any] | None,
        ctx: Context,
        *,
        run_sync: RunSync | None = None,
        placement: Placement | None = None,
    ) -> CarrierOutcome:
        """Restore the ledger ``params`` point at, replay ``handler`` and return the outcome.

        ``params`` are the request's raw params; ``arguments`` the decoded arguments the
        handler is called with; ``run_sync``, when given, runs a sync handler away from
        the event loop where ``placement`` says (see :func:`run_handler`). Raises
        :class:`~mrtr.core.errors.ProtocolError` for requests it cannot trust and
        :class:`~mrtr.core.errors.HandlerError` when handler code fails.
        """
        ...


class RoundKey(NamedTuple):
    """What names one retry of a round in the store, and how long its record is kept.

    ``token`` is a digest of the ``requestState`` the round answers (hex; never the token
    itself: the store is no place for a bearer of the conversation), ``answers`` a
    digest of the ``inputResponses`` it brings (key order aside), and ``expires_at``
    when that token stops being accepted (epoch seconds): after that no retry of the
    round can be served, so its record can go.
    """

    token: str
    answers: str
    expires_at: float


RoundRun = Callable[[], Awaitable["dict[str, Any] | ProtocolError"]]
"""One run of a round: its result object, or the error it ended with (returned, not raised).

Both are recorded, except a result whose ``resultType`` is ``input_required``: the
conversation goes on and its next round has its own token. A *raised*
:class:`~mrtr.core.errors.ProtocolError` (a malformed answer, a replay mismatch, a
missing capability) means the round did not run to an end; nothing is recorded and a
retry runs it again.
"""


class RoundRecords(Protocol):
    """Runs a round at most once per :class:`RoundKey` and answers its retries from the record."""

    async def once(self, key: RoundKey, run: RoundRun) -> dict[str, Any]:
        """The round's result: ``run``'s own on its first attempt, the recorded one on every retry.

        A retry that arrives while the first attempt runs (on any node sharing the store)
        waits for it. A retry whose ``answers`` differ from the recorded round's is
        refused with ``-32602``; an error the round ended with is raised again.
        """
        ...


class StepStore(Protocol):
    """Where a carrier saves the ledger each time a Step's result is recorded.

    :meth:`save` is awaited on the event loop (async handlers); :meth:`save_from_thread`
    is called from the worker thread a sync handler runs in, and returns once saved.
    """

    async def save(self, ledger: Ledger) -> None:
        """Save ``ledger`` before the handler goes on."""
        ...

    def save_from_thread(self, ledger: Ledger) -> None:
        """Save ``ledger`` from a worker thread before the handler goes on."""
        ...


@overload
async def run_handler(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger,
                      unmatched: Mapping[str, Any] | None = None, *, run_sync: RunSync | None,
                      until_step: Literal[False] = False, steps: StepStore | None = None,
                      placement: Placement | None = None) -> Completed | InputRequired: ...
@overload
async def run_handler(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger,
                      unmatched: Mapping[str, Any] | None = None, *, run_sync: RunSync | None,
                      until_step: bool, steps: StepStore | None = None,
                      placement: Placement | None = None) -> Completed | InputRequired | Detached: ...


async def run_handler(
    handler: Any,
    arguments: Mapping[str, Any] | None,
    ctx: Context,
    ledger: Ledger,
    unmatched: Mapping[str, Any] | None = None,
    *,
    run_sync: RunSync | None,
    until_step: bool = False,
    steps: StepStore | None = None,
    placement: Placement | None = None,
) -> Completed | InputRequired | Detached:
    """Replay ``handler`` against ``ledger``: the one place deciding where handler code runs.

    A sync handler (plain function or sync generator) runs in a worker thread through
    ``run_sync`` when one is given and ``placement`` asks for a thread (the server's
    choice for this handler: its ``thread=True``, or ``sync_handlers="thread"``), or
    when no placement is given (the tasks carrier runs every run of a task so). Async
    handlers, and the other sync ones, run on the event loop; a sync one that holds the
    loop longer than ``placement.stall_warning`` is named once in a warning.
    ``until_step`` stops before the first Step that has not run yet, other than a
    :class:`~mrtr.core.effects.RoundStep` (:class:`~mrtr.core.replay.Detached`); ``steps`` saves the ledger after each Step.
    """
    spec = handler_spec(handler)
    is_async = spec.is_async
    if runs_in_thread(handler, run_sync, placement):
        assert run_sync is not None
        on_thread = None if steps is None else steps.save_from_thread
        return await run_sync(  # type: ignore[no-any-return]
            lambda: replay(handler, arguments, ctx, ledger, unmatched, on_step=on_thread, until_step=until_step))
    if steps is not None and not is_async:
        # A sync generator cannot wait for an asynchronous save between two of its lines.
        raise ValueError(f"the sync handler {spec.name} saves its Steps, so it needs run_sync")
    if is_async:
        on_loop = None if steps is None else steps.save
        return await replay_async(handler, arguments, ctx, ledger, unmatched, on_step=on_loop, until_step=until_step)
    return _on_loop(handler, arguments, ctx, ledger, unmatched, until_step, placement)


def run_on_loop(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger,
                unmatched: Mapping[str, Any] | None, *, run_sync: RunSync | None, until_step: bool = False,
                placement: Placement | None = None) -> Completed | InputRequired | Detached | None:
    """:func:`run_handler` without a coroutine for the handler it runs at once: a sync handler on the loop.

    Returns its outcome, or ``None`` when the handler must be awaited (an async handler, or
    a sync one placed in a worker thread): then await :func:`run_handler`. The token
    carrier asks here first, since every plain round of a sync handler comes through it
    and a coroutine around a call that never suspends costs as much as a check.
    """
    if handler_spec(handler).is_async or runs_in_thread(handler, run_sync, placement):
        return None
    return _on_loop(handler, arguments, ctx, ledger, unmatched, until_step, placement)


def _on_loop(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger,
             unmatched: Mapping[str, Any] | None, until_step: bool,
             placement: Placement | None) -> Completed | InputRequired | Detached:
    # A sync handler on the loop never suspends: the sync driver replays it, with no coroutine of its
    # own (and no Steps saved: run_handler refuses them), and the time it takes is the time it held the loop.
    limit = None if placement is None or placement.thread else placement.stall_warning
    if limit is None:
        return replay(handler, arguments, ctx, ledger, unmatched, until_step=until_step)
    started = time.perf_counter()
    try:
        return replay(handler, arguments, ctx, ledger, unmatched, until_step=until_step)
    finally:
        held = time.perf_counter() - started
        if held > limit:
            _stalled(handler, ctx, held, limit)


_DECORATOR = {"tools/call": "@server.tool(thread=True)", "prompts/get": "@server.prompt(thread=True)",
              "resources/read": "@server.resource(..., thread=True) (or resource_template)"}
_warned: weakref.WeakSet[Any] = weakref.WeakSet()
_warned_ids: set[int] = set()  # handlers that cannot be weakly referenced (kept for the process's life)


def _stalled(handler: Any, ctx: Context, held: float, limit: float) -> None:
    """Name a sync handler that held the event loop, once per handler."""
    try:
        if handler in _warned:
            return
        _warned.add(handler)
    except TypeError:
        if id(handler) in _warned_ids:
            return
        _warned_ids.add(id(handler))
    code = getattr(inspect.unwrap(handler), "__code__", None)
    where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
    log.warning(
        "the sync handler %s for %s %r%s held the event loop for %.0f ms (over %.0f ms): no other request of "
        "this worker was served meanwhile. Make it `async def`, or run it in a worker thread with %s",
        handler_spec(handler).name, ctx.method, ctx.target, where, held * 1000, limit * 1000,
        _DECORATOR.get(ctx.method, "thread=True"))


def runs_in_thread(handler: Any, run_sync: RunSync | None, placement: Placement | None = None) -> bool:
    """Whether ``handler``'s code runs through ``run_sync``: a sync handler, when one is given
    and ``placement`` asks for a thread (or no placement is given).

    :func:`run_handler` and the live carrier both decide by it, so ``sync_handlers``
    and ``thread=True`` mean the same whichever carrier runs the handler.
    """
    if run_sync is None or (placement is not None and not placement.thread):
        return False  # decided without the handler: the usual call, on the loop
    return not handler_spec(handler).is_async


class ToolBinding(NamedTuple):
    """What the server gives the tasks carrier to run one tool later, on any node.

    ``arguments`` are the decoded arguments the handler is called with; ``shape`` turns
    the handler's value into the ``CallToolResult`` object; ``handler_failed`` turns a
    failing handler into the result the wire answers for it (a tool error result);
    ``scopes`` are the OAuth scopes calling the tool needs, recorded with its task;
    ``refused`` turns a protocol error the run met (a replay mismatch) into the
    ``error`` object of the failed task, as the server shows errors to clients.
    """

    handler: Any
    arguments: Mapping[str, Any]
    shape: Callable[[Any], dict[str, Any]]
    handler_failed: Callable[[HandlerError], dict[str, Any]]
    scopes: tuple[str, ...] = ()
    refused: Callable[[ProtocolError], dict[str, Any]] = ProtocolError.to_error_object

    def result(self, value: Any) -> dict[str, Any]:
        """The tool's result for what its handler returned: ``shape``'s, or the error result when it cannot shape it."""
        try:
            return self.shape(value)
        except HandlerError as error:
            return self.handler_failed(error)


class TaskAccess(NamedTuple):
    """What guards a task: the tool it runs and the scopes recorded for that tool at its creation."""

    tool: str
    scopes: tuple[str, ...]


class TaskHost(Carrier, Protocol):
    """The tasks carrier as the server sees it: a carrier for ``tools/call`` plus the ``tasks/*`` methods.

    ``execute`` answers an :class:`Interim` ``CreateTaskResult`` (or an
    ``InputRequiredResult`` while the call's rounds before the task last). Each method
    takes the caller's principal and raises ``-32602 "Unknown task"`` for unknown,
    expired and other principals' tasks alike.
    """

    async def get(self, task_id: Any, principal: str | None) -> dict[str, Any]:
        """``tasks/get``: the ``GetTaskResult``."""
        ...

    async def update(self, task_id: Any, principal: str | None, responses: Any) -> dict[str, Any]:
        """``tasks/update``: merge answers; the empty acknowledgement."""
        ...

    async def cancel(self, task_id: Any, principal: str | None) -> dict[str, Any]:
        """``tasks/cancel``: the empty acknowledgement."""
        ...

    async def access(self, task_id: Any, principal: str | None) -> TaskAccess | None:
        """What guards the task, or ``None`` for an unknown, expired or other principal's task."""
        ...
