"""Start each host entry as its host would, with the official MCP Python SDK 1.x, and call a tool.

Run by the python of ``.cache/legacy-venv`` (``mcp==1.30.0``): ``python sdk1_host.py ENTRIES.json``,
where the file holds ``{name: {"command", "args", "env", "cwd"}}``. For each it prints one
JSON line ``{"name", "server", "text"}``: the server's name from ``initialize`` and the
text of ``tools/call add {"a": 2, "b": 3}``.
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def start(name: str, entry: dict) -> dict:
    parameters = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"] or None,
                                       cwd=entry["cwd"] or None)
    async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
        initialized = await session.initialize()
        result = await session.call_tool("add", {"a": 2, "b": 3})
    return {"name": name, "server": initialized.serverInfo.name, "text": result.content[0].text,
            "error": result.isError}


async def main() -> None:
    with open(sys.argv[1]) as file:
        entries = json.load(file)
    for name, entry in entries.items():
        with anyio.fail_after(60):
            print(json.dumps(await start(name, entry)), flush=True)


anyio.run(main)
