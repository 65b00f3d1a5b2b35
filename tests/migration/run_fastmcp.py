"""Run docs/examples/fastmcp_expenses.py with FastMCP's own client; one JSON line per scenario.

Runs in the FastMCP virtualenv (``.cache/fastmcp-venv``), never in mrtr's.
"""

import asyncio
import json
import sys
from pathlib import Path

from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "examples"))

import fastmcp_expenses  # noqa: E402


def answerer(category_action: str, ok: bool):
    asked: list[str] = []

    async def handler(message, response_type, params, context):
        asked.append(message)
        if message.startswith("Category"):
            if category_action != "accept":
                return ElicitResult(action=category_action)
            return {"value": "meals"}
        return {"ok": ok}

    return handler, asked


async def scenario(name: str, category_action: str, ok: bool) -> None:
    fastmcp_expenses.reads.clear()
    handler, asked = answerer(category_action, ok)
    # `await ctx.elicit` is a server-to-client request: FastMCP serves it on 2025-era connections only.
    async with Client(fastmcp_expenses.mcp, elicitation_handler=handler, mode="legacy") as client:
        result = await client.call_tool("file_expense", {"description": "taxi", "amount": 23.5})
    print(json.dumps({"scenario": name, "text": result.content[0].text, "asked": asked,
                      "reads": len(fastmcp_expenses.reads)}), flush=True)


async def main() -> None:
    await scenario("accepted", "accept", True)
    await scenario("declined", "decline", True)
    await scenario("not_confirmed", "accept", False)


asyncio.run(main())
