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

from .hostile import head, serve_http

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
