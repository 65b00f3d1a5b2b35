"""``Client.subscribe``: a resource's updates reach ``on_resource_updated``, in both eras.

In the modern era a ``subscriptions/listen`` stream naming the resources (opened again as
the set changes), in a 2025 session ``resources/subscribe`` and the session's stream.
In process and over loopback HTTP here; over stdio in the slow tier. Every message is
checked against the schema of its era (:class:`tests.client.conftest.Checked`), the
session's own notifications included.
"""

from __future__ import annotations

import subprocess
from functools import partial
from typing import Any

import pytest
import trio

import mrtr
from mrtr import Server
from mrtr.transports.http.native import serve

from ..conftest import until
from .conftest import REPO, Checked
from .watched_app import server as watched_server

_WAYS = [("inprocess", "modern"), ("http", "modern"), ("http", "legacy"),
         pytest.param("stdio", "modern", marks=pytest.mark.slow), pytest.param("stdio", "legacy", marks=pytest.mark.slow)]


@pytest.fixture
async def connect(nursery: trio.Nursery) -> Any:
    async def make(kind: str, era: str, server: Server = watched_server, **options: Any) -> mrtr.Client:
        if kind == "inprocess":
            client = mrtr.Client(server, **options)
        elif kind == "http":
            port = await nursery.start(partial(serve, server, "127.0.0.1", 0))
            client = mrtr.Client(f"http://127.0.0.1:{port}/mcp", era=era, **options)
        else:
            command = ["python", "-m", "mrtr", "serve", "tests.client.watched_app:server", "--stdio",
                       "--log-level", "warning"]
            import sys

            command[0] = sys.executable
            client = mrtr.Client.stdio(command, cwd=str(REPO), stderr=subprocess.DEVNULL, era=era, **options)
        client.target = Checked(client.target)
        return client

    return make


@pytest.mark.parametrize("kind, era", _WAYS)
async def test_an_update_reaches_the_callback_and_stops_after_unsubscribe(connect, kind, era):
    updated: list[str] = []
    client = await connect(kind, era, on_resource_updated=updated.append)
    async with client:
        await client.subscribe("notes://a")
        await client.subscribe("notes://b")
        await client.subscribe("notes://a")  # twice is once
        assert client.subscribed == ["notes://a", "notes://b"]
        await client.call_tool("touch", {"uri": "notes://a", "text": "new a"})
        await until(lambda: "notes://a" in updated)
        assert (await client.read_resource("notes://a")).text == "new a"
        await client.unsubscribe("notes://a")
        await client.call_tool("touch", {"uri": "notes://a"})  # no longer heard
        await client.call_tool("touch", {"uri": "notes://b"})  # heard, after the one above was sent
        await until(lambda: "notes://b" in updated)
    assert updated.count("notes://a") == 1


async def test_a_modern_stream_the_server_ends_is_opened_again_and_reports_each_resource(connect):
    updated: list[str] = []
    client = await connect("http", "modern", on_resource_updated=updated.append)
    async with client:
        await client.subscribe("notes://b")
        watched_server._subscriptions.interrupt()  # every listen stream ends, as when notifications were lost
        await until(lambda: updated == ["notes://b"])  # may have changed meanwhile: reported
        await client.call_tool("touch", {"uri": "notes://b"})
        await until(lambda: updated == ["notes://b", "notes://b"])  # the new stream carries updates


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_server_that_will_not_send_updates_is_a_clear_error(connect, era):
    plain = Server("plain", secret=b"x" * 32)

    @plain.tool
    def hello() -> str:
        """No resources at all."""
        return "hi"

    client = await connect("http", era, server=plain, on_resource_updated=lambda uri: None)
    async with client:
        with pytest.raises(mrtr.ClientError) as refused:
            await client.subscribe("notes://a")
        assert client.subscribed == []
    if era == "modern":
        assert refused.value.code == -32602 and refused.value.data == {"uris": ["notes://a"]}
    else:
        assert refused.value.code == -32601


async def test_a_client_closing_while_its_stream_waits_to_reopen_does_not_send_on_its_closed_target(connect):
    # The stream the server ended waits a second before it is opened again; a target whose
    # closing takes longer than that (an HTTP session's DELETE, a child process's exit) used
    # to be sent the new listen request once closed: RuntimeError out of the client's block.
    client = await connect("http", "modern", on_resource_updated=lambda uri: None)
    target = client.target.inner  # inside the schema check
    closing = target.aclose
    closed = trio.Event()

    async def slow_aclose() -> None:
        await closing()
        closed.set()
        await trio.sleep(1.5)  # past the second the ended stream waits

    target.aclose = slow_aclose
    async with client:
        await client.subscribe("notes://b")
        watched_server._subscriptions.interrupt()
        await trio.sleep(0.1)  # the stream has ended and waits to open again
    assert closed.is_set()
