"""notifications/tasks: a listen stream that names task ids hears their status changes.

Served over stdio (in-memory streams) with the memory store: the real transport, the real
carrier, the real hub. Every message is checked against the core or the tasks schema.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio
import trio.testing

from mrtr.transports.stdio import serve_stdio

from ..conftest import meta as base_meta
from ..wire_schema import validate_message
from .app import build
from .tasks_schema import validate_task

TASKS = "io.modelcontextprotocol/tasks"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


def meta(extension: bool = True) -> dict[str, Any]:
    capabilities: dict[str, Any] = {"elicitation": {"form": {}}}
    if extension:
        capabilities["extensions"] = {TASKS: {}}
    return base_meta(capabilities)


class Peer:
    """The client's side of the stdio streams: send requests, read every line the server writes."""

    def __init__(self, send_stream: Any, receive_stream: Any) -> None:
        self.send_stream = send_stream
        self.receive_stream = receive_stream
        self.buffer = b""
        self.seen: list[dict[str, Any]] = []

    async def send(self, request_id: int | None, method: str, params: dict[str, Any]) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if request_id is not None:
            message["id"] = request_id
        await self.send_stream.send_all(json.dumps(message).encode() + b"\n")

    async def read_until(self, wanted: Any) -> dict[str, Any]:
        """Read lines until one satisfies ``wanted``; every line read is kept in ``seen``."""
        for message in self.seen:
            if wanted(message):
                self.seen.remove(message)
                return message
        with trio.fail_after(10):
            while True:
                while b"\n" not in self.buffer:
                    chunk = await self.receive_stream.receive_some()
                    assert chunk, "stdout closed"
                    self.buffer += chunk
                line, self.buffer = self.buffer.split(b"\n", 1)
                message = json.loads(line)
                if message.get("method") == "notifications/tasks":
                    validate_task("TaskStatusNotification", message)
                else:
                    validate_message(message)
                if wanted(message):
                    return message
                self.seen.append(message)

    async def reply(self, request_id: int) -> dict[str, Any]:
        return await self.read_until(lambda message: message.get("id") == request_id and "method" not in message)


def task_note(task_id: str, status: str) -> Any:
    return lambda message: (message.get("method") == "notifications/tasks"
                            and message["params"]["taskId"] == task_id and message["params"]["status"] == status)


@asynccontextmanager
async def serving() -> AsyncIterator[Peer]:
    """The tasks test app over in-memory stdio streams with a memory store, and the client's end of them."""
    server = build("memory:")
    to_server, server_stdin = trio.testing.memory_stream_one_way_pair()
    server_stdout, from_server = trio.testing.memory_stream_one_way_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(serve_stdio, server, stdin=server_stdin, stdout=server_stdout))
        yield Peer(to_server, from_server)


