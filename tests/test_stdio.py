"""The stdio transport, through a real ``python -m mrtr serve --stdio`` subprocess.

Every line the server writes to stdout is parsed as JSON and validated against the
official schema (``tests/wire_schema.py``) as it is read, so any stray output or
malformed message fails the test that reads it.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mrtr.server import Server
from mrtr.transports.stdio import DEFAULT_MAX_LINE_BYTES, serve_stdio

from .conftest import meta
from .wire_schema import validate_message

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

REPO = Path(__file__).resolve().parents[1]
APP = "tests.stdio_server:server"
PROTOCOL_VERSION = "2026-07-28"


def request(request_id: Any, method: str, params: dict[str, Any] | None = None, **meta_extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method,
            "params": {**(params or {}), "_meta": meta({"elicitation": {}}, **meta_extra)}}


def call(request_id: Any, tool: str, arguments: dict[str, Any] | None = None, **meta_extra: Any) -> dict[str, Any]:
    return request(request_id, "tools/call", {"name": tool, "arguments": arguments or {}}, **meta_extra)


def cancelled(request_id: Any, reason: str = "test") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id, "reason": reason}}


def text_of(response: dict[str, Any]) -> str:
    return response["result"]["content"][0]["text"]


class LineReader:
    """Splits a trio receive stream into lines."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def line(self) -> bytes | None:
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self.buffer[:newline])
                del self.buffer[: newline + 1]
                return line
            data = await self.stream.receive_some(65536)
            if not data:
                assert not self.buffer, f"output ended inside a line: {bytes(self.buffer)[:200]!r}"
                return None
            self.buffer += data


class Client:
    """Talks to a stdio server: writes messages, reads and validates every line it answers."""

    def __init__(self, send_stream: Any, receive_stream: Any) -> None:
        self.send_stream = send_stream
        self.lines = LineReader(receive_stream)
        self.received: list[dict[str, Any]] = []  # everything, in arrival order
        self.backlog: list[dict[str, Any]] = []  # responses read while waiting for another
        self.eof = False

    async def send(self, message: dict[str, Any] | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        await self.send_stream.send_all(data)

    async def close_input(self) -> None:
        await self.send_stream.aclose()

    async def next_message(self) -> dict[str, Any] | None:
        """The next message on stdout, or None at EOF."""
        line = await self.lines.line()
        if line is None:
            self.eof = True
            return None
        message = json.loads(line)  # stdout carries JSON lines only
        validate_message(message)
        self.received.append(message)
        return message

    async def response(self, request_id: Any, result_def: str | None = None) -> dict[str, Any]:
        """Wait for the response to ``request_id`` (other responses are kept for later)."""
        for index, message in enumerate(self.backlog):
            if message.get("id") == request_id:
                del self.backlog[index]
                break
        else:
            while True:
                message = await self.next_message()
                assert message is not None, f"stdout closed before the response to {request_id!r}"
                if "method" in message:
                    continue  # a notification; still in self.received
                if message.get("id") == request_id:
                    break
                self.backlog.append(message)
        if result_def is not None:
            validate_message(message, result_def=result_def)
        return message

    async def ask(self, message: dict[str, Any], result_def: str | None = None) -> dict[str, Any]:
        await self.send(message)
        return await self.response(message["id"], result_def)

    async def drain(self) -> None:
        """Read (and validate) everything left until stdout closes."""
        while await self.next_message() is not None:
            pass

    def messages_for(self, request_id: Any) -> list[dict[str, Any]]:
        return [message for message in self.received if "method" not in message and message.get("id") == request_id]


class StdioProcess(Client):
    def __init__(self, process: trio.Process) -> None:
        super().__init__(process.stdin, process.stdout)
        self.process = process
        self.stderr = bytearray()

    async def collect_stderr(self) -> None:
        assert self.process.stderr is not None
        while data := await self.process.stderr.receive_some(65536):
            self.stderr += data

    async def finish(self) -> int:
        """Close stdin, read stdout to its end, and return the exit code."""
        await self.close_input()
        await self.drain()
        return await self.process.wait()


@asynccontextmanager
async def stdio_server(app: str | None = APP, *options: str,
                       env: dict[str, str] | None = None) -> AsyncIterator[StdioProcess]:
    """``python -m mrtr serve --stdio [app] [options]``, its environment extended by ``env``."""
    command = [sys.executable, "-m", "mrtr", "serve", "--stdio"] + ([app] if app else []) + list(options)
    async with trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
            env={**os.environ, **env} if env else None,
        )
        client = StdioProcess(process)
        nursery.start_soon(client.collect_stderr)
        try:
            yield client
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    with trio.move_on_after(5):
                        await process.stdin.aclose()
                        await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()


async def wait_for_file(path: Path, content: str) -> None:
    while not (path.exists() and path.read_text() == content):
        await trio.sleep(0.02)


