"""The replay core: ordinals, groups, steps, fingerprints, closing, capabilities."""

from __future__ import annotations

import enum
from typing import Annotated, Literal

import msgspec
import pytest

from mrtr import Context, Elicit, ElicitResult, Form, ListRoots, Sample, Step
from mrtr.core.errors import HandlerError, InvalidParams, MissingRequiredClientCapability, ReplayMismatch
from mrtr.core.kinds import Kind
from mrtr.core.ledger import Ledger, Slot, merge_answers
from mrtr.core.replay import Completed, InputRequired, replay, replay_async
from mrtr.testing import ALL_CAPABILITIES, accept, cancel, decline, roots, run, sampled

from .conftest import line_of

EMAIL = Form().string("email", format="email")
AGE = Form().integer("age", minimum=0)


def ctx(**kwargs) -> Context:
    kwargs.setdefault("client_capabilities", ALL_CAPABILITIES)
    return Context({}, **kwargs)


# -- sequential questions -------------------------------------------------------------


def test_a_handler_that_never_asks_completes_in_one_execution():
    def plain():
        return "plain"

    outcome = run(plain)
    assert outcome.result == "plain"
    assert outcome.rounds == []
    assert outcome.executions == 1


def test_one_question_takes_two_rounds_and_the_handler_sees_the_answer():
    executions = []

    def register():
        executions.append(1)
        answer = yield Elicit("Your email?", EMAIL)
        return f"registered:{answer.content['email']}"

    outcome = run(register, answers=[accept(email="ada@example.com")])
    assert outcome.result == "registered:ada@example.com"
    assert outcome.asked == [["elicit-1"]]
    assert len(executions) == 2


def test_first_round_is_input_required_with_the_wire_request():
    def register():
        yield Elicit("Your email?", EMAIL)
        return "unreachable"

    outcome = replay(register, {}, ctx())
    assert isinstance(outcome, InputRequired)
    assert outcome.to_wire() == {
        "elicit-1": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "Your email?", "requestedSchema": EMAIL.to_schema()},
        }
    }
    [slot] = outcome.ledger.slots
    assert slot.kind == Kind.ELICIT and not slot.answered and slot.key is None


@pytest.mark.parametrize("n", [2, 3, 7])
def test_n_sequential_questions_take_n_plus_one_rounds(n):
    def survey():
        total = 0
        for i in range(n):
            answer = yield Elicit(f"Number {i}?", Form().integer("v"))
            total += answer.content["v"]
        return total

    outcome = run(survey, answers=[accept(v=i) for i in range(n)])
    assert outcome.result == sum(range(n))
    assert outcome.asked == [[f"elicit-{i + 1}"] for i in range(n)]
    assert outcome.executions == n + 1


def test_second_round_asks_only_the_new_question():
    def two():
        email = yield Elicit("Your email?", EMAIL)
        age = yield Elicit("Your age?", AGE)
        return f"{email.content['email']}:{age.content['age']}"

    first = replay(two, {}, ctx())
    ledger, _ = merge_answers(first.ledger, {"elicit-1": accept(email="a@b.io")})
    second = replay(two, {}, ctx(), ledger)
    assert isinstance(second, InputRequired)
    assert list(second.requests) == ["elicit-2"]
    assert second.ledger.slots[0].answered and not second.ledger.slots[1].answered
    ledger, _ = merge_answers(second.ledger, {"elicit-2": accept(age=42)})
    third = replay(two, {}, ctx(), ledger)
    assert isinstance(third, Completed) and third.result == "a@b.io:42"


def test_a_retry_that_answers_nothing_asks_the_same_key_again():
    def one():
        answer = yield Elicit("Your email?", EMAIL)
        return answer.action

    first = replay(one, {}, ctx())
    again = replay(one, {}, ctx(), first.ledger)
    assert isinstance(again, InputRequired) and list(again.requests) == ["elicit-1"]
    assert again.ledger == first.ledger


# -- groups ---------------------------------------------------------------------------


def test_a_tuple_group_is_one_round_and_answers_come_back_in_order():
    def profile():
        name, age = yield (Elicit("Name?", Form().string("name")), Elicit("Age?", AGE))
        return f"{name.content['name']}/{age.content['age']}"

    outcome = run(profile, answers=[accept(name="Ada"), accept(age=36)])
    assert outcome.result == "Ada/36"
    assert outcome.asked == [["elicit-1", "elicit-2"]]
    assert outcome.executions == 2


def test_a_list_group_behaves_like_a_tuple():
    def profile():
        answers = yield [Elicit("Name?", Form().string("name")), ListRoots()]
        assert isinstance(answers, tuple)
        return answers[1].roots[0].uri

    outcome = run(profile, answers=[accept(name="x"), roots("file:///home")])
    assert outcome.result == "file:///home"
    assert outcome.asked == [["elicit-1", "roots-2"]]


