"""Step a handler round by round with scripted answers, without a server.

``run(handler, arguments, answers=[...])`` plays the client: it calls the handler,
answers every request of each :class:`~mrtr.core.replay.InputRequired` round from the
script, and retries, until the handler completes. Every round goes through the real
ledger merge, answer validation and replay code, and the ledger is sealed into a real
``requestState`` token and opened again between rounds, exactly as on the wire. So a
handler that passes here behaves the same behind a server, and a Step value that
cannot be recorded fails here, not in production.

Answers can be written the way a client would send them (``{"action": "accept",
"content": {...}}``) or with the helpers :func:`accept`, :func:`decline`,
:func:`cancel`, :func:`sampled` and :func:`roots`. A plain dict answering an
:class:`~mrtr.Elicit` means "accept with this content"; a plain string answering a
:class:`~mrtr.Sample` means "the model said this". The script is a list consumed in
order, a callable, or a mapping from a question's wire key or message to its answer, so
a test does not depend on ordinals that shift when a Step is added.

Tests that go through a :class:`~mrtr.Server` (``mrtr.Client(server)``) seal tokens with
the server's key: :func:`use_test_key` gives every server of the test process the fixed
:data:`TEST_SECRET`, so a test run prints no ``EphemeralKeyWarning``.
"""

from __future__ import annotations

import copy
import inspect
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .core.answers import accept, cancel, decline, roots, sampled
from .core.context import Context
from .core.effects import Elicit, ElicitResult, ListRoots, Request, Sample
from .core.kinds import REQUEST_KINDS, Kind
from .core.ledger import Ledger, merge_answers
from .core.errors import ReplayMismatch
from .core.replay import Completed, InputRequired, handler_spec, replay, replay_async

__all__ = [
    "ALL_CAPABILITIES",
    "TEST_SECRET",
    "use_test_key",
    "Round",
    "Outcome",
    "Notification",
    "ScriptExhausted",
    "NotDeterministic",
    "RetryDiffers",
    "accept",
    "decline",
    "cancel",
    "sampled",
    "roots",
    "run",
    "arun",
]

ALL_CAPABILITIES: dict[str, Any] = {
    str(row.capability): {feature: {} for feature in row.features} for row in REQUEST_KINDS
}
"""Client capabilities that can answer every kind of request (the default for :func:`run`)."""


TEST_SECRET = "bXJ0ci50ZXN0aW5nOiBwdWJsaWMsIG5vdCBzZWNyZXQ="
"""A fixed ``MRTR_SECRET`` for tests: the Base64 of 32 bytes everyone can read, so never a production key."""


def use_test_key() -> None:
    """Seal every server's ``requestState`` in this process with :data:`TEST_SECRET`, silently.

    Call it at the top of a test suite's ``conftest.py``. It sets ``MRTR_SECRET`` in the
    environment unless it is already set (a CI that sets its own key keeps it), so a
    :class:`~mrtr.Server` built without ``secret=`` uses a fixed key instead of an
    ephemeral one and no test prints ``EphemeralKeyWarning``. A server reads the
    variable when it first seals a token; one that already has is not changed. Subprocesses
    started afterwards (``mrtr serve``) inherit it. Never in production: the key is public.
    """
    os.environ.setdefault("MRTR_SECRET", TEST_SECRET)


def _matches(request: Request, question: str, key: str | None = None) -> bool:
    return question == (key if key is not None else request.key) or question == getattr(request, "message", None)


@dataclass
class Round:
    """One ``input_required`` round: what the handler asked and what the script answered.

    ``number`` counts rounds from 1. ``requests`` maps each wire key asked in the round
    (``elicit-1``, or the ``key=`` given) to the request the handler yielded: an
    :class:`~mrtr.Elicit` (``.message``, ``.requested.schema``), :class:`~mrtr.ElicitURL`
    (``.message``, ``.url``), :class:`~mrtr.Sample` (``.messages``, ``.max_tokens``) or
    :class:`~mrtr.ListRoots`, in the order asked. ``answers`` maps the same keys to what
    the script answered, in the wire form (``{"action": "accept", "content": {...}}``).
    """

    number: int
    requests: dict[str, Request]
    answers: dict[str, Any] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        """The wire keys asked in this round, in order."""
        return list(self.requests)

    def request(self, question: str) -> Request | None:
        """The request of this round whose wire key or message is ``question``, or ``None``."""
        for key, request in self.requests.items():
            if _matches(request, question, key):
                return request
        return None

    def wire(self) -> dict[str, Any]:
        """The ``inputRequests`` object this round would put on the wire."""
        return {key: request.to_wire() for key, request in self.requests.items()}


