"""Authoring mistakes surface as errors that name the handler, the line and the fix.

Each test reproduces a mistake a new author makes and checks what they would read.
"""

from __future__ import annotations

import functools
import random
import time

import msgspec
import pytest

from mrtr import Context, Elicit, Form, ListRoots, Sample, Step
from mrtr.core.errors import HandlerError, ReplayMismatch
from mrtr.core.ledger import merge_answers
from mrtr.core.replay import replay
from mrtr.testing import ALL_CAPABILITIES, accept, run

from .conftest import line_of

EMAIL = Form().string("email", format="email")


def ctx() -> Context:
    return Context({}, client_capabilities=ALL_CAPABILITIES)


# -- a forgotten yield ----------------------------------------------------------------


@pytest.mark.parametrize("attribute", ["accepted", "content", "action", "value"])
def test_reading_the_answer_of_an_unyielded_elicit_says_forgot_yield(attribute):
    def register(plan: str):
        answer = Elicit("Your email?", EMAIL)
        return getattr(answer, attribute)

    with pytest.raises(HandlerError) as caught:
        run(register, {"plan": "pro"})
    message = caught.value.message
    where = f"test_authoring.py:{line_of(register, 'return getattr')}"
    assert "did you forget `yield`?" in message
    assert f"`.{attribute}`" in message
    assert "register" in message and where in message
    assert "answer = yield Elicit('Your email?', ...)" in message
    assert caught.value.location.endswith(where)
    assert "AttributeError" not in message


def test_the_same_goes_for_sample_listroots_and_step():
    def handler():
        reply = Sample("hi", max_tokens=5)
        return reply.model

    def listing():
        listed = ListRoots()
        return listed.roots

    def book():
        slots = Step(sorted, (3, 1, 2))
        return [slot for slot in slots]

    def first():
        slots = Step(sorted, (3, 1, 2))
        return slots[0]

    for fn, use in [(handler, "`.model`"), (listing, "`.roots`"), (book, "iterated over Step(sorted"),
                    (first, "indexed `[0]` into Step(sorted")]:
        with pytest.raises(HandlerError, match="did you forget `yield`") as caught:
            run(fn)
        assert use in caught.value.message


def test_an_unyielded_effect_keeps_plain_attribute_errors_for_private_and_dunder_names():
    import copy

    elicit = Elicit("A?", EMAIL)
    assert not hasattr(elicit, "__deepcopy__")
    assert not hasattr(elicit, "_private")
    assert copy.copy(elicit).message == "A?"
    # Truthiness is untouched: the runtime and authors may test an effect for presence.
    assert bool(elicit) and bool(Step(len, ()))


def test_returning_an_effect_instead_of_yielding_it_says_forgot_yield():
    def confirm():
        return Elicit("Sure?", Form().boolean("ok"))

    with pytest.raises(HandlerError) as caught:
        run(confirm)
    message = caught.value.message
    assert "returned Elicit('Sure?', ...) instead of yielding it: did you forget `yield`?" in message
    assert f"test_authoring.py:{line_of(confirm, 'def confirm')}" in message


# -- delegating without `yield from` ----------------------------------------------------


def ask_email():
    answer = yield Elicit("Your email?", EMAIL)
    return answer.content["email"]


def test_a_plain_function_returning_a_generator_is_refused_with_the_fix():
    def register():
        return ask_email()

    with pytest.raises(HandlerError) as caught:
        run(register)
    message = caught.value.message
    assert "is a plain function that returned a generator (ask_email)" in message
    assert f"test_authoring.py:{line_of(register, 'def register')}" in message
    assert "`return (yield from ask_email(...))`" in message


def test_a_decorator_that_drops_the_generator_is_named_as_such():
    def logged(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)

        return wrapper

    @logged
    def register():
        return (yield from ask_email())

    with pytest.raises(HandlerError, match="a decorator around a generator handler must be a generator too"):
        run(register)


async def test_a_plain_function_returning_a_coroutine_is_refused_with_the_fix():
    async def lookup():
        return "x"

    def handler():
        return lookup()

    from mrtr.testing import arun

    with pytest.raises(HandlerError, match=r"returned a coroutine .*`return await lookup\(\.\.\.\)`"):
        await arun(handler)


def test_yield_from_delegation_still_works():
    def register():
        return (yield from ask_email())

    assert run(register, answers=[accept(email="a@b.io")]).result == "a@b.io"


# -- non-determinism: which kind, and where --------------------------------------------


def _mismatch(handler) -> ReplayMismatch:
    first = replay(handler, {}, ctx())
    ledger, _ = merge_answers(first.ledger, {})
    with pytest.raises(ReplayMismatch) as caught:
        replay(handler, {}, ctx(), ledger)
    return caught.value


def test_a_lambda_step_that_changes_between_rounds_is_named_as_a_step_function_change():
    picks = iter([0, 1])

    def book():
        if next(picks) == 0:
            slot = yield Step(lambda: "mon")
        else:
            slot = yield Step(lambda: "tue")
        yield Elicit(f"Book {slot}?", Form().boolean("ok"))

    error = _mismatch(book)
    message = error.message
    assert error.data["changed"] == ["function"]
    assert "why: the Step's function is a lambda" in message
    line = line_of(book, 'lambda: "tue"')
    assert f"test_authoring.py:{line}" in message
    assert "give the Step a named function" in message


def test_a_closure_step_over_the_clock_is_named_with_its_captured_value():
    def book():
        started = time.monotonic_ns()
        deadline = yield Step(lambda: started + 60)
        yield Elicit(f"Deadline {deadline}?", Form().boolean("ok"))

    error = _mismatch(book)
    assert error.data["changed"] == ["arguments"]
    assert "closure or partial" in error.message and "now started=" in error.message
    assert f"test_authoring.py:{line_of(book, 'yield Step')}" in error.message


