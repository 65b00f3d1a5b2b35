"""With ``sync_handlers="thread"``, or ``thread=True`` on the tool alone, every run of a sync
task tool's code happens in a worker thread.

On both carriers: the token carrier (a client without the tasks extension) and the
tasks carrier, for the rounds before the task exists, the task's own runs after each
``tasks/update``, and a take-over by another node after the first one died. Served
over real loopback HTTP, with a SQLite store both nodes share. Without either, the
rounds on the call run on the event loop (and a task's own runs in a thread, always).
"""

from __future__ import annotations

import base64
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from mrtr import Context, Elicit, Form, Server, Step
from mrtr.transports.http.native import serve

from .test_http import WITH_TASKS, WITHOUT_TASKS, Client, accept

SECRET = base64.b64encode(b"t" * 32).decode()


class Runs:
    """Where each run of the tool's code happened: ``(what ran, in the main thread?)``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool]] = []
        self.hold = threading.Event()  # the first attempt of the long Step waits here (its node dies)

    def note(self, what: str) -> None:
        self.seen.append((what, threading.current_thread() is threading.main_thread()))

    def on_the_loop(self) -> list[str]:
        return [what for what, main in self.seen if main]


def build(runs: Runs, store: str, mode: str = "server") -> Server:
    """``mode``: ``"server"`` (sync_handlers="thread"), ``"tool"`` (thread=True on each tool) or ``"inline"``."""
    app = Server("threads", secret=SECRET, sync_handlers="thread" if mode == "server" else "inline",
                 tasks_url=store, task_lease=0.6)
    in_thread = mode == "tool"

    def ticket(plan: str) -> str:
        runs.note("step")
        return f"T-{plan}"

    def long_work() -> str:
        runs.note("long step")
        if [what for what, _ in runs.seen].count("long step") == 1:
            runs.hold.wait(30)  # its node is gone by the time this returns; the result is dropped
        return "worked"

    @app.tool(task="optional", thread=in_thread)
    def onboard(ctx: Context, plan: str) -> Any:
        """Asks a name on the call, runs a Step, then asks a city (in the task, as a task)."""
        runs.note("onboard")
        name = yield Elicit("Your name?", Form().string("name"))
        code = yield Step(ticket, plan)
        city = yield Elicit("Your city?", Form().string("city"))
        return f"{name.value['name']} ({code}) from {city.value['city']}"

    @app.tool(task="required", thread=in_thread)
    def job() -> Any:
        """Two Steps; the second one blocks on its first attempt, and that node dies in it."""
        runs.note("job")
        first = yield Step(ticket, "job")
        second = yield Step(long_work)
        return f"{first}+{second}"

    return app


@asynccontextmanager
async def node(runs: Runs, store: str, mode: str = "server") -> AsyncIterator[Client]:
    """A server on its own port; leaving the block kills it as a dead process would leave its tasks."""
    async with trio.open_nursery() as nursery:
        port = await nursery.start(partial(serve, build(runs, store, mode), "127.0.0.1", 0))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            yield Client(http)
        nursery.cancel_scope.cancel()


async def conversation(client: Client) -> dict[str, Any]:
    """``onboard`` to its end, on whichever carrier the client's capabilities select."""
    call = {"name": "onboard", "arguments": {"plan": "pro"}}
    _, reply = await client.post("tools/call", call)
    asked = reply["result"]
    assert asked["resultType"] == "input_required"
    _, reply = await client.post("tools/call", {**call, "requestState": asked["requestState"],
                                                "inputResponses": {"elicit-1": accept(name="Ada")}})
    result = reply["result"]
    if result["resultType"] == "input_required":  # the token carrier: the city is one more round
        _, reply = await client.post("tools/call", {**call, "requestState": result["requestState"],
                                                    "inputResponses": {"elicit-3": accept(city="Oslo")}})
        return reply["result"]  # type: ignore[no-any-return]
    assert result["resultType"] == "task"
    task = await client.until(result["taskId"], "input_required")
    await client.post("tasks/update", {"taskId": result["taskId"], "inputResponses": {"elicit-3": accept(city="Oslo")}})
    task = await client.until(result["taskId"], "completed")
    return task["result"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("capabilities, runs", [
    # The token carrier: three rounds on the call, the Step in the second.
    (WITHOUT_TASKS, ["onboard", "onboard", "step", "onboard"]),
    # The tasks carrier: two rounds on the call (the second stops at the Step), the task's run,
    # and its run after tasks/update.
    (WITH_TASKS, ["onboard", "onboard", "onboard", "step", "onboard"]),
], ids=["token carrier", "tasks carrier"])
@pytest.mark.parametrize("mode", ["server", "tool"], ids=["sync_handlers=thread", "thread=True"])
async def test_every_round_and_every_run_is_in_a_worker_thread(tmp_path: Path, capabilities: dict[str, Any],
                                                               runs: list[str], mode: str) -> None:
    seen = Runs()
    async with node(seen, f"sqlite:///{tmp_path / 'tasks.sqlite3'}", mode) as client:
        client.capabilities = capabilities
        result = await conversation(client)
    assert result["content"][0]["text"] == "Ada (T-pro) from Oslo"
    assert [what for what, _ in seen.seen] == runs
    assert seen.on_the_loop() == []


@pytest.mark.parametrize("capabilities, on_the_loop", [
    (WITHOUT_TASKS, ["onboard", "onboard", "step", "onboard"]),
    (WITH_TASKS, ["onboard", "onboard"]),  # the task's own runs are in a thread all the same
], ids=["token carrier", "tasks carrier"])
async def test_without_thread_mode_the_rounds_on_the_call_run_on_the_event_loop(
        tmp_path: Path, capabilities: dict[str, Any], on_the_loop: list[str]) -> None:
    seen = Runs()
    async with node(seen, f"sqlite:///{tmp_path / 'tasks.sqlite3'}", "inline") as client:
        client.capabilities = capabilities
        result = await conversation(client)
    assert result["content"][0]["text"] == "Ada (T-pro) from Oslo"
    assert seen.on_the_loop() == on_the_loop


async def test_a_task_taken_over_by_another_node_runs_in_a_worker_thread(tmp_path: Path) -> None:
    runs = Runs()
    store = f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    try:
        async with node(runs, store) as dying:
            _, reply = await dying.post("tools/call", {"name": "job", "arguments": {}})
            task_id = reply["result"]["taskId"]
            with trio.fail_after(10):
                while "long step" not in [what for what, _ in runs.seen]:
                    await trio.sleep(0.01)
        async with node(runs, store) as survivor:
            task = await survivor.until(task_id, "completed")
    finally:
        runs.hold.set()
    assert task["result"]["content"][0]["text"] == "T-job+worked"
    # The survivor replays from the top: the recorded Step is not run again, the long one is.
    assert [what for what, _ in runs.seen] == ["job", "job", "step", "long step", "job", "long step"]
    assert runs.on_the_loop() == []
