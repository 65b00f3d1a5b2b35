"""An official Python SDK 1.x client (``mcp`` 1.30.0) talking to ``mrtr proxy``: one JSON line per check.

Runs in ``.cache/legacy-venv``: ``python sdk1_client.py --url URL`` (Streamable HTTP with
a session) or ``python sdk1_client.py --stdio COMMAND...`` (it starts the proxy). The
conversation: ``interview`` with two accepted answers, again with the second declined,
``confirm`` cancelled, ``count`` with progress, and ``sleepy`` cancelled by the client
after a moment (its next request must still be served).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client


def text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def run(session: ClientSession) -> None:
    answers: list[types.ElicitResult] = []
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return answers.pop(0)

    session._elicitation_callback = on_elicit  # set after construction: the same session for every check
    answers[:] = [types.ElicitResult(action="accept", content={"name": "Ada"}),
                  types.ElicitResult(action="accept", content={"colour": "red"})]
    result = await session.call_tool("interview", {})
    print(json.dumps({"check": "two_questions", "text": text(result), "asked": list(asked)}), flush=True)
    asked.clear()
    answers[:] = [types.ElicitResult(action="accept", content={"name": "Bo"}), types.ElicitResult(action="decline")]
    result = await session.call_tool("interview", {})
    print(json.dumps({"check": "decline", "text": text(result), "asked": list(asked)}), flush=True)
    answers[:] = [types.ElicitResult(action="cancel")]
    result = await session.call_tool("confirm", {})
    print(json.dumps({"check": "cancel", "text": text(result)}), flush=True)
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    result = await session.call_tool("count", {"steps": 3}, progress_callback=on_progress)
    print(json.dumps({"check": "progress", "text": text(result), "progress": seen}), flush=True)
    with anyio.move_on_after(1.0):
        await session.call_tool("sleepy", {"seconds": 60})
    result = await session.call_tool("count", {"steps": 1})
    print(json.dumps({"check": "after_cancel", "text": text(result)}), flush=True)


async def main(argv: list[str]) -> None:
    async def placeholder(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    if argv[0] == "--url":
        async with streamablehttp_client(argv[1]) as (read, write, _):
            async with ClientSession(read, write, elicitation_callback=placeholder) as session:
                await session.initialize()
                await run(session)
    else:
        parameters = StdioServerParameters(command=argv[1], args=argv[2:])
        async with stdio_client(parameters) as (read, write):
            async with ClientSession(read, write, elicitation_callback=placeholder) as session:
                await session.initialize()
                await run(session)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
