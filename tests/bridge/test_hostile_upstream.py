"""An upstream that answers garbage or goes silent: the downstream gets a clear error of its era, never a hang.

The upstream is a hostile HTTP server written byte by byte (``tests.client.hostile``) on
loopback: it lists one tool properly, then answers its calls with what cannot be used.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import mrtr

from ..client import hostile
from ..client.conftest import Checked

TOOL = {"name": "echo", "inputSchema": {"type": "object"}}


async def _proxied(nursery: trio.Nursery, call_replies: list[dict[str, Any]], **options: Any) -> str:
    from functools import partial

    from mrtr.transports.http.native import serve

    upstream = await hostile.serve_http(nursery, hostile.scripted({
        "tools/list": [{"result": hostile.listing("tools", [TOOL])}], "tools/call": call_replies}))
    proxied = mrtr.proxy(upstream, secret=b"p" * 32, upstream_era="modern", connect_timeout=5, **options)
    port = await nursery.start(partial(serve, proxied, "127.0.0.1", 0))
    return f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize("era", ["modern", "legacy"])
@pytest.mark.parametrize("reply, said", [
    ({"raw": "this is not JSON"}, "cannot be used"),
    ({"result": {"resultType": "input_required", "inputRequests": "nonsense"}}, "cannot be used"),
    ({"result": {"resultType": "input_required", "inputRequests": {"q": {"method": "elicitation/create",
                                                                          "params": {"message": 7}}}}},
     "cannot pass on"),
])
async def test_garbage_from_the_upstream_is_a_clear_error(nursery, era, reply, said):
    url = await _proxied(nursery, [reply])
    client = mrtr.Client(url, era=era, on_elicit=lambda request: mrtr.accept())
    client.target = Checked(client.target)
    async with client:
        with trio.fail_after(10), pytest.raises(mrtr.ClientError) as error:
            await client.call_tool("echo", {})
    assert error.value.code == -32603
    assert said in error.value.message


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_silent_upstream_times_out_with_a_clear_error(nursery, era):
    async def silent(message: dict[str, Any], stream: trio.SocketStream) -> None:
        if message["method"] == "tools/call":
            await trio.sleep_forever()
        await hostile.scripted({"tools/list": [{"result": hostile.listing("tools", [TOOL])}]})(message, stream)

    from functools import partial

    from mrtr.transports.http.native import serve

    upstream = await hostile.serve_http(nursery, silent)
    proxied = mrtr.proxy(upstream, secret=b"p" * 32, upstream_era="modern", upstream_timeout=0.5)
    port = await nursery.start(partial(serve, proxied, "127.0.0.1", 0))
    async with mrtr.Client(f"http://127.0.0.1:{port}/mcp", era=era) as client:
        with trio.fail_after(10), pytest.raises(mrtr.ClientError) as error:
            await client.call_tool("echo", {})
    assert error.value.code == -32603
    assert error.value.data == {"reason": "upstream-unavailable"}
