"""``on_list_changed``: a modern server's list changes (through ``subscriptions/listen``) reach the callback.

In process and over loopback HTTP; a legacy server's, sent on its session's stream, reach
the same callback (``tests/interop/test_sdk1_interop.py`` covers the 2025 era's other
notifications).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import trio

import mrtr
from mrtr import Server
from mrtr.transports.http.native import serve

from ..conftest import until


def build() -> Server:
    server = Server("changing", "1.0.0", secret=b"l" * 32)

    @server.tool
    def grow() -> str:
        """Announce that the tools changed."""
        server.notify_tools_changed()
        return "grown"

    return server


@pytest.fixture(params=["inprocess", "http"])
async def target(request: Any, nursery: trio.Nursery) -> Any:
    server = build()
    if request.param == "inprocess":
        return server
    port = await nursery.start(partial(serve, server, "127.0.0.1", 0))
    return f"http://127.0.0.1:{port}/mcp"


async def test_list_changes_reach_the_callback(target):
    changed: list[str] = []
    async with mrtr.Client(target, on_list_changed=changed.append) as client:
        await until(lambda: client.listening)  # the server acknowledged the stream
        await client.call_tool("grow")
        await until(lambda: changed)
    assert changed[0] == "tools"