@dataclass
class Notification:
    """A notification the handler sent: ``execution`` is the run (1-based) that sent it."""

    execution: int
    method: str
    params: dict[str, Any]


@dataclass
class Outcome:
    """The end of a scripted conversation: the handler's result and every round before it.

    ``result`` is what the handler returned (for an async generator: the value it
    yielded last), before any result shaping. ``rounds`` holds one :class:`Round` per
    ``input_required`` round, in order; a handler that never asked has none.
    ``executions`` counts the times the handler ran (the rounds plus the final run).
    ``notifications`` holds every progress and log notification a client would have
    received, in order, across all executions.
    """

    result: Any
    rounds: list[Round]
    executions: int
    notifications: list[Notification] = field(default_factory=list)

    @property
    def asked(self) -> list[list[str]]:
        """The keys asked, round by round."""
        return [round_.keys for round_ in self.rounds]

    def request(self, question: str) -> Request:
        """The first request asked whose wire key or message is ``question``.

        For assertions that do not depend on ordinals: ``outcome.request("Which
        plan?").requested.schema``. Raises ``KeyError`` listing what was asked when no
        request matches.
        """
        for round_ in self.rounds:
            found = round_.request(question)
            if found is not None:
                return found
        asked = ", ".join(f"{key} ({request.message!r})" if isinstance(getattr(request, "message", None), str)
                          else key for round_ in self.rounds for key, request in round_.requests.items())
        raise KeyError(f"no request with the key or message {question!r} was asked; asked: {asked or 'nothing'}")

    def answer(self, question: str) -> Any:
        """What the script answered the first request matching ``question`` (see :meth:`request`), in wire form."""
        for round_ in self.rounds:
            for key, request in round_.requests.items():
                if _matches(request, question, key):
                    return round_.answers[key]
        self.request(question)  # raises, listing what was asked
        raise AssertionError("unreachable")

    @property
    def progress(self) -> list[tuple[float, float | None, str | None]]:
        """The ``(progress, total, message)`` of each progress notification, in order."""
        return [
            (n.params["progress"], n.params.get("total"), n.params.get("message"))
            for n in self.notifications
            if n.method == "notifications/progress"
        ]

    @property
    def logs(self) -> list[tuple[str, Any]]:
        """The ``(level, data)`` of each log notification, in order."""
        return [(n.params["level"], n.params["data"]) for n in self.notifications if n.method == "notifications/message"]


class ScriptExhausted(AssertionError):
    """The handler asked more than the script answers."""


Answers = Mapping[str, Any] | Iterable[Any] | Callable[..., Any]


class _Script:
    def __init__(self, answers: Answers) -> None:
        self.by_question: dict[str, Any] | None = None
        self.used: set[str] = set()
        self.callback: Callable[..., Any] | None = None
        self.items: Any = None
        if isinstance(answers, Mapping):
            self.by_question = dict(answers)
            bad = [question for question in self.by_question if not isinstance(question, str)]
            if bad:
                raise TypeError(f"answers given as a mapping are keyed by a question's wire key or message, got {bad[0]!r}")
        elif callable(answers):
            self.callback = answers
            try:
                positional = [
                    p
                    for p in inspect.signature(answers).parameters.values()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                ]
                self.with_key = len(positional) >= 2
            except (TypeError, ValueError):
                self.with_key = False
        else:
            self.items = iter(list(answers))
        self.log: list[str] = []

    def answer(self, key: str, request: Request, number: int) -> Any:
        if self.by_question is not None:
            raw = self._by_question(key, request, number)
        elif self.callback is not None:
            raw = self.callback(key, request) if self.with_key else self.callback(request)
        else:
            try:
                raw = next(self.items)
            except StopIteration:
                history = "\n".join(self.log) or "  (nothing answered)"
                raise ScriptExhausted(
                    f"the script has no answer left for round {number}, key {key!r}: {request!r}\n"
                    f"answered so far:\n{history}"
                ) from None
        self.log.append(f"  round {number}: {key} <- {raw!r}")
        return _to_wire(request, raw)

    def _by_question(self, key: str, request: Request, number: int) -> Any:
        assert self.by_question is not None
        message = getattr(request, "message", None)
        for question in (key, message):
            if isinstance(question, str) and question in self.by_question:
                self.used.add(question)
                return self.by_question[question]
        shown = f"{key} ({message!r})" if message is not None else key
        raise ScriptExhausted(
            f"the answers name no question asked in round {number}: {shown}; they answer "
            f"{sorted(self.by_question)!r} (a question is found by its wire key or its message)"
        )

    def check_used(self) -> None:
        """Every question the mapping answers was asked: a typo in a message must not pass silently."""
        if self.by_question is None:
            return
        unused = [question for question in self.by_question if question not in self.used]
        if unused:
            raise AssertionError(f"the handler completed without asking {unused!r}, which the answers name")


