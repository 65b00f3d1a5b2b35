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

:class:`LiveCarrier` implements :class:`~mrtr.carriers.contract.Carrier`; it imports no
event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..core.context import Context
from ..core.effects import ElicitURL
from ..core.eras import legacy_request
from ..core.jsonrpc import Notify, RunSync
from ..core.live import MAX_LIVE_ROUNDS, LiveDriver, Questions
from ..core.peer import Peer
from ..core.replay import Completed
from .contract import runs_in_thread

__all__ = ["LiveCarrier", "Suspensions"]


class Suspensions(Protocol):
    """The count of handlers waiting for their clients' answers that one call is held to, with its bounds.

    The bounds are fair shares: a session's, its client's and the process's
    (:meth:`mrtr.server.sessions.SessionRegistry.waits_of`).
    """

    def acquire(self, method: str) -> None:
        """Count one more waiting handler; at a bound count nothing and raise
        :class:`~mrtr.core.peer.TooManySuspended` naming it (``method`` is what would have been sent)."""
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
    notifications (the URL elicitations' completion).
    """

    __slots__ = ("peer", "version", "answer_timeout", "suspensions", "max_rounds", "notify")

    def __init__(self, peer: Peer, *, version: str, answer_timeout: float, suspensions: Suspensions | None = None,
                 max_rounds: int = MAX_LIVE_ROUNDS, notify: Notify | None = None) -> None:
        if not answer_timeout > 0:
            raise ValueError(f"answer_timeout must be a positive number of seconds, got {answer_timeout!r}")
        self.peer = peer
        self.version = version
        self.answer_timeout = answer_timeout
        self.suspensions = suspensions
        self.max_rounds = max_rounds
        self.notify = notify

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
        driver = LiveDriver(handler, arguments, ctx, max_rounds=self.max_rounds)
        threaded = runs_in_thread(handler, run_sync)
        accepted: dict[bytes, str] = {}  # fingerprint of an accepted URL elicitation -> its elicitationId
        try:
            if threaded and run_sync is not None:
                outcome = await run_sync(driver.start)
            else:
                outcome = await driver.astart()
            while isinstance(outcome, Questions):
                self._completed(accepted, outcome)
                answers = await self._ask(outcome, accepted)
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
            # Cancelled: close here, now (a worker thread would not start under a cancelled scope).
            if threaded:
                driver.close_quietly()
            else:
                await driver.aclose_quietly()
            raise

    async def _ask(self, questions: Questions, accepted: dict[bytes, str]) -> dict[str, Any]:
        """Send one round and return the answers by wire key."""
        rendered = [legacy_request(item.request, self.version) for item in questions.asked]
        first = rendered[0][0]
        suspensions = self.suspensions
        if suspensions is not None:
            suspensions.acquire(first)  # TooManySuspended at a bound: nothing was sent
        try:
            results = await self.peer.request_all(rendered, timeout=self.answer_timeout)
        finally:
            if suspensions is not None:
                suspensions.release()
        answers: dict[str, Any] = {}
        for item, (_, params), result in zip(questions.asked, rendered, results, strict=True):
            answers[item.key] = result
            if isinstance(item.request, ElicitURL) and isinstance(result, dict) and result.get("action") == "accept":
                accepted[item.fingerprint] = params["elicitationId"]
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
