"""The token carrier: retry validation, binding, answer policies, token abuse."""

from __future__ import annotations

import base64
import string

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrtr import Context, Elicit, Form, Step
from mrtr.carriers.contract import Interim
from mrtr.carriers.sealed import TokenBinding, TokenCarrier
from mrtr.core.errors import InvalidParams, InvalidRequestState, ReplayMismatch
from mrtr.core.replay import Completed
from mrtr.core.codec import RequestStateCodec
from mrtr.testing import ALL_CAPABILITIES, accept, decline

from .conftest import examples
from .wire_schema import validate

KEY = b"k" * 32
OTHER_KEY = b"o" * 32


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Counter:
    """Counts how often handler code starts executing."""

    def __init__(self) -> None:
        self.runs = 0


def tamper(token: str) -> str:
    """Change one character in the middle of a token (every bit of it is significant there)."""
    middle = len(token) // 2
    return token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1:]


def make_carrier(answers="strict", clock=None, keys=(KEY,)) -> TokenCarrier:
    return TokenCarrier(RequestStateCodec(list(keys), ttl=300.0, clock=clock or Clock()), answers=answers)


def onboard_handler(counter: Counter):
    def onboard(ctx, plan: str):
        counter.runs += 1
        email = yield Elicit("Your email?", Form().string("email", format="email"))
        age = yield Elicit("Your age?", Form().integer("age", minimum=0))
        if not email.accepted:
            return f"not-accepted:{email.action}"
        return f"{email.content['email']}:{age.content['age']}:{plan}"

    return onboard


async def call(carrier, handler, *, method="tools/call", name="onboard", arguments=None, principal=None,
               responses=None, token=None, capabilities=ALL_CAPABILITIES, uri=None):
    arguments = {"plan": "pro"} if arguments is None else arguments
    params: dict = {}
    if method == "resources/read":
        params["uri"] = uri or "file:///gated"
    else:
        params["name"] = name
        params["arguments"] = arguments
    if responses is not None:
        params["inputResponses"] = responses
    if token is not None:
        params["requestState"] = token
    ctx = Context(arguments, principal=principal, client_capabilities=capabilities, method=method, target=name)
    handler_arguments = arguments if method == "tools/call" else {}
    return await carrier.execute(method, params, handler, handler_arguments, ctx)


def as_result(outcome) -> dict:
    assert isinstance(outcome, Interim), outcome
    validate(outcome.result, "InputRequiredResult")
    return outcome.result


def restore(carrier: TokenCarrier, params: dict, principal: str | None) -> tuple:
    """Checks 1-7 of a ``tools/call`` with ``params``, as the carrier runs them before any handler code."""
    return carrier.restore(TokenBinding("tools/call", params), params, principal)


# -- the happy path -----------------------------------------------------------------------


async def test_fresh_call_without_questions_returns_the_result_and_no_token():
    carrier = make_carrier()

    def plain(plan: str):
        return f"plain:{plan}"

    outcome = await call(carrier, plain)
    assert isinstance(outcome, Completed) and outcome.result == "plain:pro"


async def test_two_questions_take_three_round_trips_and_each_token_differs():
    carrier, counter = make_carrier(), Counter()
    handler = onboard_handler(counter)
    first = as_result(await call(carrier, handler))
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["elicit-1"]
    token1 = first["requestState"]
    assert "=" not in token1 and set(token1) <= set(string.ascii_letters + string.digits + "-_")
    second = as_result(await call(carrier, handler, responses={"elicit-1": accept(email="a@b.io")}, token=token1))
    assert list(second["inputRequests"]) == ["elicit-2"]
    token2 = second["requestState"]
    assert token2 != token1
    done = await call(carrier, handler, responses={"elicit-2": accept(age=42)}, token=token2)
    assert isinstance(done, Completed) and done.result == "a@b.io:42:pro"
    assert counter.runs == 3