def _to_wire(request: Request, raw: Any) -> Any:
    if isinstance(raw, ElicitResult):
        return {"action": raw.action, "content": raw.content} if raw.content is not None else {"action": raw.action}
    if isinstance(raw, msgspec.Struct):
        raw = msgspec.to_builtins(raw)
        if isinstance(request, Elicit) and "action" not in raw:
            return accept(raw)
        return raw
    if isinstance(request, Elicit) and isinstance(raw, dict) and not (raw.keys() and raw.keys() <= {"action", "content"}):
        return accept(raw)
    if isinstance(request, Sample) and isinstance(raw, str):
        return sampled(raw)
    if isinstance(request, ListRoots) and isinstance(raw, (list, tuple)):
        return roots(*raw)
    return raw


class _Recorder:
    """Collects what a client would receive, and passes it on to the caller's ``notify``."""

    def __init__(self, notify: Callable[[str, dict[str, Any]], None] | None,
                 progress_token: str | int | None, log_level: str | None, lifespan: Any) -> None:
        self.forward = notify
        self.lifespan = lifespan
        self.progress_token = progress_token
        self.log_level = log_level
        self.execution = 0
        self.seen: list[Notification] = []

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.seen.append(Notification(self.execution, method, params))
        if self.forward is not None:
            self.forward(method, params)

    def context(self, arguments: Mapping[str, Any], capabilities: Mapping[str, Any], principal: str | None) -> Context:
        """The context of the next execution, which reports to this recorder."""
        self.execution += 1
        return Context(arguments, principal=principal, client_capabilities=capabilities,
                       progress_token=self.progress_token, log_level=self.log_level, notify=self.notify,
                       lifespan=self.lifespan)

    def again(self, arguments: Mapping[str, Any], capabilities: Mapping[str, Any], principal: str | None,
              seen: list[tuple[str, dict[str, Any]]]) -> Context:
        """The context of the determinism check's second run of a round: what it sends goes to ``seen``."""
        return Context(arguments, principal=principal, client_capabilities=capabilities,
                       progress_token=self.progress_token, log_level=self.log_level,
                       notify=lambda method, params: seen.append((method, params)), lifespan=self.lifespan)

    def sent(self) -> list[tuple[str, dict[str, Any]]]:
        """What the latest execution sent."""
        return [(n.method, n.params) for n in self.seen if n.execution == self.execution]


class _Twice:
    """What the determinism check sees of the two runs of one round: the Steps each recorded, what each sent."""

    def __init__(self, start: Ledger) -> None:
        self.start = len(start)
        self.steps: tuple[list[Ledger], list[Ledger]] = ([], [])
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def new_steps(self, run: int) -> list[tuple[int, Any]]:
        """The Steps the run recorded (ordinal, value), beyond the ledger the round started from."""
        snapshots = self.steps[run]
        if not snapshots:
            return []
        return [(index + 1, slot.answer) for index, slot in enumerate(snapshots[-1].slots)
                if index >= self.start and slot.kind == Kind.STEP and slot.answered]


def _sealer() -> Any:
    # A real codec so every round crosses the token boundary; imported lazily so the
    # core modules stay free of crypto.
    from .core.codec import RequestStateCodec

    return RequestStateCodec.configure(TEST_SECRET, ttl=3600.0)


def _as_sent(arguments: dict[str, Any]) -> dict[str, Any]:
    # Each execution gets its own copy, as each request to a server decodes its own: a handler
    # that changes what it was given must not see the change in its next round.
    return copy.deepcopy(arguments)


def _through_token(codec: Any, ledger: Ledger, arguments: Mapping[str, Any], principal: str | None) -> Ledger:
    token = codec.mint(method="tools/call", target="test", arguments=dict(arguments), principal=principal, ledger=ledger.slots)
    return Ledger(tuple(codec.decode(token).ledger))