def test_a_dict_group_uses_its_keys_and_the_handler_receives_a_dict():
    def mixed():
        got = yield {
            "user_name": Elicit("Name?", Form().string("name")),
            "greeting": Sample("Say hi", max_tokens=50),
            "client_roots": ListRoots(),
        }
        return (got["user_name"].content["name"], got["greeting"].content.text, len(got["client_roots"].roots))

    outcome = run(mixed, answers=[accept(name="Ada"), "hello", roots("file:///a", "file:///b")])
    assert outcome.result == ("Ada", "hello", 2)
    assert outcome.asked == [["user_name", "greeting", "client_roots"]]


def test_a_partially_answered_group_asks_only_the_missing_member_and_keeps_the_other():
    def pair():
        a, b = yield (Elicit("A?", Form().string("a")), Elicit("B?", Form().string("b")))
        return a.content["a"] + b.content["b"]

    first = replay(pair, {}, ctx())
    ledger, _ = merge_answers(first.ledger, {"elicit-1": accept(a="x")})
    second = replay(pair, {}, ctx(), ledger)
    assert isinstance(second, InputRequired) and list(second.requests) == ["elicit-2"]
    ledger, _ = merge_answers(second.ledger, {"elicit-2": accept(b="y")})
    assert replay(pair, {}, ctx(), ledger).result == "xy"


def test_a_group_may_not_mix_steps_and_requests():
    def bad():
        yield (Elicit("A?", Form().string("a")), Step(len, "x"))

    with pytest.raises(HandlerError, match="only hold requests"):
        replay(bad, {}, ctx())


def test_a_keyed_group_conflicting_with_an_explicit_key_is_a_handler_error():
    def bad():
        yield {"a": Elicit("A?", Form().string("a"), key="b")}

    with pytest.raises(HandlerError, match='key="b"'):
        replay(bad, {}, ctx())


# -- keys -----------------------------------------------------------------------------


def test_default_keys_count_every_ordinal_of_every_kind():
    def everything():
        yield Step(lambda: 1)
        yield Elicit("A?", Form().string("a"))
        yield Sample("hi", max_tokens=5)
        yield ListRoots()
        return "done"

    outcome = run(everything, answers=[accept(a="x"), "hello", roots()])
    assert outcome.asked == [["elicit-2"], ["sample-3"], ["roots-4"]]


def test_explicit_keys_travel_on_the_wire_and_are_stored_in_the_ledger():
    def named():
        answer = yield Elicit("Email?", EMAIL, key="email")
        return answer.content["email"]

    first = replay(named, {}, ctx())
    assert list(first.requests) == ["email"]
    assert first.ledger.slots[0].key == "email"
    outcome = run(named, answers=[accept(email="x@y.io")])
    assert outcome.result == "x@y.io" and outcome.asked == [["email"]]


def test_an_explicit_key_equal_to_the_default_is_stored_compactly():
    def named():
        yield Elicit("Email?", EMAIL, key="elicit-1")

    first = replay(named, {}, ctx())
    assert first.ledger.slots[0].key is None and list(first.requests) == ["elicit-1"]


def test_a_duplicate_key_is_a_handler_error_naming_both_yields():
    def dup():
        yield Elicit("A?", Form().string("a"), key="same")
        yield Elicit("B?", Form().string("b"), key="same")

    with pytest.raises(HandlerError) as caught:
        run(dup, answers=[accept(a="x"), accept(b="y")])
    message = str(caught.value)
    assert '"same"' in message
    assert f"test_replay.py:{line_of(dup, 'A?')}" in message
    assert f"test_replay.py:{line_of(dup, 'B?')}" in message


def test_a_duplicate_key_inside_one_group_is_reported():
    def dup():
        yield (Elicit("A?", Form().string("a"), key="k"), Elicit("B?", Form().string("b"), key="k"))

    with pytest.raises(HandlerError, match='"k" twice'):
        replay(dup, {}, ctx())


# -- Step -----------------------------------------------------------------------------


def test_a_step_runs_exactly_once_across_rounds_and_its_value_is_stable():
    calls = []

    def fetch_slots(day: str) -> list[str]:
        calls.append(day)
        return [f"{day} 09:00", f"{day} 10:00"] if len(calls) == 1 else ["changed"]

    seen = []

    def book():
        slots = yield Step(fetch_slots, "mon")
        seen.append(slots)
        choice = yield Elicit("Which slot?", Form().choice("slot", slots))
        confirm = yield Elicit("Sure?", Form().boolean("ok"))
        return choice.content["slot"] if confirm.content["ok"] else None

    outcome = run(book, answers=[accept(slot="mon 10:00"), accept(ok=True)])
    assert outcome.result == "mon 10:00"
    assert calls == ["mon"]
    assert seen == [["mon 09:00", "mon 10:00"]] * 3


