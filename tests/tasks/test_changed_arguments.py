"""A handler that changes what it was given: every round and every run starts from the arguments the client sent.

A tool's parameters typed ``Any`` (or containers of ``Any``) reach the handler as the
very objects the request decoded to, so a handler may change them (``items.append``,
``options.setdefault``). The token of a pausing round must still bind the arguments the
client sent (its retry re-sends those), and a task must replay each run from the call's
arguments, not from what an earlier run or the rounds on the call left of them. Through
the server, every request encoded and decoded as on the wire; on every kind of store; and
in the test harness, which must replay as a server does.
"""

from __future__ import annotations

from typing import Any

import trio

from mrtr import Elicit, Step
from mrtr.server import Server
from mrtr.testing import accept, arun, run

from ..conftest import until
from .test_recorded_values import CONFIRM, TASK_META, task_of, wire
from .test_recorded_values import retry as answered


def build(seen: list[Any], **options: Any) -> Server:
    server = Server("changed", secret=b"c" * 32, **options)

    @server.tool
    def grow(items: Any, options: dict[str, Any]) -> Any:
        """Changes both arguments before its first question, then asks twice."""
        items.append("x")
        options.setdefault("seen", []).append(len(items))
        seen.append((list(items), dict(options)))
        first = yield Elicit(f"Grow to {len(items)}?", CONFIRM)
        second = yield Elicit(f"Really {options['seen']}?", CONFIRM)
        return f"{items} {options} {first.value['ok']} {second.value['ok']}"

    def size(items: list[Any]) -> int:
        return len(items)

    @server.tool(task="optional")
    def grow_task(items: Any) -> Any:
        """The same in a task: a question on the call, a Step, a question in the task."""
        items.append("x")
        seen.append(list(items))
        yield Elicit(f"Grow to {len(items)}?", CONFIRM)
        counted = yield Step(size, items)
        yield Elicit(f"Counted {counted}, go on?", CONFIRM)
        return f"{items} {counted}"

    return server


def retry(asked: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    return answered(asked, params, accept(ok=True))


async def test_a_pausing_round_binds_the_arguments_the_client_sent_not_what_the_handler_made_of_them():
    seen: list[Any] = []
    server = build(seen)
    call = {"name": "grow", "arguments": {"items": [1], "options": {"seen": [0]}}}
    first = await wire(server, "tools/call", call)
    second = await wire(server, "tools/call", retry(first, call))  # the same arguments, re-sent
    assert second["result"]["resultType"] == "input_required", second
    done = await wire(server, "tools/call", retry(second, call))
    assert done["result"]["content"][0]["text"] == "[1, 'x'] {'seen': [0, 2]} True True"
    # each round started from the client's arguments
    assert seen == [([1, "x"], {"seen": [0, 2]})] * 3


async def test_a_task_replays_every_run_from_the_arguments_of_the_call(store_url: str):
    seen: list[Any] = []
    server = build(seen, tasks_url=store_url)
    call = {"name": "grow_task", "arguments": {"items": [1]}}
    async with server.running():
        first = await wire(server, "tools/call", call, TASK_META)
        created = await wire(server, "tools/call", retry(first, call), TASK_META)
        task_id = created["result"]["taskId"]

        task = task_of(server, task_id)

        waiting = await until(task, lambda found: found["status"] != "working")
        assert waiting["status"] == "input_required", waiting
        (key,) = waiting["inputRequests"]
        assert waiting["inputRequests"][key]["params"]["message"] == "Counted 2, go on?"
        await wire(server, "tasks/update", {"taskId": task_id, "inputResponses": {key: accept(ok=True)}}, TASK_META)
        finished = await until(task, lambda found: found["status"] not in ("working", "input_required"))
    assert finished["status"] == "completed", finished
    assert finished["result"]["content"][0]["text"] == "[1, 'x'] 2"
    # two rounds on the call, the task's run up to its question and the run that finished it
    assert seen == [[1, "x"]] * 4


def appends(items: Any) -> Any:
    items.append("x")
    yield Elicit(f"Grow to {len(items)}?", CONFIRM)
    yield Elicit("Sure?", CONFIRM)
    return list(items)


async def appends_async(items: Any) -> Any:
    items.append("x")
    yield Elicit(f"Grow to {len(items)}?", CONFIRM)
    yield Elicit("Sure?", CONFIRM)
    yield list(items)


def test_the_harness_gives_each_execution_the_arguments_as_sent():
    arguments = {"items": [1]}
    for check in (False, True):
        outcome = run(appends, arguments, answers=[accept(ok=True)] * 2, check_determinism=check)
        assert outcome.result == [1, "x"]
        assert [next(iter(r.requests.values())).message for r in outcome.rounds] == ["Grow to 2?", "Sure?"]
    assert arguments == {"items": [1]}  # the caller's own dict is never handed to the handler

    async def main() -> None:
        for check in (False, True):
            outcome = await arun(appends_async, arguments, answers=[accept(ok=True)] * 2, check_determinism=check)
            assert outcome.result == [1, "x"]

    trio.run(main)
