"""A live call that starts from a recorded ledger: the replay up to the pending question, then live.

A call another process ran and recorded (its answers and Step values, as ledger slots)
is adopted by replaying its handler from the top against that ledger with the live
driver: what was recorded is answered from the ledger exactly as a replay answers it
(fingerprints checked, no Step run again, ``ctx.is_replaying`` true meanwhile), and the
generator suspends live at the first question with no answer. The same handler, driven
without interruption, gives the same result.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr import Context, Elicit, Form, Patched, ReplayMismatch, Step
from mrtr.core.ledger import Ledger
from mrtr.core.live import LiveDriver, Questions, TooManyRounds
from mrtr.core.replay import Completed
from mrtr.testing import ALL_CAPABILITIES

from ..conftest import examples


def make(runs: list[str], seen: list[tuple[str, bool]], *, changed: bool = False) -> Any:
    def count_it(item: str, count: int) -> int:
        runs.append(item)
        return count * 2

    def handler(ctx: Context, item: str) -> Any:
        seen.append(("start", ctx.is_replaying))
        try:
            first = yield Elicit("How many?", Form().integer("count"))
            total = yield Step(count_it, item, first.content["count"])
            seen.append(("after step", ctx.is_replaying))
            if (yield Patched("ask-colour")):
                form = Form().string("colour") if not changed else Form().string("color")
                second = yield Elicit(f"{total} {item}: which colour?", form)
                return f"{total} {second.content.get('colour', second.content.get('color'))} {item}"
            return "never"
        finally:
            seen.append(("finally", ctx.is_replaying))
    return handler


def context() -> Context:
    return Context({"item": "boxes"}, client_capabilities=ALL_CAPABILITIES)


def test_a_call_adopted_at_its_second_question_replays_to_it_and_goes_on_live() -> None:
    runs: list[str] = []
    seen: list[tuple[str, bool]] = []
    first = LiveDriver(make(runs, seen), {"item": "boxes"}, context())
    asked = first.start()
    assert isinstance(asked, Questions) and list(asked.requests) == ["elicit-1"]
    asked = first.resume({"elicit-1": {"action": "accept", "content": {"count": 3}}})
    assert isinstance(asked, Questions) and list(asked.requests) == ["elicit-4"] and asked.round == 2
    recorded = first.ledger  # what a store keeps: the answer, the Step's value, the gate, the pending question
    assert [slot.answered for slot in recorded.slots] == [True, True, True, False]
    assert runs == ["boxes"]
    first.close()  # the first process lets it go (or dies): its finally ran there, as at a pause

    seen.clear()
    adopter = LiveDriver(make(runs, seen), {"item": "boxes"}, context(), ledger=recorded, rounds=1)
    again = adopter.start()
    assert isinstance(again, Questions) and list(again.requests) == ["elicit-4"] and again.round == 2
    assert [item.fingerprint for item in again.asked] == [item.fingerprint for item in asked.asked]
    assert runs == ["boxes"]  # the Step's recorded value was fed: it did not run again
    assert seen == [("start", True), ("after step", True)]  # replaying until the pending question
    done = adopter.resume({"elicit-4": {"action": "accept", "content": {"colour": "red"}}})
    assert isinstance(done, Completed) and done.result == "6 red boxes"
    assert seen[-1] == ("finally", False)
    assert [slot.answered for slot in adopter.ledger.slots] == [True, True, True, True]


def test_an_adopter_runs_with_the_recorded_rounds_and_refuses_what_the_code_no_longer_asks() -> None:
    runs: list[str] = []
    first = LiveDriver(make(runs, []), {"item": "boxes"}, context())
    first.start()
    first.resume({"elicit-1": {"action": "accept", "content": {"count": 1}}})
    recorded = first.ledger
    first.close()
    # A deploy changed the second question: the adopter's replay mismatches at its ordinal, the generator is closed.
    seen: list[tuple[str, bool]] = []
    changed = LiveDriver(make(runs, seen, changed=True), {"item": "boxes"}, context(), ledger=recorded, rounds=1)
    with pytest.raises(ReplayMismatch, match="ordinal #4"):
        changed.start()
    assert changed.done and seen[-1][0] == "finally"
    # The rounds an adopter starts from count against the same bound as the live call's.
    bounded = LiveDriver(make(runs, []), {"item": "boxes"}, context(), ledger=recorded, rounds=1, max_rounds=1)
    with pytest.raises(TooManyRounds):
        bounded.start()


async def test_an_async_handler_adopted_saves_each_step_before_it_goes_on() -> None:
    saved: list[Ledger] = []
    runs: list[int] = []

    async def work(number: int) -> int:
        runs.append(number)
        return number + 1

    async def handler(ctx: Context) -> Any:
        a = yield Step(work, 1)
        answer = yield Elicit("Go on?", Form().boolean("go"))
        b = yield Step(work, a)
        yield f"{a} {b} {answer.content['go']}"

    async def save(ledger: Ledger) -> None:
        saved.append(ledger)

    first = LiveDriver(handler, {}, Context({}, client_capabilities=ALL_CAPABILITIES), on_step=save)
    asked = await first.astart()
    assert isinstance(asked, Questions) and len(saved) == 1 and saved[0].slots[0].answer == 2
    recorded = first.ledger
    await first.aclose()
    adopter = LiveDriver(handler, {}, Context({}, client_capabilities=ALL_CAPABILITIES), ledger=recorded, rounds=0,
                         on_step=save)
    asked = await adopter.astart()
    assert isinstance(asked, Questions) and runs == [1]
    done = await adopter.aresume({"elicit-2": {"action": "accept", "content": {"go": True}}})
    assert isinstance(done, Completed) and done.result == "2 3 True" and runs == [1, 2]
    assert len(saved) == 2 and saved[1].slots[1].answered and saved[1].slots[2].answer == 3


@settings(max_examples=examples(60), deadline=None)
@given(counts=st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=6), cut=st.integers(0, 6))
def test_adopted_at_any_question_the_call_ends_as_one_run_uninterrupted(counts: list[int], cut: int) -> None:
    """Interrupt after any round and continue from the ledger: the result and the Step runs are those of one run."""
    def make_handler(runs: list[int]) -> Any:
        def add(total: int, value: int) -> int:
            runs.append(value)
            return total + value

        def handler() -> Any:
            total = 0
            for number in range(len(counts)):
                answer = yield Elicit(f"Number {number}?", Form().integer("n"))
                total = yield Step(add, total, answer.content["n"])
            return total
        return handler

    def answer(number: int) -> dict[str, Any]:
        return {"action": "accept", "content": {"n": counts[number]}}

    runs: list[int] = []
    driver = LiveDriver(make_handler(runs), {}, Context({}, client_capabilities=ALL_CAPABILITIES))
    outcome = driver.start()
    answered = 0
    while isinstance(outcome, Questions) and answered < min(cut, len(counts) - 1):
        outcome = driver.resume({key: answer(answered) for key in outcome.requests})
        answered += 1
    assert isinstance(outcome, Questions)
    recorded, rounds = driver.ledger, driver.rounds - 1  # the pending round is asked again by the adopter's replay
    driver.close()
    adopter = LiveDriver(make_handler(runs), {}, Context({}, client_capabilities=ALL_CAPABILITIES),
                         ledger=recorded, rounds=rounds)
    outcome = adopter.start()
    while isinstance(outcome, Questions):
        outcome = adopter.resume({key: answer(answered) for key in outcome.requests})
        answered += 1
    assert isinstance(outcome, Completed) and outcome.result == sum(counts)
    assert runs == counts  # each Step ran once, in order, across the two processes


class Journal:
    """A recorded call's journal as the carrier sees it, in memory: what it saved, and what it resumes from."""

    def __init__(self, resumed: Any = None) -> None:
        self.resumed = resumed
        self.principal = None
        self.waiting = False
        self.released = self.taken = False
        self.questions: list[Any] = []
        self.saved: list[Any] = []

    @property
    def recorded(self) -> bool:
        return bool(self.saved)

    def attach(self, source: Any) -> None:
        pass

    def hold(self) -> None:
        pass

    async def save(self, state: Any) -> None:
        self.saved.append(state)

    def save_from_thread(self, state: Any) -> None:
        self.saved.append(state)

    async def flush(self, *, done: bool = False) -> None:
        pass


