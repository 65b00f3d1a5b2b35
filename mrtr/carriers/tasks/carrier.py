"""The task carrier: run handlers as tasks, with the ledger in a store instead of a token.

Lifecycle of one task, as store transitions (each one compare-and-set on the version):

- ``create``: stored ``working`` with a lease held by this node, then run here.
- a run replays the handler from the record's ledger through
  :func:`~mrtr.carriers.contract.run_handler` (the same core as the token carrier; a
  sync handler runs in a worker thread, so lease renewal and other tasks go on). Each
  Step's result is saved before the handler goes on; progress becomes
  ``statusMessage``; the lease is renewed every third of its length. The run ends
  ``completed``, ``failed`` or ``input_required`` (lease dropped), and that last write
  carries the last progress reported.
- ``update``: answers merged leniently into the ledger (:func:`~mrtr.core.ledger.merge_answers`);
  when no key is pending any more, the same write sets ``working`` and takes the lease,
  so whichever update wins that write is the only one that resumes the task.
- ``cancel``: any non-terminal state becomes ``cancelled``; a run on this node is
  cancelled at once, a run elsewhere notices at its next write and stops.
- every node polls for working tasks whose lease expired (their runner died) and takes
  them over, replaying from the saved ledger: Steps already saved are not run again; the
  Step that was running when the runner died runs again (at-least-once).

The round of a call that creates its task runs once per token
(:class:`~mrtr.carriers.tasks.rounds.FinalRounds`, in the same store): a retry of it
with the same ``requestState`` gets the ``CreateTaskResult`` of the task it already
created. A record keeps the version of the handler that started it, so a replay
mismatch after a deploy says so.
"""

from __future__ import annotations

import copy
import logging
import math
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

from ...core.context import Context
from ...core.errors import AnswerRefused, HandlerError, InvalidParams, ProtocolError, ReplayMismatch
from ...core.jsonrpc import RunSync
from ...core.effects import Elicit
from ...core.interpretation import delivered
from ...core.kinds import ASKED, Kind
from ...core.ledger import Ledger, Slot, decode_answer, merge_answers
from ...core.replay import Completed, Detached, InputRequired
from ...core.schema import RequestedSchema
from ...core.versions import deploy_hint, handler_version
from ..contract import Interim, Placement, TaskAccess, ToolBinding, run_handler
from ..sealed import CheckedToken, TokenCarrier
from .record import TaskRecord, TaskTooLarge, new_task_id
from .rounds import FinalRounds
from .store import StoreUnavailable, TaskStore, mutate

__all__ = ["TaskCarrier", "Resolve", "UnknownTask", "status_message"]

log = logging.getLogger("mrtr.tasks")


class UnknownTask(InvalidParams):
    """-32602 "Unknown task": unknown, expired and another principal's tasks look the same."""

    def __init__(self) -> None:
        super().__init__("Unknown task")


Resolve = Callable[[str, Mapping[str, Any]], ToolBinding]
"""Tool name and raw call arguments to a :class:`ToolBinding`; raises ``ProtocolError`` if it cannot."""


def status_message(progress: float, total: float | None, message: str | None) -> str:
    """A progress report as a ``statusMessage``: ``"3/10: copying"``, ``"3"``."""
    text = _number(progress) if total is None else f"{_number(progress)}/{_number(total)}"
    return text if message is None else f"{text}: {message}"


def _number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return str(int(value))
    return str(value)


class _Lost(Exception):
    """This node no longer owns the task (cancelled, taken over or expired)."""


async def _in_thread(run: Callable[[], Any]) -> Any:
    """How a task runs sync handler code: in a worker thread, abandoned when the run is cancelled.

    A task runs off any request, beside its lease renewal and other tasks, and saves
    each Step before going on: sync code on the event loop would stall all of them.
    """
    return await trio.to_thread.run_sync(run, abandon_on_cancel=True)


