"""The tools the suite's ``tasks-*`` scenarios call (the tasks extension).

Each task tool does its real work in a Step: the questions it asks before its first Step
are MRTR rounds on the call, the rest runs as a task (see docs/tasks.md).
"""

from __future__ import annotations

import os
from typing import Any

import trio

from mrtr import Elicit, Form, InvalidParams, Step
from mrtr.server import Server

__all__ = ["TASKS_URL", "register"]

TASKS_URL = os.environ.get("MRTR_TASKS") or "memory:"
"""Where the fixture server keeps its tasks: in memory unless ``MRTR_TASKS`` says otherwise."""


async def _pause(seconds: float) -> float:
    await trio.sleep(seconds)
    return seconds


def register(server: Server) -> None:
    """Add the tasks fixtures to ``server`` (built with ``tasks_url=TASKS_URL``)."""

    @server.tool
    def greet(name: str) -> str:
        """A plain tool: never a task."""
        return f"Hello, {name}!"

    @server.tool(task="optional")
    async def slow_compute(seconds: float, label: str = "") -> Any:
        """Sleeps ``seconds`` in a Step, then reports; cancellable while it sleeps."""
        slept = yield Step(_pause, seconds)
        yield f"computed {label or 'result'} after {slept:g} s"

    @server.tool(task="required")
    async def failing_job() -> Any:
        """Fails in its handler after a short Step: a tool error, so the task completes with isError."""
        yield Step(_pause, 0.5)
        raise RuntimeError("the job failed")

    @server.tool(task="optional")
    async def protocol_error_job() -> Any:
        """Raises a protocol error after a Step: the task fails with it."""
        yield Step(_pause, 0.1)
        raise InvalidParams("protocol_error_job always fails with -32602")

    @server.tool(task="optional")
    async def confirm_delete(filename: str) -> Any:
        """Checks the file in a Step, then asks for confirmation from inside the task."""
        yield Step(_pause, 0)
        answer = yield Elicit(f"Delete {filename}?", Form().boolean("confirm"))
        confirmed = answer.accepted and bool((answer.content or {}).get("confirm"))
        yield f"{'deleted' if confirmed else 'kept'} {filename}"

    @server.tool(task="optional")
    async def multi_input() -> Any:
        """Asks two questions at once from inside the task."""
        yield Step(_pause, 0)
        form = Form().string("name").boolean("confirm", optional=True)
        answers = yield {
            "first_name": Elicit("First name?", form),
            "last_name": Elicit("Last name?", form),
        }
        first = (answers["first_name"].content or {}).get("name", "")
        last = (answers["last_name"].content or {}).get("name", "")
        yield f"{first} {last}".strip()

    @server.tool(task="required")
    async def test_tool_with_task() -> Any:
        """Asks the user's name in an MRTR round, then becomes a task that greets them."""
        answer = yield Elicit("What is your name?", Form().string("name"), key="user_name")
        name = (answer.content or {}).get("name", "stranger")
        greeting = yield Step(lambda: f"Hello, {name}!")
        yield greeting