# -- through a subprocess --------------------------------------------------------------------


async def test_discover_and_list_tools() -> None:
    with trio.fail_after(15):
        async with stdio_server() as server:
            discovered = await server.ask(request("d", "server/discover"), "DiscoverResult")
            assert discovered["result"]["supportedVersions"] == [PROTOCOL_VERSION]
            assert "tools" in discovered["result"]["capabilities"]
            listed = await server.ask(request(2, "tools/list"), "ListToolsResult")
            names = {tool["name"] for tool in listed["result"]["tools"]}
            assert {"echo", "greet", "count", "slow", "shout"} <= names
            assert await server.finish() == 0


async def test_a_full_mrtr_conversation() -> None:
    with trio.fail_after(15):
        async with stdio_server() as server:
            first = await server.ask(call(1, "greet", {"greeting": "Hi"}), "InputRequiredResult")
            result = first["result"]
            assert result["resultType"] == "input_required"
            [key] = result["inputRequests"]
            assert result["inputRequests"][key]["method"] == "elicitation/create"
            retry = call(2, "greet", {"greeting": "Hi"})
            retry["params"]["requestState"] = result["requestState"]
            retry["params"]["inputResponses"] = {key: {"action": "accept", "content": {"name": "Ada"}}}
            final = await server.ask(retry, "CallToolResult")
            assert final["result"]["resultType"] == "complete"
            assert text_of(final) == "Hi, Ada"
            assert await server.finish() == 0


async def test_two_requests_in_flight_are_answered_independently() -> None:
    with trio.fail_after(15):
        async with stdio_server() as server:
            await server.send(call("slow", "slow", {"seconds": 0.5}))
            await server.send(call("fast", "echo", {"text": "quick"}))
            first = await server.next_message()
            assert first is not None and first["id"] == "fast"
            validate_message(first, result_def="CallToolResult")
            assert text_of(first) == "quick"
            later = await server.response("slow", "CallToolResult")
            assert text_of(later) == "slept 0.5"
            assert await server.finish() == 0


async def test_progress_notifications_come_before_the_response() -> None:
    with trio.fail_after(15):
        async with stdio_server() as server:
            response = await server.ask(call(1, "count", {"steps": 3}, progressToken="tok"), "CallToolResult")
            assert text_of(response) == "counted 3"
            position = server.received.index(response)
            progress = [message for message in server.received[:position]
                        if message.get("method") == "notifications/progress"]
            assert [note["params"]["progress"] for note in progress] == [1, 2, 3]
            assert all(note["params"]["progressToken"] == "tok" and note["params"]["total"] == 3 for note in progress)
            # Without a progressToken nothing but the response is sent.
            before = len(server.received)
            quiet = await server.ask(call(2, "count", {"steps": 2}), "CallToolResult")
            assert server.received[before:] == [quiet]
            assert await server.finish() == 0
            assert not any(message.get("method") for message in server.received[position:])


async def test_cancelled_notification_cancels_the_request(tmp_path: Path) -> None:
    marker = tmp_path / "slow-marker"
    with trio.fail_after(15):
        async with stdio_server() as server:
            await server.send(call("s1", "slow", {"seconds": 30, "marker": str(marker)}, progressToken="p"))
            started = await server.next_message()  # the tool is running once it reports progress
            assert started is not None and started["method"] == "notifications/progress"
            assert marker.read_text() == "started"
            await server.send(cancelled("no-such-request"))  # ignored
            await server.send(cancelled("s1"))
            after = await server.ask(call("after", "echo", {"text": "still here"}), "CallToolResult")
            assert text_of(after) == "still here"
            await wait_for_file(marker, "cancelled")
            assert await server.finish() == 0
            assert server.messages_for("s1") == []
            assert b"slow: cancelled" in server.stderr


async def test_a_duplicate_id_in_flight_is_refused() -> None:
    with trio.fail_after(15):
        async with stdio_server() as server:
            await server.send(call("dup", "slow", {"seconds": 30}, progressToken="p"))
            started = await server.next_message()
            assert started is not None and started["method"] == "notifications/progress"
            refused = await server.ask(call("dup", "echo", {"text": "second"}))
            assert refused["error"]["code"] == -32600
            assert "already in use" in refused["error"]["message"]
            await server.send(cancelled("dup"))
            assert await server.finish() == 0
            assert server.messages_for("dup") == [refused]  # the first one was cancelled: no response


async def test_parse_error_and_blank_lines() -> None:
    with trio.fail_after(15):
        async with stdio_server() as server:
            await server.send(b"\n   \n\r\n")  # blank lines are ignored
            await server.send(b"{this is not json\n")
            error = await server.next_message()
            assert error is not None and error["error"]["code"] == -32700
            assert "id" not in error  # the MCP schema has no null id: an unknown id is left out
            echoed = await server.ask(call(1, "echo", {"text": "ok"}), "CallToolResult")
            assert server.received == [error, echoed]
            assert await server.finish() == 0


