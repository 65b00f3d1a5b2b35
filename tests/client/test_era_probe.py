"""How the client judges a server's answer to its ``server/discover`` probe, against scripted loopback servers."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import mrtr
from mrtr.client.oauth import parse_challenge
from mrtr.client.tasks import TaskStatus
from mrtr.core.eras import LEGACY, MODERN

from ..conftest import examples
from .hostile import DISCOVER, head, result, send_json, serve_http

GUARD = 20


def legacy_after(reply: Any) -> Any:
    """A server answering the probe with ``reply`` (status, body) and speaking 2025 once initialized."""

    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        if "_http_method" in message:  # the standalone GET stream and the closing DELETE: not offered
            await stream.send_all(head(405, Content_Length="0"))
        elif message.get("method") == "server/discover":
            status, body = reply
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            await stream.send_all(head(status, Content_Length=str(len(data))) + data)
        elif message.get("method") == "initialize":
            await send_json(stream, result(message, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                                     "serverInfo": {"name": "old", "version": "1"}}))
        elif "id" not in message:
            await stream.send_all(head(202, Content_Length="0"))
        else:
            await send_json(stream, result(message, {"tools": []}))

    return respond


@pytest.mark.parametrize("reply", [
    (400, b"Bad Request: Missing session ID"),
    (200, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}),
    (404, b""),
    (405, b"Method Not Allowed"),
    (200, {"jsonrpc": "2.0", "id": 1, "result": {}}),  # answered, but no DiscoverResult
    (400, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32022, "message": "no", "data": {
        "supported": ["2025-11-25"], "requested": "2026-07-28"}}}),  # a modern error naming only 2025 versions
])
async def test_answers_that_mean_legacy(nursery: trio.Nursery, reply):
    url = await serve_http(nursery, legacy_after(reply))
    async with mrtr.Client(url) as client:
        with trio.fail_after(GUARD):
            assert await client.list_tools() == []
        assert client.era == LEGACY and client.server is not None


async def test_a_modern_answer_is_modern_and_is_not_asked_twice(nursery: trio.Nursery):
    asked: list[str] = []

    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        asked.append(message["method"])
        await send_json(stream, result(message, DISCOVER))

    url = await serve_http(nursery, respond)
    async with mrtr.Client(url, era="auto") as client:
        assert (await client.discover())["supportedVersions"] == ["2026-07-28"]
        assert client.era == MODERN
    assert asked == ["server/discover"]  # the probe's answer served discover()


async def test_an_authorization_refusal_is_no_verdict(nursery: trio.Nursery):
    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        await stream.send_all(head(401, WWW_Authenticate='Bearer resource_metadata="http://x/y"', Content_Length="0"))

    url = await serve_http(nursery, respond)
    async with mrtr.Client(url) as client:
        with pytest.raises(mrtr.ClientError) as refused:
            await client.list_tools()
        assert refused.value.status == 401 and client.era is None


async def test_an_unreachable_server_is_no_verdict():
    async with mrtr.Client("http://127.0.0.1:9/mcp") as client:
        with pytest.raises(mrtr.ClientError, match="failed"):
            await client.list_tools()
        assert client.era is None


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=300))
def test_any_challenge_header_parses_to_a_dict_of_strings(header):
    parsed = parse_challenge(header)
    assert all(isinstance(key, str) and isinstance(value, str) for key, value in parsed.items())


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                                 max_size=4), max_leaves=20)


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(st.sampled_from(["taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs",
                                        "inputRequests", "result", "error", "statusMessage"]), _json))
def test_any_task_a_server_sends_is_checked_or_refused(value):
    try:
        status = TaskStatus.of(value)
    except mrtr.ClientError:
        return
    assert 0.1 <= status.poll_interval <= 30 and isinstance(status.input_requests, dict)