class Offer(msgspec.Struct):
    id: str
    price: float


def test_a_step_value_is_converted_to_its_return_annotation_on_every_round():
    def make_offer() -> Offer:
        return Offer("o-1", 9.5)

    seen = []

    def buy():
        offer = yield Step(make_offer)
        seen.append(offer)
        yield Elicit(f"Buy {offer.id}?", Form().boolean("ok"))
        return offer.price

    outcome = run(buy, answers=[accept(ok=True)])
    assert outcome.result == 9.5
    assert seen == [Offer("o-1", 9.5), Offer("o-1", 9.5)]


def test_a_step_exception_is_thrown_into_the_handler_and_not_recorded():
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("db down")
        return 7

    def handler():
        try:
            value = yield Step(flaky)
        except ConnectionError as exc:
            value = str(exc)
        yield Elicit(f"Got {value}", Form().boolean("ok"))
        return value

    first = replay(handler, {}, ctx())
    assert isinstance(first, InputRequired)
    assert list(first.requests) == ["elicit-2"]
    step_slot, elicit_slot = first.ledger.slots
    assert step_slot.kind == Kind.STEP and not step_slot.answered
    assert elicit_slot.kind == Kind.ELICIT
    ledger, _ = merge_answers(first.ledger, {"elicit-2": accept(ok=True)})
    # The recorded question embeds the error text, so the retry must see the same failure
    # path: the step runs again (it was not recorded), now succeeds, and the question changes.
    with pytest.raises(ReplayMismatch):
        replay(handler, {}, ctx(), ledger)
    assert len(attempts) == 2


def test_a_failing_step_holds_its_ordinal_unanswered_and_the_next_round_runs_it_again():
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) <= 2:  # fails in round one and again when round two re-runs it
            raise ConnectionError("db down")
        return "ok"

    def handler():
        try:
            value = yield Step(flaky)
        except ConnectionError:
            yield Elicit("Retry?", Form().boolean("again"))
            value = yield Step(flaky)
        return value

    first = replay(handler, {}, ctx())
    assert isinstance(first, InputRequired)
    # The failed Step keeps ordinal 1 (so the question is elicit-2, not elicit-1) but records nothing.
    assert [(slot.kind, slot.answered) for slot in first.ledger.slots] == [(Kind.STEP, False), (Kind.ELICIT, False)]
    assert first.ledger.slots[0].answer is None
    assert list(first.requests) == ["elicit-2"]
    assert len(attempts) == 1

    ledger, _ = merge_answers(first.ledger, {"elicit-2": accept(again=True)})
    second = replay(handler, {}, ctx(), ledger)
    # Round two runs the unanswered Step again (attempt 2, fails again), finds the answered
    # question at ordinal 2, and runs the retry Step at ordinal 3 (attempt 3, succeeds).
    assert isinstance(second, Completed) and second.result == "ok"
    assert len(attempts) == 3


def test_a_step_whose_value_cannot_be_recorded_is_a_handler_error():
    def handler():
        yield Step(object)

    with pytest.raises(HandlerError, match="cannot be recorded"):
        replay(handler, {}, ctx())


def test_an_async_step_in_a_sync_handler_is_a_handler_error():
    async def fetch():
        return 1

    def handler():
        yield Step(fetch)

    with pytest.raises(HandlerError, match="async"):
        replay(handler, {}, ctx())


def test_step_with_different_arguments_on_replay_is_a_mismatch():
    rounds = []

    def handler():
        rounds.append(1)
        value = yield Step(str, len(rounds))
        yield Elicit("ok?", Form().boolean("ok"))
        return value

    with pytest.raises(ReplayMismatch) as caught:
        run(handler, answers=[accept(ok=True)])
    assert "arguments" in str(caught.value) and "Step" in str(caught.value)


# -- decline and cancel ---------------------------------------------------------------


@pytest.mark.parametrize("answer, action", [(decline(), "decline"), (cancel(), "cancel")])
def test_decline_and_cancel_reach_the_handler_and_are_never_asked_again(answer, action):
    def handler():
        result = yield Elicit("Email?", EMAIL)
        if not result.accepted:
            return f"aborted:{result.action}:{result.content}:{result.value}"
        return "accepted"

    outcome = run(handler, answers=[answer])
    assert outcome.result == f"aborted:{action}:None:None"
    assert outcome.executions == 2


