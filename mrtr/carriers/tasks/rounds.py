"""Rounds that run once: the first attempt's outcome recorded in the store, every retry answered from it.

A conversation's last round is where side effects go (the idempotency contract), and
nothing stops a client, a proxy or a flaky network from sending that round twice. For a
handler declared ``once=True``, and for the round that creates a task, the retry is
named by its token (:class:`~mrtr.carriers.contract.RoundKey`: a digest of the token and
of its answers) and goes through :class:`FinalRounds`:

1. **claim**: insert a claim under the key, atomically, unless a record is there. The
   claim carries a lease (``lease`` seconds), renewed every third of it while the
   attempt runs.
2. **run** the round in this node's background, not in the request: a client that
   goes away (a timeout, a dropped connection: the very reasons it retries) does not
   cut the round short, and the retry finds its outcome.
3. **settle**: a completed round's result, or the error it ended with, replaces the
   claim and stays until the token expires. A round that asks another question
   (``input_required``) or fails before it ran to an end (a malformed answer, a
   replay mismatch) releases the claim: nothing is recorded and a retry runs again.

A retry that finds a record answers from it: the same result, or the same error,
without running anything; one that brings other answers than the recorded round is
refused (``-32602``). A retry that finds a claim waits for it (on this node, woken the
moment the attempt ends; from another node, polling the store) and then does the same.
A claim whose lease ran out belongs to an attempt that died (its node was killed, or
lost the store for longer than the lease): nobody knows whether its side effects
happened, so the round is **not run again**; its retries are told so (``-32603``) until
the token expires, and the client starts the request over. At most once, never twice.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

import msgspec
import trio

from ...core.errors import InternalError, InvalidParams, ProtocolError
from ..contract import RoundKey, RoundRun
from .record import RoundRecord, TaskTooLarge
from .store import StoreUnavailable, TaskStore

__all__ = ["FinalRounds", "RoundInterrupted", "OtherAnswers"]

log = logging.getLogger("mrtr.tasks")

_FIRST_POLL = 0.005
_LAST_POLL = 0.1  # seconds between two reads of a claim held on another node, at most


class RoundInterrupted(InternalError):
    """A round's first attempt stopped before it recorded its outcome, and a once round never runs twice (-32603)."""

    def __init__(self) -> None:
        super().__init__(
            "Internal error: the first attempt of this round stopped before it recorded its outcome (its node "
            "stopped or lost the task store); a round that runs once is not run again, so whether it took effect "
            "is unknown: start the request again without requestState"
        )


class OtherAnswers(InvalidParams):
    """A retry brings other answers than those of the round it retries, which already ran (-32602)."""

    def __init__(self) -> None:
        super().__init__(
            "requestState was already used to complete this request with other inputResponses; a round that runs "
            "once keeps the answers it ran with: retry with the same inputResponses to get its result, or start "
            "the request again without requestState"
        )


class _Attempt:
    """This node's attempt at a round: its outcome, once it has one, and who waits for it."""

    __slots__ = ("done", "outcome")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.outcome: dict[str, Any] | BaseException = RoundInterrupted()

    def result(self) -> dict[str, Any]:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


