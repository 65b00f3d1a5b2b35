"""Tasks end to end over real loopback HTTP, raw JSON-RPC, every message schema-checked."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import httpx
import pytest
import trio

from mrtr.transports.http.native import serve

from ..conftest import meta, until
from ..wire_schema import validate_message
from .app import GATES, build
from .tasks_schema import validate_task

TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"elicitation": {"form": {}}, "extensions": {TASKS: {}}}
WITHOUT_TASKS = {"elicitation": {"form": {}}}


class Client:
    def __init__(self, http: httpx.AsyncClient, user: str = "alice", capabilities: dict[str, Any] = WITH_TASKS):
        self.http = http
        self.user = user
        self.capabilities = capabilities

    async def post(self, method: str, params: dict[str, Any], *, name: str | None = None,
                   user: str | None = None) -> tuple[int, dict[str, Any]]:
        params = {**params, "_meta": meta(self.capabilities)}
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "X-User": user or self.user}
        target = name if name is not None else params.get("name", params.get("taskId"))
        if isinstance(target, str):
            headers["Mcp-Name"] = target
        response = await self.http.post("/mcp", content=json.dumps(message), headers=headers)
        reply = json.loads(response.content)
        if method.startswith("tasks/"):
            if "result" in reply:
                validate_task({"tasks/get": "GetTaskResult", "tasks/update": "UpdateTaskResult",
                               "tasks/cancel": "CancelTaskResult"}[method], reply["result"])
        elif "result" in reply and reply["result"].get("resultType") == "task":
            validate_task("CreateTaskResult", reply["result"])
            assert "requestState" not in reply["result"]
        else:
            result_def = None
            if "result" in reply:
                result_def = "InputRequiredResult" if reply["result"].get("resultType") == "input_required" else None
                result_def = result_def or {"tools/call": "CallToolResult", "server/discover": "DiscoverResult"}.get(method)
            validate_message(reply, result_def=result_def)
        return response.status_code, reply

    async def get(self, task_id: str) -> dict[str, Any]:
        """The task as ``tasks/get`` shows it."""
        status, reply = await self.post("tasks/get", {"taskId": task_id})
        assert status == 200, reply
        return reply["result"]  # type: ignore[no-any-return]

    async def until(self, task_id: str, *statuses: str, timeout: float = 10) -> dict[str, Any]:
        """Poll ``tasks/get`` until the task is in one of ``statuses``."""
        return await until(lambda: self.get(task_id), lambda task: task["status"] in statuses, timeout=timeout)


@pytest.fixture
async def client(store_url: str, nursery: trio.Nursery) -> AsyncIterator[Client]:
    app = build(store_url)
    port = await nursery.start(partial(serve, app, "127.0.0.1", 0))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        yield Client(http)


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


async def test_discover_advertises_the_extension(client: Client) -> None:
    status, reply = await client.post("server/discover", {})
    assert reply["result"]["capabilities"]["extensions"] == {TASKS: {}}


async def test_mrtr_rounds_first_then_a_task_that_asks_through_update(client: Client) -> None:
    status, reply = await client.post("tools/call", {"name": "onboard", "arguments": {"plan": "pro"}})
    assert reply["result"]["resultType"] == "input_required"
    assert list(reply["result"]["inputRequests"]) == ["elicit-1"]
    status, reply = await client.post("tools/call", {
        "name": "onboard", "arguments": {"plan": "pro"},
        "inputResponses": {"elicit-1": accept(name="Ada")}, "requestState": reply["result"]["requestState"],
    })
    created = reply["result"]
    assert created["resultType"] == "task" and created["status"] == "working"
    task_id = created["taskId"]
    task = await client.until(task_id, "input_required")
    assert list(task["inputRequests"]) == ["elicit-3"]
    assert "requestState" not in task
    status, reply = await client.post("tasks/update", {"taskId": task_id, "inputResponses": {"elicit-3": accept(city="Oslo")}})
    assert reply["result"] == {"resultType": "complete", "_meta": reply["result"]["_meta"]}
    task = await client.until(task_id, "completed")
    assert task["result"]["content"] == [{"type": "text", "text": "Ada (T-pro) from Oslo"}]


async def test_capability_gating(client: Client) -> None:
    bare = Client(client.http, capabilities=WITHOUT_TASKS)
    status, reply = await bare.post("tools/call", {"name": "report", "arguments": {}})
    assert status == 400
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}
    status, reply = await bare.post("tasks/get", {"taskId": "whatever"})
    assert status == 400 and reply["error"]["code"] == -32021
    # An optional task tool answers a client without the extension on the call itself.
    status, reply = await bare.post("tools/call", {"name": "onboard", "arguments": {"plan": "x"}})
    assert reply["result"]["resultType"] == "input_required"


async def test_a_required_task_tool_reports_progress_and_completes(client: Client) -> None:
    gate = f"progress-{uuid.uuid4()}"
    GATES[gate] = threading.Event()
    try:
        status, reply = await client.post("tools/call", {"name": "report", "arguments": {"gate": gate}})
        task_id = reply["result"]["taskId"]
        # While its Step is held, the task shows the progress it reported before it.
        task = await until(lambda: client.get(task_id), lambda task: "statusMessage" in task)
        assert (task["status"], task["statusMessage"]) == ("working", "1/2: collecting")
        GATES[gate].set()
        task = await client.until(task_id, "completed")
        assert task["result"]["content"][0]["text"] == "42 rows"
    finally:
        GATES.pop(gate).set()


async def test_another_principal_and_unknown_ids_look_the_same(client: Client) -> None:
    status, reply = await client.post("tools/call", {"name": "report", "arguments": {}})
    task_id = reply["result"]["taskId"]
    answers = []
    for method, params, user in (
        ("tasks/get", {"taskId": task_id}, "mallory"),
        ("tasks/cancel", {"taskId": task_id}, "mallory"),
        ("tasks/update", {"taskId": task_id, "inputResponses": {}}, "mallory"),
        ("tasks/get", {"taskId": "A" * 22}, "alice"),
    ):
        status, reply = await client.post(method, params, user=user)
        answers.append((status, reply["error"]))
    assert answers == [(400, {"code": -32602, "message": "Unknown task"})] * 4


async def test_mcp_name_must_mirror_the_task_id(client: Client) -> None:
    status, reply = await client.post("tools/call", {"name": "report", "arguments": {}})
    task_id = reply["result"]["taskId"]
    response = await client.http.post("/mcp", content=json.dumps({
        "jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": task_id, "_meta": meta(WITH_TASKS)},
    }), headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                 "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/get", "Mcp-Name": "other", "X-User": "alice"})
    assert response.status_code == 400
    assert json.loads(response.content)["error"]["code"] == -32020


@pytest.mark.parametrize(("setting", "ttl_ms"), [("2.5", 2500), ("none", None), ("", 3_600_000)])
async def test_mrtr_task_ttl_sets_the_ttl_of_new_tasks(setting: str, ttl_ms: int | None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_TASK_TTL", setting)
    app = build("memory:")
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": WITH_TASKS}
    async with app.running():
        reply = await app.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                  "params": {"name": "report", "arguments": {}, "_meta": meta}})
    assert validate_task("CreateTaskResult", reply["result"])["ttlMs"] == ttl_ms


async def test_an_unusable_mrtr_task_ttl_fails_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_TASK_TTL", "-5")
    app = build("memory:")
    with pytest.raises(ValueError, match="MRTR_TASK_TTL must be a positive number of seconds or none"):
        async with app.running():
            pass


async def test_a_call_whose_task_would_exceed_the_size_cap_gets_a_clear_400(client: Client) -> None:
    from mrtr.tasks import MAX_RECORD_BYTES

    padding = "x" * (MAX_RECORD_BYTES + 1000)  # fits an HTTP body (4 MiB), not a task record (1 MiB)
    status, reply = await client.post("tools/call", {"name": "report", "arguments": {"padding": padding}})
    assert status == 400
    assert reply["error"]["code"] == -32602
    assert f"over the limit of {MAX_RECORD_BYTES} bytes" in reply["error"]["message"]
    status, reply = await client.post("tools/call", {"name": "report", "arguments": {}})
    assert reply["result"]["resultType"] == "task"
