"""Property tests: random conversations replay exactly what was answered, in order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr import Elicit, Form, ListRoots, Sample, Step
from mrtr.testing import accept, cancel, decline, roots, run, sampled

from .conftest import examples

# One question: (kind, payload). Elicitations carry a field type and a value that fits it.
FIELDS = {
    "string": (lambda form: form.string("v"), st.text(min_size=0, max_size=10)),
    "integer": (lambda form: form.integer("v"), st.integers(-1000, 1000)),
    "number": (lambda form: form.number("v"), st.floats(-1e6, 1e6, allow_nan=False)),
    "boolean": (lambda form: form.boolean("v"), st.booleans()),
    "choice": (lambda form: form.choice("v", ["a", "b", "c"]), st.sampled_from(["a", "b", "c"])),
    "choices": (lambda form: form.choices("v", ["a", "b", "c"]), st.lists(st.sampled_from(["a", "b", "c"]), unique=True)),
}

question = st.one_of(
    st.tuples(st.just("elicit"), st.sampled_from(sorted(FIELDS)), st.sampled_from(["accept", "decline", "cancel"])),
    st.tuples(st.just("sample"), st.text(min_size=1, max_size=8), st.just(None)),
    st.tuples(st.just("roots"), st.integers(0, 3), st.just(None)),
    st.tuples(st.just("step"), st.integers(0, 99), st.just(None)),
)


@settings(max_examples=examples(150), deadline=None)
@given(plan=st.lists(st.lists(question, min_size=1, max_size=3), min_size=0, max_size=5), data=st.data())
def test_random_conversations_feed_back_exactly_the_scripted_answers(plan, data):
    """Each inner list is one yield: a single request, a group, or a Step."""
    script, expected = [], []
    step_calls = []
    for members in plan:
        if members[0][0] == "step":
            expected.append(("step", members[0][1]))
            continue
        for kind, detail, action in members:
            if kind == "step":
                continue
            if kind == "elicit":
                value = data.draw(FIELDS[detail][1])
                answer = {"accept": accept(v=value), "decline": decline(), "cancel": cancel()}[action]
                script.append(answer)
                expected.append(("elicit", action, value if action == "accept" else None))
            elif kind == "sample":
                script.append(sampled(detail))
                expected.append(("sample", detail))
            else:
                uris = [f"file:///r{i}" for i in range(detail)]
                script.append(roots(*uris))
                expected.append(("roots", uris))

    def make_step(value):
        def compute() -> int:
            step_calls.append(value)
            return value
        return compute

    steps = {}

    def handler():
        seen = []
        for position, members in enumerate(plan):
            if members[0][0] == "step":
                fn = steps.setdefault(position, make_step(members[0][1]))
                seen.append(("step", (yield Step(fn))))
                continue
            requests = []
            for index, (kind, detail, _action) in enumerate(members):
                if kind == "elicit":
                    requests.append(Elicit(f"q{position}.{index}", FIELDS[detail][0](Form())))
                elif kind == "sample":
                    requests.append(Sample(f"s{position}.{index}", max_tokens=5))
                elif kind == "roots":
                    requests.append(ListRoots())
            if not requests:
                continue
            answers = (yield requests[0],) if len(requests) == 1 else (yield tuple(requests))
            for answer in answers:
                if hasattr(answer, "action"):
                    seen.append(("elicit", answer.action, answer.content["v"] if answer.accepted else None))
                elif hasattr(answer, "model"):
                    seen.append(("sample", answer.content.text))
                else:
                    seen.append(("roots", [root.uri for root in answer.roots]))
        return seen

    outcome = run(handler, answers=script)
    assert outcome.result == expected
    asked_rounds = sum(1 for members in plan if members[0][0] != "step" and any(m[0] != "step" for m in members))
    assert len(outcome.rounds) == asked_rounds
    assert outcome.executions == asked_rounds + 1
    # every Step ran exactly once, however many rounds replayed it
    assert sorted(step_calls) == sorted(members[0][1] for members in plan if members[0][0] == "step")
