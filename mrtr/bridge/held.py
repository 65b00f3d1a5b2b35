"""Calls to a 2025-era upstream that wait live in this process, between the rounds of the call they serve.

A 2025-era server asks its questions as requests of its own while one call runs: the
call cannot be paused and resumed later, it waits. When the proxy's downstream client
speaks 2026-07-28, each of its rounds is a separate request, so the upstream call has
to wait here, in the process, while that client answers and retries. :class:`HeldCalls`
keeps such calls:

- each runs in a task of the registry's own (:meth:`HeldCalls.running`), with the
  :class:`HeldCall` as the context its questions are routed by;
- its events (a question, its result, its error) go to whoever waits for the next one:
  the forwarded handler's Step, in the request of the round (:meth:`HeldCalls.start`,
  :meth:`HeldCalls.reply`);
- a question waits at most ``answer_timeout`` seconds for its answer; past that the
  upstream call is cancelled and its slot freed, so a client that never retries holds
  nothing for long;
- calls held at once are bounded, in fair shares like the waiting handlers of 2025
  sessions (:mod:`mrtr.server.sessions`): per client (the principal, where there is
  one) and per process; a call past a share is refused at once, naming the bound;
- a call's id names the process that holds it (``<owner>.<random>``, as session ids
  name their worker), and the id travels in the downstream's sealed token
  (:data:`mrtr.core.holding.HELD_BY`), so a retry that reaches another worker can be forwarded to the
  owner, and one that reaches a process without the call gets a clear error.

A Step waiting for the next event that is cancelled (the downstream client went away or
cancelled) cancels the upstream call: it can never be answered.
"""

from __future__ import annotations

import contextvars
import logging
import math
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from ..core.errors import INTERNAL_ERROR, ProtocolError

__all__ = ["CURRENT", "DEFAULT_MAX_HELD", "DEFAULT_MAX_HELD_PER_CLIENT", "CallGone", "HeldCall", "HeldCalls",
           "TooManyHeld"]

log = logging.getLogger("mrtr.bridge")

DEFAULT_MAX_HELD = 1_000
"""Upstream calls one process holds waiting at most (as many as the live handlers of its 2025 sessions)."""

DEFAULT_MAX_HELD_PER_CLIENT = 100
"""Upstream calls one client (principal) holds waiting at most: a tenth of the process's."""

CURRENT: contextvars.ContextVar[Any] = contextvars.ContextVar("mrtr.bridge.current")
"""The forwarded call the running code serves (a :class:`HeldCall`, or the relay of a modern call)."""


class TooManyHeld(ProtocolError):
    """A bound on held upstream calls is reached: this client's share or the process's (``-32603``).

    ``data`` says which (``bound``: ``"client"`` or ``"process"``), its ``limit`` and the
    option that raises it.
    """

    code = INTERNAL_ERROR

    def __init__(self, limit: int, bound: str, option: str) -> None:
        holder = "This client holds" if bound == "client" else "The proxy holds"
        super().__init__(f"{holder} {limit} upstream calls waiting for their answers, its limit ({option}); "
                         "answer or cancel a waiting call, or try again later",
                         data={"limit": limit, "bound": bound, "option": option})


class CallGone(ProtocolError):
    """The held call a retry continues is not in this process (``-32603``, ``data.reason``: ``held-call-gone``).

    Its answer timeout passed, it was cancelled, the upstream ended it, the process holding
    it restarted, or the retry reached a process that never held it.
    """

    code = INTERNAL_ERROR

    def __init__(self, call_id: str, why: str) -> None:
        super().__init__(f"The proxied call this retry continues is gone ({why}); start the call again",
                         data={"reason": "held-call-gone", "call": call_id})


class HeldCall:
    """One upstream call held live: its id, whom it counts against, its events and its pending answers."""

    def __init__(self, call_id: str, client: str | None, capabilities: Any) -> None:
        self.id = call_id
        self.client = client
        self.capabilities = capabilities  # the downstream's, what the upstream session may be asked for
        self.listener: Any = None  # the relay of the round waiting now (progress, logs), else None
        self.scope = trio.CancelScope()
        self.done = False
        self._send, self._events = trio.open_memory_channel[dict[str, Any]](math.inf)
        self._asked = 0
        self._answers: dict[int, tuple[trio.Event, list[Any]]] = {}

    async def ask(self, question: dict[str, Any], timeout: float) -> Any:
        """Hand ``question`` (``{method, params}``) to the downstream and wait for its answer (the upstream's task)."""
        self._asked += 1
        number = self._asked
        arrived = trio.Event()
        slot: list[Any] = []
        self._answers[number] = (arrived, slot)
        self._send.send_nowait({"question": question, "n": number})
        try:
            with trio.fail_after(timeout):
                await arrived.wait()
        except trio.TooSlowError:
            log.info("held call %s: no answer to question %d within %g s; cancelling it upstream", self.id, number,
                     timeout)
            self.scope.cancel()
            raise
        finally:
            self._answers.pop(number, None)
        return slot[0]

    def answer(self, number: int, value: Any) -> None:
        """Deliver the downstream's answer to question ``number``; :class:`CallGone` when it waits for none."""
        waiting = self._answers.get(number)
        if waiting is None or waiting[0].is_set():
            raise CallGone(self.id, f"question {number} is not waiting for an answer: a round already answered "
                                    "was retried")
        waiting[1].append(value)
        waiting[0].set()

    async def next_event(self, listener: Any) -> dict[str, Any]:
        """The call's next event, ``listener`` receiving its progress and logs meanwhile.

        Cancelled (the downstream went away), it cancels the upstream call.
        """
        self.listener = listener
        try:
            return await self._events.receive()
        except trio.EndOfChannel:
            raise CallGone(self.id, "the upstream call ended") from None
        except trio.Cancelled:
            self.scope.cancel()
            raise
        finally:
            self.listener = None

    def finish(self, event: dict[str, Any]) -> None:
        """The call's last event (its result or error)."""
        self.done = True
        self._send.send_nowait(event)
        self._send.close()