async def test_a_response_gets_no_answer_at_all() -> None:
    # JSON-RPC answers no response, not even with an error that would carry a client's id.
    with trio.fail_after(15):
        async with stdio_server() as server:
            await server.send(b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
            await server.send(b'{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"no"}}\n')
            # a client that could not read a request of ours answers with a null id: still no answer
            await server.send(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n')
            echoed = await server.ask(call(2, "echo", {"text": "ok"}), "CallToolResult")
            assert server.received == [echoed]
            assert await server.finish() == 0


async def test_invalid_requests() -> None:
    cases = [
        (b'{"jsonrpc":"2.0","id":7,"method":42}\n', 7),
        (b'{"jsonrpc":"1.0","id":"x","method":"tools/list"}\n', "x"),
        (b'{"jsonrpc":"2.0","id":8}\n', 8),
        (b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]\n', None),
        (b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}\n', None),
        (b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}\n', None),
        (b'"just a string"\n', None),
    ]
    with trio.fail_after(15):
        async with stdio_server() as server:
            for line, expected_id in cases:
                await server.send(line)
                error = await server.next_message()
                assert error is not None and error["error"]["code"] == -32600, line
                assert error.get("id") == expected_id, line
                if expected_id is None:
                    assert "id" not in error
            # The first request carries the modern claim, so the connection speaks 2026-07-28 from here on.
            listed = await server.ask(request(9, "tools/list"), "ListToolsResult")
            assert listed["result"]["tools"]
            # A request without _meta is then a well-formed request with invalid params.
            missing = await server.ask({"jsonrpc": "2.0", "id": 10, "method": "tools/list"})
            assert missing["error"]["code"] == -32602
            # initialize with the modern claim is a removed method; without it, it belongs to the
            # other era and is refused naming the version this connection speaks.
            removed = await server.ask(request(11, "initialize", {"protocolVersion": "2025-11-25"}))
            assert removed["error"]["code"] == -32601
            refused = await server.ask({"jsonrpc": "2.0", "id": 12, "method": "initialize",
                                        "params": {"protocolVersion": "2025-11-25", "capabilities": {}}})
            assert refused["error"]["code"] == -32022
            assert refused["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}
            assert await server.finish() == 0


async def test_an_oversize_line_is_refused_and_skipped() -> None:
    big = (b'{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"echo","arguments":{"text":"'
           + b"a" * DEFAULT_MAX_LINE_BYTES + b'"}}}\n')
    with trio.fail_after(15):
        async with stdio_server() as server:
            await server.send(big)
            error = await server.next_message()
            assert error is not None and error["error"]["code"] == -32600
            assert "id" not in error
            echoed = await server.ask(call("next", "echo", {"text": "fine"}), "CallToolResult")
            assert text_of(echoed) == "fine"
            assert await server.finish() == 0
            assert server.messages_for("big") == []


async def test_eof_lets_requests_in_flight_finish_then_exits_zero() -> None:
    with trio.fail_after(15):
        async with stdio_server() as server:
            await server.send(call("last", "slow", {"seconds": 0.3}))
            await server.close_input()
            await server.drain()
            assert await server.process.wait() == 0
            [answer] = server.messages_for("last")
            validate_message(answer, result_def="CallToolResult")
            assert text_of(answer) == "slept 0.3"


async def test_stray_prints_go_to_stderr_not_stdout() -> None:
    with trio.fail_after(15):
        async with stdio_server() as server:
            shouted = await server.ask(call(1, "shout", {"text": "hello"}), "CallToolResult")
            assert text_of(shouted) == "HELLO"
            assert await server.finish() == 0
            assert b"stray output: hello" in server.stderr
            assert server.received == [shouted]


# -- in process, with memory streams -----------------------------------------------------------


def forever_server() -> Server:
    server = Server("in-process", secret=b"s" * 32)

    @server.tool
    async def forever() -> str:
        await trio.sleep(math.inf)
        return "never"

    @server.tool
    def echo(text: str) -> str:
        return text

    return server


@asynccontextmanager
async def in_process(server: Server, **options: Any) -> AsyncIterator[tuple[Client, trio.CancelScope]]:
    to_server, server_stdin = trio.testing.memory_stream_one_way_pair()
    server_stdout, from_server = trio.testing.memory_stream_one_way_pair()
    async with trio.open_nursery() as nursery:
        done = trio.Event()

        async def serve() -> None:
            await serve_stdio(server, stdin=server_stdin, stdout=server_stdout, **options)
            await server_stdout.aclose()
            done.set()

        nursery.start_soon(serve)
        client = Client(to_server, from_server)
        client.done = done  # type: ignore[attr-defined]
        yield client, nursery.cancel_scope


async def test_grace_period_cancels_what_is_still_running() -> None:
    with trio.fail_after(5):
        async with in_process(forever_server(), grace_period=0.2) as (client, _):
            await client.send(call("stuck", "forever"))
            echoed = await client.ask(call("quick", "echo", {"text": "x"}), "CallToolResult")
            assert text_of(echoed) == "x"
            started = trio.current_time()
            await client.close_input()
            await client.drain()
            await client.done.wait()  # type: ignore[attr-defined]
            assert 0.15 < trio.current_time() - started < 2
            assert client.messages_for("stuck") == []


async def test_cancelling_a_sync_handler_in_thread_mode_abandons_its_thread_and_writes_nothing_for_it() -> None:
    release, finished = threading.Event(), threading.Event()
    server = Server("threads", secret=b"s" * 32, sync_handlers="thread")

    @server.tool
    def blocking(ctx) -> str:
        try:
            ctx.progress(1, message="blocked")
            release.wait(10)  # a blocking call that cannot be interrupted
            ctx.progress(2, message="late")  # after the cancellation: must not be written
            return "late result"
        finally:
            finished.set()

    @server.tool
    def echo(text: str) -> str:
        return text

    try:
        with trio.fail_after(10):
            async with in_process(server) as (client, _):
                await client.send(call(1, "blocking", progressToken="p"))
                started = await client.next_message()
                assert started is not None and started["params"] == {"progressToken": "p", "progress": 1,
                                                                      "message": "blocked"}
                await client.send(cancelled(1))
                after = await client.ask(call(2, "echo", {"text": "after"}), "CallToolResult")
                assert text_of(after) == "after"
                # The thread is still blocked, yet the request is over: its id is free again.
                assert not finished.is_set()
                reused = await client.ask(call(1, "echo", {"text": "new"}), "CallToolResult")
                assert text_of(reused) == "new"
                release.set()
                assert await trio.to_thread.run_sync(finished.wait, 5)
                last = await client.ask(call(3, "echo", {"text": "last"}), "CallToolResult")
                await client.close_input()
                await client.drain()
    finally:
        release.set()
    # Neither the late progress nor the late result was written, under either id.
    assert client.received == [started, after, reused, last]


async def test_line_limit_is_configurable_and_lines_may_arrive_in_pieces() -> None:
    limit = 300
    with trio.fail_after(5):
        async with in_process(forever_server(), max_line_bytes=limit) as (client, _):
            exact = json.dumps(call(1, "echo", {"text": ""})).encode()
            padded = exact.replace(b'"text": ""', b'"text": "' + b"y" * (limit - len(exact)) + b'"')
            assert len(padded) == limit
            await client.send(padded[:50])
            await trio.testing.wait_all_tasks_blocked()
            await client.send(padded[50:] + b"\n")
            accepted = await client.response(1, "CallToolResult")
            assert text_of(accepted) == "y" * (limit - len(exact))
            # One byte over: refused while it is still arriving, the rest of it skipped,
            # and the next line (in the same chunk as the tail) served.
            over = padded.replace(b"yy", b"yyy", 1).replace(b'"id": 1', b'"id": 2')
            assert len(over) == limit + 1
            await client.send(over[:limit])
            await trio.testing.wait_all_tasks_blocked()
            await client.send(over[limit:] + b"\n" + json.dumps(call(3, "echo", {"text": "z"})).encode() + b"\n")
            error = await client.next_message()
            assert error is not None and error["error"]["code"] == -32600 and "id" not in error
            assert text_of(await client.response(3, "CallToolResult")) == "z"
            # A last line without a newline before EOF is still served.
            await client.send(json.dumps(call(4, "echo", {"text": "tail"})).encode())
            await client.close_input()
            assert text_of(await client.response(4, "CallToolResult")) == "tail"
            await client.drain()
            assert client.messages_for(2) == []


async def test_serve_stdio_returns_when_stdout_is_closed() -> None:
    with trio.fail_after(5):
        async with in_process(forever_server(), grace_period=30) as (client, _):
            await client.send(call("stuck", "forever"))
            await client.lines.stream.aclose()  # the client stops reading
            await client.send(call("x", "echo", {"text": "nobody listens"}))
            await client.done.wait()  # type: ignore[attr-defined]


async def test_sigterm_stops_the_server_at_once() -> None:
    with trio.fail_after(15):
        async with stdio_server() as server:
            await server.send(call("long", "slow", {"seconds": 30}, progressToken="p"))
            started = await server.next_message()
            assert started is not None and started["method"] == "notifications/progress"
            server.process.send_signal(signal.SIGTERM)
            await server.drain()
            assert await server.process.wait() == 0
            assert server.messages_for("long") == []