async def test_a_retry_that_answers_nothing_reasks_with_a_new_token():
    carrier, counter = make_carrier(), Counter()
    handler = onboard_handler(counter)
    first = as_result(await call(carrier, handler))
    for responses in (None, {}):
        again = as_result(await call(carrier, handler, responses=responses, token=first["requestState"]))
        assert list(again["inputRequests"]) == ["elicit-1"]
        assert again["requestState"] != first["requestState"]


async def test_decline_reaches_the_handler():
    carrier, counter = make_carrier(), Counter()
    handler = onboard_handler(counter)
    first = as_result(await call(carrier, handler))
    second = as_result(await call(carrier, handler, responses={"elicit-1": decline()}, token=first["requestState"]))
    done = await call(carrier, handler, responses={"elicit-2": accept(age=1)}, token=second["requestState"])
    assert done.result == "not-accepted:decline"


async def test_prompts_and_resources_elicit_across_two_round_trips():
    carrier = make_carrier()

    def ask_context(ctx):
        answer = yield Elicit("What context?", Form().string("context"))
        return f"Context: {answer.content['context']}"

    first = as_result(await call(carrier, ask_context, method="prompts/get", name="ask-context", arguments={}))
    done = await call(carrier, ask_context, method="prompts/get", name="ask-context", arguments={},
                      responses={"elicit-1": accept(context="runbook")}, token=first["requestState"])
    assert done.result == "Context: runbook"

    def gated():
        answer = yield Elicit("Grant access?", Form())
        return "granted" if answer.accepted else "denied"

    first = as_result(await call(carrier, gated, method="resources/read"))
    done = await call(carrier, gated, method="resources/read", responses={"elicit-1": accept()}, token=first["requestState"])
    assert done.result == "granted"


# -- checks 1-7, each with its own message, before any handler code runs --------------------


async def first_token(carrier, counter, **kwargs) -> str:
    result = as_result(await call(carrier, onboard_handler(counter), **kwargs))
    return result["requestState"]


async def expect_rejected(carrier, counter, match: str, **kwargs) -> InvalidParams:
    before = counter.runs
    with pytest.raises(InvalidParams) as caught:
        await call(carrier, onboard_handler(counter), **kwargs)
    assert caught.value.code == -32602 and caught.value.status_hint == 400
    assert match in caught.value.message, caught.value.message
    assert counter.runs == before, "handler code ran before the retry was validated"
    return caught.value


async def test_input_responses_without_request_state_is_rejected():
    carrier, counter = make_carrier(), Counter()
    await expect_rejected(
        carrier, counter,
        "inputResponses present without requestState; retries must echo the requestState from the InputRequiredResult",
        responses={"elicit-1": accept(email="a@b.io")},
    )


async def test_each_binding_failure_has_its_own_message():
    carrier, counter = make_carrier(), Counter()
    token = await first_token(carrier, counter, principal="alice")
    answer = {"elicit-1": accept(email="a@b.io")}
    await expect_rejected(carrier, counter, "issued for a different principal", principal="bob", token=token, responses=answer)
    await expect_rejected(carrier, counter, "issued for a different principal", principal=None, token=token, responses=answer)
    await expect_rejected(carrier, counter, "issued for tools/call but the retry arrived on prompts/get",
                          method="prompts/get", principal="alice", token=token, responses=answer)
    await expect_rejected(carrier, counter, "issued for tools/call but the retry arrived on resources/read",
                          method="resources/read", principal="alice", token=token, responses=answer)
    await expect_rejected(carrier, counter, "issued for a different target", name="other-tool", principal="alice",
                          token=token, responses=answer)
    await expect_rejected(carrier, counter, "issued for different arguments", arguments={"plan": "free"},
                          principal="alice", token=token, responses=answer)


