"""The client side of the tasks extension, against mrtr's own task tools (``tests/client/tasks_app.py``).

In process and over real loopback HTTP, every message checked against the 2026-07-28
schema and the tasks extension's: a task tool's call returns its result as any call
does, its questions are answered through ``tasks/update``, its status reaches
``on_progress``, a handle outlives the client that made it, and a cancelled call
cancels its task.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

import mrtr
from mrtr.client import ElicitationRequest
from mrtr.client.tasks import TaskCancelled, TaskStatus, progress_of
from mrtr.transports.http.native import serve

from ..conftest import until
from .conftest import Checked
from .tasks_app import build


def answer(request: ElicitationRequest) -> dict[str, Any]:
    if "format" in request.requested_schema["properties"]:
        return mrtr.accept(format="json")
    return mrtr.accept(ok=True)


@pytest.fixture(params=["inprocess", "http"])
async def reach(request: Any, nursery: trio.Nursery) -> Any:
    server = build("memory:")
    url = None
    if request.param == "http":
        port = await nursery.start(partial(serve, server, "127.0.0.1", 0))
        url = f"http://127.0.0.1:{port}/mcp"

    def make(**options: Any) -> mrtr.Client:
        client = mrtr.Client(url if url is not None else server, **options)
        client.target = Checked(client.target)
        return client

    return make


async def test_a_task_tools_call_returns_the_tasks_result(reach):
    progress: list[tuple[Any, ...]] = []
    async with reach(on_elicit=answer, on_progress=lambda *update: progress.append(update)) as client:
        result = await client.call_tool("export", {"dataset": "owls"})
    assert result.text == "wrote 40 rows of owls as json" and not result.is_error
    methods = [message["method"] for message, _ in client.target.exchanges
               if message["method"] not in ("tools/list", "server/discover")]
    assert methods[:2] == ["tools/call", "tools/call"]  # the MRTR round before the task exists
    assert "tasks/update" in methods and methods[-1] == "tasks/get"
    created = client.target.calls()[-1][1]
    assert created["resultType"] == "task" and "requestState" not in created
    updates = [message["params"] for message, _ in client.target.exchanges if message["method"] == "tasks/update"]
    assert len(updates) == 1 and list(updates[0]["inputResponses"].values()) == [{"action": "accept",
                                                                                   "content": {"ok": True}}]
    assert (1.0, 2.0, "counted") in progress and progress[-1] == (2.0, 2.0, "written")


async def test_a_handle_outlives_its_client_and_is_picked_up_by_id(reach):
    first = reach(on_elicit=lambda request: mrtr.accept(format="csv"))
    async with first:
        handle = await first.start_task("export", {"dataset": "bats"})
        assert handle.id is not None
        status = await until(handle.get, lambda status: status.status == "input_required")
        assert list(status.input_requests.values())[0]["params"]["message"] == "Write 40 rows as csv?"
        # Another client, knowing only the id (in process both share the server's running store).
        async with reach(on_elicit=lambda request: mrtr.accept(ok=False)) as second:
            again = second.task(handle.id)
            assert (await again.get()).status == "input_required"
            assert (await again.wait()).text == "not written"
            assert (await again.get()).done


async def test_update_by_hand(reach):
    async with reach(on_elicit=lambda request: mrtr.accept(format="csv")) as client:
        handle = await client.start_task("export", {"dataset": "ant"})
        status = await until(handle.get, lambda status: status.status == "input_required")
        (key,) = status.input_requests
        await handle.update({key: mrtr.accept(ok=True)})
        final = await until(handle.get, lambda status: status.done)
    assert final.status == "completed" and final.result["content"][0]["text"] == "wrote 30 rows of ant as csv"


async def test_cancelling_the_call_cancels_the_task(reach, tmp_path: Path):
    gate = tmp_path / "gate"
    async with reach() as client:
        seen: list[str] = []

        async def call() -> None:
            with trio.CancelScope() as scope:
                cancel_scopes.append(scope)
                await client.call_tool("slow", {"path": str(gate)})

        cancel_scopes: list[trio.CancelScope] = []
        original = client.start_task

        async def start(*args: Any, **kwargs: Any) -> Any:
            handle = await original(*args, **kwargs)
            seen.append(handle.id)
            return handle

        client.start_task = start  # type: ignore[method-assign]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await until(lambda: Path(str(gate) + ".started").exists())
            cancel_scopes[0].cancel()
        status = await client.task(seen[0]).get()
        assert status.status == "cancelled"
        with pytest.raises(TaskCancelled):
            await client.task(seen[0]).wait()
    assert [message["method"] for message, _ in client.target.exchanges].count("tasks/cancel") == 1


async def test_a_client_without_the_extension_gets_results_on_the_call(reach):
    async with reach(on_elicit=answer, tasks=False) as client:
        result = await client.call_tool("export", {"dataset": "owls"})
        assert result.text == "wrote 40 rows of owls as json"
        with pytest.raises(mrtr.ClientError) as caught:
            await client.call_tool("slow", {"path": "/nonexistent"})
        assert caught.value.code == -32021
        sent = client.target.sent()[0]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        assert "extensions" not in sent
        assert all(message["method"] != "tasks/get" for message, _ in client.target.exchanges)


async def test_a_call_that_makes_no_task_gives_a_finished_handle(reach):
    async with reach() as client:
        handle = await client.start_task("plain", {"x": 21})
        assert handle.id is None and (await handle.wait()).structured == {"result": 42} or \
            (await handle.wait()).text == "42"
        with pytest.raises(RuntimeError):
            await handle.get()


def test_status_messages_become_progress():
    assert progress_of("3/10: copying") == (3.0, 10.0, "copying")
    assert progress_of("3") == (3.0, None, None)
    assert progress_of("1.5/2") == (1.5, 2.0, None)
    assert progress_of("halfway there") == (0, None, "halfway there")


def test_a_task_is_checked_and_its_poll_interval_bounded():
    base = {"taskId": "t", "status": "working", "createdAt": "x", "lastUpdatedAt": "x", "ttlMs": None}
    assert TaskStatus.of({**base, "pollIntervalMs": 0}).poll_interval == 0.1
    assert TaskStatus.of({**base, "pollIntervalMs": 10**9}).poll_interval == 30.0
    assert TaskStatus.of(base).poll_interval == 1.0
    for bad in ({**base, "status": "sleeping"}, {**base, "status": "completed"}, {**base, "status": "failed"},
                {key: value for key, value in base.items() if key != "taskId"}, {**base, "inputRequests": []}):
        with pytest.raises(mrtr.ClientError):
            TaskStatus.of(bad)
