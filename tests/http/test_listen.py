"""subscriptions/listen over real loopback HTTP (native server and ASGI under hypercorn).

A client opens a listen stream; the first message is the acknowledgement naming what
the server agreed to send; list changes and updates of subscribed resources follow,
each carrying the subscription id; shutdown ends the stream with the listen result.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from mrtr import Server
from mrtr.transports.http import ASGIApp
from mrtr.transports.http.native import serve

from ..wire_schema import validate_message
from .conftest import BASE_HEADERS, rpc

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


def build() -> Server:
    server = Server("listen", "1", secret=b"s" * 32)

    @server.tool
    def echo(text: str) -> str:
        return text

    @server.resource("notes://a")
    def note_a() -> str:
        return "a"

    return server


def headers_for(method: str) -> dict[str, str]:
    return {**BASE_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}


class Events:
    """Reads the SSE events of one streaming response, one JSON-RPC message at a time."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.aiter_lines()
        self.data: list[str] = []

    async def next(self) -> dict[str, Any] | None:
        with trio.fail_after(5):
            async for line in self.lines:
                if line.startswith("data:"):
                    self.data.append(line[5:].lstrip(" "))
                elif not line and self.data:
                    message = json.loads("\n".join(self.data))
                    self.data = []
                    return message
        return None


@pytest.mark.parametrize("front", ["native", "asgi"])
async def test_a_listen_stream_gets_what_it_asked_for_then_the_result_at_shutdown(front):
    server = build()
    shutdown, stopped = trio.Event(), trio.Event()
    async with trio.open_nursery() as nursery:
        if front == "native":
            async def run(task_status=trio.TASK_STATUS_IGNORED):
                await serve(server, "127.0.0.1", 0, shutdown_event=shutdown, task_status=task_status)
                stopped.set()

            port = await nursery.start(run)
        else:
            config = HypercornConfig()
            config.bind = ["127.0.0.1:0"]
            config.accesslog = None
            config.graceful_timeout = 1

            async def run(task_status=trio.TASK_STATUS_IGNORED):
                await hypercorn_serve(ASGIApp(server), config, shutdown_trigger=shutdown.wait, task_status=task_status)
                stopped.set()

            port = int((await nursery.start(run))[0].rsplit(":", 1)[1])

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
            del client.headers["accept"]
            discover = (await client.post("/mcp", json=rpc("server/discover"), headers=headers_for("server/discover"))).json()
            validate_message(discover, result_def="DiscoverResult")
            capabilities = discover["result"]["capabilities"]
            assert capabilities["tools"] == {"listChanged": True}
            assert capabilities["resources"] == {"listChanged": True, "subscribe": True}
            assert "prompts" not in capabilities

            listen = rpc("subscriptions/listen", {"notifications": {
                "toolsListChanged": True, "promptsListChanged": True,
                "resourceSubscriptions": ["notes://a"]}}, id="sub-1")
            async with client.stream("POST", "/mcp", json=listen, headers=headers_for("subscriptions/listen")) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                events = Events(response)
                ack = await events.next()
                assert ack is not None
                validate_message(ack)
                # No prompts here: the server agrees only to what it can send.
                assert ack["method"] == "notifications/subscriptions/acknowledged"
                assert ack["params"]["notifications"] == {"toolsListChanged": True, "resourceSubscriptions": ["notes://a"]}
                assert ack["params"]["_meta"] == {SUBSCRIPTION_ID: "sub-1"}

                # From a worker thread, as application code would; unasked kinds are not sent.
                def publish():
                    server.notify_resources_changed()
                    server.notify_resource_updated("notes://b")
                    server.notify_tools_changed()
                    server.notify_resource_updated("notes://a")

                await trio.to_thread.run_sync(publish)
                tools = await events.next()
                updated = await events.next()
                for message in (tools, updated):
                    validate_message(message)
                    assert message["params"]["_meta"] == {SUBSCRIPTION_ID: "sub-1"}
                assert tools["method"] == "notifications/tools/list_changed"
                assert updated["method"] == "notifications/resources/updated"
                assert updated["params"]["uri"] == "notes://a"

                shutdown.set()
                if front == "native":
                    # The native server ends listen streams when shutdown begins, gracefully.
                    final = await events.next()
                    assert final is not None and final["id"] == "sub-1"
                    validate_message(final, result_def="SubscriptionsListenResult")
                    assert final["result"]["resultType"] == "complete"
                    assert final["result"]["_meta"][SUBSCRIPTION_ID] == "sub-1"
                    assert await events.next() is None
                else:
                    # An ASGI host tells the app about shutdown only after its graceful
                    # timeout, so the stream is cut then, without a result (which the spec
                    # allows: "an abrupt transport close carries no response").
                    try:
                        assert await events.next() is None
                    except (httpx.RemoteProtocolError, httpx.ReadError):
                        pass
        with trio.fail_after(10):
            await stopped.wait()


async def test_a_bad_filter_is_refused():
    server = build()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve, server, "127.0.0.1", 0)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
            del client.headers["accept"]
            message = rpc("subscriptions/listen", {"notifications": {"toolsListChanged": "yes"}})
            reply = await client.post("/mcp", json=message, headers=headers_for("subscriptions/listen"))
            body = reply.json()
            validate_message(body)
            assert body["error"]["code"] == -32602 and "toolsListChanged" in body["error"]["message"]
        nursery.cancel_scope.cancel()