class FinalRounds:
    """Runs rounds at most once per key, with their outcome recorded in ``store``.

    ``lease`` is how long a claim lives without renewal (seconds; the attempt renews it
    every third of that); ``clock`` gives the time in epoch seconds. :meth:`serve` must
    be running (in a nursery) for :meth:`once` to run a round. Implements
    :class:`mrtr.carriers.contract.RoundRecords`.
    """

    def __init__(self, store: TaskStore, *, lease: float = 30.0, clock: Callable[[], float] = time.time) -> None:
        if not lease > 0:
            raise ValueError(f"lease must be a positive number of seconds, got {lease!r}")
        self.store = store
        self.lease = float(lease)
        self.clock = clock
        self._nursery: trio.Nursery | None = None
        self._attempts: dict[str, _Attempt] = {}

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery this node's attempts run in, until cancelled (which interrupts them)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._nursery = None

    async def once(self, key: RoundKey, run: RoundRun) -> dict[str, Any]:
        """See :meth:`mrtr.carriers.contract.RoundRecords.once`."""
        if self._nursery is None:
            raise RuntimeError("FinalRounds.serve() is not running; start it in a nursery before running rounds")
        poll = _FIRST_POLL
        while True:
            claim = RoundRecord(key=key.token, answers=key.answers, claim=secrets.token_hex(8),
                                lease_expiry=self.clock() + self.lease, expires_at=key.expires_at)
            found = await self.store.claim_round(claim)
            if found is None:
                return await self._first(claim, run)
            while found is not None:
                if found.settled:
                    return _replayed(found, key)
                here = self._attempts.get(key.token)
                if here is not None:  # running on this node, alive whatever its lease says: woken when it ends
                    with trio.move_on_after(1.0):
                        await here.done.wait()
                elif found.lease_expiry <= self.clock():
                    raise RoundInterrupted()
                else:
                    await trio.sleep(poll)
                    poll = min(poll * 2, _LAST_POLL)
                found = await self.store.get_round(key.token)
            # Released (the attempt asked another question, or failed before its end): claim it anew.

    async def _first(self, claim: RoundRecord, run: RoundRun) -> dict[str, Any]:
        attempt = self._attempts[claim.key] = _Attempt()
        assert self._nursery is not None
        self._nursery.start_soon(self._attempt, claim, run, attempt)
        await attempt.done.wait()
        return attempt.result()

    async def _attempt(self, claim: RoundRecord, run: RoundRun, attempt: _Attempt) -> None:
        # Cancelled (the node stops) before the outcome is known: the claim stays, its lease runs
        # out, and retries are told the round was interrupted (the default outcome).
        try:
            failed: Exception | None = None
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._keep, claim)
                try:
                    outcome = await run()
                except Exception as exc:
                    failed = exc
                finally:
                    nursery.cancel_scope.cancel()
            if failed is not None:  # did not run to an end: nothing to record, a retry runs again
                attempt.outcome = failed
                await self._release(claim)
            else:
                attempt.outcome = outcome
                await self._settle(claim, outcome)
        except Exception:
            # A bug here must not take the node's other rounds and requests with it.
            log.exception("round %s: recording its outcome failed unexpectedly", claim.key)
        finally:
            attempt.done.set()
            if self._attempts.get(claim.key) is attempt:
                del self._attempts[claim.key]

    async def _keep(self, claim: RoundRecord) -> None:
        """Renew the claim's lease every third of its length while the attempt runs."""
        while True:
            await trio.sleep(self.lease / 3)
            renewed = msgspec.structs.replace(claim, lease_expiry=self.clock() + self.lease)
            try:
                if not await self.store.settle_round(renewed):
                    log.warning("round %s: its claim is gone (its token expired); the attempt goes on", claim.key)
                    return
            except StoreUnavailable:
                log.warning("round %s: cannot renew its claim while the task store is unavailable", claim.key)

    async def _settle(self, claim: RoundRecord, outcome: dict[str, Any] | ProtocolError) -> None:
        if isinstance(outcome, dict) and outcome.get("resultType") == "input_required":
            await self._release(claim)  # not the last round: the next one has a token of its own
            return
        if isinstance(outcome, dict):
            settled = msgspec.structs.replace(claim, result=outcome)
        else:
            settled = msgspec.structs.replace(claim, error=outcome.to_error_object())
        try:
            try:
                saved = await self.store.settle_round(settled)
            except TaskTooLarge as error:
                log.warning("round %s: its outcome is too large to record (%s bytes, limit %s); its retries are "
                            "told so", claim.key, error.size, error.limit)
                saved = await self.store.settle_round(msgspec.structs.replace(claim, error=_too_large(error)))
        except StoreUnavailable:
            log.warning("round %s: cannot record its outcome while the task store is unavailable; its retries "
                        "will be told it was interrupted", claim.key)
            return
        if not saved:
            log.warning("round %s: its claim expired with its token before the outcome was recorded", claim.key)

    async def _release(self, claim: RoundRecord) -> None:
        try:
            await self.store.release_round(claim.key, claim.claim)
        except StoreUnavailable:
            log.warning("round %s: cannot release its claim while the task store is unavailable; its retries "
                        "will be told it was interrupted", claim.key)


def _replayed(record: RoundRecord, key: RoundKey) -> dict[str, Any]:
    if record.answers != key.answers:
        raise OtherAnswers()
    if record.error is not None:
        error = record.error
        raise ProtocolError(str(error.get("message", "Internal error")), code=int(error.get("code", -32603)),
                            data=error.get("data"))
    assert record.result is not None
    return dict(record.result)


def _too_large(error: TaskTooLarge) -> dict[str, Any]:
    return {"code": -32603, "data": {"size": error.size, "limit": error.limit},
            "message": "Internal error: this round ran, but its result was too large to record "
                       f"({error.size} bytes, over the limit of {error.limit}); it is not run again"}
