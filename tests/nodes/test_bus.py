"""Notifications between nodes: two servers on one real redis-server, each a "node" served over stdio.

Each node is a real server behind the real stdio transport and its hub, in this process,
with its own Redis connections; what one publishes must reach the listen streams of the
other through Redis, and its own, exactly once and in order. Every message is checked
against the core or the tasks schema (the stdio peer of the tasks tests does it).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mrtr.server.subscriptions import NOTIFICATIONS_UNAVAILABLE
from mrtr.transports.stdio import serve_stdio

from ..conftest import until
from ..tasks.redis_server import free_port, redis_cli, redis_server
from ..tasks.test_notifications import Peer, meta, task_note
from .app import build

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


class Node(Peer):
    """The client's end of one node's stdio streams, and the node's server."""

    server: Any

    def notes(self, method: str) -> list[dict[str, Any]]:
        """The notifications of ``method`` read so far, in order."""
        return [message for message in self.seen if message.get("method") == method]

    async def keep_until(self, wanted: Callable[[dict[str, Any]], bool]) -> None:
        """Read new messages until one satisfies ``wanted``, keeping it (and all before it) in ``seen``."""
        kept, self.seen = self.seen, []
        try:
            found = await self.read_until(wanted)
        finally:
            self.seen = kept + self.seen
        self.seen.append(found)

    async def listen(self, request_id: int, notifications: dict[str, Any]) -> dict[str, Any]:
        """Open a listen stream; its acknowledgement."""
        await self.send(request_id, "subscriptions/listen", {"_meta": meta(), "notifications": notifications})
        return await self.read_until(lambda message: message.get("method") == "notifications/subscriptions/acknowledged"
                                     and message["params"]["_meta"][SUBSCRIPTION_ID] == request_id)

    async def call(self, request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request and its response message."""
        await self.send(request_id, method, {**params, "_meta": meta()})
        return await self.reply(request_id)


@asynccontextmanager
async def _served(server: Any) -> AsyncIterator[Node]:
    """``server`` over in-memory stdio streams, and the client's end of them."""
    to_server, server_stdin = trio.testing.memory_stream_one_way_pair()
    server_stdout, from_server = trio.testing.memory_stream_one_way_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(serve_stdio, server, stdin=server_stdin, stdout=server_stdout))
        peer = Node(to_server, from_server)
        peer.server = server
        yield peer
        await to_server.aclose()  # at EOF the node stops serving


def node(url: str) -> Any:
    """The nodes test app on the store ``url``, served over stdio in this process."""
    return _served(build(url))


def is_tools_changed(message: dict[str, Any]) -> bool:
    return message.get("method") == "notifications/tools/list_changed"


async def test_a_list_change_on_one_node_reaches_the_listeners_of_every_node_once(redis_url: str):
    async with node(redis_url) as one, node(redis_url) as two:
        await one.listen(1, {"toolsListChanged": True})
        await two.listen(1, {"toolsListChanged": True})
        assert (await two.call(2, "tools/call", {"name": "change_tools", "arguments": {}}))["result"]["content"]
        for peer in (one, two):
            changed = await peer.read_until(is_tools_changed)
            assert changed["params"] == {"_meta": {SUBSCRIPTION_ID: 1}}
        # A second change, from the other node: once it arrived, a copy of the first would have too.
        one.server.notify_tools_changed()
        for peer in (one, two):
            await peer.keep_until(is_tools_changed)
            assert len(peer.notes("notifications/tools/list_changed")) == 1


async def test_a_resource_update_reaches_only_the_listeners_subscribed_to_it_on_any_node(redis_url: str):
    async with node(redis_url) as one, node(redis_url) as two:
        await one.listen(1, {"resourceSubscriptions": ["node://pid"]})
        await two.listen(1, {"toolsListChanged": True})
        await two.call(2, "tools/call", {"name": "touch", "arguments": {"uri": "node://other"}})
        await two.call(3, "tools/call", {"name": "touch", "arguments": {"uri": "node://pid"}})
        updated = await one.read_until(lambda m: m.get("method") == "notifications/resources/updated")
        assert updated["params"] == {"uri": "node://pid", "_meta": {SUBSCRIPTION_ID: 1}}
        two.server.notify_tools_changed()
        await two.keep_until(is_tools_changed)  # published after both updates: they would be here by now
        assert not two.notes("notifications/resources/updated")
        assert not one.notes("notifications/resources/updated")  # the update of node://other was not for it


