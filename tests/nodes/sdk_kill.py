"""SDK 1.x sessions whose calls wait at a question while the test kills a node (run with the legacy python).

    .cache/legacy-venv/bin/python tests/nodes/sdk_kill.py --url URL --sessions 9 --gate PATH

Each session (``ClientSession`` over ``streamable_http_client``, a new connection per
request) initializes, then calls ``secret_code``; its elicitation callback notes the
id of the server's question (which names the node that asked) and, once every session's
question has arrived, prints ``asked`` and waits for the file ``gate`` before it
answers. The test kills a node meanwhile, then creates the gate. Each session then
calls ``whoami``. Prints one JSON line per session: the node its question named, how
the call ended (``ok`` or the error's message) and how the next call ended.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from typing import Any

import anyio
import httpx
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError


async def one(url: str, gate: str, waiting: list[int], total: int, results: list[dict[str, Any]]) -> None:
    nonce = secrets.token_hex(4)
    record: dict[str, Any] = {"asker": None, "call": None, "next": None}
    results.append(record)

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        record["asker"] = str(context.request_id).partition(".")[0]
        waiting.append(1)
        if len(waiting) == total:
            print(json.dumps({"asked": total}), flush=True)
        while not os.path.exists(gate):
            await anyio.sleep(0.05)
        return types.ElicitResult(action="accept", content={"code": "c"})

    limits = httpx.Limits(max_keepalive_connections=0)
    try:
        with anyio.fail_after(60):
            async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(30.0, read=60.0)) as http, \
                    streamable_http_client(url, http_client=http) as (read, write, _):
                async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
                    await session.initialize()
                    try:
                        result = await session.call_tool("secret_code", {"nonce": nonce})
                        record["call"] = "ok" if result.content[0].text == f"{nonce}=c" else repr(result)
                    except McpError as error:
                        record["call"] = error.error.message
                    try:
                        result = await session.call_tool("whoami", {})
                        record["next"] = "ok" if result.content[0].text.isdigit() else repr(result)
                    except Exception as error:  # noqa: BLE001  (reported, the test judges)
                        record["next"] = f"{type(error).__name__}: {error}"
    except Exception as error:  # noqa: BLE001
        record["failed"] = f"{type(error).__name__}: {error}"


async def main(url: str, sessions: int, gate: str) -> None:
    results: list[dict[str, Any]] = []
    waiting: list[int] = []
    async with anyio.create_task_group() as group:
        for _ in range(sessions):
            group.start_soon(one, url, gate, waiting, sessions, results)
    for record in results:
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--sessions", type=int, default=9)
    parser.add_argument("--gate", required=True)
    args = parser.parse_args()
    anyio.run(main, args.url, args.sessions, args.gate)
    sys.exit(0)
