"""Part 3's measuring device (benchmarks.apps.TableAnswered) answers what the server answers, from its table.

Its row is only worth reading if a repeated call gets the server's own answer (so wrk's
checks hold and the bytes are the real server's) without going through the MCP layer, and
if a kept ``input_required`` never outlives its use: these tests pin both.
"""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import apps
from benchmarks.loadgen import META

from .wire_schema import validate_message


def call(id_: int, tool: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": META, **extra}}


async def test_a_repeated_call_is_answered_from_the_table_with_the_servers_answer() -> None:
    server = apps.make_server(apps.TableAnswered)
    plain = apps.make_server()
    first = await server.respond(call(1, "echo", {"text": "ok"}))
    again = await server.respond(call(2, "echo", {"text": "ok"}))
    other = await server.respond(call(3, "echo", {"text": "other"}))
    for response in (first, again, other):
        validate_message(response.message, "CallToolResult")
    assert again.message["id"] == 2
    assert again.message["result"] is first.message["result"]  # from the table, not built again
    assert again.message == (await plain.respond(call(2, "echo", {"text": "ok"}))).message
    assert other.message["result"]["content"][0]["text"] == "other"  # other params: through the server


async def test_a_kept_question_round_leads_to_the_servers_final_answer() -> None:
    server = apps.make_server(apps.TableAnswered)
    asked = (await server.respond(call(1, "ask", {"plan": "pro"}))).message["result"]
    assert asked["resultType"] == "input_required"
    kept = (await server.respond(call(2, "ask", {"plan": "pro"}))).message
    validate_message(kept, "InputRequiredResult")
    assert kept["result"] is asked
    (key,) = asked["inputRequests"]
    retry = {"inputResponses": {key: {"action": "accept", "content": {"email": "a@b.io"}}},
             "requestState": asked["requestState"]}
    for id_ in (3, 4):
        message = (await server.respond(call(id_, "ask", {"plan": "pro"}, **retry))).message
        validate_message(message, "CallToolResult")
        final = message["result"]
        assert final["content"][0]["text"] == "a@b.io:pro"


async def test_an_answer_is_kept_no_longer_than_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    server = apps.make_server(apps.TableAnswered)
    monkeypatch.setattr(apps, "TABLE_SECONDS", 0.0)
    first = await server.respond(call(1, "ask", {"plan": "pro"}))
    again = await server.respond(call(2, "ask", {"plan": "pro"}))
    assert again.message["result"] is not first.message["result"]


async def test_the_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    server = apps.make_server(apps.TableAnswered)
    monkeypatch.setattr(apps, "TABLE_SIZE", 3)
    for n in range(10):
        await server.respond(call(n, "echo", {"text": str(n)}))
    assert len(server._table) <= 3
