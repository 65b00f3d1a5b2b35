"""What mrtr.Client adds on top of the HTTP library it uses, against that library alone, same run.

Usage: ``python benchmarks/client_overhead.py [--requests 300]``

Serves ``tests.client.app:server`` with the native server in this process on a free
port and sends, one after another:

- ``baseline``: bare ``httpx.AsyncClient.post`` calls of a first-round ``tools/call``
  (body and MCP headers built once, the JSON answer not parsed);
- ``mrtr.Client.call_once``: the same request through the client (fresh id and
  ``_meta``, headers derived from the body, the answer parsed and checked);
- ``conversation (http)``, ``conversation (stdio)``, ``conversation (in process)``:
  whole one-question conversations through ``call_tool`` (two requests each, an
  answerer in between), reported as requests per second for comparison;
- ``a client per call``: open a client, one ``call_once``, close it, with ``era="modern"``
  (no probe), with ``era="auto"`` probing every time (the era forgotten before each), and
  with ``era="auto"`` remembering the endpoint's era (the case of a process that opens
  many clients): what the ``server/discover`` probe costs.

Prints requests per second and the ratio to the baseline. Client and server share the
machine's cores, so the ratio is the figure to compare.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import httpx
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import mrtr  # noqa: E402
from mrtr.transports.http.native import serve  # noqa: E402
from tests.client.app import server  # noqa: E402

ARGUMENTS = {"name": "ask_name", "arguments": {"tag": "bench"}}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "ask_name"}


async def rate(count: int, send: Callable[[], Awaitable[object]], per_call: int = 1) -> float:
    await send()  # warm up: connection, imports, tools/list for headers
    started = time.perf_counter()
    for _ in range(count):
        await send()
    return count * per_call / (time.perf_counter() - started)


def answer(request: object) -> dict[str, object]:
    return mrtr.accept(name="Ada")


async def main(count: int) -> None:
    rows: list[tuple[str, float]] = []
    async with trio.open_nursery() as nursery:
        port = await nursery.start(partial(serve, server, "127.0.0.1", 0))
        url = f"http://127.0.0.1:{port}/mcp"
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {**ARGUMENTS, "_meta": META}}).encode()
        async with httpx.AsyncClient() as bare:
            rows.append(("baseline (bare httpx POST)",
                         await rate(count, partial(bare.post, url, content=body, headers=HEADERS))))
        async with mrtr.Client(url, on_elicit=answer) as client:
            rows.append(("mrtr.Client.call_once", await rate(count, partial(client.call_once, "tools/call", ARGUMENTS))))
            rows.append(("conversation (http)", await rate(count // 2, partial(client.call_tool, "ask_name",
                                                                               {"tag": "bench"}), 2)))
        async def fresh(era: str, forget: bool) -> None:
            if forget:
                from mrtr.client import session

                session._ERAS.clear()
            async with mrtr.Client(url, era=era, on_elicit=answer) as client:
                await client.call_once("tools/call", ARGUMENTS)

        rows.append(("a client per call, era=modern", await rate(count // 4, partial(fresh, "modern", False))))
        rows.append(("a client per call, era=auto, probed each time", await rate(count // 4, partial(
            fresh, "auto", True))))
        rows.append(("a client per call, era=auto, era remembered", await rate(count // 4, partial(
            fresh, "auto", False))))
        nursery.cancel_scope.cancel()
    command = [sys.executable, "-m", "mrtr", "serve", "tests.client.app:server", "--stdio", "--log-level", "warning"]
    async with mrtr.Client.stdio(command, cwd=str(ROOT), on_elicit=answer) as client:
        rows.append(("conversation (stdio)", await rate(count // 2, partial(client.call_tool, "ask_name",
                                                                            {"tag": "bench"}), 2)))
    async with mrtr.Client(server, on_elicit=answer) as client:
        rows.append(("conversation (in process)", await rate(count // 2, partial(client.call_tool, "ask_name",
                                                                                 {"tag": "bench"}), 2)))
    baseline = rows[0][1]
    print(f"{'':32} {'req/s':>8} {'ratio':>7}")
    for label, value in rows:
        print(f"{label:32} {value:8.0f} {value / baseline:7.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="requests per measurement (default 300)")
    trio.run(main, parser.parse_args().requests)
