"""Hostile HTTP input the native server must survive: regressions, each with the request that broke it."""

from __future__ import annotations

import json

import pytest
import trio

from .conftest import raw_post, rpc
from .test_native import RawClient, start


@pytest.mark.parametrize("split", [False, True])
async def test_a_post_with_an_ignored_h2c_upgrade_keeps_its_body(split: bool) -> None:
    """`curl --http2 http://...` sends `Connection: Upgrade, HTTP2-Settings` and `Upgrade: h2c` with its
    POST. A server that does not upgrade must ignore the offer (RFC 9110 section 7.8) and answer the
    request; observed: 400 with -32700 "Invalid JSON" for a valid body."""
    async with trio.open_nursery() as nursery:
        port, shutdown = await start(nursery)
        message = rpc("tools/call", {"name": "ask_name", "arguments": {}})
        client = await RawClient.connect(port)
        data = raw_post(message, port, {"Connection": "Upgrade, HTTP2-Settings", "Upgrade": "h2c",
                                        "HTTP2-Settings": "AAMAAABkAAQCAAAAAAIAAAAA"})
        if split:  # the body in later reads than the head
            head_end = data.index(b"\r\n\r\n") + 4
            await client.send(data[:head_end + 3])
            await trio.sleep(0.05)  # lets the server read the head on its own, not a condition stand-in
            data = data[head_end + 3:]
        await client.send(data)
        with trio.fail_after(10):
            head, body = await client.response()
        await client.stream.aclose()
        shutdown.set()
    assert head.status_code == 200, body
    assert json.loads(body)["result"]["resultType"] == "input_required"
