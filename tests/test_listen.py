"""subscriptions/listen over stdio, and its absence when no transport can hold the stream."""

from __future__ import annotations

import json
from functools import partial

import trio
import trio.testing

from mrtr import Server
from mrtr.transports.stdio import serve_stdio

from .conftest import meta
from .wire_schema import validate_message

META = meta()
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


def build() -> Server:
    server = Server("listen", "1", secret=b"s" * 32)

    @server.prompt
    def greet(who: str):
        return f"hello {who}"

    return server


class Lines:
    def __init__(self, stream) -> None:
        self.stream = stream
        self.buffer = b""

    async def next(self) -> dict:
        with trio.fail_after(5):
            while b"\n" not in self.buffer:
                chunk = await self.stream.receive_some()
                assert chunk, "stdout closed"
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


async def test_stdio_listen_then_cancel_and_a_second_stream_ending_at_eof():
    server = build()
    to_server, server_stdin = trio.testing.memory_stream_one_way_pair()
    server_stdout, from_server = trio.testing.memory_stream_one_way_pair()
    lines = Lines(from_server)

    async def send(message):
        await to_server.send_all(json.dumps(message).encode() + b"\n")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(serve_stdio, server, stdin=server_stdin, stdout=server_stdout))
        await send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}})
        discover = await lines.next()
        validate_message(discover, result_def="DiscoverResult")
        assert discover["result"]["capabilities"]["prompts"] == {"listChanged": True}

        for request_id in (7, 8):
            await send({"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen",
                        "params": {"_meta": META, "notifications": {"promptsListChanged": True, "toolsListChanged": True}}})
            ack = await lines.next()
            validate_message(ack)
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"] == {"notifications": {"promptsListChanged": True}, "_meta": {SUBSCRIPTION_ID: request_id}}

        server.notify_tools_changed()  # asked for, but the server has no tools: never agreed, never sent
        server.notify_prompts_changed()
        seen = sorted([(await lines.next()), (await lines.next())], key=lambda m: m["params"]["_meta"][SUBSCRIPTION_ID])
        for message, request_id in zip(seen, (7, 8)):
            validate_message(message)
            assert message["method"] == "notifications/prompts/list_changed"
            assert message["params"]["_meta"] == {SUBSCRIPTION_ID: request_id}

        # The client ends one stream with notifications/cancelled: nothing more is sent for it.
        await send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
        (hub,) = server._subscriptions._hubs
        with trio.fail_after(5):
            while True:  # the cancelled stream's listener is gone once the next publish finds it closed
                server.notify_prompts_changed()
                if len(hub._listeners) == 1:
                    break
                await trio.sleep(0.01)
        await to_server.aclose()  # EOF: the other stream ends with its result
        final = await lines.next()
        while "id" not in final:  # what the remaining stream received meanwhile: nothing for 7
            assert final["params"]["_meta"] == {SUBSCRIPTION_ID: 8}
            final = await lines.next()
        validate_message(final, result_def="SubscriptionsListenResult")
        assert final["id"] == 8 and final["result"]["_meta"][SUBSCRIPTION_ID] == 8
    assert lines.buffer == b""


async def test_without_a_transport_listen_is_not_offered_nor_advertised():
    server = build()
    response = await server.handle({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                                    "params": {"_meta": META, "notifications": {"promptsListChanged": True}}})
    assert response["error"]["code"] == -32601
    assert server.capabilities()["prompts"] == {}
    server.notify_prompts_changed()  # nobody listening: a no-op, not an error