class TaskCarrier:
    """Creates, runs, resumes and takes over tasks kept in ``store``.

    ``lease`` is the lease length in seconds; ``ttl_ms`` how long a task lives after
    its last activity (``None``: unlimited; see :meth:`TaskRecord.lifetime_end`);
    ``poll_interval_ms`` the polling pace suggested to clients. ``token`` is the server's
    token carrier, which holds the call's ledger while its rounds before the task last
    (see :meth:`execute`). ``clock`` gives the time (epoch seconds) that timestamps,
    leases and expiry are reckoned in. :meth:`serve` must be running (in a nursery) for
    tasks to run. ``rounds`` records, in the same store and with the same lease, the
    rounds that run once (the round creating a task, and the server's ``once=True``
    handlers). Implements :class:`mrtr.carriers.contract.TaskHost`.
    """

    def __init__(
        self,
        store: TaskStore,
        resolve: Resolve,
        *,
        lease: float = 30.0,
        ttl_ms: int | None = 3_600_000,
        poll_interval_ms: int = 1000,
        node: str | None = None,
        token: TokenCarrier | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not lease > 0:
            raise ValueError(f"lease must be a positive number of seconds, got {lease!r}")
        self.store = store
        self.resolve = resolve
        self.clock = clock
        self.lease = float(lease)
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.node = node or secrets.token_hex(8)
        self.token = token
        self.rounds = FinalRounds(store, lease=self.lease, clock=clock)
        self._nursery: trio.Nursery | None = None
        self._runs: dict[str, _Run] = {}

    # -- the node's background work -------------------------------------------------------

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run this node's tasks and rounds, and take over abandoned tasks, until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.rounds.serve)
            self._nursery = nursery
            try:
                task_status.started()
                while True:
                    try:
                        await self.take_over_abandoned()
                    except Exception:
                        # Store errors are handled inside; anything else is a bug, and the node
                        # serving everything else must not die of it.
                        log.exception("looking for abandoned tasks failed")
                    await trio.sleep(self.lease / 3)
            finally:
                self._nursery = None

    async def take_over_abandoned(self) -> int:
        """Take every working task whose lease expired and run it here; returns how many."""
        try:
            ids = await self.store.claimable(self.clock())
        except StoreUnavailable:
            log.warning("cannot look for abandoned tasks while the task store is unavailable")
            return 0
        taken = 0
        for task_id in ids:
            try:
                record, changed = await mutate(self.store, task_id, self._claim, clock=self.clock)
            except StoreUnavailable:
                log.warning("task %s: cannot take over while the task store is unavailable", task_id)
                return taken
            except TaskTooLarge as error:  # stored under a larger cap than this node's: it can never run here
                log.warning("task %s: cannot take over: %s", task_id, error.message)
                await self._fail_too_large(task_id, error)
                continue
            if changed and record is not None:
                log.info("task %s: lease expired, resuming by replay on node %s", task_id, self.node)
                self._start(record)
                taken += 1
        return taken

    async def _fail_too_large(self, task_id: str, error: TaskTooLarge) -> None:
        def fail(record: TaskRecord, now: float) -> TaskRecord | None:
            return record.evolve(now, **_too_large(error)) if record.lease_free(now) else None

        try:
            await mutate(self.store, task_id, fail, clock=self.clock)
        except (StoreUnavailable, TaskTooLarge):
            log.warning("task %s: cannot record that it is too large", task_id)

    def _claim(self, record: TaskRecord, now: float) -> TaskRecord | None:
        if not record.lease_free(now):
            return None
        return record.evolve(now, lease_owner=self.node, lease_expiry=now + self.lease)

    def _start(self, record: TaskRecord) -> None:
        if self._nursery is None:
            raise RuntimeError("TaskCarrier.serve() is not running; start it in a nursery before running tasks")
        self._nursery.start_soon(self._run, record)

    # -- the methods ----------------------------------------------------------------------

    async def create(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None,
        *,
        principal: str | None,
        client_capabilities: Mapping[str, Any] | None,
        ledger: Ledger | None = None,
        result: dict[str, Any] | None = None,
        scopes: tuple[str, ...] = (),
        version: str | None = None,
    ) -> TaskRecord:
        """Store a new working task, start running it, and return the stored record.

        ``ledger`` carries answers gathered by MRTR rounds before the task existed;
        ``result`` stores a task that is already completed (the handler finished during
        those rounds); ``scopes`` are the tool's, which its task methods need too;
        ``version`` is the version of the handler that starts it.
        Returns only once the record is durable, so ``tasks/get`` resolves it at once.
        """
        if self._nursery is None:
            raise RuntimeError("TaskCarrier.serve() is not running; start it in a nursery before creating tasks")
        now = self.clock()
        restored = ledger if ledger is not None else Ledger()
        record = TaskRecord(
            task_id=new_task_id(),
            tool=tool,
            arguments=dict(arguments or {}),
            principal=principal,
            client_capabilities=dict(client_capabilities or {}),
            created_at=now,
            updated_at=now,
            ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
            ledger=restored.slots,
            fresh=tuple(sorted(restored.fresh)),
            lease_owner=None if result is not None else self.node,
            lease_expiry=0.0 if result is not None else now + self.lease,
            status="completed" if result is not None else "working",
            result=result,
            scopes=tuple(scopes),
            handler_version=version,
        ).with_lifetime(now)
        await self.store.create(record)
        if result is None:
            self._start(record)
        return record

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
    ) -> Interim:
        """``tools/call`` for a task tool from a client that declared the extension.

        The handler's questions before its first Step are rounds on the call itself
        (the token carrier checks and seals the ledger, as for any call, and runs the
        handler where :func:`~mrtr.carriers.contract.run_handler` says for ``run_sync``
        and ``placement``);
        once it reaches a Step (other than a :class:`~mrtr.core.effects.RoundStep`,
        which runs in the round), or finishes, the task is stored and ``CreateTaskResult``
        answered. The Step and everything after it run in the task, on this node or a
        later one. A call that carries a ``requestState`` runs once per token
        (:attr:`rounds`): its retries get the ``CreateTaskResult`` of the task it created.
        """
        if self.token is None:
            raise RuntimeError("TaskCarrier.execute needs the token carrier (token=server.token_carrier)")
        checked = self.token.check(method, params, ctx.principal)
        key = checked.key()

        async def call() -> dict[str, Any]:
            return await self._call(method, params, handler, arguments, ctx, run_sync, checked, placement)

        if key is None:  # a first call: nothing names it, so a retry of it is a new call
            return Interim(await call())
        return Interim(await self.rounds.once(key, call))

    async def _call(self, method: str, params: Mapping[str, Any], handler: Any, arguments: Mapping[str, Any] | None,
                    ctx: Context, run_sync: RunSync | None, checked: CheckedToken,
                    placement: Placement | None = None) -> dict[str, Any]:
        assert self.token is not None
        name = str(params.get("name"))
        # What the client sent, kept apart before the handler runs: it may change what it was given
        # (values typed Any reach it as the very objects in params), and the task must replay from
        # the arguments of the call, not from what its rounds on the call left of them.
        raw = copy.deepcopy(params.get("arguments") or {})
        done: dict[str, Any] | None = None
        binding: ToolBinding | None = None
        try:
            outcome = await self.token.until_step(method, params, handler, arguments, ctx, run_sync=run_sync,
                                                  checked=checked, placement=placement)
        except HandlerError as error:
            outcome = Completed(None)
            binding = self.resolve(name, raw)
            done = binding.handler_failed(error)
        if isinstance(outcome, Interim):
            return outcome.result
        if binding is None:
            binding = self.resolve(name, raw)
        common: dict[str, Any] = {"principal": ctx.principal, "client_capabilities": ctx.client_capabilities,
                                  "scopes": binding.scopes, "version": handler_version(handler)}
        if isinstance(outcome, Detached):
            record = await self.create(name, raw, ledger=outcome.ledger, **common)
        else:
            if done is None:
                done = binding.result(outcome.result)
            record = await self.create(name, raw, result=done, **common)
        return {**record.to_wire(), "resultType": "task"}

    async def _owned(self, task_id: Any, principal: str | None) -> TaskRecord:
        if not isinstance(task_id, str) or not task_id:
            raise InvalidParams('tasks methods need a string "taskId"')
        record = await self.store.get(task_id)
        if record is None or record.principal != principal:
            raise UnknownTask()
        return record

    async def access(self, task_id: Any, principal: str | None) -> TaskAccess | None:
        """The task's tool and recorded scopes, or ``None`` where every method would say "Unknown task"."""
        try:
            record = await self._owned(task_id, principal)
        except InvalidParams:  # unknown, expired, another principal's, or no id at all; a store failure propagates
            return None
        return TaskAccess(record.tool, record.scopes)

    async def get(self, task_id: Any, principal: str | None) -> dict[str, Any]:
        """The ``GetTaskResult`` for ``tasks/get``."""
        record = await self._owned(task_id, principal)
        return {**record.to_wire(), "resultType": "complete"}

    async def update(self, task_id: Any, principal: str | None, responses: Any) -> dict[str, Any]:
        """``tasks/update``: merge answers; resume once nothing is pending, exactly once across nodes."""
        current = await self._owned(task_id, principal)
        if responses is not None and not isinstance(responses, dict):
            raise InvalidParams("inputResponses must be an object mapping keys to answers")
        answers = responses or {}
        # Stored answers are replayed later, off the request: one that breaks its form would fail the
        # whole task then, so it is refused now and the task keeps waiting for a good one.
        for key, value in answers.items():
            _check_form_answer(key, current.input_requests.get(key), value)

        def answer(record: TaskRecord, now: float) -> TaskRecord | None:
            if record.status != "input_required":
                return None
            # Only keys outstanding now count: unknown, answered and superseded ones are ignored.
            relevant = {key: value for key, value in answers.items() if key in record.input_requests}
            if not relevant:
                return None
            merged, _ = merge_answers(record.restored_ledger(), relevant, lenient=True)
            answered = {slot.wire_key(i + 1) for i, slot in enumerate(merged.slots)
                        if slot.answered and slot.kind in ASKED}
            pending = {key: request for key, request in record.input_requests.items() if key not in answered}
            changes: dict[str, Any] = {"ledger": merged.slots, "fresh": tuple(sorted(merged.fresh))}
            if record.refused_answer is not None:  # answered again: the reason no longer holds
                changes["status_message"] = changes["refused_answer"] = None
            if pending:
                return record.evolve(now, input_requests=pending, **changes)
            return record.evolve(
                now, status="working", input_requests={}, lease_owner=self.node, lease_expiry=now + self.lease,
                **changes,
            )

        record, changed = await mutate(self.store, task_id, answer, clock=self.clock)
        if changed and record is not None and record.status == "working":
            self._start(record)
        return {"resultType": "complete"}

    async def cancel(self, task_id: Any, principal: str | None) -> dict[str, Any]:
        """``tasks/cancel``: cooperative; a terminal task stays as it is."""
        await self._owned(task_id, principal)

        def stop(record: TaskRecord, now: float) -> TaskRecord | None:
            if record.terminal:
                return None
            return record.evolve(
                now, status="cancelled", status_message="Cancelled by the client", input_requests={},
                lease_owner=None, lease_expiry=0.0,
            )

        record, changed = await mutate(self.store, task_id, stop, clock=self.clock)
        run = self._runs.get(task_id)
        if changed and run is not None:
            run.abandon()
        return {"resultType": "complete"}

    # -- one run ---------------------------------------------------------------------------

    async def _run(self, record: TaskRecord) -> None:
        run = _Run(self, record)
        self._runs[record.task_id] = run
        try:
            await run.execute()
        except Exception:
            # A bug in one run must not take the node's other runs and requests with it; the
            # task's lease runs out and a node takes it over.
            log.exception("task %s: its run failed unexpectedly; left for takeover", record.task_id)
        finally:
            if self._runs.get(record.task_id) is run:
                del self._runs[record.task_id]


