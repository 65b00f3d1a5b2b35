"""Part 2: whole conversations in process: server CPU and token size, N = 1 ... 50 questions.

A conversation of N sequential questions takes N + 1 rounds, and round j replays the
j - 1 answers recorded before it, so the replay work of the whole conversation grows as
N squared. Three handler shapes, timed in turns for each N (CPU time of the whole
conversation, all rounds through the token carrier: unseal, merge, replay, seal):

- ``plain``: N questions, nothing else;
- ``work inline``: 1 ms of CPU work before the first question, written as plain code,
  so every round pays it again;
- ``work in Step``: the same work wrapped in ``yield Step(...)``: paid in the first
  round, then read back from the ledger.

Token size: the ``requestState`` length after each round of the longest conversation.
Group round: N questions yielded as one group (two rounds) against the same N asked one
by one (N + 1 rounds), CPU and bytes of token sent back and forth.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from mrtr import Context, Elicit, Form, Step
from mrtr.carriers.sealed import TokenBinding, TokenCarrier
from mrtr.core.replay import Completed, replay
from mrtr.core.codec import RequestStateCodec

from .common import interleave, log

SCHEMA = Form().string("email", format="email")
CAPS = {"elicitation": {}}
NS_FULL = (1, 2, 5, 10, 20, 30, 40, 50)
NS_QUICK = (1, 5, 20)
GROUP_NS_FULL = (2, 5, 10, 20, 50)
GROUP_NS_QUICK = (5, 20)
WORK_S = 0.001


def work() -> int:
    """1 ms of CPU, the stand-in for a database read or an expensive computation."""
    end = time.thread_time() + WORK_S
    spins = 0
    while time.thread_time() < end:
        spins += 1
    return 42


def plain(n: int):
    emails = []
    for i in range(n):
        reply = yield Elicit(f"Question {i}?", SCHEMA)
        emails.append(reply.content["email"])
    return emails


def work_inline(n: int):
    seed = work()
    emails = []
    for i in range(n):
        reply = yield Elicit(f"Question {i}?", SCHEMA)
        emails.append(reply.content["email"])
    return [seed, *emails]


def work_in_step(n: int):
    seed = yield Step(work)
    emails = []
    for i in range(n):
        reply = yield Elicit(f"Question {i}?", SCHEMA)
        emails.append(reply.content["email"])
    return [seed, *emails]


def grouped(n: int):
    replies = yield tuple(Elicit(f"Question {i}?", SCHEMA) for i in range(n))
    return [reply.content["email"] for reply in replies]


HANDLERS = {"plain": plain, "work inline": work_inline, "work in Step": work_in_step}


def answer(i: int) -> dict[str, Any]:
    return {"action": "accept", "content": {"email": f"user{i}@example.com"}}


class Conversation:
    """Plays whole conversations through the token carrier, as a client would."""

    def __init__(self) -> None:
        self.carrier = TokenCarrier(RequestStateCodec([b"k" * 32]))

    def round(self, handler: Any, params: dict[str, Any]) -> Any:
        arguments = params["arguments"]
        ctx = Context(arguments, client_capabilities=CAPS)
        binding = TokenBinding("tools/call", params)
        ledger, unmatched = self.carrier.restore(binding, params, None)
        outcome = replay(handler, arguments, ctx, ledger, unmatched)
        if isinstance(outcome, Completed):
            return outcome
        return self.carrier.seal(binding, None, outcome)

    def play(self, handler: Any, n: int, tokens: list[int] | None = None) -> list[Any]:
        """Every round of one conversation; checks the result against the answers given."""
        params: dict[str, Any] = {"name": "t", "arguments": {"n": n}}
        given: list[str] = []
        while True:
            outcome = self.round(handler, params)
            if isinstance(outcome, Completed):
                break
            token = outcome["requestState"]
            if tokens is not None:
                tokens.append(len(token))
            responses = {}
            for key in outcome["inputRequests"]:
                i = len(given)
                responses[key] = answer(i)
                given.append(answer(i)["content"]["email"])
            params = {"name": "t", "arguments": {"n": n}, "requestState": token, "inputResponses": responses}
        result = outcome.result
        emails = result if handler in (plain, grouped) else result[1:]
        assert emails == given, (emails, given)
        return result


def run(*, quick: bool) -> dict[str, Any]:
    """Part 2's results."""
    ns = NS_QUICK if quick else NS_FULL
    group_ns = GROUP_NS_QUICK if quick else GROUP_NS_FULL
    pairs, batch_s = (3, 0.05) if quick else (7, 0.2)
    conversation = Conversation()
    curves = []
    for n in ns:
        log(f"part 2: N={n}")
        timings = interleave({name: (lambda h=handler, n=n: conversation.play(h, n)) for name, handler in HANDLERS.items()},
                             pairs=pairs, batch_s=batch_s)
        curves.append({"n": n, "timings": timings})

    longest = max(ns)
    tokens: list[int] = []
    conversation.play(plain, longest, tokens)
    content = len(msgspec.msgpack.encode(answer(10)["content"]))
    slope = (tokens[-1] - tokens[0]) / (len(tokens) - 1)

    groups = []
    for n in group_ns:
        log(f"part 2: group of {n}")
        group_tokens: list[int] = []
        single_tokens: list[int] = []
        conversation.play(grouped, n, group_tokens)
        conversation.play(plain, n, single_tokens)
        timings = interleave({"one group round": lambda n=n: conversation.play(grouped, n),
                              "one by one": lambda n=n: conversation.play(plain, n)}, pairs=pairs, batch_s=batch_s)
        groups.append({"n": n, "timings": timings, "rounds": {"one group round": 2, "one by one": n + 1},
                       "token_chars_total": {"one group round": sum(group_tokens), "one by one": sum(single_tokens)}})
    return {
        "ns": list(ns), "pairs": pairs, "work_ms": WORK_S * 1000, "curves": curves,
        "tokens": {"n": longest, "chars_after_round": tokens, "chars_per_answer": slope,
                   "answer_content_msgpack_bytes": content,
                   # base64 turns 3 bytes into 4 characters
                   "overhead_chars_per_answer": slope - content * 4 / 3},
        "groups": groups,
    }
