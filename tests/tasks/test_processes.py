"""Durable execution for real: two ``mrtr serve`` processes on one store, one SIGKILLed mid-Step."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import httpx
import trio

from ..conftest import meta, stop, until
from .redis_server import free_port
from .tasks_schema import validate_task

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

ROOT = Path(__file__).resolve().parents[2]
CAPABILITIES = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


@contextmanager
def mrtr_serve(store_url: str, secret: str, *options: str, log: Path | None = None,
               app: str = "tests.tasks.app:server",
               env: dict[str, str] | None = None) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """``mrtr serve`` of ``app`` (the tasks app) on a free port, with a 1 s lease; its stderr in ``log`` when given.

    The store is given with ``--tasks`` (the older name of ``--store``), or in
    ``MRTR_STORE`` when its URL carries a password, which the command line refuses.
    ``env`` adds to the environment of the process.
    """
    port = free_port()
    environment = {**os.environ, "MRTR_SECRET": secret, "PYTHONPATH": str(ROOT), **(env or {})}
    has_password = "@" in store_url and ":" in store_url.split("://", 1)[1].split("@", 1)[0]
    if has_password:
        environment["MRTR_STORE"] = store_url
    stderr: Any = subprocess.PIPE if log is None else open(log, "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "mrtr", "serve", app, "--port", str(port),
         *([] if has_password else ["--tasks", store_url]), "--task-lease", "1", "--log-level", "warning", *options],
        cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=stderr,
    )
    if log is not None:
        stderr.close()  # the child holds its own descriptor
    try:
        yield process, port
    finally:
        if process.poll() is None:
            stop(process)
        if process.stderr is not None:
            process.stderr.close()


async def post(port: int, method: str, params: dict[str, Any],
               capabilities: dict[str, Any] = CAPABILITIES) -> dict[str, Any]:
    """One JSON-RPC request declaring ``capabilities`` (the tasks extension); the response message."""
    params = {**params, "_meta": meta(capabilities)}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method,
               "Mcp-Name": params.get("name") or params["taskId"]}
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(f"http://127.0.0.1:{port}/mcp", headers=headers,
                                   content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
    return dict(json.loads(response.content))


async def ready(process: subprocess.Popen[bytes], port: int) -> None:
    """Wait until the process answers HTTP."""
    with trio.fail_after(30):
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                await post(port, "server/discover", {"name": "-"})
                return
            except httpx.TransportError:
                await trio.sleep(0.05)


async def kill_and_resume(store_url: str, tmp_path: Path) -> None:
    journal = tmp_path / "journal.txt"
    secret = base64.b64encode(os.urandom(32)).decode()
    with mrtr_serve(store_url, secret) as (first, first_port), mrtr_serve(store_url, secret) as (second, second_port):
        await ready(first, first_port)
        await ready(second, second_port)
        reply = await post(first_port, "tools/call", {"name": "journal", "arguments": {"path": str(journal)}})
        task_id = validate_task("CreateTaskResult", reply["result"])["taskId"]
        await until(lambda: journal.exists() and "long" in journal.read_text(), timeout=20)
        os.kill(first.pid, signal.SIGKILL)
        first.wait()

        async def get() -> dict[str, Any]:
            return validate_task("GetTaskResult", (await post(second_port, "tasks/get", {"taskId": task_id}))["result"])

        task = await until(get, lambda task: task["status"] != "working", timeout=30)
        assert task["status"] == "completed", task
        assert task["result"]["content"][0]["text"] == "journal done"
    lines = journal.read_text().splitlines()
    assert lines[0] == "prepare" and lines.count("prepare") == 1  # the recorded Step did not run again
    assert [line.split()[1] for line in lines[1:]] == [str(first.pid), str(second.pid)]  # the killed Step did


async def test_a_killed_process_task_is_finished_by_the_other_on_sqlite(tmp_path: Path) -> None:
    await kill_and_resume(f"sqlite:///{tmp_path / 'tasks.sqlite3'}", tmp_path)


async def test_a_killed_process_task_is_finished_by_the_other_on_redis(tmp_path: Path, redis_url: str) -> None:
    await kill_and_resume(redis_url, tmp_path)


async def test_an_unreachable_store_fails_at_start(tmp_path: Path) -> None:
    port = free_port()
    url = f"redis://:hunter2-pass@127.0.0.1:{port}/0"
    with mrtr_serve(url, base64.b64encode(os.urandom(32)).decode()) as (process, _port):
        await until(lambda: process.poll() is not None, timeout=30)
        assert process.returncode == 1
        assert process.stderr is not None
        said = process.stderr.read().decode()
        assert f"task store redis://:***@127.0.0.1:{port}/0 cannot be reached" in said
        assert "hunter2" not in said


async def test_task_ttl_sets_how_long_a_finished_task_is_kept(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    with mrtr_serve(url, base64.b64encode(os.urandom(32)).decode(), "--task-ttl", "0.5") as (process, port):
        await ready(process, port)
        reply = await post(port, "tools/call", {"name": "report", "arguments": {}})
        created = validate_task("CreateTaskResult", reply["result"])
        assert created["ttlMs"] == 500
        seen = []
        with trio.fail_after(20):
            while True:  # completed, then kept half a second, then unknown
                reply = await post(port, "tasks/get", {"taskId": created["taskId"]})
                if "error" in reply:
                    break
                seen.append(validate_task("GetTaskResult", reply["result"])["status"])
                await trio.sleep(0.02)
        assert reply["error"] == {"code": -32602, "message": "Unknown task"}
        assert "completed" in seen
