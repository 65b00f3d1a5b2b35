"""The live driver: a handler generator driven once, suspended at each question.

The replay core (:mod:`mrtr.core.replay`) re-runs a handler from the top every round
and feeds it recorded answers. A legacy (2025-era) session does not need that: the
server may ask the client mid-call, so the generator can simply wait at its
``yield`` for the answer. :class:`LiveDriver` does exactly that, without I/O and
without an event loop:

- :meth:`~LiveDriver.start` runs the handler up to its first question (or its end);
- each question comes out as :class:`Questions`: every request of one yield (a group
  is one round), under the keys, ordinals and fingerprints the replay core gives them,
  after the same capability gate, with nothing asked yet;
- :meth:`~LiveDriver.resume` takes the client's answers, checks each exactly as an
  ``inputResponses`` value is checked on the modern path (the same typed
  ``-32602`` for a malformed answer or content the form did not ask for), and runs
  the handler on to its next question;
- :meth:`~LiveDriver.close` closes the generator (its ``finally`` runs), reporting a
  handler that swallows ``GeneratorExit`` as the replay core does.

A Step runs once, when first reached, and the handler receives the value converted to
its function's return annotation, as on the modern path, so a handler sees the same
value in both eras. Code before a yield also runs once here, where a replay runs it
every round: the idempotency contract still holds, it is only not exercised.

How a yielded value is read (requests, groups, Steps, results; keys and their
uniqueness; the capability gate; answers checked and converted; the ledger of what
was asked, answered and computed) is the replay core's own
:class:`~mrtr.core.interpretation.LedgerInterpretation`, shared, so nothing is
implemented twice. That also lets a live call start from a recorded ledger (a call
another process ran, adopted after that process stopped): the driver replays the
handler from the top against it as a replay would (no recorded Step runs again,
fingerprints are checked, ``ctx.is_replaying`` is true meanwhile) and suspends live at
the first question the ledger has no answer for; :attr:`LiveDriver.ledger` is the ledger
so far, and ``on_step`` is told of each Step recorded, so a carrier can keep it.

A live suspension holds a request open while a person answers, so
:class:`LiveDriver` caps the rounds of one call (:data:`MAX_LIVE_ROUNDS`): a handler
that asks again after every decline cannot hold it forever.

The sync methods drive plain functions and sync generators; the ``a``-prefixed ones
drive any handler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .context import Context
from .effects import Request
from .errors import HandlerError, InvalidParams, ProtocolError
from .ledger import KEY_PREFIX, Ledger, Slot, decode_answer
from .diagnostics import handler_failed, yield_location
from .driving import (DONE, aadvance, aclose_handler, aclose_quietly, advance, check_result, close_handler,
                      close_quietly, start_handler)
from .handlers import ASYNC_GEN, CORO, PLAIN, HandlerSpec, handler_spec
from .interpretation import PENDING, STOP, LedgerInterpretation, delivered, gathered
from .outcomes import Completed

__all__ = ["MAX_LIVE_ROUNDS", "Asked", "Questions", "LiveDriver", "TooManyRounds"]

_EMPTY = Ledger()  # immutable: every live run with no ledger starts from this one

MAX_LIVE_ROUNDS = 10
"""Rounds of questions one call may ask on a live session.