async def test_a_handler_that_changes_its_arguments_before_it_pauses_gets_a_token_for_the_ones_sent():
    # The handler is given the very objects of params["arguments"] (the helper passes that dict),
    # as a server passes values typed Any: the binding must be taken before the handler runs.
    def grows(ctx, items: list):
        items.append("x")
        yield Elicit(f"Grow to {len(items)}?", Form().boolean("ok"))
        return list(items)

    carrier = make_carrier()
    asked = as_result(await call(carrier, grows, name="grows", arguments={"items": [1]}))
    done = await call(carrier, grows, name="grows", arguments={"items": [1]}, token=asked["requestState"],
                      responses={"elicit-1": accept(ok=True)})
    assert isinstance(done, Completed) and done.result == [1, "x"]


async def test_the_same_principal_and_the_anonymous_pair_succeed():
    carrier, counter = make_carrier(), Counter()
    for principal in ("alice", None):
        token = await first_token(carrier, counter, principal=principal)
        again = await call(carrier, onboard_handler(counter), principal=principal, token=token,
                           responses={"elicit-1": accept(email="a@b.io")})
        assert list(again.result["inputRequests"]) == ["elicit-2"]


async def test_answer_merge_errors_name_the_key():
    carrier, counter = make_carrier(), Counter()
    token = await first_token(carrier, counter)
    await expect_rejected(carrier, counter, 'Unknown inputResponses key "elicit-99"', token=token,
                          responses={"elicit-99": accept(email="a@b.io")})
    await expect_rejected(carrier, counter, '"elicit-1" must carry an elicitation result', token=token,
                          responses={"elicit-1": {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}})
    await expect_rejected(carrier, counter, '"elicit-1" must be an object', token=token, responses={"elicit-1": 12345})
    await expect_rejected(carrier, counter, "inputResponses must be an object", token=token, responses=[1, 2])
    await expect_rejected(carrier, counter, '"action" must be one of', token=token, responses={"elicit-1": {"action": "maybe"}})
    second = as_result(await call(carrier, onboard_handler(counter), token=token, responses={"elicit-1": accept(email="a@b.io")}))
    await expect_rejected(carrier, counter, 'inputResponses key "elicit-1" was already answered in a previous round trip',
                          token=second["requestState"], responses={"elicit-1": accept(email="b@b.io")})


async def test_checks_run_in_order_when_a_token_fails_several():
    carrier, counter = make_carrier(), Counter()
    token = await first_token(carrier, counter, principal="alice")
    # wrong principal, method, target and arguments, and an unknown key: the principal is reported.
    await expect_rejected(carrier, counter, "different principal", principal="bob", method="prompts/get",
                          name="x", arguments={"a": 1}, token=token, responses={"nope": {}})
    await expect_rejected(carrier, counter, "but the retry arrived on prompts/get", principal="alice",
                          method="prompts/get", name="x", arguments={"a": 1}, token=token, responses={"nope": {}})
    await expect_rejected(carrier, counter, "different target", principal="alice", name="x", arguments={"a": 1},
                          token=token, responses={"nope": {}})
    await expect_rejected(carrier, counter, "different arguments", principal="alice", arguments={"a": 1},
                          token=token, responses={"nope": {}})
    await expect_rejected(carrier, counter, 'Unknown inputResponses key "nope"', principal="alice", token=token,
                          responses={"nope": {}})
    # a tampered token fails before the binding is even looked at
    await expect_rejected(carrier, counter, "failed authentication", principal="bob", method="prompts/get",
                          token=tamper(token))


async def test_an_expired_token_is_rejected_and_the_boundary_is_accepted():
    clock = Clock()
    carrier, counter = make_carrier(clock=clock), Counter()
    token = await first_token(carrier, counter)
    clock.now += 300.0
    again = await call(carrier, onboard_handler(counter), token=token)
    assert list(again.result["inputRequests"]) == ["elicit-1"]
    clock.now += 0.001
    await expect_rejected(carrier, counter, "Invalid requestState: requestState has expired; restart the original request",
                          token=token)


