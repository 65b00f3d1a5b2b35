"""@server.lifespan behind both HTTP front ends, over real loopback HTTP.

The lifespan opens before the first request, its value reaches handlers (async ones
and sync ones in worker threads) as ``ctx.lifespan``, and it closes only after the
requests in flight at shutdown have finished.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

import httpx
import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from mrtr import Context, Server
from mrtr.transports.http import ASGIApp
from mrtr.transports.http.native import serve

from .conftest import BASE_HEADERS, decode_reply, rpc


def build(events: list[str], gate: trio.Event, started: trio.Event) -> Server:
    server = Server("life", "1", secret=b"s" * 32, sync_handlers="thread")

    @server.lifespan
    async def resources(server):
        events.append("enter")
        try:
            yield {"pool": f"pool-of-{server.name}"}
        finally:
            await trio.lowlevel.checkpoint()  # the exit may await even when shutdown cancels
            events.append("exit")

    @server.tool
    async def slow(ctx: Context) -> str:
        events.append("start")
        started.set()
        await gate.wait()
        events.append("end")
        return ctx.lifespan["pool"]

    @server.tool
    def blocking(ctx: Context) -> str:
        return f"{ctx.lifespan['pool']} in {'worker' if threading.current_thread() is not threading.main_thread() else 'main'}"

    return server


async def refused(port: int) -> None:
    with trio.fail_after(5):
        while True:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                return
            await stream.aclose()
            await trio.sleep(0.01)


async def call(client: httpx.AsyncClient, name: str) -> dict[str, Any]:
    message = rpc("tools/call", {"name": name, "arguments": {}})
    headers = {**BASE_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
    response = await client.post("/mcp", json=message, headers=headers)
    return decode_reply(response, message).result


@pytest.mark.parametrize("front", ["native", "asgi"])
async def test_the_lifespan_wraps_serving_and_closes_after_in_flight_requests(front):
    events: list[str] = []
    gate, started, shutdown, stopped = trio.Event(), trio.Event(), trio.Event(), trio.Event()
    server = build(events, gate, started)

    async with trio.open_nursery() as nursery:
        if front == "native":
            async def run_native(task_status=trio.TASK_STATUS_IGNORED):
                await serve(server, "127.0.0.1", 0, shutdown_event=shutdown, shutdown_grace=10,
                            task_status=task_status)
                stopped.set()

            port = await nursery.start(run_native)
        else:
            config = HypercornConfig()
            config.bind = ["127.0.0.1:0"]
            config.accesslog = None
            config.graceful_timeout = 10

            async def run_hypercorn(task_status=trio.TASK_STATUS_IGNORED):
                await hypercorn_serve(ASGIApp(server), config, shutdown_trigger=shutdown.wait,
                                      task_status=task_status)
                stopped.set()

            binds = await nursery.start(run_hypercorn)
            port = int(binds[0].rsplit(":", 1)[1])
        assert events == ["enter"]  # open before the first request can arrive

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
            del client.headers["accept"]
            blocking = await call(client, "blocking")
            assert blocking["content"][0]["text"] == "pool-of-life in worker"

            answers: list[dict[str, Any]] = []

            async def slow_call():
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as other:
                    del other.headers["accept"]
                    answers.append(await call(other, "slow"))

            nursery.start_soon(slow_call)
            with trio.fail_after(5):
                await started.wait()
        shutdown.set()
        # Once the listener is closed, shutdown is under way with the request still in
        # flight: the lifespan must stay open until it has finished.
        await refused(port)
        assert events == ["enter", "start"]
        gate.set()
        with trio.fail_after(10):
            await stopped.wait()
        assert answers and answers[0]["content"][0]["text"] == "pool-of-life"
        assert events == ["enter", "start", "end", "exit"]


async def test_an_asgi_startup_failure_is_reported_to_the_host():
    server = Server("broken", "1", secret=b"s" * 32)

    @server.lifespan
    async def resources():
        raise OSError("database unreachable")
        yield  # pragma: no cover

    app = ASGIApp(server)
    inbox = [{"type": "lifespan.startup"}]
    sent: list[dict[str, Any]] = []

    async def receive():
        return inbox.pop(0)

    async def send(message):
        sent.append(message)

    await app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    assert sent == [{"type": "lifespan.startup.failed", "message": "OSError: database unreachable"}]


LIFESPAN_WORKERS = """
import os, sys
from mrtr import Context, Server
from mrtr.transports.http.workers import run

server = Server("life", "1", secret=b"w" * 32)

@server.lifespan
async def resources():
    yield os.getpid()  # the process that opened it
    # One write of the whole line: two workers print at once, and a pipe keeps a write of
    # less than PIPE_BUF bytes whole, where print's several writes interleave.
    os.write(2, f"lifespan closed in {os.getpid()}\\n".encode())

@server.tool
def owner(ctx: Context) -> str:
    return f"{os.getpid()}:{ctx.lifespan}"

run(server, sock=sock, workers=2, shutdown_grace=2)
"""


@pytest.mark.slow
async def test_each_worker_process_opens_its_own_lifespan_and_closes_it_on_shutdown():
    from .test_workers import listening_socket, start_process

    sock = listening_socket(reuse_port=True)
    port = sock.getsockname()[1]
    process = await start_process(LIFESPAN_WORKERS, sock)
    try:
        seen: dict[str, str] = {}
        with trio.fail_after(20):
            # A fresh connection each time, so the kernel picks a worker each time.
            async with httpx.AsyncClient(timeout=5.0, headers={"connection": "close"}) as client:
                del client.headers["accept"]
                while len(seen) < 2:
                    try:
                        result = await call_at(client, port, "owner")
                    except httpx.TransportError:
                        await trio.sleep(0.05)
                        continue
                    worker, opened_by = result["content"][0]["text"].split(":")
                    seen[worker] = opened_by
        assert all(worker == opened_by for worker, opened_by in seen.items()), seen
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(10):
            await process.wait()
        stderr = await process.stderr.receive_some(1 << 20) if process.stderr else b""
        assert process.returncode == 0, stderr.decode(errors="replace")
        closed = {line.split()[-1] for line in stderr.decode().splitlines() if line.startswith("lifespan closed in")}
        assert closed == set(seen), stderr.decode(errors="replace")
    finally:
        if process.returncode is None:
            # SIGTERM first: the parent passes it on to its workers, which SIGKILL would orphan.
            process.send_signal(signal.SIGTERM)
            with trio.move_on_after(10):
                await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


async def call_at(client: httpx.AsyncClient, port: int, name: str) -> dict[str, Any]:
    message = rpc("tools/call", {"name": name, "arguments": {}})
    headers = {**BASE_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
    response = await client.post(f"http://127.0.0.1:{port}/mcp", json=message, headers=headers)
    return decode_reply(response, message).result