# -- fingerprints ---------------------------------------------------------------------


def test_a_different_question_at_an_answered_ordinal_is_a_mismatch_naming_file_and_line():
    messages = iter(["Your email?", "Your e-mail address?"])

    def fickle():
        answer = yield Elicit(next(messages), EMAIL)
        return answer

    first = replay(fickle, {}, ctx())
    ledger, _ = merge_answers(first.ledger, {"elicit-1": accept(email="a@b.io")})
    with pytest.raises(ReplayMismatch) as caught:
        replay(fickle, {}, ctx(), ledger)
    error = caught.value
    assert error.code == -32602
    message = error.message
    assert "ordinal #1" in message and '"elicit-1"' in message
    assert "idempotency contract" in message
    assert f"test_replay.py:{line_of(fickle, 'yield Elicit')}" in message
    assert "changed: message" in message
    assert "Your e-mail address?" in message
    assert error.data["changed"] == ["message"]


def test_a_different_question_at_a_pending_ordinal_is_also_a_mismatch():
    schemas = iter([Form().string("a"), Form().integer("a")])

    def fickle():
        yield Elicit("Same text", next(schemas))

    first = replay(fickle, {}, ctx())
    with pytest.raises(ReplayMismatch) as caught:
        replay(fickle, {}, ctx(), first.ledger)
    assert "changed: requestedSchema" in caught.value.message


def test_a_different_kind_at_an_ordinal_is_a_mismatch():
    kinds = iter([lambda: Elicit("A?", Form().string("a")), lambda: ListRoots()])

    def fickle():
        yield next(kinds)()

    first = replay(fickle, {}, ctx())
    with pytest.raises(ReplayMismatch, match="kind elicitation/create -> roots/list"):
        replay(fickle, {}, ctx(), first.ledger)


def test_a_mismatch_inside_a_yield_from_names_the_inner_line():
    messages = iter(["one", "two"])

    def inner():
        answer = yield Elicit(next(messages), Form().string("x"))
        return answer

    def outer():
        return (yield from inner())

    first = replay(outer, {}, ctx())
    with pytest.raises(ReplayMismatch) as caught:
        replay(outer, {}, ctx(), first.ledger)
    assert f"test_replay.py:{line_of(inner, 'yield Elicit')}" in caught.value.message


# -- closing and exceptions -------------------------------------------------------------


def test_except_exception_around_a_yield_still_pauses():
    def careful():
        try:
            answer = yield Elicit("Email?", EMAIL)
        except Exception as exc:  # the pattern that loses the question in exception-based designs
            return f"swallowed:{type(exc).__name__}"
        return answer.content["email"]

    first = replay(careful, {}, ctx())
    assert isinstance(first, InputRequired)
    assert run(careful, answers=[accept(email="x@y.io")]).result == "x@y.io"


def test_a_handler_that_swallows_generator_exit_is_reported_with_its_line():
    def stubborn():
        while True:
            try:
                yield Elicit("Email?", EMAIL)
            except:  # noqa: E722 - the bug under test
                yield Elicit("Really?", EMAIL, key="again")

    with pytest.raises(HandlerError) as caught:
        replay(stubborn, {}, ctx())
    assert "ignored GeneratorExit" in str(caught.value)
    assert caught.value.location.endswith(f"test_replay.py:{line_of(stubborn, 'Really?')}")


def test_finally_runs_once_per_round():
    events = []

    def handler():
        try:
            events.append("start")
            a = yield Elicit("A?", Form().string("a"))
            b = yield Elicit("B?", Form().string("b"))
            return a.content["a"] + b.content["b"]
        finally:
            events.append("finally")

    outcome = run(handler, answers=[accept(a="x"), accept(b="y")])
    assert outcome.result == "xy"
    assert events == ["start", "finally"] * 3


def test_context_managers_exit_when_the_round_pauses():
    events = []

    class Resource:
        def __enter__(self):
            events.append("enter")

        def __exit__(self, *exc):
            events.append("exit")

    def handler():
        with Resource():
            yield Elicit("A?", Form().string("a"))
            events.append("after")

    first = replay(handler, {}, ctx())
    assert isinstance(first, InputRequired)
    assert events == ["enter", "exit"]


def test_handler_exceptions_are_handler_errors_with_the_original_as_cause():
    def broken():
        yield Elicit("A?", Form().string("a"))
        raise ValueError("boom")

    with pytest.raises(HandlerError) as caught:
        run(broken, answers=[accept(a="x")])
    assert isinstance(caught.value.__cause__, ValueError)
    assert "ValueError: boom" in str(caught.value)
    assert caught.value.location.endswith(f":{line_of(broken, 'boom')}")