async def test_a_listen_stream_hears_the_status_changes_of_the_tasks_it_names():
    async with serving() as peer:
        call = {"name": "onboard", "arguments": {"plan": "pro"}, "_meta": meta()}
        await peer.send(1, "tools/call", call)
        asked = (await peer.reply(1))["result"]
        (key,) = asked["inputRequests"]
        await peer.send(2, "tools/call", {**call, "requestState": asked["requestState"],
                                          "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}}})
        created = (await peer.reply(2))["result"]
        assert created["resultType"] == "task"
        task_id = validate_task("CreateTaskResult", created)["taskId"]

        await peer.send(3, "subscriptions/listen", {"_meta": meta(), "notifications": {"taskIds": [task_id, "nope"]}})
        ack = await peer.read_until(lambda message: message.get("method") == "notifications/subscriptions/acknowledged")
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}  # an unknown id is not echoed

        # The task may have reached its question before the stream opened; tasks/get says where it is.
        while True:
            await peer.send(4, "tasks/get", {"taskId": task_id, "_meta": meta()})
            task = (await peer.reply(4))["result"]
            if task["status"] == "input_required":
                break
            await peer.read_until(task_note(task_id, "input_required"))
        (city,) = task["inputRequests"]
        await peer.send(5, "tasks/update", {"taskId": task_id, "_meta": meta(),
                                            "inputResponses": {city: {"action": "accept", "content": {"city": "Oslo"}}}})
        await peer.reply(5)
        done = await peer.read_until(task_note(task_id, "completed"))
        assert done["params"]["result"]["content"][0]["text"] == "Ada (T-pro) from Oslo"
        assert done["params"]["_meta"] == {SUBSCRIPTION_ID: 3}
        assert "requestState" not in json.dumps(done)
        assert not [message for message in peer.seen if message.get("method") == "notifications/tasks"
                    and message["params"]["taskId"] != task_id]
        await peer.send_stream.aclose()  # at EOF the listen stream ends with its result
        closing = await peer.reply(3)
        assert closing["result"]["_meta"][SUBSCRIPTION_ID] == 3


async def test_task_notifications_need_the_extension():
    async with serving() as peer:
        await peer.send(1, "subscriptions/listen", {"_meta": meta(extension=False),
                                                    "notifications": {"taskIds": ["whatever"]}})
        error = (await peer.reply(1))["error"]
        assert error["code"] == -32021
        assert error["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}
        await peer.send(2, "subscriptions/listen", {"_meta": meta(), "notifications": {"taskIds": "nope"}})
        assert (await peer.reply(2))["error"]["code"] == -32602
        await peer.send_stream.aclose()


async def test_the_status_observer_forgets_tasks_that_expired_while_waiting():
    """One entry per task waiting for input was kept forever once the task expired (about 110 B each)."""
    from mrtr.carriers.tasks.memory import MemoryStore
    from mrtr.carriers.tasks.store import Observed

    from .test_carrier import ALICE, node, start, status, task_until, two_questions

    reported: list[tuple[str, str]] = []
    observed = Observed(MemoryStore(), lambda record: reported.append((record.task_id, record.status)))
    async with node(observed, {"ask": two_questions}, ttl_ms=1500) as carrier:  # type: ignore[arg-type]
        waiting = [await start(carrier, "ask") for _ in range(20)]
        for task_id in waiting:
            await task_until(carrier, task_id, status("input_required"))
        assert observed.tracked == 20
        with trio.fail_after(10):
            while observed.tracked > 1:  # they expire; the writes of a newer task let the observer notice
                fresh = await start(carrier, "ask")
                await task_until(carrier, fresh, status("input_required"))
                await carrier.cancel(fresh, ALICE)
                await trio.sleep(0.05)
        assert all((task_id, "input_required") in reported for task_id in waiting)


async def test_the_status_observer_keeps_a_bounded_number_of_tasks():
    from mrtr.carriers.tasks.memory import MemoryStore
    from mrtr.carriers.tasks.store import Observed

    from .test_carrier import node, start, status, task_until, two_questions

    reported: list[tuple[str, str]] = []
    observed = Observed(MemoryStore(), lambda record: reported.append((record.task_id, record.status)), limit=5)
    async with node(observed, {"ask": two_questions}) as carrier:  # type: ignore[arg-type]
        waiting = [await start(carrier, "ask") for _ in range(12)]
        for task_id in waiting:
            await task_until(carrier, task_id, status("input_required"))
        assert observed.tracked == 5
        assert all((task_id, "input_required") in reported for task_id in waiting)  # every change still reported


async def test_a_listen_stream_names_at_most_max_listen_task_ids():
    from mrtr.server.dispatch import MAX_LISTEN_TASK_IDS

    async with serving() as peer:
        # 150,000 ids fit in one 4 MiB line; looking each up cost the node seconds of work.
        for request_id, count in ((1, MAX_LISTEN_TASK_IDS + 1), (2, 150_000)):
            await peer.send(request_id, "subscriptions/listen",
                            {"_meta": meta(), "notifications": {"taskIds": [f"t{i}" for i in range(count)]}})
            with trio.fail_after(2):
                error = (await peer.reply(request_id))["error"]
            assert error["code"] == -32602
            assert f"at most {MAX_LISTEN_TASK_IDS} task ids" in error["message"]
        await peer.send(3, "subscriptions/listen",
                        {"_meta": meta(), "notifications": {"taskIds": [f"t{i}" for i in range(MAX_LISTEN_TASK_IDS)]}})
        ack = await peer.read_until(lambda message: message.get("method") == "notifications/subscriptions/acknowledged")
        assert ack["params"]["notifications"] == {"taskIds": []}  # at the cap it is served (none of them exists)
        await peer.send_stream.aclose()
