"""What the replay core remembers between rounds: per-handler facts and question digests.

Every round asks for its handler's spec (shape, context parameter, name) and
fingerprints every question it replays; both are remembered so a round does not derive
them again. These tests hold the caches to following the function they were derived
from, to holding no handler alive, and to a bounded size.
"""

from __future__ import annotations

import gc
import hashlib
import weakref

from mrtr import Context, Elicit, ElicitURL, Form
from mrtr.core import effects
from mrtr.core import handlers as core
from mrtr.core.versions import handler_version, set_handler_version
from mrtr.testing import accept, run

EMAIL = Form().string("email", format="email")


def _define(source: str) -> object:
    """A handler named ``handler`` defined from ``source``, as a reload or a redefinition makes it."""
    namespace: dict[str, object] = {"Elicit": Elicit, "EMAIL": EMAIL, "Context": Context}
    exec(source, namespace)
    return namespace["handler"]


def test_a_handler_redefined_under_the_same_name_is_read_afresh():
    first = _define("def handler(ctx):\n"
                    "    answer = yield Elicit('Email?', EMAIL)\n"
                    "    return ['ctx', ctx.arguments, answer.content['email']]\n")
    assert run(first, {}, answers=[accept(email="a@example.com")]).result == ["ctx", {}, "a@example.com"]
    # Same name, another shape and another context parameter: a plain function taking the
    # context under a name the first one did not use, then a generator with none at all.
    second = _define("def handler(who, context: Context):\n"
                     "    return ['plain', who, context.arguments]\n")
    assert core.handler_spec(second).shape != core.handler_spec(first).shape
    assert run(second, {"who": "ada"}).result == ["plain", "ada", {"who": "ada"}]
    third = _define("def handler(who):\n"
                    "    answer = yield Elicit('Email of ' + who + '?', EMAIL)\n"
                    "    return ['gen', who, answer.content['email']]\n")
    assert core.handler_spec(third).ctx_name is None
    assert run(third, {"who": "bo"}, answers=[accept(email="b@example.com")]).result == ["gen", "bo", "b@example.com"]
    # and the first one, asked for again, is still what it was
    assert core.handler_spec(first).ctx_name == "ctx"
    assert run(first, {}, answers=[accept(email="c@example.com")]).result == ["ctx", {}, "c@example.com"]


def test_closures_with_other_cell_values_each_replay_their_own():
    def make(prefix):
        def handler():
            answer = yield Elicit(f"{prefix}: email?", EMAIL)
            return f"{prefix}:{answer.content['email']}"
        return handler

    left, right = make("left"), make("right")
    asked: list[str] = []

    def answers(request):
        asked.append(request.message)
        return accept(email="x@example.com")

    # interleaved, so one's remembered spec is never the other's
    for _ in range(2):
        assert run(left, answers=answers).result == "left:x@example.com"
        assert run(right, answers=answers).result == "right:x@example.com"
    assert asked == ["left: email?", "right: email?"] * 2
    assert core.handler_spec(left).fn is left and core.handler_spec(right).fn is right


def test_a_lambda_handler_gets_its_context_and_arguments():
    with_ctx = lambda ctx, n: (ctx.arguments, n)  # noqa: E731
    without = lambda n: n * 2  # noqa: E731
    assert run(with_ctx, {"n": 3}).result == ({"n": 3}, 3)
    assert run(without, {"n": 3}).result == 6
    assert run(with_ctx, {"n": 4}).result == ({"n": 4}, 4)
    assert core.handler_spec(with_ctx).name == core.handler_spec(without).name == (
        "test_a_lambda_handler_gets_its_context_and_arguments.<locals>.<lambda>")


def test_remembered_facts_keep_no_handler_alive_and_go_with_it():
    def make(i):
        def handler():
            answer = yield Elicit(f"#{i}?", EMAIL)
            return answer.content["email"]
        return handler

    handlers = [make(i) for i in range(50)]
    watched = [weakref.ref(h) for h in handlers]
    for handler in handlers:
        assert run(handler, answers=[accept(email="a@example.com")]).result == "a@example.com"
        handler_version(handler)
    before = len(core._facts)
    # The last handler used stays remembered (one handler at most) until another is used.
    run(lambda: None)
    del handlers, handler
    gc.collect()
    assert [ref() for ref in watched] == [None] * 50
    # The 50 entries went with their handlers; the lambda's, used last, is the one added.
    assert len(core._facts) <= before - 50 + 1


def test_a_version_set_after_one_was_computed_wins():
    def handler():
        return "ok"

    computed = handler_version(handler)
    assert len(computed) == 8
    set_handler_version(handler, "2026-12")
    assert handler_version(handler) == "2026-12"


def test_question_digests_are_the_digests_of_their_text_cached_or_not():
    def expected(message: str) -> bytes:
        return hashlib.sha256(message.encode()).digest()[:8]

    long_text = "é" * (effects.MESSAGE_DIGEST_LONGEST + 1)
    for message in ("Email?", "Email? ", "Ünïcode ✓", long_text):
        for _ in range(2):  # the first computes, the second may come from the table
            assert Elicit(message, EMAIL).fingerprint()[:8] == expected(message)
            assert ElicitURL(message, "https://example.com/x").fingerprint()[:8] == expected(message)
    assert long_text not in effects._MESSAGE_DIGESTS
    assert Elicit("Email?", EMAIL).fingerprint() != Elicit("Email? ", EMAIL).fingerprint()


def test_the_question_digest_table_is_bounded():
    for i in range(3 * effects.MESSAGE_DIGESTS_MAX):
        Elicit(f"question {i}", EMAIL).fingerprint()
        assert len(effects._MESSAGE_DIGESTS) <= effects.MESSAGE_DIGESTS_MAX
    # a text met after the table was emptied is digested again, the same way
    assert Elicit("question 0", EMAIL).fingerprint()[:8] == hashlib.sha256(b"question 0").digest()[:8]