async def test_a_task_run_on_one_node_is_heard_on_both_in_the_same_order_once_each(redis_url: str, tmp_path: Path):
    gate = tmp_path / "gate"
    async with node(redis_url) as here, node(redis_url) as there:
        created = (await there.call(1, "tools/call", {"name": "counted", "arguments": {"steps": 6,
                                                                                      "gate": str(gate)}}))
        task_id = created["result"]["taskId"]
        for peer in (here, there):
            ack = await peer.listen(7, {"taskIds": [task_id, "not-a-task"]})
            assert ack["params"]["notifications"] == {"taskIds": [task_id]}
        gate.touch()  # the run on ``there`` goes on; every status it writes must reach both listeners
        for peer in (here, there):
            await peer.keep_until(task_note(task_id, "completed"))
        heard = {name: [(m["params"]["status"], m["params"].get("statusMessage"))
                        for m in peer.notes("notifications/tasks")] for name, peer in (("here", here), ("there", there))}
        assert heard["here"] == heard["there"], heard  # the writer hears its own changes once, by the same path
        progress = [message for status, message in heard["here"] if status == "working"]
        assert progress and [int(text.split("/")[0]) for text in progress] == sorted(
            {int(text.split("/")[0]) for text in progress}), heard  # strictly forward: in order, nothing twice
        assert heard["here"][-1] == ("completed", "6/6"), heard
        done = here.notes("notifications/tasks")[-1]
        assert done["params"]["result"]["content"][0]["text"] == "counted 6"
        assert done["params"]["_meta"] == {SUBSCRIPTION_ID: 7}


async def test_an_update_answered_on_one_node_resumes_a_task_heard_on_the_other(redis_url: str):
    from ..tasks.app import build as tasks_app

    # The tasks app's onboard asks a name on the call, then works, then asks a city in the task.
    async with _served(tasks_app(redis_url)) as here, _served(tasks_app(redis_url)) as there:
        call = {"name": "onboard", "arguments": {"plan": "pro"}}
        asked = (await there.call(1, "tools/call", call))["result"]
        (key,) = asked["inputRequests"]
        created = await there.call(2, "tools/call", {**call, "requestState": asked["requestState"],
                                                     "inputResponses": {key: {"action": "accept",
                                                                              "content": {"name": "Ada"}}}})
        task_id = created["result"]["taskId"]
        task = await until(lambda: here.call(3, "tasks/get", {"taskId": task_id}),
                           lambda reply: reply["result"]["status"] == "input_required")
        for peer in (here, there):
            await peer.listen(9, {"taskIds": [task_id]})
        (city,) = task["result"]["inputRequests"]
        await here.call(4, "tasks/update", {"taskId": task_id,  # answered on the node that did not run it
                                            "inputResponses": {city: {"action": "accept", "content": {"city": "Oslo"}}}})
        for peer in (here, there):
            await peer.keep_until(task_note(task_id, "completed"))
            assert [m["params"]["status"] for m in peer.notes("notifications/tasks")] == ["working", "completed"]
            done = peer.notes("notifications/tasks")[-1]
            assert done["params"]["result"]["content"][0]["text"] == "Ada (T-pro) from Oslo"


