"""Check the tasks in flight in a store against the code about to be deployed, without running them.

Each task still working or waiting for input is replayed from its record against the
handler the new code registers for its tool, as a node would replay it after the
deploy, but only up to the first Step that has not run yet (:func:`run_handler` with
``until_step``): no Step runs, nothing is written, no notification is sent. A task
fails the check when its tool is gone or no longer takes its arguments, when the
replay mismatches its ledger (the diagnostic says a deploy caused it when the task was
started by another version of the handler, and names the gate to add), when the
handler raises on the way, or when a task waiting for answers would now ask for others.
Code between Steps does run, as on every replay: the idempotency contract keeps it
free of side effects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from ...core.context import Context
from ...core.errors import HandlerError, ProtocolError, ReplayMismatch
from ...core.replay import InputRequired
from ...core.versions import deploy_hint, handler_version
from ..contract import run_handler
from .carrier import Resolve
from .record import TaskRecord
from .store import TaskStore

__all__ = ["TaskCheck", "check_task", "check_tasks"]


class TaskCheck(NamedTuple):
    """What the check found for one task: ``problem`` is ``None`` when it replays cleanly.

    ``started_by`` is the version of the handler that started the task (``None`` for a
    record from before versions were kept), ``running`` the version the checked code
    has (``None`` when its tool is gone).
    """

    task_id: str
    tool: str
    status: str
    started_by: str | None
    running: str | None
    problem: str | None


async def check_task(record: TaskRecord, resolve: Resolve, *, lifespan: Any = None) -> TaskCheck:
    """Replay one task's record against the handler ``resolve`` gives for its tool, up to its next Step."""
    found = record.task_id, record.tool, record.status, record.handler_version

    def failed(problem: str, running: str | None = None) -> TaskCheck:
        return TaskCheck(*found, running, problem)

    try:
        binding = resolve(record.tool, record.arguments)
    except ProtocolError as error:
        return failed(f"the code has no tool that can run it: {error.message}")
    running = handler_version(binding.handler)
    ctx = Context(binding.arguments, principal=record.principal, client_capabilities=record.client_capabilities,
                  method="tools/call", target=record.tool, lifespan=lifespan)
    try:
        outcome = await run_handler(binding.handler, binding.arguments, ctx, record.restored_ledger(),
                                    run_sync=None, until_step=True)
    except ReplayMismatch as mismatch:
        return failed(deploy_hint(mismatch, binding.handler, record.handler_version).message, running)
    except ProtocolError as error:
        return failed(error.message, running)
    except HandlerError as error:
        where = f" at {error.location}" if error.location else ""
        return failed(f"the handler fails on replay{where}: {error.message}", running)
    if record.status == "input_required":
        waiting = sorted(record.input_requests)
        asked = sorted(outcome.requests) if isinstance(outcome, InputRequired) else []
        if asked != waiting:
            return failed(f"the task waits for answers to {', '.join(waiting)}, and the code would now ask for "
                          f"{', '.join(asked) or 'nothing'}", running)
    return TaskCheck(*found, running, None)


async def check_tasks(store: TaskStore, resolve: Resolve, *, lifespan: Any = None,
                      task_ids: Iterable[str] | None = None) -> list[TaskCheck]:
    """Check every task in flight in ``store`` (or those of ``task_ids``), in id order.

    A task that finished or expired while the check ran is left out. ``lifespan`` is
    what handlers see as ``ctx.lifespan``.
    """
    checks = []
    for task_id in (await store.in_flight()) if task_ids is None else task_ids:
        record = await store.get(task_id)
        if record is None or record.terminal:
            continue
        checks.append(await check_task(record, resolve, lifespan=lifespan))
    return checks