def test_a_sync_generator_yielding_a_plain_value_is_a_handler_error():
    def wrong():
        yield "result"

    with pytest.raises(HandlerError, match="use|return"):
        replay(wrong, {}, ctx())


def test_a_runtime_error_closes_the_generator_so_finally_runs():
    events = []
    messages = iter(["a", "b"])

    def fickle():
        try:
            yield Elicit(next(messages), Form().string("x"))
        finally:
            events.append("finally")

    first = replay(fickle, {}, ctx())
    with pytest.raises(ReplayMismatch):
        replay(fickle, {}, ctx(), first.ledger)
    assert events == ["finally", "finally"]


# -- async handlers ---------------------------------------------------------------------


async def test_an_async_generator_ends_by_yielding_its_result():
    events = []

    async def handler(ctx):
        try:
            name = yield Elicit("Name?", Form().string("name"))
            yield f"hello {name.content['name']}"
            events.append("after result")  # never runs: the runtime closes the generator
        finally:
            events.append("finally")

    first = await replay_async(handler, {}, ctx())
    assert isinstance(first, InputRequired)
    ledger, _ = merge_answers(first.ledger, {"elicit-1": accept(name="Ada")})
    done = await replay_async(handler, {}, ctx(), ledger)
    assert isinstance(done, Completed) and done.result == "hello Ada"
    assert events == ["finally", "finally"]


async def test_an_async_handler_awaits_async_steps_once():
    calls = []

    async def lookup(user: str) -> dict:
        calls.append(user)
        return {"plan": "pro"}

    async def handler():
        account = yield Step(lookup, "ada")
        ok = yield Elicit(f"Upgrade {account['plan']}?", Form().boolean("ok"))
        yield ok.content["ok"]

    from mrtr.testing import arun

    outcome = await arun(handler, answers=[accept(ok=True)])
    assert outcome.result is True and calls == ["ada"]


async def test_an_async_generator_that_ends_without_a_result_is_an_error_naming_it():
    async def handler():
        yield Elicit("A?", Form().string("a"))

    from mrtr.testing import arun

    with pytest.raises(HandlerError) as caught:
        await arun(handler, answers=[accept(a="x")])
    message = caught.value.message
    assert "ended without yielding a result" in message and "handler" in message
    assert f"test_replay.py:{line_of(handler, 'async def handler')}" in message
    assert "`yield result`" in message
    assert caught.value.location.endswith(f"test_replay.py:{line_of(handler, 'async def handler')}")


async def test_an_async_generator_may_yield_none_as_an_empty_result():
    async def handler():
        yield Elicit("A?", Form().string("a"))
        yield None

    from mrtr.testing import arun

    assert (await arun(handler, answers=[accept(a="x")])).result is None


async def test_an_async_generator_that_swallows_generator_exit_is_reported():
    async def stubborn():
        try:
            yield Elicit("A?", Form().string("a"))
        except BaseException:
            yield Elicit("B?", Form().string("b"), key="b")

    with pytest.raises(HandlerError, match="ignored GeneratorExit"):
        await replay_async(stubborn, {}, ctx())


def test_async_handlers_run_through_the_sync_helper_too():
    async def handler(ctx, name: str):
        answer = yield Elicit(f"Hello {name}?", Form().boolean("ok"))
        yield answer.accepted

    assert run(handler, {"name": "Ada"}, answers=[decline()]).result is False


def test_plain_and_coroutine_handlers_never_ask():
    def plain(ctx, x: int):
        return x * 2

    async def coroutine(x: int):
        return x + 1

    assert run(plain, {"x": 4}).result == 8
    assert run(coroutine, {"x": 4}).result == 5


async def test_a_coroutine_handler_failure_is_a_handler_error():
    async def broken():
        raise KeyError("k")

    with pytest.raises(HandlerError, match="KeyError"):
        await replay_async(broken, {}, ctx())


def test_replay_refuses_async_handlers():
    async def handler():
        yield 1

    with pytest.raises(TypeError, match="replay_async"):
        replay(handler, {}, ctx())


# -- context --------------------------------------------------------------------------


def test_ctx_is_passed_as_first_parameter_with_arguments():
    def handler(ctx: Context, city: str):
        return (ctx.arguments["city"], city, ctx.principal)

    outcome = run(handler, {"city": "Oslo"}, principal="alice")
    assert outcome.result == ("Oslo", "Oslo", "alice")