def test_a_partial_step_with_changing_arguments_is_a_mismatch():
    def book():
        token = yield Step(functools.partial(str.upper, f"t{random.random()}"))
        yield Elicit(f"Use {token}?", Form().boolean("ok"))

    error = _mismatch(book)
    assert error.data["changed"] == ["arguments"] and "partial args" in error.message


def test_a_question_built_from_the_clock_is_named_as_the_question_text():
    def ask():
        yield Elicit(f"Your email ({time.monotonic_ns()})?", EMAIL)

    error = _mismatch(ask)
    assert error.data["changed"] == ["message"]
    assert "why: the question's text differs from the recorded run" in error.message
    assert f"test_authoring.py:{line_of(ask, 'yield Elicit')}" in error.message


def test_a_closure_over_stable_values_or_a_mutable_cache_replays_fine():
    calls: list[str] = []

    def handler(day: str):
        def load():
            calls.append(day)
            return [day]

        slots = yield Step(load)
        answer = yield Elicit(f"Which of {slots}?", Form().choice("slot", slots))
        return answer.content["slot"]

    outcome = run(handler, {"day": "mon"}, answers=[accept(slot="mon")], check_determinism=True)
    assert outcome.result == "mon" and calls == ["mon"]


def test_a_named_step_keeps_the_fingerprint_it_had_before():
    # Tokens minted before lambdas and closures joined the fingerprint must keep replaying.
    import hashlib

    step = Step(sorted, [3, 1])
    expected = hashlib.sha256(b"builtins.sorted").digest()[:8] + hashlib.sha256(b"[[3,1]]").digest()[:8]
    assert step.fingerprint() == expected


# -- registration ---------------------------------------------------------------------------


def new_server():
    from mrtr.server import Server

    return Server("authoring", "1", secret=b"s" * 32)


def test_resource_without_a_uri_is_refused_at_registration():
    server = new_server()
    with pytest.raises(TypeError) as caught:

        @server.resource
        def welcome():
            return "hi"

    message = str(caught.value)
    assert "needs the uri it serves" in message and '@server.resource("notes://welcome")' in message
    assert "welcome" in message and "test_authoring.py:" in message
    def note():
        return "n"

    with pytest.raises(TypeError, match="needs the uri"):
        server.resource_template(note)
    with pytest.raises(ValueError, match="with a scheme"):
        server.resource("welcome")
    with pytest.raises(ValueError, match="resource_template"):
        server.resource("notes://{id}")


def test_prompt_and_tool_accept_their_name_positionally():
    server = new_server()

    @server.prompt("review")
    def ask_review(language: str):
        return f"Review this {language} code"

    @server.tool("shout")
    def loud(text: str) -> str:
        return text.upper()

    assert "review" in server.catalog.prompts and "shout" in server.catalog.tools
    with pytest.raises(TypeError, match="names the prompt twice"):
        server.prompt("a", name="b")


def test_the_context_is_found_by_annotation_whatever_its_name():
    server = new_server()

    @server.tool
    def lookup(city: str, request: Context) -> str:
        return f"{city}:{request.method}"

    definition = server.catalog.tools["lookup"].definition
    assert list(definition["inputSchema"]["properties"]) == ["city"]
    assert run(lookup, {"city": "Oslo"}).result == "Oslo:tools/call"

    @server.tool
    def first(context, city: str) -> str:  # unannotated and first: the context, as `ctx` is
        return f"{city}:{context.method}"

    assert list(server.catalog.tools["first"].definition["inputSchema"]["properties"]) == ["city"]


def test_a_context_parameter_that_would_become_an_argument_is_refused():
    server = new_server()
    with pytest.raises(TypeError) as caught:

        @server.tool
        def lookup(city: str, context) -> str:
            return city

    message = str(caught.value)
    assert "'context' looks like the request context" in message and "`mrtr.Context`" in message

    with pytest.raises(TypeError, match="'ctx' looks like the request context"):

        @server.tool
        def typed(ctx: dict, city: str) -> str:
            return city


class Pool:
    """Stands in for a connection pool: not something a client can send."""


def test_a_tool_parameter_without_a_usable_schema_is_refused():
    server = new_server()
    with pytest.raises(TypeError) as caught:

        @server.tool
        def echo(text: str, times=1) -> str:
            return text * times

    assert "'times' has no type annotation" in str(caught.value)

    with pytest.raises(TypeError) as caught:

        @server.tool
        def query(sql: str, pool: Pool) -> str:
            return sql

    assert "'pool' has no JSON Schema" in str(caught.value) and "test_authoring.py:" in str(caught.value)


# -- a form yielded without Elicit ------------------------------------------------------


class Signup(msgspec.Struct):
    email: str


@pytest.mark.parametrize("yielded, fix", [
    (EMAIL, 'to ask the user to fill in a form, yield Elicit("your question", Form()...)'),
    (Signup, 'to ask the user to fill in a Signup, yield Elicit("your question", Signup)'),
])
def test_a_form_yielded_without_elicit_names_elicit_as_the_fix(yielded, fix):
    def register(plan: str):
        answer = yield yielded
        return answer

    with pytest.raises(HandlerError) as caught:
        run(register, {"plan": "pro"})
    message = caught.value.message
    assert message.endswith(fix) and "return" not in message
    assert caught.value.location.endswith(f":{line_of(register, 'yield yielded')}")


def test_a_value_yielded_as_if_returned_is_told_about_return():
    def total(amount: int):
        yield amount * 2

    with pytest.raises(HandlerError, match="a sync generator returns its result with `return`"):
        run(total, {"amount": 2})