async def test_a_token_from_another_server_key_is_rejected():
    counter = Counter()
    token = await first_token(make_carrier(keys=(OTHER_KEY,)), counter)
    await expect_rejected(make_carrier(), counter, "failed authentication (tampered, or issued under a different key)",
                          token=token)


async def test_key_rotation_keeps_conversations_in_flight():
    counter = Counter()
    token = await first_token(make_carrier(keys=(KEY,)), counter)
    rotated = make_carrier(keys=(OTHER_KEY, KEY))
    second = await call(rotated, onboard_handler(counter), token=token, responses={"elicit-1": accept(email="a@b.io")})
    assert list(second.result["inputRequests"]) == ["elicit-2"]
    # the new token is sealed with the new first key: the old ring cannot open it
    await expect_rejected(make_carrier(keys=(KEY,)), counter, "failed authentication", token=second.result["requestState"])
    await expect_rejected(make_carrier(keys=(OTHER_KEY,)), counter, "failed authentication", token=token)


async def test_every_single_bit_flip_of_a_real_token_is_rejected_without_running_the_handler():
    carrier, counter = make_carrier(), Counter()
    token = await first_token(carrier, counter)
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    runs = counter.runs
    rejected = 0
    for byte in range(len(raw)):
        for bit in range(8):
            flipped = bytearray(raw)
            flipped[byte] ^= 1 << bit
            text = base64.urlsafe_b64encode(bytes(flipped)).rstrip(b"=").decode()
            with pytest.raises(InvalidRequestState) as caught:
                restore(carrier, {"name": "onboard", "arguments": {"plan": "pro"}, "requestState": text,
                                              "inputResponses": {"elicit-1": accept(email="a@b.io")}}, None)
            assert caught.value.code == -32602
            rejected += 1
    assert rejected == len(raw) * 8
    assert counter.runs == runs


async def test_truncated_and_extended_tokens_are_rejected():
    carrier, counter = make_carrier(), Counter()
    token = await first_token(carrier, counter)
    for cut in range(0, len(token), 7):
        with pytest.raises(InvalidRequestState):
            restore(carrier, {"name": "onboard", "arguments": {"plan": "pro"}, "requestState": token[:cut]}, None)
    for extra in ("A", "AA", "AAAA", "-_-_"):
        with pytest.raises(InvalidRequestState):
            restore(carrier, {"name": "onboard", "arguments": {"plan": "pro"}, "requestState": token + extra}, None)


async def test_a_replay_that_changes_its_question_is_a_mismatch_from_the_token_carrier():
    carrier = make_carrier()
    texts = iter(["one?", "two?"])

    def fickle(plan: str):
        yield Elicit(next(texts), Form().string("x"))

    first = as_result(await call(carrier, fickle))
    with pytest.raises(ReplayMismatch) as caught:
        await call(carrier, fickle, token=first["requestState"], responses={"elicit-1": accept(x="1")})
    assert caught.value.code == -32602 and "idempotency contract" in caught.value.message


async def test_a_malformed_accepted_answer_is_rejected_naming_the_field():
    carrier, counter = make_carrier(), Counter()
    token = await first_token(carrier, counter)
    with pytest.raises(InvalidParams) as caught:
        await call(carrier, onboard_handler(counter), token=token, responses={"elicit-1": accept(email="not-an-email")})
    assert '"email"' in caught.value.message and '"elicit-1"' in caught.value.message


async def test_steps_are_carried_in_the_token():
    carrier = make_carrier()
    calls = []

    def load() -> list[str]:
        calls.append(1)
        return ["a", "b"]

    def handler(plan: str):
        options = yield Step(load)
        pick = yield Elicit("Pick", Form().choice("x", options))
        return pick.content["x"]

    first = as_result(await call(carrier, handler))
    done = await call(carrier, handler, token=first["requestState"], responses={"elicit-2": accept(x="b")})
    assert done.result == "b" and calls == [1]


# -- concurrency ------------------------------------------------------------------------------


