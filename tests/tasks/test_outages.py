"""Redis out of memory, read-only and stopped under two real ``mrtr serve`` nodes (one of them ``--workers 2``).

What must hold through each fault: both nodes stay up (no worker restarts either), a tool
that needs no store keeps answering, a call that needs the store gets a typed ``-32603``
that names neither the store nor its password, and once Redis is usable again every task
the nodes were running completes by itself, with no operator action.
"""

from __future__ import annotations

import base64
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from .redis_server import free_port, redis_cli, redis_server
from .tasks_schema import validate_task
from .test_processes import mrtr_serve, post, ready

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

PASSWORD = "s3cret-Pa55"
TASKS_PER_NODE = 3


def assert_typed_and_silent(reply: dict[str, Any], url: str) -> None:
    """A -32603 that says the store is unavailable and nothing about where it is or how to log in."""
    assert reply["error"]["code"] == -32603, reply
    text = repr(reply)
    assert "unavailable" in reply["error"]["message"]
    for secret in (PASSWORD, url, "redis", "127.0.0.1", url.rsplit(":", 1)[1]):
        assert secret not in text, (secret, reply)


def logged(log: Path) -> str:
    return log.read_text(errors="replace") if log.exists() else ""


async def until_logged(nodes: list[tuple[subprocess.Popen[bytes], Path]], *markers: str,
                       timeout: float = 30) -> None:
    """Wait until every node's log shows every marker (its background loops met the fault), each node alive."""
    with trio.fail_after(timeout):
        while not all(marker in logged(log) for _process, log in nodes for marker in markers):
            for process, log in nodes:
                assert process.poll() is None, f"the node exited with {process.returncode}:\n{logged(log)}"
            await trio.sleep(0.05)


async def outlive(tmp_path: Path, url: str, fault: Callable[[], AbstractContextManager[None]],
                  markers: tuple[str, ...], reads_work: bool) -> None:
    secret = base64.b64encode(os.urandom(32)).decode()
    gate = tmp_path / "gate"
    logs = [tmp_path / "one.log", tmp_path / "two.log"]
    with mrtr_serve(url, secret, log=logs[0]) as (one, one_port), \
            mrtr_serve(url, secret, "--workers", "2", log=logs[1]) as (two, two_port):
        nodes = [(one, one_port), (two, two_port)]
        for process, port in nodes:
            await ready(process, port)
        task_ids = []
        for _process, port in nodes:
            for _ in range(TASKS_PER_NODE):
                reply = await post(port, "tools/call", {"name": "gated", "arguments": {"path": str(gate)}})
                task_ids.append(validate_task("CreateTaskResult", reply["result"])["taskId"])

        with fault():
            await until_logged([(one, logs[0]), (two, logs[1])], *markers)
            for process, port in nodes:
                assert process.poll() is None, logged(logs[nodes.index((process, port))])
                reply = await post(port, "tools/call", {"name": "plain", "arguments": {"x": 21}})
                assert reply["result"]["content"] == [{"type": "text", "text": "42"}], reply
                assert_typed_and_silent(
                    await post(port, "tools/call", {"name": "gated", "arguments": {"path": str(gate)}}), url)
                reply = await post(port, "tasks/get", {"taskId": task_ids[0]})
                if reads_work:
                    assert validate_task("GetTaskResult", reply["result"])["status"] == "working"
                else:
                    assert_typed_and_silent(reply, url)

        gate.touch()  # the Steps may end now; their results can be saved again
        with trio.fail_after(60):
            for task_id in task_ids:
                while True:
                    reply = await post(one_port, "tasks/get", {"taskId": task_id})
                    task = validate_task("GetTaskResult", reply["result"]) if "result" in reply else {}
                    if task.get("status") not in (None, "working"):
                        break
                    await trio.sleep(0.05)
                assert task["status"] == "completed", task
                assert task["result"]["content"][0]["text"] == "gated open"
        reply = await post(two_port, "tools/call", {"name": "report", "arguments": {}})
        assert validate_task("CreateTaskResult", reply["result"])["status"] == "working"
        assert one.poll() is None and two.poll() is None
    for log in logs:
        text = logged(log)
        assert PASSWORD not in text
        assert "redis://:***@127.0.0.1" in text  # the server side names the store, password masked
        assert "Traceback" not in text and "exited unexpectedly" not in text, text


async def test_two_nodes_outlive_redis_out_of_memory(tmp_path: Path) -> None:
    with redis_server(password=PASSWORD) as (url, _process):
        @contextmanager
        def out_of_memory() -> Iterator[None]:
            redis_cli(url, "CONFIG", "SET", "maxmemory-policy", "noeviction")
            redis_cli(url, "CONFIG", "SET", "maxmemory", "1")
            try:
                yield
            finally:
                redis_cli(url, "CONFIG", "SET", "maxmemory", "0")

        await outlive(tmp_path, url, out_of_memory, ("cannot renew the lease", "cannot take over"), reads_work=True)
        assert "OOM command not allowed" in logged(tmp_path / "one.log")