def run(
    handler: Any,
    arguments: Mapping[str, Any] | None = None,
    *,
    answers: Answers = (),
    capabilities: Mapping[str, Any] = ALL_CAPABILITIES,
    principal: str | None = None,
    lenient: bool = False,
    max_rounds: int = 50,
    notify: Callable[[str, dict[str, Any]], None] | None = None,
    check_determinism: bool = False,
    progress_token: str | int | None = "progress",
    log_level: str | None = "debug",
    lifespan: Any = None,
) -> Outcome:
    """Run ``handler`` to completion, answering each round from ``answers``.

    ``answers`` is a list consumed in order (one item per request; a group round takes
    one item per member, in key order), a callable given each request (or, if it
    takes two arguments, the wire key and the request), or a mapping from a question's
    wire key or message to its answer (given each time that question is asked; a
    question it does not name fails the run, and so does a name never asked). Protocol errors (replay
    mismatch, a malformed answer, a missing capability) and handler errors propagate
    as they would behind a server. Async handlers are run with ``trio.run``; inside a
    running event loop use :func:`arun`.

    ``check_determinism=True`` runs every round twice: the second run replays against
    the ledger the first one produced and must stop at the same place asking the same
    things (or complete again). A handler whose questions depend on the clock, random
    values or data read outside a ``Step`` fails with :class:`NotDeterministic` in the
    round where it diverges. Side effects before the last question run twice per round.
    The final round runs twice too, from the ledger it started with, as a client's retry
    of it would (a lost response, a timeout): its code after the last question, Steps
    included, runs again. When the two runs' Steps, notifications or results differ, a
    :class:`RetryDiffers` warning says how: a retry would see that difference (declare
    the handler ``once=True`` to answer retries from the first run, or make the effect
    idempotent).

    Every execution's context carries ``progress_token`` and ``log_level`` (pass
    ``None`` to leave either out, as a client that did not ask would), so the progress
    and log notifications a client would receive land in ``Outcome.notifications``
    (and ``Outcome.progress``, ``Outcome.logs``); ``notify`` also receives them as
    they are sent. ``lifespan`` is what handlers see as ``ctx.lifespan`` (the value a
    server's lifespan would yield: a fake pool, a test client).
    """
    if handler_spec(handler).is_async:
        import trio

        async def main() -> Outcome:
            return await arun(
                handler, arguments, answers=answers, capabilities=capabilities, principal=principal,
                lenient=lenient, max_rounds=max_rounds, notify=notify, check_determinism=check_determinism,
                progress_token=progress_token, log_level=log_level, lifespan=lifespan,
            )

        return trio.run(main)
    arguments = dict(arguments or {})
    script = _Script(answers)
    codec = _sealer()
    ledger = Ledger()
    unmatched: dict[str, Any] = {}
    rounds: list[Round] = []
    recorder = _Recorder(notify, progress_token, log_level, lifespan)
    for execution in range(1, max_rounds + 2):
        twice = _Twice(ledger)
        given = _as_sent(arguments)
        outcome = replay(handler, given, recorder.context(given, capabilities, principal), ledger, unmatched,
                         on_step=twice.steps[0].append if check_determinism else None)
        if check_determinism:
            again_given = _as_sent(arguments)
            second = _check_same(outcome, len(rounds) + 1, lambda: replay(
                handler, again_given, recorder.again(again_given, capabilities, principal, twice.sent),
                *_replayed(outcome, ledger, unmatched), on_step=twice.steps[1].append))
            _compare_retry(outcome, second, twice, recorder)
        if isinstance(outcome, Completed):
            script.check_used()
            return Outcome(outcome.result, rounds, execution, recorder.seen)
        ledger, unmatched = _next_round(outcome, rounds, script, codec, arguments, principal, lenient, max_rounds)
    raise AssertionError("unreachable")


async def arun(
    handler: Any,
    arguments: Mapping[str, Any] | None = None,
    *,
    answers: Answers = (),
    capabilities: Mapping[str, Any] = ALL_CAPABILITIES,
    principal: str | None = None,
    lenient: bool = False,
    max_rounds: int = 50,
    notify: Callable[[str, dict[str, Any]], None] | None = None,
    check_determinism: bool = False,
    progress_token: str | int | None = "progress",
    log_level: str | None = "debug",
    lifespan: Any = None,
) -> Outcome:
    """The async form of :func:`run`, for any handler, inside a running trio loop."""
    arguments = dict(arguments or {})
    script = _Script(answers)
    codec = _sealer()
    ledger = Ledger()
    unmatched: dict[str, Any] = {}
    rounds: list[Round] = []
    recorder = _Recorder(notify, progress_token, log_level, lifespan)
    for execution in range(1, max_rounds + 2):
        twice = _Twice(ledger)
        given = _as_sent(arguments)
        outcome = await replay_async(handler, given, recorder.context(given, capabilities, principal), ledger,
                                     unmatched, on_step=twice.steps[0].append if check_determinism else None)
        if check_determinism:
            again_given = _as_sent(arguments)
            try:
                again: Completed | InputRequired = await replay_async(
                    handler, again_given, recorder.again(again_given, capabilities, principal, twice.sent),
                    *_replayed(outcome, ledger, unmatched), on_step=twice.steps[1].append)
            except ReplayMismatch as mismatch:
                raise NotDeterministic(_diverged(len(rounds) + 1, mismatch.message)) from None
            _compare_retry(outcome, _check_same(outcome, len(rounds) + 1, lambda: again), twice, recorder)
        if isinstance(outcome, Completed):
            script.check_used()
            return Outcome(outcome.result, rounds, execution, recorder.seen)
        ledger, unmatched = _next_round(outcome, rounds, script, codec, arguments, principal, lenient, max_rounds)
    raise AssertionError("unreachable")


