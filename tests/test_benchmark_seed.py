"""Part 1's (b), the seed's replayer re-implemented (benchmarks.seed_replayer), does what the seed does.

It refuses what the seed refuses (an expired token, another principal, another method or
target, a question changed at a recorded ordinal, answers it cannot place) and carries a
conversation of k questions to the right answers, so the benchmark's row cannot silently
become a replayer that skips its work.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from benchmarks.replay_overhead import CAPS, answer, seed_questions, seed_rounds
from benchmarks.seed_replayer import SeedContext, SeedRefusal, SeedReplayer, SeedState, fingerprint
from mrtr.core.codec import RequestStateCodec

SCHEMA = {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def asking(ctx: SeedContext, n: int, suffix: str = "", field: str = "email") -> list[str]:
    """n questions; ``suffix`` changes their text and ``field`` their schema (the seed does not bind arguments)."""
    schema = {**SCHEMA, "properties": {field: {"type": "string"}}, "required": [field]}
    return [ctx.elicit(f"Question {i}?{suffix}", schema).content[field] for i in range(n)]  # type: ignore[index]


def replayer(clock: Clock | None = None) -> SeedReplayer:
    return SeedReplayer(RequestStateCodec([b"s" * 32]), asking, ttl=300, clock=clock or Clock())


def retry(reply: dict[str, Any], answers: dict[str, Any], name: str = "asking", **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "requestState": reply["requestState"], "inputResponses": answers}


def opened(codec: RequestStateCodec, token: str) -> SeedState:
    return msgspec.msgpack.decode(codec.unseal(token), type=SeedState)


@pytest.mark.parametrize("k", [1, 2, 5, 10])
def test_a_conversation_of_k_questions_ends_with_its_own_answers(k):
    seed = replayer()
    params: dict[str, Any] = {"name": "asking", "arguments": {"n": k}}
    for i in range(k):
        reply = seed.round("tools/call", params, None, CAPS)
        assert reply["resultType"] == "input_required"
        (key, request), = reply["inputRequests"].items()
        assert key == f"elicit-{i + 1}"
        assert request == {"method": "elicitation/create",
                           "params": {"mode": "form", "message": f"Question {i}?", "requestedSchema": SCHEMA}}
        state = opened(seed.codec, reply["requestState"])
        assert [slot.key for slot in state.ledger] == [f"elicit-{n + 1}" for n in range(i + 1)]
        assert [slot.response is not None for slot in state.ledger] == [True] * i + [False]
        assert state.ledger[-1].fingerprint == fingerprint(request["params"])
        assert state.method == "tools/call" and state.original_params == {"name": "asking", "arguments": {"n": k}}
        params = retry(reply, {key: answer(i)}, n=k)
    done = seed.round("tools/call", params, None, CAPS)
    assert done == {"resultType": "complete", "result": [f"user{i}@example.com" for i in range(k)]}


@pytest.mark.parametrize("k", [1, 3])
def test_the_benchmark_round_replays_k_answers_and_asks_the_next(k):
    reply = seed_rounds(k, RequestStateCodec([b"k" * 32]))()
    assert list(reply["inputRequests"]) == [f"elicit-{k + 1}"]
    state = opened(RequestStateCodec([b"k" * 32]), reply["requestState"])
    assert [slot.response.content for slot in state.ledger[:k]] == [answer(i)["content"] for i in range(k)]
    assert state.ledger[k].response is None


def first_round(seed: SeedReplayer, principal: str | None = None, **arguments: Any) -> dict[str, Any]:
    return seed.round("tools/call", {"name": "asking", "arguments": {"n": 2, **arguments}}, principal, CAPS)


def refused(seed: SeedReplayer, params: dict[str, Any], principal: str | None = None, method: str = "tools/call",
            capabilities: Any = CAPS) -> SeedRefusal:
    with pytest.raises(SeedRefusal) as caught:
        seed.round(method, params, principal, capabilities)
    return caught.value


def test_an_expired_token_is_refused_and_one_at_exactly_its_ttl_is_not():
    clock = Clock()
    seed = replayer(clock)
    reply = first_round(seed)
    clock.now += 300.0
    assert seed.round("tools/call", retry(reply, {"elicit-1": answer(0)}, n=2), None, CAPS)["resultType"] \
        == "input_required"
    clock.now += 0.001
    refusal = refused(seed, retry(reply, {"elicit-1": answer(0)}, n=2))
    assert str(refusal) == "Invalid requestState: requestState has expired; restart the original request"


@pytest.mark.parametrize(("minted", "retried"), [("alice", "bob"), ("alice", None), (None, "bob")])
def test_a_token_of_another_principal_is_refused(minted, retried):
    seed = replayer()
    reply = first_round(seed, minted)
    refusal = refused(seed, retry(reply, {"elicit-1": answer(0)}, n=2), retried)
    assert "issued for a different principal" in str(refusal)
    assert seed.round("tools/call", retry(reply, {"elicit-1": answer(0)}, n=2), minted, CAPS)["resultType"] \
        == "input_required"


def test_another_target_or_method_is_refused():
    seed = replayer()
    reply = first_round(seed)
    assert "issued for a different target" in str(refused(seed, retry(reply, {"elicit-1": answer(0)}, "other", n=2)))
    assert str(refused(seed, retry(reply, {"elicit-1": answer(0)}, n=2), method="prompts/get")) \
        == "requestState was issued for tools/call but the retry arrived on prompts/get"


@pytest.mark.parametrize("change", [{"suffix": " (changed)"}, {"field": "mail"}], ids=["message", "schema"])
def test_a_question_changed_at_a_recorded_ordinal_is_refused(change):
    seed = replayer()
    reply = first_round(seed)
    # answered slot: the retry's arguments (which the seed does not bind) change the first question
    refusal = refused(seed, retry(reply, {"elicit-1": answer(0)}, n=2, **change))
    assert 'mismatch at elicitation #1 (key "elicit-1")' in str(refusal) and "idempotency contract" in str(refusal)
    # the pending slot is compared too
    refusal = refused(seed, retry(reply, {}, n=2, **change))
    assert 'key "elicit-1"' in str(refusal) and "idempotency contract" in str(refusal)


def test_answers_the_ledger_cannot_place_are_refused():
    seed = replayer()
    reply = first_round(seed)
    assert str(refused(seed, {"name": "asking", "arguments": {"n": 2}, "inputResponses": {"elicit-1": answer(0)}})) \
        .startswith("inputResponses present without requestState")
    assert 'Unknown inputResponses key "elicit-9"' in str(refused(seed, retry(reply, {"elicit-9": answer(0)}, n=2)))
    assert 'key "elicit-1" must carry an elicitation result' in str(
        refused(seed, retry(reply, {"elicit-1": {"roots": []}}, n=2)))
    second = seed.round("tools/call", retry(reply, {"elicit-1": answer(0)}, n=2), None, CAPS)
    assert 'key "elicit-1" was already answered' in str(
        refused(seed, retry(second, {"elicit-1": answer(0)}, n=2)))


def test_a_tampered_token_and_a_client_without_elicitation_are_refused():
    seed = replayer()
    reply = first_round(seed)
    token = reply["requestState"]
    tampered = {**reply, "requestState": token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]}
    assert "failed authentication" in str(refused(seed, retry(tampered, {"elicit-1": answer(0)}, n=2)))
    refusal = refused(seed, retry(reply, {"elicit-1": answer(0)}, n=2), capabilities={})
    assert refusal.code == -32021  # checked at every question, the answered ones included


def test_the_benchmark_handler_and_the_test_handler_ask_alike():
    # seed_questions is what part 1 times: the same conversation through the same replayer
    seed = SeedReplayer(RequestStateCodec([b"s" * 32]), seed_questions)
    params: dict[str, Any] = {"name": "questions", "arguments": {"n": 2}}
    for i in range(2):
        reply = seed.round("tools/call", params, None, CAPS)
        params = {"name": "questions", "arguments": {"n": 2}, "requestState": reply["requestState"],
                  "inputResponses": {f"elicit-{i + 1}": answer(i)}}
    assert seed.round("tools/call", params, None, CAPS)["result"] == ["user0@example.com", "user1@example.com"]