async def test_two_concurrent_retries_with_the_same_token_replay_independently():
    carrier, counter = make_carrier(), Counter()

    async def slow(plan: str):
        counter.runs += 1
        email = yield Elicit("Email?", Form().string("email"))
        await trio.sleep(0.01)
        yield f"{email.content['email']}:{plan}"

    first = as_result(await call(carrier, slow))
    results = {}

    async def retry(name: str):
        outcome = await call(carrier, slow, token=first["requestState"], responses={"elicit-1": accept(email=name)})
        results[name] = outcome.result

    async with trio.open_nursery() as nursery:
        nursery.start_soon(retry, "ada")
        nursery.start_soon(retry, "bob")
    assert results == {"ada": "ada:pro", "bob": "bob:pro"}
    assert counter.runs == 3


# -- the lenient policy -----------------------------------------------------------------------


async def test_lenient_accepts_token_less_answers_for_keys_asked_now_and_ignores_extras():
    carrier = make_carrier("lenient")

    def hello():
        answer = yield Elicit("What is your name?", Form().string("name"), key="user_name")
        return f"Hello, {answer.content['name']}!"

    done = await call(carrier, hello, arguments={}, responses={
        "user_name": accept(name="Alice"), "unknown_extra_key": {"x": 1}, "another_unexpected": 5,
    })
    assert done.result == "Hello, Alice!"


async def test_lenient_reasks_a_missing_answer_and_ignores_wrong_keys():
    carrier = make_carrier("lenient")

    def hello():
        answer = yield Elicit("What is your name?", Form().string("name"), key="user_name")
        return answer.content["name"]

    again = await call(carrier, hello, arguments={}, responses={"wrong_key": accept(name="x")})
    assert list(again.result["inputRequests"]) == ["user_name"]


async def test_lenient_keeps_the_recorded_answer_when_a_key_is_answered_twice():
    carrier, counter = make_carrier("lenient"), Counter()
    token = await first_token(carrier, counter)
    second = await call(carrier, onboard_handler(counter), token=token, responses={"elicit-1": accept(email="a@b.io")})
    done = await call(carrier, onboard_handler(counter), token=second.result["requestState"],
                      responses={"elicit-1": accept(email="evil@b.io"), "elicit-2": accept(age=3)})
    assert done.result == "a@b.io:3:pro"


async def test_lenient_still_rejects_malformed_answers_and_bad_tokens():
    carrier, counter = make_carrier("lenient"), Counter()

    def hello():
        answer = yield Elicit("What is your name?", Form().string("name"), key="user_name")
        return answer.content["name"]

    with pytest.raises(InvalidParams, match="user_name"):
        await call(carrier, hello, arguments={}, responses={"user_name": 12345})
    token = await first_token(carrier, counter)
    await expect_rejected(carrier, counter, "different arguments", token=token, arguments={"plan": "x"})
    await expect_rejected(carrier, counter, "failed authentication", token=tamper(token))


def test_an_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="strict"):
        make_carrier("loose")


# -- fuzzing ----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)
responses_strategy = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from(["elicit-1", "elicit-2", "x", ""]), json_values, max_size=3),
    st.dictionaries(st.sampled_from(["elicit-1"]), st.fixed_dictionaries(
        {"action": st.sampled_from(["accept", "decline", "cancel", "other"])},
        optional={"content": st.just({"email": "ada@example.com"})
                  | st.dictionaries(st.sampled_from(["email", "age", "z"]), json_values, max_size=3)},
    )),
)