def _too_large(error: TaskTooLarge) -> dict[str, Any]:
    """The changes that fail a task whose record would not fit; they drop what made it large."""
    message = f"Internal error: the task could not be saved: {error.message[len('Task too large: ') :]}"
    return {"status": "failed", "error": {"code": -32603, "message": message, "data": error.data},
            "status_message": "The task failed", "arguments": {}, "ledger": (), "fresh": (), "input_requests": {},
            "result": None}


def _asked_again(record: TaskRecord, refused: AnswerRefused) -> dict[str, Any]:
    """The changes that put a task back to ``input_required`` for the answer its run refused."""
    index = refused.ordinal - 1
    slots = list(record.ledger)
    slot = slots[index]
    slots[index] = Slot(slot.kind, slot.fingerprint, slot.key)  # pending again
    return {"status": "input_required", "input_requests": {refused.key: refused.request.to_wire()},
            "ledger": tuple(slots), "fresh": tuple(position for position in record.fresh if position != index),
            "status_message": f"The answer was refused, answer again: {refused.message}",
            "refused_answer": refused.message}


def _check_form_answer(key: str, request: Any, answer: Any) -> None:
    """Raise :class:`InvalidParams` when an accepted answer does not fit the form it answers.

    The check every carrier makes when a run reaches an answer
    (:func:`~mrtr.core.interpretation.delivered`), made here against the form as the task
    stored it, since no run has reached the question yet.
    """
    if not isinstance(request, dict) or request.get("method") != "elicitation/create":
        return
    params = request.get("params")
    if not isinstance(params, dict):
        return
    schema, message = params.get("requestedSchema"), params.get("message")
    if not isinstance(schema, dict) or not isinstance(message, str):
        return  # a URL elicitation: its answers carry no content
    asked = Elicit(message, RequestedSchema(schema))
    delivered(Kind.ELICIT, decode_answer(Kind.ELICIT, key, answer), asked, key, check=True)


