"""A RoundStep runs in the rounds before a task exists; a plain Step is where the task begins.

The replay core asked to stop at the first Step (``until_step``, as the tasks carrier asks
for a task tool's call) runs a :class:`~mrtr.core.effects.RoundStep` and records it, so
the questions after it are still rounds on the call; it detaches at the first plain Step.
"""

from __future__ import annotations

from mrtr import Context, Elicit, Form, Step
from mrtr.core.effects import RoundStep
from mrtr.core.ledger import merge_answers
from mrtr.core.replay import Completed, Detached, InputRequired, replay, replay_async
from mrtr.testing import ALL_CAPABILITIES, accept


def test_a_round_step_runs_in_the_round_once_and_the_task_begins_at_the_plain_step():
    ran: list[str] = []

    def look(topic: str) -> str:
        ran.append(topic)
        return f"asked about {topic}"

    def finish(text: str) -> str:
        ran.append("finish")
        return text.upper()

    def handler():
        found = yield RoundStep(look, "pets")
        answer = yield Elicit(found, Form().string("name"))
        text = yield Step(finish, answer.content["name"])
        return text

    ctx = Context({}, client_capabilities=ALL_CAPABILITIES)
    first = replay(handler, {}, ctx, until_step=True)
    assert isinstance(first, InputRequired)
    assert [request.message for request in first.requests.values()] == ["asked about pets"]
    assert ran == ["pets"]
    ledger, _ = merge_answers(first.ledger, {key: accept(name="rex") for key in first.requests})
    second = replay(handler, {}, Context({}, client_capabilities=ALL_CAPABILITIES), ledger, until_step=True)
    assert isinstance(second, Detached)  # the task begins at the plain Step, which has not run
    assert ran == ["pets"]  # the RoundStep's result came from the ledger
    done = replay(handler, {}, Context({}, client_capabilities=ALL_CAPABILITIES), second.ledger)
    assert isinstance(done, Completed) and done.result == "REX"
    assert ran == ["pets", "finish"]


async def test_an_async_handler_whose_round_step_ends_it_completes_without_detaching():
    async def fetch() -> str:
        return "fetched"

    async def handler():
        value = yield RoundStep(fetch)
        yield value

    outcome = await replay_async(handler, {}, Context({}), until_step=True)
    assert isinstance(outcome, Completed) and outcome.result == "fetched"

    async def plain():
        value = yield Step(fetch)
        yield value

    assert isinstance(await replay_async(plain, {}, Context({}), until_step=True), Detached)
