"""A task's ``statusMessage`` shows the last progress its handler sent, behind both HTTP front ends.

Native HTTP and the ASGI app under hypercorn record the same status: the progress sent
just before a mid-task question, and the last one before the handler completed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio

from mrtr import Context, Elicit, Form, Server, Step

from ..http.conftest import start_front_end
from .test_http import Client, accept


def build() -> Server:
    app = Server("status", secret=b"p" * 32, tasks_url="memory:")

    @app.tool(task="required")
    def counted(ctx: Context) -> Any:
        """Five Steps, a progress report after each; the last one is 5/5."""
        for number in range(1, 6):
            yield Step(str, number)
            ctx.progress(number, 5)
        return "counted"

    @app.tool(task="required")
    async def asks(ctx: Context) -> Any:
        """Reports progress, then asks a question in the task; reports again once answered."""
        yield Step(str, "started")
        ctx.progress(1, 2, "waiting for the city")
        city = yield Elicit("Your city?", Form().string("city"))
        ctx.progress(2, 2, "done")
        yield city.value["city"]

    return app


@pytest.fixture(params=["native", "asgi"])
async def client(request: pytest.FixtureRequest, nursery: trio.Nursery) -> AsyncIterator[Client]:
    port = await start_front_end(request.param, nursery, build())
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        yield Client(http)


async def test_a_completed_task_shows_the_last_progress_sent(client: Client) -> None:
    _, reply = await client.post("tools/call", {"name": "counted", "arguments": {}})
    task = await client.until(reply["result"]["taskId"], "completed")
    assert task["result"]["content"] == [{"type": "text", "text": "counted"}]
    assert task["statusMessage"] == "5/5"


async def test_the_progress_sent_before_a_mid_task_question_is_the_status(client: Client) -> None:
    _, reply = await client.post("tools/call", {"name": "asks", "arguments": {}})
    task_id = reply["result"]["taskId"]
    task = await client.until(task_id, "input_required")
    assert task["statusMessage"] == "1/2: waiting for the city"
    await client.post("tasks/update", {"taskId": task_id, "inputResponses": {"elicit-2": accept(city="Oslo")}})
    task = await client.until(task_id, "completed")
    assert task["result"]["content"] == [{"type": "text", "text": "Oslo"}]
    assert task["statusMessage"] == "2/2: done"