class NotDeterministic(AssertionError):
    """Running the same round twice gave different questions (see ``check_determinism``)."""


class RetryDiffers(UserWarning):
    """Running the final round twice, as a retry would, gave different Steps, notifications or results.

    A warning, not a failure: the handler is deterministic where the replay needs it, but
    a client that retries the final round (see ``check_determinism``) sees what differs.
    """


def _replayed(outcome: Completed | InputRequired, ledger: Ledger, unmatched: dict[str, Any]) -> tuple[Ledger, dict[str, Any]]:
    # A paused round is replayed against the ledger it produced (its Step values and
    # pending questions included); a completed one against the ledger it started from.
    if isinstance(outcome, InputRequired):
        return outcome.ledger, {}
    return ledger, unmatched


def _diverged(number: int, detail: str) -> str:
    return f"round {number} is not deterministic: running it again against its own ledger diverged.\n{detail}"


def _check_same(outcome: Completed | InputRequired, number: int,
                again: Callable[[], Completed | InputRequired]) -> Completed | InputRequired:
    try:
        second = again()
    except ReplayMismatch as mismatch:
        raise NotDeterministic(_diverged(number, mismatch.message)) from None
    if isinstance(outcome, Completed):
        if not isinstance(second, Completed):
            raise NotDeterministic(_diverged(number, f"the first run completed; the second asked {list(second.requests)}"))
        return second
    if not isinstance(second, InputRequired):
        raise NotDeterministic(_diverged(number, f"the first run asked {list(outcome.requests)}; the second completed"))
    if second.to_wire() != outcome.to_wire():
        raise NotDeterministic(_diverged(number, f"asked {outcome.to_wire()!r}\nthen {second.to_wire()!r}"))
    return second


def _compare_retry(first: Completed | InputRequired, second: Completed | InputRequired, twice: _Twice,
                   recorder: _Recorder) -> None:
    """Warn when the two runs of a final round differ in what a retry of it would show."""
    if not (isinstance(first, Completed) and isinstance(second, Completed)):
        return
    differences = []
    steps = (twice.new_steps(0), twice.new_steps(1))
    if steps[0] != steps[1]:
        shown = [", ".join(f"#{ordinal} {_short(value)}" for ordinal, value in run) or "none" for run in steps]
        differences.append(f"the Steps it ran recorded {shown[0]}, then {shown[1]}")
    sent = recorder.sent()
    if sent != twice.sent:
        differences.append(f"it sent {len(sent)} notifications, then {len(twice.sent)} "
                           f"({_short(sent)} then {_short(twice.sent)})")
    try:
        same = bool(first.result == second.result)
    except Exception:  # a result that cannot be compared says nothing either way
        same = True
    if not same:
        differences.append(f"its result was {_short(first.result)}, then {_short(second.result)}")
    if differences:
        warnings.warn(RetryDiffers(
            "the final round ran twice, as a client's retry of it would (a lost response, a timeout), and the runs "
            f"differ: {'; '.join(differences)}. A retry of this round runs the code after its last question again: "
            "declare the handler once=True so retries get the first run's result, or make that code idempotent "
            "(see the idempotency contract in docs/handlers.md)"), stacklevel=3)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _next_round(
    outcome: InputRequired,
    rounds: list[Round],
    script: _Script,
    codec: Any,
    arguments: Mapping[str, Any],
    principal: str | None,
    lenient: bool,
    max_rounds: int,
) -> tuple[Ledger, dict[str, Any]]:
    number = len(rounds) + 1
    if number > max_rounds:
        raise AssertionError(f"the handler was still asking after {max_rounds} rounds: {rounds[-1].keys}")
    current = Round(number, dict(outcome.requests))
    for key, request in outcome.requests.items():
        current.answers[key] = script.answer(key, request, number)
    rounds.append(current)
    ledger = _through_token(codec, outcome.ledger, arguments, principal)
    return merge_answers(ledger, current.answers, lenient=lenient)
