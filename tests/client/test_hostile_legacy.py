"""Hostile 2025-era servers: silent on ``initialize``, asking what the client never declared, asking forever.

Each ends in a clear error or a refused question, within bounded time; the client
answers the server's own requests with JSON-RPC errors rather than guessing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

import mrtr
from mrtr.core.eras import LEGACY, MODERN

from .hostile import head, result, send_json, serve_http

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

HERE = Path(__file__).resolve().parent
GUARD = 20


def liar(mode: str, **options: Any) -> mrtr.Client:
    return mrtr.Client.stdio([sys.executable, str(HERE / "legacy_stdio.py"), mode], **options)


async def test_a_stdio_server_silent_on_initialize_is_cut_at_the_deadline():
    async with liar("silent", deadline=1) as client:
        with trio.fail_after(GUARD), pytest.raises(mrtr.ClientError, match="did not answer initialize within"):
            await client.call_tool("t")


async def test_an_http_server_silent_on_initialize_is_cut_at_the_deadline(nursery: trio.Nursery):
    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        if message["method"] == "initialize":
            await trio.sleep_forever()
        body = b"Bad Request: Missing session ID"
        await stream.send_all(head(400, "text/plain", Content_Length=str(len(body))) + body)

    url = await serve_http(nursery, respond)
    async with mrtr.Client(url, deadline=1) as client:
        with trio.fail_after(GUARD), pytest.raises(mrtr.ClientError, match="did not answer initialize within"):
            await client.call_tool("t")
        assert client.era == LEGACY


async def test_requests_the_client_did_not_declare_are_refused_to_the_server(caplog):
    async with liar("undeclared", on_elicit=lambda request: mrtr.decline()) as client:
        with trio.fail_after(GUARD):
            result = await client.call_tool("t")
    assert json.loads(result.text) == [-32601, -32601]  # sampling and roots: not declared, refused
    assert "did not declare" in caplog.text


async def test_a_malformed_question_is_refused_to_the_server():
    async with liar("malformed", on_elicit=lambda request: pytest.fail("a malformed request reached the answerer")) \
            as client:
        with trio.fail_after(GUARD):
            result = await client.call_tool("t")
    assert json.loads(result.text) == [-32602]


async def test_a_server_asking_forever_meets_the_round_cap_and_is_told(tmp_path: Path):
    asked: list[str] = []

    def answer(request: Any) -> dict[str, Any]:
        asked.append(request.message)
        return mrtr.accept(name="again")

    told = tmp_path / "cancelled.jsonl"
    client = mrtr.Client.stdio([sys.executable, str(HERE / "legacy_stdio.py"), "endless", str(told)],
                               on_elicit=answer, max_rounds=3)
    async with client:
        with trio.fail_after(GUARD), pytest.raises(mrtr.RoundLimitExceeded):
            await client.call_tool("t")
    assert len(asked) == 3
    (cancel,) = [json.loads(line) for line in told.read_text().splitlines()]
    assert cancel["params"]["reason"] == "abandoned by the client"


async def test_a_question_on_the_standalone_stream_is_not_lost_to_a_slow_get(nursery: trio.Nursery):
    # A 2025 server may send a question that belongs to no request on the standalone GET stream,
    # and drops it when that stream is not open yet (the TypeScript SDK's server does). This one
    # is slow to answer the GET: a client that sends its first call before the GET was answered
    # loses the question, and the call comes back "dropped".
    stream_open: list[trio.SocketStream] = []
    answers: trio.MemorySendChannel[Any]
    answers, answered = trio.open_memory_channel[Any](1)

    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        method = message.get("method") or message.get("_http_method")
        if method == "server/discover":
            body = b"Bad Request: Missing session ID"
            await stream.send_all(head(400, "text/plain", Content_Length=str(len(body))) + body)
        elif method == "initialize":
            body = json.dumps(result(message, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                               "serverInfo": {"name": "slow-get", "version": "1"}})).encode()
            await stream.send_all(head(Content_Length=str(len(body)), Mcp_Session_Id="s1") + body)
        elif method == "GET":
            await trio.sleep(0.3)  # the server's own pace, not a wait for a condition of this test
            await stream.send_all(head(200, "text/event-stream"))
            stream_open.append(stream)
            await trio.sleep_forever()
        elif method == "tools/call":
            if not stream_open:
                await send_json(stream, result(message, {"content": [{"type": "text", "text": "dropped"}]}))
                return
            question = {"jsonrpc": "2.0", "id": 99, "method": "elicitation/create",
                        "params": {"message": "Name?", "requestedSchema": {
                            "type": "object", "properties": {"name": {"type": "string", "default": "Ada"}}}}}
            await stream_open[0].send_all(b"data: " + json.dumps(question).encode() + b"\n\n")
            answer = await answered.receive()
            await send_json(stream, result(message, {"content": [{"type": "text", "text": json.dumps(answer)}]}))
        elif method == "tools/list":
            await send_json(stream, result(message, {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}))
        elif "id" in message and "result" in message:  # the client's answer to the question
            await answers.send(message["result"])
            await stream.send_all(head(202, Content_Length="0"))
        else:  # notifications/initialized, DELETE
            await stream.send_all(head(202, Content_Length="0"))

    url = await serve_http(nursery, respond)
    async with mrtr.Client(url, on_elicit=lambda request: mrtr.accept(name="Grace")) as client:
        with trio.fail_after(GUARD):
            called = await client.call_tool("t")
        assert client.era == LEGACY
    assert json.loads(called.text) == {"action": "accept", "content": {"name": "Grace"}}
