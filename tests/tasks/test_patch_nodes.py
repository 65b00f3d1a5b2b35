"""Deploys with conversations and tasks in flight, for real: ``mrtr serve`` restarted with changed code.

Version 1 of ``book`` (MRTR rounds) and ``deploy`` (a task waiting for a question) is
served first; a conversation and a task are left in flight; then ``mrtr check-tasks``
judges version 3 (the change without a gate: the task would break, and the report says
why) and version 2 (the same change behind ``Patched("add-region")``: it passes); then
the node restarts with version 2. The conversation and the task recorded under version 1
finish through the old branch, new ones take the new branch, and a node still running
version 1 refuses a ledger with the marker, naming the patch.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conftest import until
from .redis_server import redis_server
from .test_once_nodes import APP, WITH_TASKS, exchange
from .test_processes import ROOT, mrtr_serve, ready

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)


def answer(asked: dict[str, Any], params: dict[str, Any], value: Any) -> dict[str, Any]:
    result = asked["result"]
    assert result["resultType"] == "input_required", result
    (key,) = result["inputRequests"]
    content = {"ok": value} if isinstance(value, bool) else {"value": value}
    return {**params, "requestState": result["requestState"],
            "inputResponses": {key: {"action": "accept", "content": content}}}


@pytest.fixture(params=["sqlite", "redis"])
def own_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store that holds this test's tasks only (the session's Redis holds other tests' tasks in flight)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
        return
    with redis_server() as (url, _process):
        yield url


def version(number: int) -> dict[str, str]:
    return {"ONCE_APP_VERSION": str(number)}


async def task_waiting(port: int, task_id: str) -> dict[str, Any]:
    async def get() -> dict[str, Any]:
        return (await exchange(port, "tasks/get", {"taskId": task_id}, WITH_TASKS))[1]["result"]

    return await until(get, lambda task: task["status"] != "working", timeout=30)


async def update(port: int, task: dict[str, Any], value: Any) -> dict[str, Any]:
    (key,) = task["inputRequests"]
    content = {"ok": value} if isinstance(value, bool) else {"value": value}
    status, reply = await exchange(port, "tasks/update", {"taskId": task["taskId"], "inputResponses": {
        key: {"action": "accept", "content": content}}}, WITH_TASKS)
    assert status == 200 and "result" in reply, reply
    return await task_waiting(port, task["taskId"])


def check_tasks(store_url: str, number: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mrtr", "check-tasks", APP, "--tasks", store_url], cwd=ROOT, capture_output=True,
        text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT), **version(number)})


async def test_a_patched_deploy_finishes_old_conversations_and_tasks_on_the_old_branch(own_store: str) -> None:
    shared_url = own_store
    secret = base64.b64encode(os.urandom(32)).decode()
    book = {"name": "book", "arguments": {}}
    with mrtr_serve(shared_url, secret, app=APP, env=version(1)) as (old, port):
        await ready(old, port)
        _, day = await exchange(port, "tools/call", book)
        _, hour = await exchange(port, "tools/call", answer(day, book, "mon"))  # recorded past the gate's point
        _, created = await exchange(port, "tools/call", {"name": "deploy", "arguments": {"service": "svc"}},
                                    WITH_TASKS)
        waiting = await task_waiting(port, created["result"]["taskId"])
        assert waiting["status"] == "input_required"
        assert list(waiting["inputRequests"]) == ["elicit-2"]

    broken = check_tasks(shared_url, 3)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    report = broken.stdout
    assert "1 task in flight" in report and "1 would fail under tests.tasks.once_app:server" in report
    assert f"task {waiting['taskId']} (tool deploy, input_required, started by version " in report
    assert "MRTR replay mismatch at ordinal #2" in report and "changed: message" in report
    assert "deploy: handler deploy runs version" in report and "Patched(\"deploy-" in report
    passing = check_tasks(shared_url, 2)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "1 task in flight" in passing.stdout and "0 would fail" in passing.stdout

    with mrtr_serve(shared_url, secret, app=APP, env=version(2)) as (new, port):
        await ready(new, port)
        _, done = await exchange(port, "tools/call", answer(hour, book, "10:00"))
        assert done["result"]["content"][0]["text"] == "v2-old mon 10:00"
        finished = await update(port, waiting, True)
        assert finished["status"] == "completed"
        assert finished["result"]["content"][0]["text"] == "v2-old deployed svc-build-7"

        _, day = await exchange(port, "tools/call", book)
        _, region = await exchange(port, "tools/call", answer(day, book, "tue"))
        assert list(region["result"]["inputRequests"]) == ["elicit-3"]  # the new branch; the marker took #2
        with mrtr_serve(shared_url, secret, app=APP, env=version(1)) as (lagging, old_port):
            await ready(lagging, old_port)
            status, refused = await exchange(old_port, "tools/call", answer(region, book, "eu"))
        assert status == 400 and refused["error"]["data"]["patch"] == "add-region"
        assert 'holds the patch marker "add-region"' in refused["error"]["message"]
        _, hour = await exchange(port, "tools/call", answer(region, book, "eu"))
        _, done = await exchange(port, "tools/call", answer(hour, book, "9:00"))
        assert done["result"]["content"][0]["text"] == "v2 tue eu 9:00"

        _, created = await exchange(port, "tools/call", {"name": "deploy", "arguments": {"service": "api"}},
                                    WITH_TASKS)
        task = await task_waiting(port, created["result"]["taskId"])
        assert list(task["inputRequests"]) == ["elicit-3"]
        task = await update(port, await update(port, task, "eu"), True)
        assert task["status"] == "completed"
        assert task["result"]["content"][0]["text"] == "v2 deployed api-build-7 to eu"
        assert not {"handlerVersion", "handler_version", "version"} & set(task)  # tasks/get does not show it