class HeldCalls:
    """The upstream calls held in this process (see the module), bounded.

    ``answer_timeout`` bounds each question's wait for its answer (seconds);
    ``max_held`` and ``max_held_per_client`` are the shares; ``owner`` gives the name of
    this process among the workers (read when an id is minted).
    """

    def __init__(self, *, answer_timeout: float = 300.0, max_held: int = DEFAULT_MAX_HELD,
                 max_held_per_client: int = DEFAULT_MAX_HELD_PER_CLIENT,
                 owner: Callable[[], str] = lambda: "0") -> None:
        if not answer_timeout > 0:
            raise ValueError(f"answer_timeout must be a positive number of seconds, got {answer_timeout!r}")
        for name, value in (("max_held", max_held), ("max_held_per_client", max_held_per_client)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.answer_timeout = float(answer_timeout)
        self.max_held = max_held
        self.max_held_per_client = max_held_per_client
        self.owner = owner
        self._calls: dict[str, HeldCall] = {}
        self._by_client: dict[str, int] = {}
        self._nursery: trio.Nursery | None = None

    def __len__(self) -> int:
        return len(self._calls)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[HeldCalls]:
        """Hold calls for the block; leaving it cancels every call still held."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield self
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel()

    def get(self, call_id: str) -> HeldCall:
        """The held call ``call_id`` names; :class:`CallGone` when this process holds none by that id."""
        call = self._calls.get(call_id)
        if call is None:
            owner = call_id.partition(".")[0]
            where = "its answer timeout passed, it was cancelled, or the proxy restarted" if owner == self.owner() \
                else f"it is held by worker {owner!r}, which this request did not reach"
            raise CallGone(call_id, where)
        return call

    def start(self, run: Callable[[], Awaitable[dict[str, Any]]], client: str | None, capabilities: Any) -> HeldCall:
        """Start the upstream call ``run`` makes in a task of its own, counted against ``client``'s share."""
        if self._nursery is None:
            raise RuntimeError("HeldCalls holds calls only inside running()")
        if client is not None and self._by_client.get(client, 0) >= self.max_held_per_client:
            raise TooManyHeld(self.max_held_per_client, "client", "max_held_per_client")
        if len(self._calls) >= self.max_held:
            raise TooManyHeld(self.max_held, "process", "max_held")
        call = HeldCall(f"{self.owner()}.{secrets.token_urlsafe(12)}", client, capabilities)
        self._calls[call.id] = call
        if client is not None:
            self._by_client[client] = self._by_client.get(client, 0) + 1
        self._nursery.start_soon(self._run, call, run)
        return call

    def cancel(self, call_id: str) -> None:
        """Cancel a held call (the downstream cancelled it, or went away); nothing for an unknown id."""
        call = self._calls.get(call_id)
        if call is not None:
            call.scope.cancel()

    async def _run(self, call: HeldCall, run: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        token = CURRENT.set(call)
        event: dict[str, Any] | None = None
        try:
            with call.scope:
                try:
                    event = {"result": await run()}
                except ProtocolError as error:
                    event = {"error": error.to_error_object()}
            if event is None:
                event = {"error": {"code": INTERNAL_ERROR, "message": "The upstream call was cancelled"}}
        except Exception as error:  # the upstream call failed in a way it could not say: its own failure
            log.warning("held call %s failed: %s", call.id, error, exc_info=True)
            event = {"error": {"code": INTERNAL_ERROR, "message": f"The upstream call failed: {error}"}}
        finally:
            CURRENT.reset(token)
            self._calls.pop(call.id, None)
            if call.client is not None:
                left = self._by_client.get(call.client, 1) - 1
                if left:
                    self._by_client[call.client] = left
                else:
                    self._by_client.pop(call.client, None)
            call.finish(event or {"error": {"code": INTERNAL_ERROR, "message": "The upstream call was cancelled"}})
