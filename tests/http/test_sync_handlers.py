"""Sync handlers on the event loop: a slow one is named once, with its place and the fix; thread=True moves one off.

Through a real ``mrtr serve`` process (its stderr is what an operator reads) and a
server on loopback HTTP in this process (the loop is this test's main thread, so a
handler can say where it ran).
"""

from __future__ import annotations

import inspect
import os
import re
import time
from functools import partial

import httpx
import pytest
import trio

from mrtr import Server
from mrtr.transports.http.native import serve

from .. import perf_app
from ..conftest import mrtr_process, until
from ..test_stdio import REPO
from .conftest import BASE_HEADERS, mcp_headers, rpc
from .test_operations import served_port


async def call(http: httpx.AsyncClient, method: str, params: dict) -> dict:
    message = rpc(method, params)
    reply = await http.post("/mcp", json=message, headers={**BASE_HEADERS, **mcp_headers(message)})
    assert reply.status_code == 200, reply.text
    return reply.json()["result"]  # type: ignore[no-any-return]


def text(result: dict) -> str:
    if "messages" in result:
        return result["messages"][0]["content"]["text"]  # type: ignore[no-any-return]
    if "contents" in result:
        return result["contents"][0]["text"]  # type: ignore[no-any-return]
    return result["content"][0]["text"]  # type: ignore[no-any-return]


def line_of(fn) -> int:
    return inspect.unwrap(fn).__code__.co_firstlineno


@pytest.mark.slow
async def test_a_sync_handler_that_holds_the_loop_is_named_once_with_the_fix():
    async with mrtr_process(["serve", "tests.perf_app:server", "--port", "0"], cwd=REPO, env=os.environ) as (
            process, stderr):
        port = await until(lambda: served_port(process, stderr), timeout=20)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            for _ in range(3):
                assert text(await call(http, "tools/call", {"name": "nap", "arguments": {"seconds": 0.15}})) \
                    == "main thread"
            await call(http, "tools/call", {"name": "doze", "arguments": {"seconds": 0.15}})
            await call(http, "prompts/get", {"name": "stuck_prompt", "arguments": {"seconds": "0.15"}})
            await call(http, "tools/call", {"name": "nap", "arguments": {"seconds": 0}})
            for _ in range(3):  # fast, or off the loop: never named
                await call(http, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
                assert text(await call(http, "tools/call", {"name": "nap_in_thread", "arguments": {"seconds": 0.15}})) \
                    == "worker thread"
        await until(lambda: stderr.count(b"held the event loop") >= 3, timeout=10)
        process.terminate()
        assert await process.wait() == 0
    warnings = [line for line in stderr.decode().splitlines() if "held the event loop" in line]
    assert len(warnings) == 3, warnings  # once per handler, however often it stalls
    nap, doze, prompt = warnings
    app = perf_app.__file__
    assert re.search(rf"WARNING mrtr: the sync handler nap for tools/call 'nap' \({re.escape(app)}:"
                     rf"{line_of(perf_app.nap)}\) held the event loop for 1\d\d ms \(over 100 ms\)", nap), nap
    assert "Make it `async def`, or run it in a worker thread with @server.tool(thread=True)" in nap
    assert "doze for tools/call 'doze'" in doze and f"{app}:{line_of(perf_app.doze)}" in doze
    assert "stuck_prompt for prompts/get 'stuck_prompt'" in prompt and "@server.prompt(thread=True)" in prompt


@pytest.fixture
async def loopback(nursery):
    port = await nursery.start(partial(serve, perf_app.server, "127.0.0.1", 0))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        yield http


async def test_thread_true_runs_a_tool_a_prompt_and_a_resource_in_a_worker_thread(loopback):
    assert text(await call(loopback, "tools/call", {"name": "nap_in_thread", "arguments": {"seconds": 0}})) \
        == "worker thread"
    assert text(await call(loopback, "prompts/get", {"name": "slow_prompt", "arguments": {"seconds": "0"}})) \
        == "worker thread"
    assert text(await call(loopback, "resources/read", {"uri": "perf://where"})) == "worker thread"
    # ... and the others stay on the loop, the fast default
    assert text(await call(loopback, "tools/call", {"name": "nap", "arguments": {"seconds": 0}})) == "main thread"


async def test_a_thread_tool_blocking_does_not_stall_the_others(loopback):
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, loopback, "tools/call", {"name": "nap_in_thread", "arguments": {"seconds": 2.0}})
        await until(perf_app.napping.is_set)
        await call(loopback, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        assert perf_app.napping.is_set()  # answered while the other call still sleeps


async def test_the_threshold_is_the_servers_and_none_turns_it_off(caplog):
    for threshold, warned in ((0.05, True), (None, False), (10.0, False)):
        app = Server("stall", secret=b"s" * 32, stall_warning=threshold)

        @app.tool
        def block() -> str:
            time.sleep(0.08)
            return "done"

        caplog.clear()
        async with trio.open_nursery() as nursery:
            port = await nursery.start(partial(serve, app, "127.0.0.1", 0))
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
                assert text(await call(http, "tools/call", {"name": "block", "arguments": {}})) == "done"
            nursery.cancel_scope.cancel()
        assert any("held the event loop" in r.getMessage() for r in caplog.records) is warned, threshold


def test_thread_is_for_sync_handlers_and_takes_a_bool():
    app = Server("checks", secret=b"c" * 32)
    with pytest.raises(TypeError, match=r"thread=True\) runs sync code in a worker thread, but .*work \(.*\) is async"):
        @app.tool(thread=True)
        async def work() -> str:
            return "x"
    with pytest.raises(TypeError, match="takes True or False"):
        app.prompt(thread="yes")(lambda: "x")
    for bad in (0, -1, "0.1", True):
        with pytest.raises(ValueError, match="stall_warning"):
            Server("bad", stall_warning=bad)
