"""Part 7: what a 2025-era session and a suspended handler cost in memory.

A legacy (2025-era) client keeps a session for as long as it is connected, and a call
whose handler waits for the client's answer holds its generator, its trio task and its
pending request until the answer comes. Both are bounded (the session registry's
limits); this part says what one of each costs, so the bounds can be read in bytes.

Measured with ``tracemalloc`` in this process, after a ``gc.collect()``, as the
difference before and after holding N of each:

- **an idle session**: N ``initialize`` requests as a real client sends them
  (capabilities, ``clientInfo``) served by ``Server.legacy``, each session then left
  idle in the registry;
- **a suspended handler**: N ``tools/call`` requests in one session, each served by
  ``Server.legacy.respond`` in its own trio task, all of them waiting at an ``Elicit``
  whose request went out through the transports' ``PendingRequests`` (a sync generator
  handler and an async generator handler, one row each);
- **the baseline**: N bare trio tasks waiting on an ``Event``, in the same run: what
  any server holding a request open on trio pays before a handler exists.

Figures are bytes per item; nothing here is asserted.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

import trio

from .common import log

N_FULL = {"sessions": 10_000, "suspended": 2_000}
N_QUICK = {"sessions": 1_000, "suspended": 200}


def _server(sessions: int = 10, suspended: int = 10) -> Any:
    from mrtr import Elicit, Form
    from mrtr.server import Server
    from mrtr.server.sessions import SessionRegistry

    # Room for every session measured (at the default bound the oldest idle one would make room), and for
    # every waiting handler in the one session that starts them.
    server = Server("sessions-bench", secret=b"b" * 32, sessions=SessionRegistry(
        max_sessions=sessions + 1, max_suspended=suspended + 1, max_suspended_per_session=suspended + 1))

    @server.tool
    def ask(company: str):
        """One question, then the answer."""
        answer = yield Elicit(f"Your name at {company}?", Form().string("name", min_length=1))
        return f"{company}: {answer.content['name']}"

    @server.tool
    async def ask_async(company: str):
        """The same, as an async generator."""
        answer = yield Elicit(f"Your name at {company}?", Form().string("name", min_length=1))
        yield f"{company}: {answer.content['name']}"

    return server


def _initialize(number: int) -> dict[str, Any]:
    # What an SDK 1.x client sends.
    return {"jsonrpc": "2.0", "id": number, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25",
                       "capabilities": {"sampling": {}, "elicitation": {"form": {}, "url": {}},
                                        "roots": {"listChanged": True}},
                       "clientInfo": {"name": "mcp", "version": "1.30.0"}}}


def _measured(before: tracemalloc.Snapshot) -> int:
    gc.collect()
    after = tracemalloc.take_snapshot()
    return sum(stat.size_diff for stat in after.compare_to(before, "filename"))


async def _sessions(n: int) -> dict[str, Any]:
    server = _server(n)
    legacy = server.legacy
    assert legacy is not None
    await legacy.initialize(_initialize(0), outlet=lambda method, params: None)  # warm every code path once
    gc.collect()
    before = tracemalloc.take_snapshot()
    for number in range(n):
        response, session_id = await legacy.initialize(_initialize(number), outlet=lambda method, params: None)
        assert session_id is not None, response
    held = _measured(before)
    assert len(legacy.sessions) == n + 1
    return {"n": n, "bytes_per_session": held / n}


async def _suspended(n: int, tool: str) -> dict[str, Any]:
    from mrtr.transports.pending import PendingRequests

    server = _server(suspended=n)
    legacy = server.legacy
    assert legacy is not None
    sent: list[bytes] = []
    pending = PendingRequests(sent.append)
    pending.mark_ready()
    _, session_id = await legacy.initialize(_initialize(0), outlet=lambda method, params: None)

    def call(number: int) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": number, "method": "tools/call",
                "params": {"name": tool, "arguments": {"company": f"c{number}"}}}

    async def one(number: int) -> None:
        await legacy.respond(session_id, call(number), peer=pending.peer(), notify=lambda method, params: None)

    async with trio.open_nursery() as warm:  # one full call first, so no first-use cost is counted
        warm.start_soon(one, -1)
        while not sent:
            await trio.sleep(0)
        pending.answer({"jsonrpc": "2.0", "id": json.loads(sent[-1])["id"],
                        "result": {"action": "accept", "content": {"name": "x"}}})
    sent.clear()
    gc.collect()
    before = tracemalloc.take_snapshot()
    async with trio.open_nursery() as nursery:
        for number in range(n):
            nursery.start_soon(one, number)
        while len(sent) < n:
            await trio.sleep(0.001)
        held = _measured(before) - sum(len(data) + 33 for data in sent)  # the captured requests are not the server's
        assert pending.waiting == n and legacy.sessions.suspended == n
        for data in sent:
            pending.answer({"jsonrpc": "2.0", "id": json.loads(data)["id"],
                            "result": {"action": "accept", "content": {"name": "Ada"}}})
    return {"n": n, "bytes_per_handler": held / n}


async def _baseline(n: int) -> dict[str, Any]:
    event = trio.Event()
    started = [0]

    async def wait() -> None:
        started[0] += 1
        await event.wait()

    gc.collect()
    before = tracemalloc.take_snapshot()
    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(wait)
        while started[0] < n:
            await trio.sleep(0.001)
        held = _measured(before)
        event.set()
    return {"n": n, "bytes_per_task": held / n}


def run(*, quick: bool) -> dict[str, Any]:
    """Part 7's results."""
    counts = N_QUICK if quick else N_FULL

    async def main() -> dict[str, Any]:
        tracemalloc.start(1)
        try:
            log(f"part 7: {counts['sessions']} idle sessions")
            sessions = await _sessions(counts["sessions"])
            log(f"part 7: {counts['suspended']} suspended handlers (sync, async) and the baseline")
            sync = await _suspended(counts["suspended"], "ask")
            asynchronous = await _suspended(counts["suspended"], "ask_async")
            baseline = await _baseline(counts["suspended"])
        finally:
            tracemalloc.stop()
        return {"idle_session": sessions, "suspended_sync": sync, "suspended_async": asynchronous,
                "baseline_task": baseline}

    return trio.run(main)
