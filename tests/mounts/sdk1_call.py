"""The official Python SDK 1.x client calling a mounted tool of an mrtr server: two questions, answered.

Run with the python of the legacy virtualenv: ``python sdk1_call.py URL``. Prints one JSON
line: the tools it listed, the questions it was asked, and the call's result.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client


async def main(url: str) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        if params.message.startswith("Why"):
            return types.ElicitResult(action="accept", content={"reason": "damaged"})
        return types.ElicitResult(action="accept", content={"ok": True})

    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            await session.initialize()
            tools = [tool.name for tool in (await session.list_tools()).tools]
            result = await session.call_tool("billing_refund", {"invoice": "INV-9"})
    print(json.dumps({"tools": tools, "asked": asked, "result": result.model_dump(mode="json", exclude_none=True)}))


anyio.run(main, sys.argv[1])
