"""The live driver: a handler driven once, suspended at each question, against the replay core it shares.

Where a behaviour exists on the modern path (keys, ordinals, fingerprints, the
capability gate, answer checks, Step values, error texts), the test runs the same
handler through the replay core (``mrtr.testing.run``) and compares: one handler,
the same answers, the same result and the same errors in both eras.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr import Context, Elicit, ElicitURL, Form, HandlerError, InvalidParams, ListRoots, MissingRequiredClientCapability
from mrtr import Sample, Step
from mrtr.core.live import MAX_LIVE_ROUNDS, LiveDriver, Questions, TooManyRounds
from mrtr.core.replay import Completed, InputRequired, replay
from mrtr.testing import ALL_CAPABILITIES, run

from ..conftest import examples

EVERYTHING = ALL_CAPABILITIES


def drive(handler: Any, arguments: dict[str, Any] | None, answer: Any, *,
          capabilities: dict[str, Any] | None = None) -> tuple[Any, list[list[str]]]:
    """Run ``handler`` live to its end; ``answer(key, request)`` gives each wire answer. Returns (result, keys per round)."""
    driver = LiveDriver(handler, arguments, Context(arguments, client_capabilities=capabilities or EVERYTHING))
    outcome = driver.start()
    asked = []
    while isinstance(outcome, Questions):
        asked.append(list(outcome.requests))
        outcome = driver.resume({key: answer(key, request) for key, request in outcome.requests.items()})
    assert isinstance(outcome, Completed) and driver.done
    return outcome.result, asked


async def adrive(handler: Any, arguments: dict[str, Any] | None, answer: Any) -> tuple[Any, list[list[str]]]:
    driver = LiveDriver(handler, arguments, Context(arguments, client_capabilities=EVERYTHING))
    outcome = await driver.astart()
    asked = []
    while isinstance(outcome, Questions):
        asked.append(list(outcome.requests))
        outcome = await driver.aresume({key: answer(key, request) for key, request in outcome.requests.items()})
    assert isinstance(outcome, Completed)
    return outcome.result, asked


class Size(msgspec.Struct):
    size: str


class Stamp(msgspec.Struct):
    at: dt.date
    label: str


def stamp() -> Stamp:
    return Stamp(dt.date(2026, 7, 28), "release")


calls: list[str] = []


def counted(name: str) -> str:
    calls.append(name)
    return f"ran {name}"


def wizard(ctx: Context, company: str):
    """Several questions, a Step between them, a group, a keyed group, sampling and roots."""
    name = yield Elicit("Your name?", Form().string("name", min_length=1))
    ran = yield Step(counted, company)
    when = yield Step(stamp)
    size, colour = yield (Elicit("Size?", Size), Elicit("Colour?", Form().choice("colour", ["red", "blue"])))
    keyed = yield {"why": Elicit("Why?", Form().string("why", optional=True)), "roots": ListRoots()}
    said = yield Sample("Summarise", max_tokens=10)
    return {
        "company": company, "name": name.content, "ran": ran, "when": [when.at.isoformat(), when.label],
        "size": size.value.size if size.accepted else size.action, "colour": colour.action,
        "why": keyed["why"].action, "roots": [root.uri for root in keyed["roots"].roots],
        "said": said.content.text,
    }


ANSWERS = {
    "elicit-1": {"action": "accept", "content": {"name": "Ada"}},
    "elicit-4": {"action": "accept", "content": {"size": "M"}},
    "elicit-5": {"action": "decline"},
    "why": {"action": "cancel"},
    "roots": {"roots": [{"uri": "file:///work"}]},
    "sample-8": {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "m"},
}


def test_a_conversation_asks_the_same_keys_and_gives_the_same_result_as_the_replay():
    calls.clear()
    live, asked = drive(wizard, {"company": "acme"}, lambda key, request: ANSWERS[key])
    live_calls = list(calls)
    calls.clear()
    replayed = run(wizard, {"company": "acme"}, answers=lambda key, request: ANSWERS[key])
    assert live == replayed.result
    assert asked == replayed.asked == [["elicit-1"], ["elicit-4", "elicit-5"], ["why", "roots"], ["sample-8"]]
    assert live["when"] == ["2026-07-28", "release"]  # a Step value converted to its annotation, as on replay
    assert live_calls == ["acme"]  # a Step runs once


def test_the_requests_of_each_round_are_those_the_replay_puts_in_input_requests():
    ctx = Context({"company": "acme"}, client_capabilities=EVERYTHING)
    driver = LiveDriver(wizard, {"company": "acme"}, ctx)
    outcome = driver.start()
    ledger = None
    unmatched: dict[str, Any] = {}
    while isinstance(outcome, Questions):
        replayed = replay(wizard, {"company": "acme"}, Context({"company": "acme"}, client_capabilities=EVERYTHING),
                          ledger, unmatched)
        assert isinstance(replayed, InputRequired)
        assert {key: request.to_wire() for key, request in outcome.requests.items()} == replayed.to_wire()
        fingerprints = [slot.fingerprint for slot in replayed.ledger.slots][-len(outcome.asked):]
        assert [item.fingerprint for item in outcome.asked] == fingerprints
        assert [item.ordinal for item in outcome.asked] == [len(replayed.ledger.slots) - len(outcome.asked) + i + 1
                                                             for i in range(len(outcome.asked))]
        answers = {key: ANSWERS[key] for key in outcome.requests}
        from mrtr.core.ledger import merge_answers
        ledger, unmatched = merge_answers(replayed.ledger, answers)
        outcome = driver.resume(answers)


def test_code_before_a_yield_runs_once():
    ran = []

    def handler():
        ran.append("top")
        first = yield Elicit("One?", Form().boolean("ok"))
        ran.append("middle")
        second = yield Elicit("Two?", Form().boolean("ok"))
        return [first.action, second.action]

    result, _ = drive(handler, None, lambda key, request: {"action": "decline"})
    assert result == ["decline", "decline"]
    assert ran == ["top", "middle"]


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.sampled_from(["accept", "decline", "cancel"]), min_size=4, max_size=4),
       st.integers(min_value=0, max_value=120), st.text(min_size=1, max_size=20))
def test_any_answers_give_the_same_result_in_both_eras(actions, age, name):
    def handler(ctx: Context):
        who = yield Elicit("Who?", Form().string("name"))
        if who.accepted:
            how_old = yield Elicit(f"How old is {who.content['name']}?", Form().integer("age", minimum=0))
        else:
            how_old = yield Elicit("How old?", Form().integer("age", minimum=0))
        both = yield (Elicit("Tea?", Form().boolean("tea")), Elicit("Sugar?", Form().boolean("sugar")))
        return [who.action, who.content, how_old.action, how_old.content, [answer.action for answer in both]]

    script = iter(actions)
    contents = {"Who?": {"name": name}, "How old?": {"age": age}, "Tea?": {"tea": True}, "Sugar?": {"sugar": False}}

    def answer(key, request):
        action = next(script)
        message = "How old?" if request.message.startswith("How old") else request.message
        return {"action": "accept", "content": contents[message]} if action == "accept" else {"action": action}

    live, _ = drive(handler, None, answer)
    script = iter(actions)
    assert run(handler, answers=answer).result == live


# -- the capability gate -----------------------------------------------------------------


def test_a_missing_capability_is_the_replay_cores_error_and_nothing_of_the_round_is_asked():
    cleaned = []

    def handler():
        try:
            yield (Elicit("Name?", Form().string("name")), Sample("Hi", max_tokens=5))
        finally:
            cleaned.append("finally")

    driver = LiveDriver(handler, None, Context(client_capabilities={"elicitation": {}}))
    with pytest.raises(MissingRequiredClientCapability) as live:
        driver.start()
    with pytest.raises(MissingRequiredClientCapability) as replayed:
        run(handler, capabilities={"elicitation": {}})
    assert live.value.data == replayed.value.data == {"requiredCapabilities": {"sampling": {}}}
    assert live.value.message == replayed.value.message
    assert cleaned == ["finally", "finally"] and driver.done


def test_url_elicitation_needs_the_url_capability_in_both_eras():
    def handler():
        yield ElicitURL("Sign in", "https://example.com/sign-in")
        return "ok"

    with pytest.raises(MissingRequiredClientCapability) as live:
        LiveDriver(handler, None, Context(client_capabilities={"elicitation": {}})).start()
    assert live.value.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    assert drive(handler, None, lambda key, request: {"action": "accept"},
                 capabilities={"elicitation": {"url": {}}})[0] == "ok"


# -- answers, checked as on the modern path ----------------------------------------------


@pytest.mark.parametrize("bad", [
    {"action": "accept", "content": {"age": "old"}},
    {"action": "accept", "content": {"age": 3, "extra": True}},
    {"action": "accept"},
    {"action": "maybe"},
    {"content": {}},
    ["not", "an", "object"],
])
def test_an_invalid_answer_is_the_same_typed_error_as_on_the_modern_path(bad):
    cleaned = []

    def handler():
        try:
            answer = yield Elicit("Age?", Form().integer("age"))
            return answer.content
        finally:
            cleaned.append("finally")

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING))
    assert isinstance(driver.start(), Questions)
    with pytest.raises(InvalidParams) as live:
        driver.resume({"elicit-1": bad})
    assert cleaned == ["finally"] and driver.done
    with pytest.raises(InvalidParams) as replayed:
        run(handler, answers=[bad])
    # The same rule and words; a 2025 client, which never sees inputResponses keys, is told which request it was.
    assert "inputResponses" not in live.value.message
    assert live.value.message == replayed.value.message.replace(
        'inputResponses key "elicit-1"', "the client's answer to elicitation/create")


def test_a_sampling_answer_is_checked_as_a_create_message_result():
    def handler():
        said = yield Sample("Hi", max_tokens=5)
        return said.model

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING))
    driver.start()
    with pytest.raises(InvalidParams, match="sampling result"):
        driver.resume({"sample-1": {"role": "assistant"}})


def test_a_root_that_is_not_a_file_uri_is_refused():
    def handler():
        found = yield ListRoots()
        return found

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING))
    driver.start()
    with pytest.raises(InvalidParams, match="file://"):
        driver.resume({"roots-1": {"roots": [{"uri": "https://example.com"}]}})


def test_a_round_resumes_only_with_every_answer():
    def handler():
        yield (Elicit("A?", Form().boolean("a")), Elicit("B?", Form().boolean("b")))

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING))
    driver.start()
    with pytest.raises(InvalidParams, match='no answer for "elicit-2"'):
        driver.resume({"elicit-1": {"action": "decline"}})
    assert driver.done


# -- handler errors and diagnostics -----------------------------------------------------


def test_a_duplicate_key_is_the_replay_cores_handler_error():
    def handler():
        yield Elicit("A?", Form().boolean("a"), key="same")
        yield Elicit("B?", Form().boolean("b"), key="same")

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING))
    driver.start()
    with pytest.raises(HandlerError, match='used the key "same" twice'):
        driver.resume({"same": {"action": "decline"}})


def test_a_failing_step_is_thrown_into_the_handler_and_not_run_again():
    attempts = []

    def flaky() -> int:
        attempts.append(1)
        raise ValueError("down")

    def handler():
        try:
            yield Step(flaky)
        except ValueError as exc:
            answer = yield Elicit(f"Step failed ({exc}); go on?", Form().boolean("go"))
            return answer.action

    assert drive(handler, None, lambda key, request: {"action": "cancel"})[0] == "cancel"
    assert attempts == [1]


def test_handler_code_that_raises_is_a_handler_error_naming_it():
    def handler():
        yield Elicit("A?", Form().boolean("a"))
        raise KeyError("missing")

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING))
    driver.start()
    with pytest.raises(HandlerError, match="KeyError") as failed:
        driver.resume({"elicit-1": {"action": "decline"}})
    assert failed.value.location and failed.value.location.endswith(str(handler.__code__.co_firstlineno + 2))


def test_a_sync_handler_with_an_async_step_is_refused():
    async def fetch() -> int:
        return 1

    def handler():
        yield Step(fetch)

    with pytest.raises(HandlerError, match="is async"):
        LiveDriver(handler, None, Context()).start()


def test_a_yield_that_is_not_a_request_is_the_replay_cores_error():
    def handler():
        yield "hello"

    with pytest.raises(HandlerError, match="not a request, a group of requests or a Step"):
        LiveDriver(handler, None, Context()).start()


# -- closing ----------------------------------------------------------------------------


def test_closing_a_waiting_handler_runs_its_finally_once():
    cleaned = []

    def handler():
        try:
            yield Elicit("A?", Form().boolean("a"))
        finally:
            cleaned.append("finally")

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING))
    driver.start()
    driver.close()
    driver.close()
    assert cleaned == ["finally"] and driver.done
    with pytest.raises(RuntimeError, match="not waiting"):
        driver.resume({"elicit-1": {"action": "decline"}})


def test_a_handler_that_swallows_generator_exit_is_reported_as_on_replay():
    def handler():
        try:
            yield Elicit("A?", Form().boolean("a"))
        except:  # noqa: E722 - the bug under test
            yield Elicit("Really?", Form().boolean("a"), key="again")

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING))
    driver.start()
    with pytest.raises(HandlerError, match="ignored GeneratorExit"):
        driver.close()
    with pytest.raises(HandlerError, match="ignored GeneratorExit"):
        run(handler, answers=[])


def test_start_twice_is_misuse():
    def handler():
        yield Elicit("A?", Form().boolean("a"))

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING))
    driver.start()
    with pytest.raises(RuntimeError, match="already started"):
        driver.start()


# -- the round cap ----------------------------------------------------------------------


def test_a_handler_that_asks_again_after_every_decline_is_stopped_at_the_cap():
    cleaned = []

    def stubborn():
        try:
            while True:
                answer = yield Elicit("Please?", Form().boolean("ok"))
                if answer.accepted:
                    return "yes"
        finally:
            cleaned.append("finally")

    driver = LiveDriver(stubborn, None, Context(client_capabilities=EVERYTHING))
    outcome = driver.start()
    rounds = 1
    with pytest.raises(TooManyRounds, match=f"more than {MAX_LIVE_ROUNDS} times"):
        while True:
            assert isinstance(outcome, Questions)
            outcome = driver.resume({key: {"action": "decline"} for key in outcome.requests})
            rounds += 1
    assert rounds == MAX_LIVE_ROUNDS and cleaned == ["finally"]  # ten rounds asked, the eleventh refused
    assert isinstance(TooManyRounds("x"), HandlerError)


def test_a_conversation_of_exactly_the_cap_completes():
    def handler():
        for _ in range(3):
            yield Elicit("Again?", Form().boolean("ok"))
        return "done"

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING), max_rounds=3)
    outcome = driver.start()
    while isinstance(outcome, Questions):
        outcome = driver.resume({key: {"action": "decline"} for key in outcome.requests})
    assert outcome.result == "done"
    with pytest.raises(ValueError):
        LiveDriver(handler, None, Context(), max_rounds=0)


# -- other handler shapes ----------------------------------------------------------------


def test_plain_functions_and_coroutines_complete_at_once():
    def plain(x: int) -> int:
        return x + 1

    async def coroutine(x: int) -> int:
        await trio.sleep(0)
        return x * 2

    assert LiveDriver(plain, {"x": 1}, Context()).start().result == 2  # type: ignore[union-attr]

    async def main() -> None:
        assert (await LiveDriver(coroutine, {"x": 4}, Context()).astart()).result == 8  # type: ignore[union-attr]
        assert (await LiveDriver(plain, {"x": 4}, Context()).astart()).result == 5  # type: ignore[union-attr]

    trio.run(main)
    with pytest.raises(TypeError, match="use astart"):
        LiveDriver(coroutine, {"x": 1}, Context()).start()


async def test_an_async_handler_runs_async_steps_once_and_ends_by_yielding_its_result():
    ran = []
    cleaned = []

    async def lookup(city: str) -> list[str]:
        await trio.sleep(0)
        ran.append(city)
        return ["sun", "rain"]

    async def handler(ctx: Context, city: str):
        try:
            options = yield Step(lookup, city)
            pick = yield Elicit(f"Weather in {city}?", Form().choice("w", options))
            yield f"{city}: {pick.content['w']}"
        finally:
            cleaned.append("finally")

    result, asked = await adrive(handler, {"city": "Oslo"},
                                 lambda key, request: {"action": "accept", "content": {"w": "rain"}})
    assert result == "Oslo: rain" and asked == [["elicit-2"]]
    assert ran == ["Oslo"] and cleaned == ["finally"]


async def test_an_async_handler_that_ends_without_a_result_is_the_replay_cores_error():
    async def handler():
        yield Elicit("A?", Form().boolean("a"))

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING))
    await driver.astart()
    with pytest.raises(HandlerError, match="ended without yielding a result"):
        await driver.aresume({"elicit-1": {"action": "decline"}})


async def test_closing_a_waiting_async_handler_runs_its_finally():
    cleaned = []

    async def handler():
        try:
            yield Elicit("A?", Form().boolean("a"))
            yield "never"
        finally:
            cleaned.append("finally")

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING))
    assert isinstance(await driver.astart(), Questions)
    await driver.aclose()
    assert cleaned == ["finally"] and driver.done


async def test_an_invalid_answer_closes_an_async_handler():
    cleaned = []

    async def handler():
        try:
            answer = yield Elicit("Age?", Form().integer("age"))
            yield answer.content
        finally:
            cleaned.append("finally")

    driver = LiveDriver(handler, None, Context(client_capabilities=EVERYTHING))
    await driver.astart()
    with pytest.raises(InvalidParams):
        await driver.aresume({"elicit-1": {"action": "accept", "content": {"age": "x"}}})
    assert cleaned == ["finally"]


def test_a_patch_gate_takes_the_new_branch_and_the_keys_a_fresh_replay_gives():
    from mrtr.core.effects import Patched

    def handler():
        if (yield Patched("ask-email")):
            email = yield Elicit("Email?", Form().string("email"))
            return f"new {email.action}"
        return "old"

    live, asked = drive(handler, None, lambda key, request: {"action": "decline"})
    replayed = run(handler, answers=lambda key, request: {"action": "decline"})
    assert live == replayed.result == "new decline"
    assert asked == replayed.asked == [["elicit-2"]]  # the marker took ordinal 1 in both