class _Run:
    """One execution of a task's handler on this node, while it holds the lease."""

    def __init__(self, carrier: TaskCarrier, record: TaskRecord) -> None:
        self.carrier = carrier
        self.store = carrier.store
        self.record = record
        self.lost = False
        self.scope = trio.CancelScope()
        self.lock = trio.Lock()
        self.wake = trio.Event()
        self.message: str | None = None
        self.trio_token = trio.lowlevel.current_trio_token()

    def abandon(self) -> None:
        """Stop this run without writing anything more."""
        self.lost = True
        self.scope.cancel()

    async def write(self, change: Callable[[TaskRecord, float], TaskRecord], *, lease_only: bool = False) -> None:
        """Compare-and-set the next version; give up the run if the task is no longer ours.

        ``lease_only``: ``change`` moves nothing but the lease (:meth:`TaskRecord.renewed`),
        so the store writes only that (:meth:`TaskStore.renew`).
        """
        save = self.store.renew if lease_only else self.store.replace
        async with self.lock:
            if self.lost:
                raise _Lost()
            current = self.record
            while True:
                if current.terminal or current.lease_owner != self.carrier.node:
                    self.abandon()
                    raise _Lost()
                changed = change(current, self.carrier.clock())
                if await save(changed):
                    self.record = changed
                    return
                latest = await self.store.get(current.task_id)
                if latest is None:
                    self.abandon()
                    raise _Lost()
                current = latest

    async def keep_lease(self) -> None:
        """Renew the lease every third of its length, and publish progress as it comes."""
        interval = self.carrier.lease / 3
        while True:
            with trio.move_on_after(interval):
                await self.wake.wait()
            self.wake = trio.Event()
            message = self.message
            lease = self.carrier.lease
            # While it works, this run is the task's only writer, so its own copy says what is stored.
            reported = message is None or message == self.record.status_message

            def renew(record: TaskRecord, now: float) -> TaskRecord:
                return record.renewed(now, now + lease)

            def publish(record: TaskRecord, now: float) -> TaskRecord:
                return record.evolve(now, lease_expiry=now + lease, status_message=message)

            try:
                if reported:
                    await self.write(renew, lease_only=True)
                else:
                    await self.write(publish)
            except _Lost:
                return
            except StoreUnavailable:
                log.warning("task %s: cannot renew the lease while the task store is unavailable", self.record.task_id)

    def notify(self, method: str, params: Mapping[str, Any]) -> None:
        """The Context's notify: progress becomes the status message (thread-safe)."""
        if method != "notifications/progress":
            return
        self.message = status_message(params["progress"], params.get("total"), params.get("message"))
        self.trio_token.run_sync_soon(self._wake)

    def _wake(self) -> None:
        self.wake.set()

    async def save(self, ledger: Ledger) -> None:
        """Save the ledger after a Step, before the handler goes on."""
        slots, fresh = ledger.slots, tuple(sorted(ledger.fresh))
        await self.write(lambda record, now: record.evolve(now, ledger=slots, fresh=fresh))

    def save_from_thread(self, ledger: Ledger) -> None:
        """:meth:`save` for a sync handler running in a worker thread."""
        if self.lost:
            raise _Lost()
        trio.from_thread.run(self.save, ledger, trio_token=self.trio_token)

    async def execute(self) -> None:
        """Replay the handler while renewing the lease, then record how it ended."""
        final: dict[str, Any] | None = None
        with self.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.keep_lease)
                final = await self.attempt()
                nursery.cancel_scope.cancel()
        if final is None or self.lost:
            return
        # The lease renewal that would have published the last progress was cancelled with the
        # run, or never woke up: the write that ends the run carries it.
        ended = final if self.message is None or "status_message" in final else {**final, "status_message": self.message}

        def finish(current: TaskRecord, now: float) -> TaskRecord:
            return current.evolve(now, lease_owner=None, lease_expiry=0.0, **ended)

        task_id = self.record.task_id
        try:
            try:
                await self.write(finish)
            except TaskTooLarge as error:  # the outcome does not fit: the task fails, saying why
                log.warning("task %s: %s", task_id, error.message)
                done = {"lease_owner": None, "lease_expiry": 0.0, **_too_large(error)}
                await self.write(lambda current, now: current.evolve(now, **done))
        except _Lost:
            log.info("task %s: finished after it was cancelled or taken over; outcome dropped", task_id)
        except StoreUnavailable:
            log.warning("task %s: cannot save the outcome while the task store is unavailable; left for takeover",
                        task_id)

    async def attempt(self) -> dict[str, Any] | None:
        """The record changes that end this run, or ``None`` when it must end without a write."""
        record = self.record
        task_id = record.task_id
        try:
            # A copy for each run: a handler may change what it was given, and the next run (after an
            # answer, on this node) must start from the task's arguments as the call sent them.
            binding = self.carrier.resolve(record.tool, copy.deepcopy(record.arguments))
        except ProtocolError as error:
            return {"status": "failed", "error": error.to_error_object(), "status_message": "The task failed"}
        try:
            outcome = await self.replay(binding)
        except _Lost:
            log.info("task %s: no longer owned by node %s; its run stops", task_id, self.carrier.node)
            return None
        except StoreUnavailable:
            # The lease runs out; this node or another takes the task over once the store is back.
            log.warning("task %s: the task store failed mid-run; left for takeover", task_id)
            return None
        except TaskTooLarge as error:  # a Step's result cannot be saved: the handler must not go on
            log.warning("task %s: %s", task_id, error.message)
            return _too_large(error)
        except AnswerRefused as refused:
            if refused.ordinal - 1 in self.record.fresh:
                # An answer tasks/update could not check (the Struct or model asked with refused it): the
                # task asks that question again, with the reason, rather than fail for one bad answer.
                return _asked_again(self.record, refused)
            # one accepted in an earlier run (a model made stricter since): later slots built on it
            return {"status": "failed", "error": binding.refused(refused), "status_message": "The task failed"}
        except HandlerError as error:
            return {"status": "completed", "result": binding.handler_failed(error)}
        except ReplayMismatch as mismatch:
            hinted = deploy_hint(mismatch, binding.handler, record.handler_version)
            return {"status": "failed", "error": binding.refused(hinted), "status_message": "The task failed"}
        except ProtocolError as error:
            return {"status": "failed", "error": binding.refused(error), "status_message": "The task failed"}
        except Exception:
            # A fault of the runtime, not of the handler: like any unexpected failure, it
            # reaches the log with its traceback and the client as a plain -32603.
            log.exception("task %s: runtime failure", task_id)
            return {"status": "failed", "error": {"code": -32603, "message": "Internal error"},
                    "status_message": "The task failed"}
        return self.conclude(binding, outcome)

    async def replay(self, binding: ToolBinding) -> Completed | InputRequired:
        record = self.record
        ctx = Context(
            binding.arguments,
            principal=record.principal,
            client_capabilities=record.client_capabilities,
            method="tools/call",
            target=record.tool,
            progress_token=record.task_id,
            notify=self.notify,
        )
        outcome = await run_handler(binding.handler, binding.arguments, ctx, record.restored_ledger(),
                                    run_sync=_in_thread, steps=self)
        return outcome

    def conclude(self, binding: ToolBinding, outcome: Completed | InputRequired) -> dict[str, Any]:
        if isinstance(outcome, Completed):
            return {"status": "completed", "result": binding.result(outcome.result), "ledger": (), "fresh": ()}
        return {
            "status": "input_required",
            "input_requests": outcome.to_wire(),
            "ledger": outcome.ledger.slots,
            "fresh": tuple(sorted(outcome.ledger.fresh)),
        }
