"""stdio in both eras, through a real ``python -m mrtr serve --stdio`` subprocess.

The connection's era is pinned by its first request (a ``server/discover`` probe, and a
``ping`` without the modern ``_meta``, do not pin). In a legacy connection the server's own requests go to stdout and the
client's answers come back on stdin. Every line a legacy connection writes is validated
against the 2025-11-25 schema as it is read; a modern connection's against 2026-07-28.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from mrtr.transports.stdio import serve_stdio

from ..conftest import meta, until
from ..legacy_schema import RESULT_DEFS, validate_server_message
from ..test_stdio import stdio_server
from ..wire_schema import validate_message
from .app import server as app

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

APP = "tests.legacy.app:server"


def initialize(request_id: Any = 0, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": capabilities if capabilities is not None else
                       {"elicitation": {}, "sampling": {}, "roots": {}},
                       "clientInfo": {"name": "stdio-test", "version": "1.0"}}}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(request_id: Any, tool: str, arguments: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments or {}, **params}}


class Peer:
    """The client's side of a stdio connection: writes lines, reads and validates every line the server writes."""

    def __init__(self, send: Any, receive: Any, era: str = "legacy") -> None:
        self.send_stream = send
        self.receive_stream = receive
        self.era = era
        self.buffer = bytearray()
        self.seen: list[dict[str, Any]] = []
        self.methods: dict[Any, str] = {}

    async def send(self, message: dict[str, Any] | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        if isinstance(message, dict) and "method" in message and "id" in message:
            self.methods[message["id"]] = message["method"]
        await self.send_stream.send_all(data)

    async def next(self) -> dict[str, Any] | None:
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self.buffer[:newline])
                del self.buffer[:newline + 1]
                message = json.loads(line)
                self.check(message)
                self.seen.append(message)
                return message
            data = await self.receive_stream.receive_some(65536)
            if not data:
                return None
            self.buffer += data

    def check(self, message: dict[str, Any]) -> None:
        if self.era == "modern":
            validate_message(message)
            return
        method = self.methods.get(message.get("id")) if "method" not in message else None
        validate_server_message(message, RESULT_DEFS.get(method or "") if "result" in message else None)

    async def until(self, predicate: Any) -> dict[str, Any]:
        while True:
            message = await self.next()
            assert message is not None, "stdout closed"
            if predicate(message):
                return message

    async def response(self, request_id: Any) -> dict[str, Any]:
        return await self.until(lambda m: "method" not in m and m.get("id") == request_id)

    async def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        await self.send(message)
        return await self.response(message["id"])

    async def server_request(self, method: str) -> dict[str, Any]:
        return await self.until(lambda m: m.get("method") == method and "id" in m)

    async def answer(self, request: dict[str, Any], result: Any) -> None:
        await self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    async def open(self, **options: Any) -> dict[str, Any]:
        opened = await self.ask(initialize(**options))
        await self.send(INITIALIZED)
        return opened


@asynccontextmanager
async def stdio(*options: str, env: dict[str, str] | None = None) -> AsyncIterator[tuple[Peer, trio.Process, bytearray]]:
    """``mrtr serve tests.legacy.app:server --stdio``: the client's side, the process, its stderr."""
    async with stdio_server(APP, *options, env=env) as server:
        yield Peer(server.process.stdin, server.process.stdout), server.process, server.stderr


async def test_a_legacy_conversation_over_stdio(tmp_path):
    with trio.fail_after(30):
        async with stdio(env={"MRTR_TEST_MARKERS": str(tmp_path)}) as (client, process, _):
            opened = await client.open()
            assert opened["result"]["protocolVersion"] == "2025-11-25"
            assert opened["result"]["serverInfo"]["name"] == "legacy-fixture"
            tools = await client.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert "onboard" in {tool["name"] for tool in tools["result"]["tools"]}
            await client.send(call(2, "onboard", {"company": "acme"}))
            name = await client.server_request("elicitation/create")
            assert name["params"]["message"] == "Welcome to acme! Your name?" and name["params"]["mode"] == "form"
            await client.answer(name, {"action": "accept", "content": {"name": "Ada"}})
            plan = await client.server_request("elicitation/create")
            await client.answer(plan, {"action": "accept", "content": {"plan": "team"}})
            contact = await client.server_request("elicitation/create")
            go = await client.server_request("elicitation/create")  # a group: both out before either is answered
            await client.answer(go, {"action": "accept", "content": {"go": True}})
            await client.answer(contact, {"action": "accept", "content": {"email": "ada@example.com"}})
            done = await client.response(2)
            assert done["result"]["content"][0]["text"] == "Ada on team (ada@example.com) at acme"
            assert len({name["id"], plan["id"], contact["id"], go["id"]}) == 4
            pong = await client.ask({"jsonrpc": "2.0", "id": 3, "method": "ping"})
            assert pong["result"] == {}
            await client.send_stream.aclose()
            assert await process.wait() == 0
    assert (tmp_path / "plan-options").read_text() == "read\n"  # the Step ran once