async def test_two_nodes_outlive_a_failover_that_leaves_their_redis_read_only(tmp_path: Path) -> None:
    with redis_server(password=PASSWORD) as (url, _process), redis_server(password=PASSWORD) as (other, _):
        port = url.rsplit(":", 1)[1].split("/")[0]
        other_port = other.rsplit(":", 1)[1].split("/")[0]
        redis_cli(other, "CONFIG", "SET", "masterauth", PASSWORD)
        redis_cli(url, "CONFIG", "SET", "masterauth", PASSWORD)

        @contextmanager
        def failover() -> Iterator[None]:
            # The other Redis copies ours, is promoted, and ours follows it: a replica, refusing writes.
            redis_cli(other, "REPLICAOF", "127.0.0.1", port)
            wait_in_sync(other)
            redis_cli(other, "REPLICAOF", "NO", "ONE")
            redis_cli(url, "REPLICAOF", "127.0.0.1", other_port)
            try:
                yield
            finally:
                wait_in_sync(url)
                redis_cli(url, "REPLICAOF", "NO", "ONE")  # failed back: ours is the primary again

        await outlive(tmp_path, url, failover, ("cannot renew the lease", "cannot take over"), reads_work=True)
        assert "read only replica" in logged(tmp_path / "one.log")


async def test_two_nodes_outlive_redis_stopped_and_restarted(tmp_path: Path) -> None:
    port, workdir = free_port(), tmp_path / "redis"
    workdir.mkdir()
    with ExitStack() as servers:
        url, process = servers.enter_context(redis_server(port, str(workdir), persist=True, password=PASSWORD))

        @contextmanager
        def stopped() -> Iterator[None]:
            process.terminate()
            process.wait()
            try:
                yield
            finally:  # the same port and data directory: every acknowledged write is back
                servers.enter_context(redis_server(port, str(workdir), persist=True, password=PASSWORD))

        await outlive(tmp_path, url, stopped, ("cannot renew the lease", "cannot look for abandoned tasks"),
                      reads_work=False)


def wait_in_sync(replica: str) -> None:
    """Block until ``replica`` finished its sync with its primary."""
    deadline = time.monotonic() + 10
    while "master_link_status:up" not in (info := redis_cli(replica, "INFO", "replication")):
        assert time.monotonic() < deadline, f"the replica never synced: {info}"
        time.sleep(0.02)


async def test_calls_that_fill_redis_leave_the_nodes_up(tmp_path: Path) -> None:
    """The attack itself: unauthenticated calls with large arguments until Redis is full."""
    from mrtr.tasks import MAX_RECORD_BYTES

    with redis_server(password=PASSWORD) as (url, _process):
        redis_cli(url, "CONFIG", "SET", "maxmemory-policy", "noeviction")
        redis_cli(url, "CONFIG", "SET", "maxmemory", "24mb")
        secret = base64.b64encode(os.urandom(32)).decode()
        logs = [tmp_path / "one.log", tmp_path / "two.log"]
        with mrtr_serve(url, secret, log=logs[0]) as (one, one_port), \
                mrtr_serve(url, secret, "--workers", "2", log=logs[1]) as (two, two_port):
            await ready(one, one_port)
            await ready(two, two_port)
            reply = await post(one_port, "tools/call", {"name": "report", "arguments": {"pad": "x" * 3_900_000}})
            assert reply["error"]["code"] == -32602  # over the record cap: refused, nothing stored
            assert f"over the limit of {MAX_RECORD_BYTES} bytes" in reply["error"]["message"]
            created = 0
            with trio.fail_after(60):
                while True:  # records just under the cap until Redis refuses to grow
                    port = (one_port, two_port)[created % 2]
                    reply = await post(port, "tools/call", {"name": "report", "arguments": {"pad": "x" * 1_000_000}})
                    if "error" in reply:
                        break
                    created += 1
            assert 10 < created < 30, created
            assert_typed_and_silent(reply, url)
            for process, port in ((one, one_port), (two, two_port)):
                assert process.poll() is None
                reply = await post(port, "tools/call", {"name": "plain", "arguments": {"x": 4}})
                assert reply["result"]["content"] == [{"type": "text", "text": "8"}]
            redis_cli(url, "CONFIG", "SET", "maxmemory", "0")  # the operator makes room
            reply = await post(two_port, "tools/call", {"name": "report", "arguments": {}})
            task_id = validate_task("CreateTaskResult", reply["result"])["taskId"]
            with trio.fail_after(20):
                while (await post(one_port, "tasks/get", {"taskId": task_id}))["result"]["status"] != "completed":
                    await trio.sleep(0.05)
            assert one.poll() is None and two.poll() is None
        for log in logs:
            assert "exited unexpectedly" not in logged(log) and PASSWORD not in logged(log)
