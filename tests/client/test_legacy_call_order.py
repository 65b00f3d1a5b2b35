"""A 2025 session's call, as mrtr.Client sees it: what comes before a question comes first, and a cancel is said.

Loopback HTTP to mrtr's own server in this process (a 2025 session: ``era="legacy"``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import trio

import mrtr
from mrtr.transports.http.native import serve

from ..conftest import until
from .app import SLOW
from .app import server as app_server

ORDER = mrtr.Server("order", secret=b"o" * 32)


@ORDER.tool
async def report_then_ask(ctx: mrtr.Context):
    """Progress and a log line, then a question."""
    ctx.progress(1, total=2, message="before the question")
    ctx.log("info", "about to ask")
    answer = yield mrtr.Elicit("Go on?", mrtr.Form().boolean("go"))
    yield f"go={answer.content['go']}"


async def test_progress_and_logs_reach_their_callbacks_before_the_next_question(nursery: trio.Nursery) -> None:
    port = await nursery.start(partial(serve, ORDER, "127.0.0.1", 0))
    seen: list[str] = []

    async def on_progress(progress: float, total: Any, message: Any) -> None:
        await trio.sleep(0.05)  # a callback that takes its time: the question must still come after it
        seen.append(f"progress {message}")

    async def on_log(level: str, logger: Any, data: Any) -> None:
        await trio.sleep(0.05)
        seen.append(f"log {data}")

    def on_elicit(request: Any) -> Any:
        seen.append(f"asked {request.message}")
        return mrtr.accept(go=True)

    async with mrtr.Client(f"http://127.0.0.1:{port}/mcp", era="legacy", on_progress=on_progress, on_log=on_log,
                           on_elicit=on_elicit) as client:
        result = await client.call_tool("report_then_ask")
    assert result.text == "go=True"
    assert seen == ["progress before the question", "log about to ask", "asked Go on?"]


async def test_a_call_cancelled_before_its_answer_began_is_cancelled_on_the_server(nursery: trio.Nursery) -> None:
    # The server has sent nothing of its answer yet (no progress token, no stream): closing the
    # connection is no cancel for a 2025 server; the client must say notifications/cancelled.
    port = await nursery.start(partial(serve, app_server, "127.0.0.1", 0))
    async with mrtr.Client(f"http://127.0.0.1:{port}/mcp", era="legacy") as client:
        async with trio.open_nursery() as calls:
            calls.start_soon(client.call_tool, "slow", {"tag": "legacy-early-cancel"})
            await until(lambda: SLOW.get("legacy-early-cancel") == "started")
            calls.cancel_scope.cancel()
        await until(lambda: SLOW.get("legacy-early-cancel") == "cancelled")
