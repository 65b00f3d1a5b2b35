"""The live carrier: a legacy session's call, its generator waiting at each ``yield``.

In a 2025-era session the server may send requests to the client while a call runs,
so nothing needs to survive between rounds: :class:`LiveCarrier` drives the handler
with the live driver (:mod:`mrtr.core.live`), sends each round's requests to the
client at once through the :class:`~mrtr.core.peer.Peer` the transport provides for
the call, and resumes the generator when all of them are answered. A Step runs once;
code before a yield runs once.

What a round becomes on the wire is the negotiated version's
(:func:`mrtr.core.eras.legacy_request`): a form downgraded to that version's
vocabulary, a URL elicitation with a fresh ``elicitationId``. Every request of a round
is rendered before any is sent, so a round the version cannot carry fails with nothing
asked.

When a round cannot be answered the call fails and the generator is closed (its
``finally`` runs) before the error propagates: the client's answer did not come within
the answer timeout, it answered with an error, the session ended, or the session, its
client or the process already holds its share of waiting handlers (:class:`Suspensions`).
A cancelled call (the transport cancels it on ``notifications/cancelled``) closes the
generator too; the peer withdraws the requests still unanswered.

A URL elicitation the user accepted is complete, from the server's side, once the
handler goes past it: when the next round does not ask the same page again, or the
handler finishes, ``notifications/elicitation/complete`` goes to the client with its
``elicitationId``.

**Recorded calls.** Given a :class:`~mrtr.core.calls.CallJournal` (a shared store
keeps the session's calls), the carrier records the call as it goes: before a round's
requests reach the client, the round (the ids it went out under, when) with the ledger
so far; after each Step, the ledger with its value (an async handler and one in a
worker thread before they go on; a sync handler on the event loop with its next round).
A journal whose ``resumed`` is set is a call adopted from a process that stopped: the
driver replays the handler against the recorded ledger (no Step runs again) to the
round the call waited on, and the carrier waits for that round's answers under the ids
it went out under, taking those the client sent meanwhile, for what is left of the
answer timeout; the round is not sent again. A call of a handler declared ``once=True``
whose process stopped while it ran code (waiting for nothing) is not run again: whether
its code after its last answer took effect is unknown, so it ends with
:class:`CallInterrupted`, as a modern round that runs once does.

:class:`LiveCarrier` implements :class:`~mrtr.carriers.contract.Carrier`; it imports no
event loop.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Protocol

from ..core.calls import CallJournal, CallState, Question
from ..core.context import Context
from ..core.effects import ElicitURL
from ..core.errors import InternalError
from ..core.eras import legacy_request
from ..core.jsonrpc import Notify, RunSync
from ..core.ledger import Ledger
from ..core.live import MAX_LIVE_ROUNDS, LiveDriver, Questions
from ..core.peer import AnswerTimeout, Peer
from ..core.replay import Completed, handler_spec
from .contract import runs_in_thread

__all__ = ["CallInterrupted", "LiveCarrier", "Suspensions"]


class CallInterrupted(InternalError):
    """An adopted call of a handler declared ``once=True`` whose process stopped while it ran code (-32603).

    Its code after its last answer may have run, or not: a handler that runs once is not
    run again, as a modern round declared so is not (``RoundInterrupted``).
    """

    def __init__(self) -> None:
        super().__init__(
            "Internal error: the process running this call stopped while it ran its code, after its last answer; "
            "a handler declared once=True is not run again, so whether it took effect is unknown: call it again")


class Suspensions(Protocol):
    """The count of handlers waiting for their clients' answers that one call is held to, with its bounds.

    The bounds are fair shares: a session's, its client's and the process's
    (:meth:`mrtr.server.sessions.SessionRegistry.waits_of`).
    """

    def acquire(self, method: str, *, adopted: bool = False) -> None:
        """Count one more waiting handler; at a bound count nothing and raise
        :class:`~mrtr.core.peer.TooManySuspended` naming it (``method`` is what would have been sent).

        ``adopted``: a call adopted from another process, admitted under a share there,
        is counted but never refused (refusing it would end a conversation a restart moved).
        """
        ...

    def release(self) -> None:
        """Count one fewer."""
        ...


class LiveCarrier:
    """Runs one call of a legacy session live; implements :class:`~mrtr.carriers.contract.Carrier`.

    ``peer`` reaches the client for this call; ``version`` is the session's negotiated
    protocol version; ``answer_timeout`` (seconds) bounds the wait for each round;
    ``suspensions`` counts the waiting handlers against their bounds (``None``: not
    counted); ``max_rounds`` caps the rounds of one call; ``notify`` sends the call's
    notifications (the URL elicitations' completion); ``journal`` records the call in a
    shared store, or resumes one adopted from another process (see the module docs);
    ``once`` says the handler was declared ``once=True``.
    """

    __slots__ = ("peer", "version", "answer_timeout", "suspensions", "max_rounds", "notify", "journal", "once")

    def __init__(self, peer: Peer, *, version: str, answer_timeout: float, suspensions: Suspensions | None = None,
                 max_rounds: int = MAX_LIVE_ROUNDS, notify: Notify | None = None,
                 journal: CallJournal | None = None, once: bool = False) -> None:
        if not answer_timeout > 0:
            raise ValueError(f"answer_timeout must be a positive number of seconds, got {answer_timeout!r}")
        self.peer = peer
        self.version = version
        self.answer_timeout = answer_timeout
        self.suspensions = suspensions
        self.max_rounds = max_rounds
        self.notify = notify
        self.journal = journal
        self.once = once  # the handler was declared once=True: an adopted call that was running code is not rerun

    async def execute(
        self,
        method: str,
        params: Mapping[str, Any],
        handler: Any,
        arguments: Mapping[str, Any] | None,
        ctx: Context,
        *,
        run_sync: RunSync | None = None,
    ) -> Completed:
        """Run ``handler`` to its end, asking the client each round live; return its value.

        ``params`` are the request's params (unused: a live call carries no ledger).
        Raises :class:`~mrtr.core.errors.ProtocolError` subclasses (a capability the
        client lacks, a malformed answer, a :class:`~mrtr.core.peer.LiveRequestFailed`)
        and :class:`~mrtr.core.errors.HandlerError` when handler code fails; the
        generator is closed first.
        """
        threaded = runs_in_thread(handler, run_sync)
        journal = self.journal
        resumed = journal.resumed if journal is not None else None
        if resumed is not None and self.once and not resumed.state.pending:
            raise CallInterrupted()
        accepted: dict[bytes, str] = {}  # fingerprint of an accepted URL elicitation -> its elicitationId
        if resumed is not None:
            accepted.update((bytes.fromhex(fingerprint), elicitation)
                            for fingerprint, elicitation in resumed.state.accepted.items())
        recorder = _Recorder(journal, accepted) if journal is not None else None
        on_step: Any = None
        if recorder is not None:
            if threaded and run_sync is not None:
                on_step = recorder.step_from_thread
            elif handler_spec(handler).is_async:
                on_step = recorder.step
            # A sync handler on the event loop cannot wait for a save between two of its lines: its Steps
            # are recorded with its next round (or not at all if it asks nothing more).
        if resumed is None:
            driver = LiveDriver(handler, arguments, ctx, max_rounds=self.max_rounds, on_step=on_step)
        else:
            state = resumed.state
            driver = LiveDriver(handler, arguments, ctx, max_rounds=self.max_rounds, ledger=Ledger(state.ledger),
                                rounds=state.rounds - 1 if state.pending else state.rounds, on_step=on_step)
        if recorder is not None:
            recorder.driver = driver
        try:
            if threaded and run_sync is not None:
                outcome = await run_sync(driver.start)
            else:
                outcome = await driver.astart()
            pending = resumed.state.pending if resumed is not None else ()
            while isinstance(outcome, Questions):
                self._completed(accepted, outcome)
                if pending and [question.key for question in pending] == [item.key for item in outcome.asked]:
                    answers = await self._await(outcome, pending, resumed, accepted)  # type: ignore[arg-type]
                else:
                    answers = await self._ask(outcome, accepted, driver)
                pending = ()
                if threaded and run_sync is not None:
                    outcome = await run_sync(lambda: driver.resume(answers))
                else:
                    outcome = await driver.aresume(answers)
            self._completed(accepted, None)
            assert isinstance(outcome, Completed)
            return outcome
        except Exception:
            # The round failed outside handler code (the driver closes on its own failures).
            if threaded and run_sync is not None and not driver.done:
                await run_sync(driver.close_quietly)
            else:
                await driver.aclose_quietly()
            raise
        except BaseException:
            # Cancelled (or handed over): close here, now (a worker thread would not start under a cancelled scope).
            if threaded:
                driver.close_quietly()
            else:
                await driver.aclose_quietly()
            raise

    async def _ask(self, questions: Questions, accepted: dict[bytes, str], driver: LiveDriver) -> dict[str, Any]:
        """Send one round and return the answers by wire key (recording it first, with a journal)."""
        rendered = [legacy_request(item.request, self.version) for item in questions.asked]
        first = rendered[0][0]
        suspensions = self.suspensions
        if suspensions is not None:
            suspensions.acquire(first)  # TooManySuspended at a bound: nothing was sent
        journal = self.journal
        try:
            if journal is None:
                results = await self.peer.request_all(rendered, timeout=self.answer_timeout)
            else:
                journal.hold()  # the round's requests reach the client once recorded, with the ids they carry

                async def sent(ids: list[Any]) -> None:
                    asked = tuple(Question(item.key, question_id, method,
                                           str(params.get("elicitationId", "")) if isinstance(item.request, ElicitURL)
                                           else "")
                                  for item, question_id, (method, params) in zip(questions.asked, ids, rendered))
                    await journal.save(CallState(ledger=driver.ledger.slots, rounds=driver.rounds, pending=asked,
                                                 asked_at=time.time(), accepted=_hexed(accepted)))
                    journal.waiting = True

                try:
                    results = await self.peer.request_all(rendered, timeout=self.answer_timeout, sent=sent)
                finally:
                    journal.waiting = False
        finally:
            if suspensions is not None:
                suspensions.release()
        answers: dict[str, Any] = {}
        for item, (_, params), result in zip(questions.asked, rendered, results, strict=True):
            answers[item.key] = result
            if isinstance(item.request, ElicitURL) and isinstance(result, dict) and result.get("action") == "accept":
                accepted[item.fingerprint] = params["elicitationId"]
        return answers

    async def _await(self, questions: Questions, pending: tuple[Question, ...], resumed: Any,
                     accepted: dict[bytes, str]) -> dict[str, Any]:
        """Wait, adopted, for the answers to the round another process sent: what is left of its answer timeout."""
        state: CallState = resumed.state
        left = self.answer_timeout - max(0.0, time.time() - state.asked_at)
        suspensions = self.suspensions
        if suspensions is not None:
            suspensions.acquire(pending[0].method, adopted=True)
        journal = self.journal
        assert journal is not None
        journal.waiting = True
        try:
            if left <= 0 and not all(question.id in resumed.answers for question in pending):
                raise AnswerTimeout(pending[0].method, self.answer_timeout)
            results = await self.peer.await_answers([(question.id, question.method) for question in pending],
                                                    timeout=left, answered=resumed.answers)
        finally:
            journal.waiting = False
            if suspensions is not None:
                suspensions.release()
        answers: dict[str, Any] = {}
        for item, question, result in zip(questions.asked, pending, results, strict=True):
            answers[item.key] = result
            if question.elicitation_id and isinstance(result, dict) and result.get("action") == "accept":
                accepted[item.fingerprint] = question.elicitation_id
        return answers

    def _completed(self, accepted: dict[bytes, str], questions: Questions | None) -> None:
        """Tell the client which accepted URL elicitations the handler went past."""
        if not accepted:
            return
        asked_again = {item.fingerprint for item in questions.asked} if questions is not None else set()
        for fingerprint in [fingerprint for fingerprint in accepted if fingerprint not in asked_again]:
            elicitation_id = accepted.pop(fingerprint)
            if self.notify is not None:
                self.notify("notifications/elicitation/complete", {"elicitationId": elicitation_id})
        for fingerprint in asked_again:
            accepted.pop(fingerprint, None)  # asked again: a new elicitation, with a new id


def _hexed(accepted: dict[bytes, str]) -> dict[str, str]:
    return {fingerprint.hex(): elicitation for fingerprint, elicitation in accepted.items()}


class _Recorder:
    """Saves a recorded call's ledger after each Step (what the driver's ``on_step`` calls)."""

    __slots__ = ("journal", "driver", "accepted")

    def __init__(self, journal: CallJournal, accepted: dict[bytes, str]) -> None:
        self.journal = journal
        self.driver: LiveDriver | None = None
        self.accepted = accepted

    def _state(self, ledger: Ledger) -> CallState:
        rounds = self.driver.rounds if self.driver is not None else 0
        return CallState(ledger=ledger.slots, rounds=rounds, accepted=_hexed(self.accepted))

    async def step(self, ledger: Ledger) -> None:
        self.journal.hold()
        await self.journal.save(self._state(ledger))

    def step_from_thread(self, ledger: Ledger) -> None:
        self.journal.hold()
        self.journal.save_from_thread(self._state(ledger))