The same bound :class:`mrtr.Client` gives a modern conversation (its
``DEFAULT_MAX_ROUNDS``), so a handler that completes against that client in the modern
era completes in a live session too, and one that loops fails in both.
"""


class TooManyRounds(HandlerError):
    """A handler asked more rounds of questions in one live call than the driver allows."""


class Asked(NamedTuple):
    """One request of a round, as the replay core numbers it: wire key, ordinal, request, fingerprint."""

    key: str
    ordinal: int
    request: Request
    fingerprint: bytes


class Questions:
    """A round the handler waits on: every request of one yield, to be asked at once.

    ``asked`` lists them in yield order; :attr:`requests` maps their wire keys (the
    defaults ``elicit-<N>``, ``sample-<N>``, ``roots-<N>`` or the handler's own) to the
    requests, the shape of an ``inputRequests`` object.
    """

    __slots__ = ("asked", "round")

    def __init__(self, asked: tuple[Asked, ...], round: int) -> None:  # noqa: A002 - a round of questions
        self.asked = asked
        self.round = round

    @property
    def requests(self) -> dict[str, Request]:
        """Wire key to request, in yield order."""
        return {item.key: item.request for item in self.asked}

    def __repr__(self) -> str:
        return f"Questions(round={self.round}, {list(self.requests)!r})"


class _LiveInterpretation(LedgerInterpretation):
    """The replay core's reading of yields against a ledger, kept live: the first question with no answer suspends.

    With no ledger every request is asked and every Step runs (and both are recorded
    as the call goes, so the call's ledger can be kept in a store); with one, recorded
    ordinals are answered from it exactly as a replay answers them, and the run
    suspends live at the first one it has no answer for.
    """

    __slots__ = ("asked", "yielded")

    def __init__(self, spec: HandlerSpec, ctx: Context, ledger: Ledger,
                 on_step: Callable[[Ledger], Any] | None) -> None:
        super().__init__(spec, ctx, ledger, None, on_step)
        self.asked: list[Asked] = []
        self.yielded: Any = None

    def interpret(self, yielded: Any, gen: Any, result_allowed: bool) -> tuple[int, Any]:
        self.yielded = yielded  # the shape (one request, a tuple, a dict) the answers go back in
        return super().interpret(yielded, gen, result_allowed)

    def _answer(self, ordinal: int, key: str, standard: bool, request: Request, fingerprint: bytes, gen: Any) -> Any:
        answer = super()._answer(ordinal, key, standard, request, fingerprint, gen)
        if answer is PENDING:
            self.asked.append(Asked(key, ordinal, request, fingerprint))
        return answer

    def answered(self, asked: Asked, answer: Any) -> None:
        """Record the client's ``answer`` (its stored form) to ``asked`` in the ledger."""
        kind = asked.request.kind
        standard = KEY_PREFIX[kind] + str(asked.ordinal)
        self.slots[asked.ordinal - 1] = Slot(kind, asked.fingerprint, None if asked.key == standard else asked.key,
                                             True, answer)


_NEW, _RUNNING, _WAITING, _CLOSED = range(4)  # a driver's states


class LiveDriver:
    """Drives one invocation of a handler live: start, answer each round, and close.

    ``handler`` is any handler function, called with ``arguments`` (and ``ctx`` when it
    takes the context). ``max_rounds`` caps the rounds of questions (default
    :data:`MAX_LIVE_ROUNDS`); the round past it fails with :class:`TooManyRounds` and
    closes the generator. ``ledger`` (with ``rounds``, the rounds it holds) starts the
    call from what another run recorded: the handler is replayed against it up to its
    first unanswered question, where it suspends live. ``on_step(ledger)`` is called
    after each Step's value is recorded, before the handler goes on (an awaitable it
    returns is awaited for an async handler).

    Every method raises :class:`~mrtr.core.errors.ProtocolError` subclasses for runtime
    conditions (a capability the client lacks, a malformed answer) and
    :class:`~mrtr.core.errors.HandlerError` when handler code fails; the generator is
    closed before either propagates, so its ``finally`` has run. A driver is used from
    one task at a time.
    """

    __slots__ = ("spec", "ctx", "arguments", "max_rounds", "rounds", "_state", "_gen", "_yielded",
                 "_interpretation", "_asked")

    def __init__(self, handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, *,
                 max_rounds: int = MAX_LIVE_ROUNDS, ledger: Ledger | None = None, rounds: int = 0,
                 on_step: Callable[[Ledger], Any] | None = None) -> None:
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise ValueError(f"max_rounds must be a positive integer, got {max_rounds!r}")
        self.spec = handler_spec(handler)
        self.ctx = ctx
        self.arguments = arguments or {}
        self.max_rounds = max_rounds
        self.rounds = rounds
        self._state = _NEW
        self._gen: Any = None
        self._yielded: Any = None
        self._asked: tuple[Asked, ...] = ()
        self._interpretation = _LiveInterpretation(self.spec, ctx, ledger if ledger is not None else _EMPTY, on_step)
        ctx.is_replaying = bool(ledger is not None and ledger.slots)

    @property
    def ledger(self) -> Ledger:
        """What the call has asked, been answered and computed so far: the ledger a replay starts from."""
        return Ledger(tuple(self._interpretation.slots))

    @property
    def is_async(self) -> bool:
        """Whether the handler is async (drive it with the ``a``-prefixed methods)."""
        return self.spec.is_async

    @property
    def done(self) -> bool:
        """Whether the handler finished, failed or was closed."""
        return self._state == _CLOSED

    # -- sync handlers ------------------------------------------------------------------

    def start(self) -> Questions | Completed:
        """Run a sync handler to its first question, or to its end."""
        if self.spec.is_async:
            raise TypeError(f"handler {self.spec.name} is async; use astart")
        self._begin()
        started = start_handler(self.spec, self.ctx, self.arguments)
        if self.spec.shape == PLAIN:
            self._state = _CLOSED
            return check_result(self.spec, started)
        self._gen = started
        self._state = _RUNNING
        return self._advance(None, None)

    def resume(self, answers: Mapping[str, Any]) -> Questions | Completed:
        """Answer the round :meth:`start` or the last :meth:`resume` returned; run to the next.

        ``answers`` maps each wire key of the round to the client's result for it (the
        JSON object a client puts in ``inputResponses``).
        """
        if self.spec.is_async:
            raise TypeError(f"handler {self.spec.name} is async; use aresume")
        self._waiting()
        try:
            value = self._take(answers)
        except BaseException:
            self.close_quietly()
            raise
        return self._advance(value, None)

    def close(self) -> None:
        """Close the generator now (its ``finally`` runs); idempotent.

        Raises :class:`~mrtr.core.errors.HandlerError` when the handler swallowed
        ``GeneratorExit`` and yielded again, or its cleanup failed.
        """
        if self._state == _CLOSED or self._gen is None:
            self._state = _CLOSED
            return
        self._state = _CLOSED
        if self.spec.shape == ASYNC_GEN:
            raise TypeError(f"handler {self.spec.name} is async; use aclose")
        close_handler(self._gen, self.spec)

    def close_quietly(self) -> None:
        """Close the generator, dropping any error its cleanup raises (the call already fails with a better one)."""
        if self._state == _CLOSED or self._gen is None:
            self._state = _CLOSED
            return
        self._state = _CLOSED
        close_quietly(self._gen)

    # -- any handler ----------------------------------------------------------------------

    async def astart(self) -> Questions | Completed:
        """Run any handler to its first question, or to its end."""
        if not self.spec.is_async:
            return self.start()
        self._begin()
        started = start_handler(self.spec, self.ctx, self.arguments)
        if self.spec.shape == CORO:
            self._state = _CLOSED
            try:
                result = await started
            except ProtocolError:
                raise
            except Exception as exc:
                raise handler_failed(self.spec, exc) from exc
            return check_result(self.spec, result)
        self._gen = started
        self._state = _RUNNING
        return await self._aadvance(None, None)

    async def aresume(self, answers: Mapping[str, Any]) -> Questions | Completed:
        """:meth:`resume`, for any handler."""
        if not self.spec.is_async:
            return self.resume(answers)
        self._waiting()
        try:
            value = self._take(answers)
        except BaseException:
            await self.aclose_quietly()
            raise
        return await self._aadvance(value, None)

    async def aclose(self) -> None:
        """:meth:`close`, for any handler."""
        if self.spec.shape != ASYNC_GEN:
            self.close()
            return
        if self._state == _CLOSED or self._gen is None:
            self._state = _CLOSED
            return
        self._state = _CLOSED
        await aclose_handler(self._gen, self.spec)

    async def aclose_quietly(self) -> None:
        """:meth:`close_quietly`, for any handler."""
        if self.spec.shape != ASYNC_GEN:
            self.close_quietly()
            return
        if self._state == _CLOSED or self._gen is None:
            self._state = _CLOSED
            return
        self._state = _CLOSED
        await aclose_quietly(self._gen)

    # -- the loop -------------------------------------------------------------------------

    def _begin(self) -> None:
        if self._state != _NEW:
            raise RuntimeError("the handler was already started")

    def _waiting(self) -> None:
        if self._state != _WAITING:
            raise RuntimeError("the handler is not waiting for answers")

    def _take(self, answers: Mapping[str, Any]) -> Any:
        """The value the handler receives for the round it waits on, from the client's ``answers``."""
        values = []
        stored = []
        for asked in self._asked:
            key, ordinal, request, _ = asked
            if key not in answers:
                raise InvalidParams(f'no answer for "{key}" ({request.method}); every request of a round '
                                    "is answered before the handler resumes")
            kind = request.kind
            # A 2025 client never sees the wire keys: an error names the request it answered.
            named = f"the client's answer to {request.method}"
            answer = decode_answer(kind, key, answers[key], named=named)
            values.append(delivered(kind, answer, request, key, check=True, ordinal=ordinal, named=named))
            stored.append(answer)
        for asked, answer in zip(self._asked, stored):
            self._interpretation.answered(asked, answer)
        self._state = _RUNNING
        members = [(item.key, item.request) for item in self._asked]
        return gathered(self._yielded, members, values)

    def _suspend(self) -> Questions:
        self.rounds += 1
        if self.rounds > self.max_rounds:
            raise TooManyRounds(
                f"handler {self.spec.name} asked a round of questions more than {self.max_rounds} times in one call; "
                "a live session holds the call open while the client answers, so its rounds are capped (a handler "
                "that asks again after every decline never ends)",
                location=yield_location(self._gen),
            )
        self._yielded = self._interpretation.yielded
        self._asked = tuple(self._interpretation.asked)
        self._interpretation.asked.clear()
        self._state = _WAITING
        return Questions(self._asked, self.rounds)

    def _advance(self, send: Any, throw: BaseException | None) -> Questions | Completed:
        try:
            operation, payload = advance(self._gen, self._interpretation, send, throw)
            if operation == DONE:
                self._state = _CLOSED
                return payload  # type: ignore[no-any-return]
            return self._suspend()
        except BaseException:
            self._state = _CLOSED
            close_quietly(self._gen)
            raise

    async def _aadvance(self, send: Any, throw: BaseException | None) -> Questions | Completed:
        try:
            operation, payload = await aadvance(self._gen, self._interpretation, send, throw)
            if operation == STOP:
                return self._suspend()
        except BaseException:
            self._state = _CLOSED
            await aclose_quietly(self._gen)
            raise
        self._state = _CLOSED
        await aclose_handler(self._gen, self.spec)  # an async generator ends by yielding its result: close it as a pause is
        return Completed(payload)