async def test_listen_streams_end_when_redis_goes_and_work_again_when_it_is_back(tmp_path: Path,
                                                                               caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, "mrtr.tasks")
    port, workdir = free_port(), tmp_path / "redis"
    workdir.mkdir()
    with redis_server(port, str(workdir), persist=True) as (url, process):
        async with node(url) as one, node(url) as two:
            await one.listen(1, {"toolsListChanged": True})
            await two.listen(1, {"toolsListChanged": True})
            process.terminate()
            process.wait()
            for peer in (one, two):  # the streams end with their normal result: clients listen again and re-read
                closing = await peer.reply(1)
                assert closing["result"]["resultType"] == "complete"
                assert closing["result"]["_meta"][SUBSCRIPTION_ID] == 1
            refused = await one.call(2, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
            assert refused["error"] == {"code": -32603, "message": NOTIFICATIONS_UNAVAILABLE}
            two.server.notify_tools_changed()  # it waits for Redis, and goes out once Redis is back
            assert two.server._subscriptions.bus.backlog == 1
            with redis_server(port, str(workdir), persist=True):
                request_ids = iter(range(100, 10_000))

                async def listening() -> bool:
                    request_id = next(request_ids)
                    await one.send(request_id, "subscriptions/listen",
                                   {"_meta": meta(), "notifications": {"toolsListChanged": True}})
                    reply = await one.read_until(lambda m: m.get("id") == request_id or (
                        m.get("method") == "notifications/subscriptions/acknowledged"
                        and m["params"]["_meta"][SUBSCRIPTION_ID] == request_id))
                    return "error" not in reply

                await until(listening, timeout=20, every=0.05)  # by itself, with no restart
                await until(lambda: two.server._subscriptions.bus.backlog == 0)  # published once Redis was back
                two.server.notify_tools_changed()
                await one.read_until(is_tools_changed)
    said = caplog.text
    assert "lost the subscription" in said and "again" in said, said


async def test_what_is_no_envelope_on_the_channel_is_dropped(redis_url: str):
    async with node(redis_url) as one:
        await one.listen(1, {"toolsListChanged": True})
        for junk in ("not json", '{"v": 1}', '{"v": 2, "kind": "notification", "body": ["x", {}]}',
                     '{"v": 1, "kind": "notification", "body": 5}', '{"v": 1, "kind": "later", "body": null}',
                     '{"v": 1, "kind": "notification", "body": ["notifications/tools/list_changed"]}'):
            redis_cli(redis_url, "PUBLISH", "mrtr:notifications", junk)
        one.server.notify_tools_changed()
        await one.keep_until(is_tools_changed)
        assert [m.get("method") for m in one.seen if "method" in m] == ["notifications/tools/list_changed"]


async def test_two_servers_with_their_own_prefix_share_one_redis_without_hearing_each_other(redis_url: str,
                                                                                           tmp_path: Path):
    async with node(redis_url + "?prefix=first:") as first, node(redis_url + "?prefix=second:") as second:
        await first.listen(1, {"toolsListChanged": True})
        await second.listen(1, {"toolsListChanged": True})
        created = await second.call(2, "tools/call", {"name": "counted", "arguments": {"steps": 1,
                                                                                      "gate": str(tmp_path / "g")}})
        task_id = created["result"]["taskId"]
        assert (await first.call(3, "tasks/get", {"taskId": task_id}))["error"] == {"code": -32602,
                                                                                     "message": "Unknown task"}
        assert redis_cli(redis_url, "EXISTS", f"second:task:{task_id}") == "1"
        second.server.notify_tools_changed()
        first.server.notify_tools_changed()
        for peer in (first, second):
            await peer.keep_until(is_tools_changed)
        second.server.notify_tools_changed()
        await second.keep_until(is_tools_changed)  # after both: first's change would be here if it leaked
        assert len(second.notes("notifications/tools/list_changed")) == 2
        (tmp_path / "g").touch()


@pytest.mark.parametrize("shape", ["memory", "sqlite"])
async def test_without_redis_notifications_stay_in_the_process(shape: str, tmp_path: Path):
    url = "memory:" if shape == "memory" else f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    async with node(url) as one:
        await one.listen(1, {"toolsListChanged": True})
        assert one.server._subscriptions.bus is None
        one.server.notify_tools_changed()
        await one.read_until(is_tools_changed)