def _settled(answer) -> bool:
    """Whether ``answer`` is a decline or cancel the handler must accept as it is (no content)."""
    return isinstance(answer, dict) and set(answer) == {"action"} and answer["action"] in ("decline", "cancel")


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(responses=responses_strategy, with_token=st.booleans(), policy=st.sampled_from(["strict", "lenient"]))
def test_fuzzed_input_responses_give_a_typed_error_or_a_reask_that_leads_to_the_right_result(responses, with_token, policy):
    carrier, counter = make_carrier(policy), Counter()
    handler = onboard_handler(counter)

    async def main():
        token = None
        if with_token:
            token = (await call(carrier, handler)).result["requestState"]
        try:
            outcome = await call(carrier, handler, responses=responses, token=token)
        except InvalidParams as error:
            # Typed, and it says which part of the request is wrong.
            assert "inputResponses" in error.message or "requestState" in error.message or "elicit-" in error.message, error.message
            return
        if isinstance(outcome, Completed):
            raise AssertionError(f"completed without answering elicit-2: {outcome.result}")
        validate(outcome.result, "InputRequiredResult")
        # The handler asks one question per round, so the reask is exactly one key: the first
        # question still open. A bare decline or cancel of elicit-1 is a complete answer.
        [asked] = outcome.result["inputRequests"]
        first = responses.get("elicit-1") if isinstance(responses, dict) else None
        if (with_token or policy == "lenient") and _settled(first) and set(responses) == {"elicit-1"}:
            assert asked == "elicit-2"
        # Following the reask with good answers must finish, and the result must reflect what
        # elicit-1 was really recorded as: the answer sent here, or the one given afterwards.
        state = outcome.result["requestState"]
        if asked == "elicit-1":
            reask = await call(carrier, handler, responses={"elicit-1": accept(email="a@b.io")}, token=state)
            [asked_next] = reask.result["inputRequests"]
            assert asked_next == "elicit-2"
            state, expected = reask.result["requestState"], "a@b.io:7:pro"
        elif first["action"] == "accept":
            expected = f"{first['content']['email']}:7:pro"
        else:
            expected = f"not-accepted:{first['action']}"
        done = await call(carrier, handler, responses={"elicit-2": accept(age=7)}, token=state)
        assert isinstance(done, Completed) and done.result == expected

    trio.run(main)


def _real_token() -> str:
    async def first_round():
        return (await call(make_carrier(), onboard_handler(Counter()))).result["requestState"]

    return trio.run(first_round)


REAL_TOKEN = _real_token()
B64URL = string.ascii_letters + string.digits + "-_"


@st.composite
def mutated_tokens(draw):
    """A token this carrier really issued, with one character changed, cut short or extended."""
    how = draw(st.sampled_from(["flip", "truncate", "extend"]))
    if how == "truncate":
        return REAL_TOKEN[: draw(st.integers(0, len(REAL_TOKEN) - 1))]
    if how == "extend":
        return REAL_TOKEN + draw(st.text(alphabet=B64URL, min_size=1, max_size=8))
    at = draw(st.integers(0, len(REAL_TOKEN) - 1))
    other = draw(st.sampled_from(B64URL).filter(lambda ch: ch != REAL_TOKEN[at]))
    return REAL_TOKEN[:at] + other + REAL_TOKEN[at + 1:]


@settings(max_examples=examples(400), deadline=None)
@given(token=st.one_of(st.text(max_size=120), st.text(alphabet=B64URL, max_size=200),
                       st.integers(), st.lists(st.integers(), max_size=2), st.binary(max_size=40),
                       mutated_tokens()))
def test_fuzzed_and_mutated_tokens_never_open(token):
    carrier = make_carrier()
    params = {"name": "onboard", "arguments": {"plan": "pro"}, "requestState": token}
    with pytest.raises(InvalidRequestState, match="^Invalid requestState: "):
        restore(carrier, params, None)


def test_the_unmutated_token_opens_and_no_token_is_a_first_round():
    # Guards the fuzz test above: the token it mutates is one the carrier accepts.
    carrier = make_carrier()
    ledger, _ = restore(carrier, {"name": "onboard", "arguments": {"plan": "pro"},
                                              "requestState": REAL_TOKEN}, None)
    assert len(ledger) == 1 and not ledger.slots[0].answered
    ledger, _ = restore(carrier, {"name": "onboard", "arguments": {"plan": "pro"}}, None)
    assert len(ledger) == 0
