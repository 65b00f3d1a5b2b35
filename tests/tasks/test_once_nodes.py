"""Rounds that run once, for real: two ``mrtr serve`` nodes on one SQLite file and on one Redis.

The handlers' side effects are lines in a file the test reads (with the pid of the
process that wrote them). The same final round is retried on the node that ran it, on
the other one, and twenty times at once across both; a retry brings other answers; the
round that creates a task is retried on both nodes; a node is killed while it runs a
final round. Every message is checked against the schema of its era (and the tasks
extension's for task results).
"""

from __future__ import annotations

import base64
import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from ..conftest import meta, until
from ..wire_schema import validate_message
from .tasks_schema import validate_task
from .test_processes import mrtr_serve, ready

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

APP = "tests.tasks.once_app:server"
TASKS = "io.modelcontextprotocol/tasks"
PLAIN = {"elicitation": {}}
WITH_TASKS = {"elicitation": {}, "extensions": {TASKS: {}}}


async def exchange(port: int, method: str, params: dict[str, Any], capabilities: dict[str, Any] = PLAIN,
                   request_id: int = 1) -> tuple[int, dict[str, Any]]:
    """One request over HTTP: its status and its response message, checked against the schema."""
    params = {**params, "_meta": meta(capabilities)}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method,
               "Mcp-Name": params.get("name") or params.get("taskId") or ""}
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(f"http://127.0.0.1:{port}/mcp", headers=headers, content=json.dumps(body))
    message = dict(json.loads(response.content))
    result = message.get("result")
    if isinstance(result, dict) and result.get("resultType") == "task":
        validate_task("CreateTaskResult", result)
    elif method == "tasks/get" and isinstance(result, dict):
        validate_task("GetTaskResult", result)
    else:
        validate_message(message)
    return response.status_code, message


def retry_of(asked: dict[str, Any], params: dict[str, Any], ok: bool = True) -> dict[str, Any]:
    result = asked["result"]
    assert result["resultType"] == "input_required", result
    (key,) = result["inputRequests"]
    return {**params, "requestState": result["requestState"],
            "inputResponses": {key: {"action": "accept", "content": {"ok": ok}}}}


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def secret() -> str:
    return base64.b64encode(os.urandom(32)).decode()


async def two_nodes_round_once(store_url: str, secret: str, tmp_path: Path) -> None:
    ledger = tmp_path / "charges.txt"
    with mrtr_serve(store_url, secret, app=APP) as (first, a), mrtr_serve(store_url, secret, app=APP) as (second, b):
        await ready(first, a)
        await ready(second, b)
        call = {"name": "charge", "arguments": {"amount": 12, "ledger": str(ledger)}}
        _, asked = await exchange(a, "tools/call", call)
        final = retry_of(asked, call)
        status, done = await exchange(a, "tools/call", final)
        assert status == 200 and done["result"]["content"][0]["text"] == f"charged 12 by {first.pid}"
        for port in (a, b, a, b):  # on the node that ran it, and on the other
            status, again = await exchange(port, "tools/call", final, request_id=port)
            assert status == 200 and again["result"] == done["result"]
        assert lines(ledger) == [f"charged 12 {first.pid}"]

        # Twenty at once across both nodes, of a round nobody ran yet.
        call = {"name": "charge", "arguments": {"amount": 20, "ledger": str(ledger)}}
        _, asked = await exchange(b, "tools/call", call)
        final = retry_of(asked, call)
        results: list[dict[str, Any]] = []

        async def retry(n: int) -> None:
            status, message = await exchange((a, b)[n % 2], "tools/call", final, request_id=n)
            assert status == 200, message
            results.append(message["result"])

        async with trio.open_nursery() as nursery:
            for n in range(20):
                nursery.start_soon(retry, n)
        assert len(results) == 20 and all(result == results[0] for result in results)
        charged = [line for line in lines(ledger) if line.startswith("charged 20 ")]
        assert len(charged) == 1, lines(ledger)
        assert results[0]["content"][0]["text"] == f"charged 20 by {charged[0].split()[-1]}"

        # Other answers to a round that ran: refused, never run.
        status, other = await exchange(b, "tools/call", retry_of(asked, call, ok=False))
        assert status == 400 and other["error"]["code"] == -32602
        assert "other inputResponses" in other["error"]["message"]
        assert len([line for line in lines(ledger) if line.startswith("charged 20 ")]) == 1

        # The round that creates a task, retried on both nodes: one task.
        call = {"name": "ship", "arguments": {"item": "lamp", "ledger": str(ledger)}}
        _, asked = await exchange(a, "tools/call", call, WITH_TASKS)
        final = retry_of(asked, call)
        created = [(await exchange(port, "tools/call", final, WITH_TASKS, request_id=n))[1]["result"]
                   for n, port in enumerate((a, b, b, a))]
        assert len({task["taskId"] for task in created}) == 1
        task_id = created[0]["taskId"]

        async def status_of() -> dict[str, Any]:
            return (await exchange(b, "tasks/get", {"taskId": task_id}, WITH_TASKS))[1]["result"]

        task = await until(status_of, lambda task: task["status"] == "completed", timeout=30)
        assert task["result"]["content"][0]["text"] == "shipped L-lamp"
        assert len([line for line in lines(ledger) if line.startswith("label lamp ")]) == 1


async def test_a_final_round_runs_once_across_two_nodes_on_sqlite(tmp_path: Path, secret: str) -> None:
    await two_nodes_round_once(f"sqlite:///{tmp_path / 'tasks.sqlite3'}", secret, tmp_path)


async def test_a_final_round_runs_once_across_two_nodes_on_redis(tmp_path: Path, secret: str, redis_url: str) -> None:
    await two_nodes_round_once(redis_url, secret, tmp_path)


async def test_a_node_killed_in_a_final_round_leaves_it_interrupted_not_run_twice(
        tmp_path: Path, secret: str, shared_url: str) -> None:
    ledger, gate = tmp_path / "charges.txt", tmp_path / "gate"
    with mrtr_serve(shared_url, secret, app=APP) as (first, a), mrtr_serve(shared_url, secret, app=APP) as (second, b):
        await ready(first, a)
        await ready(second, b)
        call = {"name": "slow_charge", "arguments": {"amount": 3, "ledger": str(ledger), "gate": str(gate)}}
        _, asked = await exchange(a, "tools/call", call)
        final = retry_of(asked, call)
        async with trio.open_nursery() as nursery:
            async def lost() -> None:
                try:
                    await exchange(a, "tools/call", final)
                except httpx.TransportError:
                    pass  # the node dies under it

            nursery.start_soon(lost)
            await until(lambda: lines(ledger) == [f"started {first.pid}"], timeout=20)
            os.kill(first.pid, signal.SIGKILL)
            first.wait()
        gate.touch()  # were the round run again, it would now charge
        status, told = await exchange(b, "tools/call", final)  # waits out the dead node's lease (1 s)
        assert status == 200 and told["error"]["code"] == -32603
        assert "is not run again" in told["error"]["message"]
        assert lines(ledger) == [f"started {first.pid}"]
