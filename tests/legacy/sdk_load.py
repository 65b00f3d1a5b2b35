"""Many 2025 sessions at once through the official Python SDK 1.x client, each checking its own answers.

Run with the python of the legacy virtualenv against a running server::

    .cache/legacy-venv/bin/python tests/legacy/sdk_load.py --url http://127.0.0.1:PORT/mcp --sessions 300 --concurrency 16

Each session is a ``ClientSession`` over ``streamable_http_client`` whose HTTP client
keeps no connection alive, so every request (the POSTs, the answers, the GET stream,
the DELETE) is a new connection the kernel may hand to any worker. A session calls
``secret_code`` with a nonce of its own; the question must name that nonce and the
result must carry the code answered for it, so an answer that reached another
session's call shows as ``misrouted``; a session that fails, or takes longer than
``--timeout`` seconds, is an error. ``--calls N`` makes each session call it ``N``
times. Behind a balancer that names the node answering (``X-Mrtr-Node``), an answer
whose ``202`` came from another node than the call's stream counts as ``crossed``.
Prints one JSON line: the counts, the owners the session ids named, the seconds taken.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
import traceback
from collections import Counter
from typing import Any

import anyio
import httpx
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client


async def one(url: str, counts: Counter[str], owners: Counter[str], problems: list[str], timeout: float,
              calls: int = 1) -> None:
    """One session: its own nonce and code, checked at the end; any failure (or ``timeout``) is an error."""
    nonce = secrets.token_hex(8)
    code = secrets.token_hex(8)
    asked: list[str] = []
    streams: list[str] = []  # the nodes the calls' streams came from

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"code": code})

    async def seen(response: httpx.Response) -> None:
        node = response.headers.get("x-mrtr-node")
        if node is None or response.request.method != "POST":
            return
        body = json.loads(response.request.content or b"{}")
        if body.get("method") == "tools/call":
            streams.append(node)
        elif "method" not in body and streams:
            counts["crossed" if node != streams[-1] else "same node"] += 1

    try:
        limits = httpx.Limits(max_keepalive_connections=0)
        results = []
        with anyio.fail_after(timeout):
            async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(30.0, read=120.0),
                                         event_hooks={"response": [seen]}) as http, \
                    streamable_http_client(url, http_client=http) as (read, write, session_id):
                async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
                    await session.initialize()
                    owners[(session_id() or "?").partition(".")[0]] += 1
                    for _ in range(calls):
                        results.append(await session.call_tool("secret_code", {"nonce": nonce}))
        texts = [result.content[0].text if result.content and hasattr(result.content[0], "text") else ""
                 for result in results]
        if asked != [f"Code for {nonce}?"] * calls or texts != [f"{nonce}={code}"] * calls:
            counts["misrouted"] += 1
            problems.append(f"asked {asked}, answered {texts!r}, expected {nonce}={code}")
        else:
            counts["ok"] += 1
    except Exception:
        counts["errors"] += 1
        problems.append(traceback.format_exc(limit=5))


async def main(url: str, sessions: int, concurrency: int, timeout: float, calls: int) -> None:
    counts: Counter[str] = Counter()
    owners: Counter[str] = Counter()
    problems: list[str] = []
    limiter = anyio.CapacityLimiter(concurrency)
    started = time.monotonic()

    async def limited() -> None:
        async with limiter:
            await one(url, counts, owners, problems, timeout, calls)

    async with anyio.create_task_group() as group:
        for _ in range(sessions):
            group.start_soon(limited)
    print(json.dumps({"sessions": sessions, "ok": counts["ok"], "errors": counts["errors"],
                      "misrouted": counts["misrouted"], "owners": dict(owners),
                      "crossed": counts["crossed"], "same node": counts["same node"],
                      "seconds": round(time.monotonic() - started, 2), "problems": problems[:5]}), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one session may take before it fails")
    parser.add_argument("--calls", type=int, default=1, help="calls of secret_code each session makes")
    args = parser.parse_args()
    anyio.run(main, args.url, args.sessions, args.concurrency, args.timeout, args.calls)
    sys.exit(0)