class Peer:
    """The client: answers each question as ``answers`` says; notes what was sent and awaited."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.sent: list[Any] = []
        self.awaited: list[Any] = []

    async def request_all(self, requests: Any, *, timeout: float, sent: Any = None) -> list[dict[str, Any]]:
        ids = [f"n1.{len(self.sent) + index + 1}" for index in range(len(requests))]
        self.sent += [method for method, _ in requests]
        if sent is not None:
            await sent(ids)
        return [self.answers[params["message"]] for _, params in requests]

    async def await_answers(self, questions: Any, *, timeout: float, answered: Any = None) -> list[dict[str, Any]]:
        self.awaited += [question_id for question_id, _ in questions]
        return [dict(answered[question_id]["result"]) for question_id, _ in questions]


async def test_the_carrier_records_each_round_and_an_adopter_takes_the_answer_that_arrived_without_asking_again() -> None:
    from mrtr.carriers.live import LiveCarrier
    from mrtr.core.calls import Resumption

    runs: list[str] = []
    seen: list[tuple[str, bool]] = []
    answers = {"How many?": {"action": "accept", "content": {"count": 2}},
               "4 boxes: which colour?": {"action": "accept", "content": {"colour": "blue"}}}
    first = Journal()
    peer = Peer(answers)
    carrier = LiveCarrier(peer, version="2025-11-25", answer_timeout=30, journal=first)  # type: ignore[arg-type]
    context = Context({"item": "boxes"}, client_capabilities=ALL_CAPABILITIES)
    done = await carrier.execute("tools/call", {}, make(runs, seen), {"item": "boxes"}, context)
    assert done.result == "4 blue boxes" and peer.sent == ["elicitation/create", "elicitation/create"]
    # Each round was saved with the id it went out under, before the wait; the second with the first's answer.
    rounds = [state for state in first.saved if state.pending]
    assert [[question.id for question in state.pending] for state in rounds] == [["n1.1"], ["n1.2"]]
    assert rounds[1].rounds == 2 and rounds[1].ledger[0].answered and rounds[1].ledger[1].answer == 4
    # Another process adopts the call at its second round, the client's answer already recorded for it.
    runs.clear()
    resumed = Resumption(rounds[1], {"n1.2": {"jsonrpc": "2.0", "id": "n1.2",
                                              "result": {"action": "accept", "content": {"colour": "red"}}}})
    adopter = Peer({})
    carrier = LiveCarrier(adopter, version="2025-11-25", answer_timeout=30,  # type: ignore[arg-type]
                          journal=Journal(resumed))  # type: ignore[arg-type]
    context = Context({"item": "boxes"}, client_capabilities=ALL_CAPABILITIES)
    done = await carrier.execute("tools/call", {}, make(runs, seen), {"item": "boxes"}, context)
    assert done.result == "4 red boxes" and runs == []  # the Step's recorded value: it did not run again
    assert adopter.sent == [] and adopter.awaited == ["n1.2"]  # not asked again: awaited under its id
    # A handler declared once=True adopted while it ran code (waiting for nothing) is not run again.
    from mrtr.carriers.live import CallInterrupted

    running = Resumption(rounds[1].__class__(ledger=rounds[1].ledger[:2], rounds=1), {})
    carrier = LiveCarrier(Peer({}), version="2025-11-25", answer_timeout=30,  # type: ignore[arg-type]
                          journal=Journal(running), once=True)  # type: ignore[arg-type]
    with pytest.raises(CallInterrupted):
        await carrier.execute("tools/call", {}, make(runs, seen), {"item": "boxes"},
                              Context({"item": "boxes"}, client_capabilities=ALL_CAPABILITIES))
    assert runs == []