async def test_a_cancelled_call_sends_no_response_withdraws_the_question_and_runs_finally(tmp_path):
    with trio.fail_after(30):
        async with stdio(env={"MRTR_TEST_MARKERS": str(tmp_path)}) as (client, process, _):
            await client.open()
            await client.send(call("c-1", "hold", {"marker": "hold"}))
            asked = await client.server_request("elicitation/create")
            await client.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                               "params": {"requestId": "c-1", "reason": "user pressed stop"}})
            withdrawn = await client.until(lambda m: m.get("method") == "notifications/cancelled")
            assert withdrawn["params"]["requestId"] == asked["id"]
            await until(lambda: (tmp_path / "hold").exists() and "finally ran" in (tmp_path / "hold").read_text())
            await client.answer(asked, {"action": "accept", "content": {"here": True}})  # too late: dropped
            pong = await client.ask({"jsonrpc": "2.0", "id": "after", "method": "ping"})
            assert pong["result"] == {}
            assert not [m for m in client.seen if m.get("id") == "c-1"]


async def test_the_end_of_input_ends_a_waiting_call_at_once_not_after_the_grace_period(tmp_path):
    with trio.fail_after(30):
        async with stdio(env={"MRTR_TEST_MARKERS": str(tmp_path)}) as (client, process, _):
            await client.open()
            await client.send(call(5, "hold", {"marker": "eof"}))
            await client.server_request("elicitation/create")
            started = trio.current_time()
            await client.send_stream.aclose()
            assert await process.wait() == 0
            assert trio.current_time() - started < 8  # the grace period is 10 s
            assert "finally ran" in (tmp_path / "eof").read_text()


async def test_a_probe_does_not_pin_and_the_first_request_does():
    with trio.fail_after(30):
        async with stdio() as (client, process, _):
            client.era = "modern"
            probe = await client.ask({"jsonrpc": "2.0", "id": "p", "method": "server/discover",
                                      "params": {"_meta": meta()}})
            assert "supportedVersions" in probe["result"]
            again = await client.ask({"jsonrpc": "2.0", "id": "p2", "method": "server/discover",
                                      "params": {"_meta": meta()}})
            assert "supportedVersions" in again["result"]
            client.era = "legacy"
            opened = await client.open()
            assert opened["result"]["protocolVersion"] == "2025-11-25"
            crossed = await client.ask({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"_meta": meta()}})
            assert crossed["error"]["code"] == -32600 and "modern era" in crossed["error"]["message"]
            unknown = await client.ask({"jsonrpc": "2.0", "id": 10, "method": "server/discover"})
            assert unknown["error"]["code"] == -32601


async def test_a_modern_first_request_pins_the_modern_era():
    with trio.fail_after(30):
        async with stdio() as (client, process, _):
            client.era = "modern"
            listed = await client.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}})
            assert listed["result"]["resultType"] == "complete"
            refused = await client.ask(initialize(2, "2025-06-18"))
            assert refused["error"]["code"] == -32022
            assert refused["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2025-06-18"}
            pong = await client.ask({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": meta()}})
            assert pong["error"]["code"] == -32601


async def test_era_modern_serves_only_2026_and_names_it_to_initialize():
    with trio.fail_after(30):
        async with stdio("--era", "modern") as (client, process, _):
            client.era = "modern"
            refused = await client.ask(initialize())
            assert refused["error"]["code"] == -32022
            assert refused["error"]["data"]["supported"] == ["2026-07-28"]
            listed = await client.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}})
            assert listed["result"]["resultType"] == "complete"
            missing = await client.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            assert missing["error"]["code"] == -32602  # not pinned to anything: today's behaviour


