"""@server.lifespan: registration, stdio, running without a transport, testing."""

from __future__ import annotations

import json
from functools import partial

import pytest
import trio
import trio.testing

from mrtr import Context, Server
from mrtr.transports.stdio import serve_stdio
from mrtr.testing import run

from .conftest import meta
from .wire_schema import validate_message

META = meta()


def build(events: list[str]) -> Server:
    server = Server("life", "1", secret=b"s" * 32, debug=True)  # the not-running hint reaches the client

    @server.lifespan
    async def resources():
        events.append("enter")
        try:
            yield {"pool": "p"}
        finally:
            events.append("exit")

    @server.tool
    def pool(ctx: Context) -> str:
        return ctx.lifespan["pool"]

    return server


def call(request_id: int, name: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": {}, "_meta": META}}


async def test_stdio_opens_the_lifespan_before_reading_and_closes_it_after_eof():
    events: list[str] = []
    server = build(events)
    to_server, server_stdin = trio.testing.memory_stream_one_way_pair()
    server_stdout, from_server = trio.testing.memory_stream_one_way_pair()
    received = b""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(serve_stdio, server, stdin=server_stdin, stdout=server_stdout))
        await to_server.send_all(json.dumps(call(1, "pool")).encode() + b"\n")
        with trio.fail_after(5):
            while b"\n" not in received:
                received += await from_server.receive_some()
        assert events == ["enter"]
        await to_server.aclose()  # EOF
    response = json.loads(received.split(b"\n")[0])
    validate_message(response, result_def="CallToolResult")
    assert response["result"]["content"][0]["text"] == "p"
    assert events == ["enter", "exit"]


async def test_without_a_transport_the_handler_is_told_the_lifespan_is_not_running():
    events: list[str] = []
    server = build(events)
    response = await server.handle(call(1, "pool"))
    assert response["result"]["isError"] is True
    assert "lifespan" in response["result"]["content"][0]["text"] and "not running" in response["result"]["content"][0]["text"]
    async with server.running() as value:
        assert value == {"pool": "p"}
        async with server.running() as again:  # a second transport in the process shares it
            assert again is value
        assert events == ["enter"]
        response = await server.handle(call(2, "pool"))
        assert response["result"]["content"][0]["text"] == "p"
    assert events == ["enter", "exit"]


async def test_a_server_without_a_lifespan_gives_none():
    server = Server("plain", "1", secret=b"s" * 32)

    @server.tool
    def look(ctx: Context) -> str:
        return repr(ctx.lifespan)

    response = await server.handle(call(1, "look"))
    assert response["result"]["content"][0]["text"] == "None"


def test_lifespan_registration_refuses_what_cannot_work():
    server = Server("x", "1", secret=b"s" * 32)
    with pytest.raises(TypeError, match="async generator function"):

        @server.lifespan
        def sync_resources():
            yield {}

    @server.lifespan
    async def resources():
        yield {}

    with pytest.raises(ValueError, match="already registered"):
        server.lifespan(resources)


def test_run_hands_a_lifespan_value_to_the_handler():
    def pool(ctx: Context) -> str:
        return ctx.lifespan["pool"]

    assert run(pool, lifespan={"pool": "fake"}).result == "fake"