def test_is_replaying_is_true_until_the_live_edge():
    flags = []

    def handler(ctx):
        flags.append(("start", ctx.is_replaying))
        yield Elicit("A?", Form().string("a"))
        flags.append(("after a", ctx.is_replaying))
        yield Elicit("B?", Form().string("b"))
        flags.append(("after b", ctx.is_replaying))
        return None

    run(handler, answers=[accept(a="x"), accept(b="y")])
    assert flags == [
        ("start", False),
        ("start", True),
        ("after a", False),
        ("start", True),
        ("after a", True),
        ("after b", False),
    ]


# -- capabilities ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_factory, capabilities, required",
    [
        (lambda: Elicit("A?", Form().string("a")), {}, {"elicitation": {"form": {}}}),
        (lambda: Elicit("A?", Form().string("a")), {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
        (lambda: Sample("hi", max_tokens=5), {"elicitation": {}}, {"sampling": {}}),
        (lambda: Sample("hi", max_tokens=5, tools=[{"name": "t", "inputSchema": {"type": "object"}}]), {"sampling": {}}, {"sampling": {"tools": {}}}),
        (lambda: ListRoots(), {"sampling": {}}, {"roots": {}}),
    ],
)
def test_a_request_the_client_cannot_answer_is_missing_capability(request_factory, capabilities, required):
    def handler():
        yield request_factory()

    with pytest.raises(MissingRequiredClientCapability) as caught:
        replay(handler, {}, Context({}, client_capabilities=capabilities))
    error = caught.value
    assert error.code == -32021 and error.status_hint == 400
    assert error.data == {"requiredCapabilities": required}


@pytest.mark.parametrize("capabilities", [{"elicitation": {}}, {"elicitation": {"form": {}}}, {"elicitation": {"form": {}, "url": {}}}])
def test_any_form_capable_elicitation_object_is_enough(capabilities):
    def handler():
        yield Elicit("A?", Form().string("a"))

    assert isinstance(replay(handler, {}, Context({}, client_capabilities=capabilities)), InputRequired)


def test_capability_is_checked_again_for_an_answered_slot():
    def handler():
        answer = yield Elicit("A?", Form().string("a"))
        return answer.content

    first = replay(handler, {}, ctx())
    ledger, _ = merge_answers(first.ledger, {"elicit-1": accept(a="x")})
    with pytest.raises(MissingRequiredClientCapability):
        replay(handler, {}, Context({}, client_capabilities={}), ledger)


def test_ctx_supports_lets_a_handler_degrade():
    def handler(ctx):
        if ctx.supports(Elicit):
            answer = yield Elicit("Name?", Form().string("name"))
            return answer.content["name"]
        reply = yield Sample("Invent a name", max_tokens=10)
        return reply.content.text

    outcome = run(handler, answers=["Zed"], capabilities={"sampling": {}})
    assert outcome.result == "Zed" and outcome.asked == [["sample-1"]]
    assert Context(client_capabilities={"sampling": {}}).supports(Sample("x", max_tokens=1))
    assert not Context(client_capabilities={"sampling": {}}).supports(Sample("x", max_tokens=1, tools=[{"name": "t"}]))
    assert not Context(client_capabilities={}).supports(ListRoots)


# -- answers --------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Profile(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=2)]
    age: int
    color: Color
    tags: set[Literal["a", "b"]] = set()


def test_a_struct_schema_gives_the_handler_a_struct_value():
    def handler():
        answer = yield Elicit("Profile?", Profile)
        return answer.value

    outcome = run(handler, answers=[accept(name="Ada", age=36, color="blue", tags=["a"])])
    assert outcome.result == Profile("Ada", 36, Color.BLUE, {"a"})


@pytest.mark.parametrize(
    "content, field",
    [
        ({"name": "A", "age": 1, "color": "red"}, "name"),
        ({"name": "Ada", "age": "1", "color": "red"}, "age"),
        ({"name": "Ada", "age": 1, "color": "green"}, "color"),
        ({"name": "Ada", "age": 1}, "color"),
        ({"name": "Ada", "age": 1, "color": "red", "tags": ["z"]}, "tags"),
    ],
)
def test_a_malformed_accepted_answer_is_invalid_params_naming_the_field(content, field):
    def handler():
        yield Elicit("Profile?", Profile)

    with pytest.raises(InvalidParams) as caught:
        run(handler, answers=[accept(content)])
    assert caught.value.code == -32602
    assert f'"{field}"' in caught.value.message and '"elicit-1"' in caught.value.message


def test_an_answer_is_validated_once_then_trusted():
    def handler():
        a = yield Elicit("A?", Form().integer("n", maximum=5))
        b = yield Elicit("B?", Form().string("s"))
        return a.content["n"], b.content["s"]

    first = replay(handler, {}, ctx())
    ledger, _ = merge_answers(first.ledger, {"elicit-1": accept(n=3)})
    assert ledger.fresh == {0}
    second = replay(handler, {}, ctx(), ledger)
    assert second.ledger.fresh == frozenset()


def test_a_sampling_answer_of_the_wrong_shape_is_invalid_params():
    def handler():
        yield Sample("hi", max_tokens=5)

    with pytest.raises(InvalidParams, match="sample-1"):
        run(handler, answers=[{"action": "accept"}])


def test_sampling_and_roots_answers_reach_the_handler_typed():
    def handler():
        reply = yield Sample("Capital of France?", max_tokens=100, key="capital")
        listing = yield ListRoots(key="client_roots")
        return reply.model, reply.content.text, [root.uri for root in listing.roots]

    outcome = run(handler, answers=[sampled("Paris", model="m1"), roots({"uri": "file:///r", "name": "R"})])
    assert outcome.result == ("m1", "Paris", ["file:///r"])


def test_an_elicit_result_compares_by_action_and_content():
    assert ElicitResult("accept", {"a": 1}) == ElicitResult("accept", {"a": 1}, value=object())
    assert ElicitResult("decline") != ElicitResult("cancel")


def test_ledgers_compare_by_slots_and_fresh_positions_and_show_both_in_repr():
    pending = Slot(Kind.ELICIT, b"fp")
    answered = Slot(Kind.ELICIT, b"fp", None, True, [0, {"n": 1}])
    assert Ledger((answered,), frozenset({0})) == Ledger((answered,), frozenset({0}))
    assert Ledger((answered,)) != Ledger((pending,))
    assert Ledger((answered,), frozenset({0})) != Ledger((answered,))  # same answers, not yet validated
    assert Ledger((answered,)) != (answered,)
    text = repr(Ledger((answered,), frozenset({0})))
    assert text.startswith("Ledger([") and "answered=True" in text and text.endswith("fresh=[0])")


def test_a_root_that_is_not_a_file_uri_is_invalid_params():
    def handler():
        listing = yield ListRoots()
        return listing

    with pytest.raises(InvalidParams, match="not a file:// URI"):
        run(handler, answers=[roots("https://example.com/repo")])


# -- URL-mode elicitation ---------------------------------------------------------------


def test_url_mode_elicitation_goes_on_the_wire_in_url_mode():
    from mrtr import ElicitURL

    from .wire_schema import validate

    def connect():
        yield ElicitURL("Sign in to your bank", "https://bank.example.com/connect?session=abc")

    first = replay(connect, {}, ctx())
    wire_form = first.to_wire()["elicit-1"]
    assert wire_form == {"method": "elicitation/create", "params": {
        "mode": "url", "message": "Sign in to your bank", "url": "https://bank.example.com/connect?session=abc"}}
    validate(wire_form, "ElicitRequest")


def test_url_mode_accept_is_consent_and_the_handler_asks_again_until_the_step_is_done():
    from mrtr import ElicitURL

    completed = {"done": False}

    def connect():
        consent = yield ElicitURL("Sign in to your bank", "https://bank.example.com/connect")
        if not consent.accepted:
            return "cancelled"
        while not completed["done"]:
            consent = yield ElicitURL("Finish signing in, then continue", "https://bank.example.com/connect")
            if not consent.accepted:
                return "cancelled"
        return "connected"

    def client(request):
        if isinstance(request, ElicitURL) and request.message.startswith("Finish"):
            completed["done"] = True  # the user finished on the web page meanwhile
        return {"action": "accept"}

    outcome = run(connect, answers=client)
    assert outcome.result == "connected"
    assert outcome.asked == [["elicit-1"], ["elicit-2"]]
    assert run(connect, answers=[decline()]).result == "cancelled"


@pytest.mark.parametrize("capabilities", [{}, {"elicitation": {}}, {"elicitation": {"form": {}}}])
def test_url_mode_needs_the_url_capability(capabilities):
    from mrtr import ElicitURL

    def connect():
        yield ElicitURL("Sign in", "https://example.com/x")

    with pytest.raises(MissingRequiredClientCapability) as caught:
        replay(connect, {}, Context({}, client_capabilities=capabilities))
    assert caught.value.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    assert Context(client_capabilities={"elicitation": {"url": {}}}).supports(ElicitURL)


@pytest.mark.parametrize("url", ["/relative", "ftp://example.com/x", "https://", "not a url", 5])
def test_url_mode_needs_an_absolute_http_url(url):
    from mrtr import ElicitURL

    with pytest.raises(ValueError, match="absolute http"):
        ElicitURL("Sign in", url)


def test_switching_between_form_and_url_mode_at_an_ordinal_is_a_mismatch():
    from mrtr import ElicitURL

    kinds = iter([lambda: Elicit("Sign in", Form().string("token")), lambda: ElicitURL("Sign in", "https://x.example/")])

    def fickle():
        yield next(kinds)()

    first = replay(fickle, {}, ctx())
    with pytest.raises(ReplayMismatch, match="changed: .*requestedSchema|changed: .*url"):
        replay(fickle, {}, Context({}, client_capabilities={"elicitation": {"form": {}, "url": {}}}), first.ledger)


# -- the determinism check of the testing helper ------------------------------------------


def test_check_determinism_passes_a_deterministic_handler_with_steps():
    import random

    def new_id() -> str:
        return f"id-{random.random()}"

    def handler():
        booking = yield Step(new_id)
        ok = yield Elicit(f"Confirm {booking}?", Form().boolean("ok"))
        return booking if ok.content["ok"] else None

    outcome = run(handler, answers=[accept(ok=True)], check_determinism=True)
    assert outcome.result.startswith("id-") and outcome.executions == 2


def test_check_determinism_catches_a_question_built_from_live_data():
    from mrtr.testing import NotDeterministic

    clock = iter(range(100))

    def handler():
        yield Elicit(f"Price now: {next(clock)}. Buy?", Form().boolean("ok"))

    with pytest.raises(NotDeterministic, match="round 1 is not deterministic") as caught:
        run(handler, answers=[accept(ok=True)], check_determinism=True)
    assert "changed: message" in str(caught.value)
    # without the check the same handler only fails one round later, as a replay mismatch
    with pytest.raises(ReplayMismatch):
        run(handler, answers=[accept(ok=True)])


def test_check_determinism_catches_a_handler_that_only_sometimes_asks():
    from mrtr.testing import NotDeterministic

    calls = []

    def handler():
        calls.append(1)
        if len(calls) % 2:
            yield Elicit("Sure?", Form().boolean("ok"))
        return "done"

    with pytest.raises(NotDeterministic, match="second completed"):
        run(handler, answers=[accept(ok=True)], check_determinism=True)


async def test_check_determinism_works_for_async_handlers():
    from mrtr.testing import NotDeterministic, arun

    counter = iter(range(100))

    async def handler():
        answer = yield Elicit(f"Attempt {next(counter)}", Form().boolean("ok"))
        yield answer.accepted

    with pytest.raises(NotDeterministic):
        await arun(handler, answers=[accept(ok=True)], check_determinism=True)

    async def steady():
        answer = yield Elicit("Steady?", Form().boolean("ok"))
        yield answer.accepted

    assert (await arun(steady, answers=[accept(ok=True)], check_determinism=True)).result is True


def test_check_determinism_runs_the_final_round_twice_and_warns_when_a_retry_would_differ():
    import itertools
    import warnings

    from mrtr.testing import RetryDiffers

    numbers = itertools.count(1)
    writes: list[str] = []

    def new_booking_id() -> str:
        return f"b-{next(numbers)}"

    def book(ctx):
        ok = yield Elicit("Book it?", Form().boolean("ok"))
        booking = yield Step(new_booking_id)  # after the last question: a retry runs it again
        writes.append(booking)
        ctx.progress(1, 1, f"booked {booking}")
        return f"booked {booking}" if ok.content["ok"] else "not booked"

    with pytest.warns(RetryDiffers) as warned:
        outcome = run(book, answers=[accept(ok=True)], check_determinism=True)
    assert outcome.result == "booked b-1" and writes == ["b-1", "b-2"]  # the final round ran twice
    message = str(warned[0].message)
    assert message.startswith("the final round ran twice, as a client's retry of it would")
    assert "the Steps it ran recorded #2 'b-1', then #2 'b-2'" in message
    assert "its result was 'booked b-1', then 'booked b-2'" in message
    assert "sent 1 notifications, then 1" in message and "once=True" in message

    def steady(ctx):
        ok = yield Elicit("Book it?", Form().boolean("ok"))
        ctx.progress(1, 1, "booked")
        return "booked" if ok.content["ok"] else "not booked"

    with warnings.catch_warnings():
        warnings.simplefilter("error", RetryDiffers)
        assert run(steady, answers=[accept(ok=True)], check_determinism=True).result == "booked"


async def test_check_determinism_warns_for_an_async_final_round_too():
    import itertools

    from mrtr.testing import RetryDiffers, arun

    numbers = itertools.count(1)

    async def charge():
        ok = yield Elicit("Charge?", Form().boolean("ok"))
        receipt = yield Step(lambda: next(numbers))
        yield (ok.content["ok"], receipt)

    with pytest.warns(RetryDiffers, match=r"the Steps it ran recorded #2 1, then #2 2"):
        await arun(charge, answers=[accept(ok=True)], check_determinism=True)