async def test_notifications_before_the_first_request_are_kept_bounded_and_do_not_pin():
    with trio.fail_after(30):
        async with stdio("--log-level", "debug") as (client, process, stderr):
            for _ in range(100):
                await client.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
            opened = await client.open()
            assert opened["result"]["protocolVersion"] == "2025-11-25"
            assert (await client.ask({"jsonrpc": "2.0", "id": 1, "method": "ping"}))["result"] == {}
            await client.send_stream.aclose()
            assert await process.wait() == 0
    assert b"too many notifications before the first request" in stderr


async def test_a_stray_answer_and_a_second_initialize_are_harmless():
    with trio.fail_after(30):
        async with stdio() as (client, process, _):
            await client.open()
            await client.send({"jsonrpc": "2.0", "id": 999, "result": {"action": "accept"}})
            again = await client.ask(initialize(7))
            assert again["error"]["code"] == -32600 and "already initialized" in again["error"]["message"]
            assert (await client.ask({"jsonrpc": "2.0", "id": 8, "method": "ping"}))["result"] == {}


async def test_subscribe_answers_an_empty_object_over_stdio():
    with trio.fail_after(30):
        async with stdio() as (client, process, _):
            await client.open()
            subscribed = await client.ask({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
                                           "params": {"uri": "test://static"}})
            assert subscribed["result"] == {}


# -- in process: the in-flight limit and waiting calls ---------------------------------------------


async def test_waiting_calls_give_their_places_back_so_their_answers_can_be_read():
    """More calls waiting for answers than ``max_in_flight``: the answers must still be read, not deadlock."""
    to_server, server_in = trio.testing.memory_stream_pair()
    server_out, from_server = trio.testing.memory_stream_pair()
    client = Peer(to_server, from_server)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: serve_stdio(app, stdin=server_in, stdout=server_out, max_in_flight=2,
                                                   grace_period=1))
            await client.open()
            for index in range(5):
                await client.send(call(f"w{index}", "polite"))
            asked = [await client.server_request("elicitation/create") for _ in range(5)]
            for request in asked:
                await client.answer(request, {"action": "decline"})
            results = [await client.response(f"w{index}") for index in range(5)]
            assert {result["result"]["content"][0]["text"] for result in results} == {"declined: nothing stored"}
            await to_server.aclose()


async def test_a_resource_update_is_written_to_a_subscribed_stdio_session():
    to_server, server_in = trio.testing.memory_stream_pair()
    server_out, from_server = trio.testing.memory_stream_pair()
    client = Peer(to_server, from_server)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: serve_stdio(app, stdin=server_in, stdout=server_out, grace_period=1))
            await client.open()
            await client.ask({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
                              "params": {"uri": "test://static"}})
            await trio.to_thread.run_sync(app.notify_resource_updated, "test://static")  # from another thread
            updated = await client.until(lambda m: m.get("method") == "notifications/resources/updated")
            assert updated["params"] == {"uri": "test://static"}
            app.notify_prompts_changed()
            changed = await client.until(lambda m: m.get("method", "").endswith("list_changed"))
            assert changed["method"] == "notifications/prompts/list_changed"
            await to_server.aclose()


async def test_a_ping_before_the_first_request_is_answered_and_pins_nothing():
    # Hosts ping to see that a server is alive, some before they have chosen an era: the answer must
    # not choose it for them (docs/apps.md, the ping decision).
    for then in ("modern", "legacy"):
        with trio.fail_after(30):
            async with stdio() as (client, process, _):
                assert (await client.ask({"jsonrpc": "2.0", "id": "p", "method": "ping"}))["result"] == {}
                if then == "modern":
                    client.era = "modern"
                    listed = await client.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                               "params": {"_meta": meta()}})
                    assert listed["result"]["resultType"] == "complete"
                    removed = await client.ask({"jsonrpc": "2.0", "id": 2, "method": "ping",
                                                "params": {"_meta": meta()}})
                    assert removed["error"]["code"] == -32601  # 2026-07-28 has no ping
                else:
                    assert (await client.open())["result"]["protocolVersion"] == "2025-11-25"
                    assert (await client.ask({"jsonrpc": "2.0", "id": 3, "method": "ping"}))["result"] == {}
