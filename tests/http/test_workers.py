"""``run(..., workers=2)`` in a subprocess: both workers answer, a conversation crosses them."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio

from .conftest import BASE_HEADERS, decode_reply, mcp_headers, rpc

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def post(port: int, message: dict):
    # a fresh client per request: a fresh connection, so the kernel picks a worker each time
    async with httpx.AsyncClient(timeout=5.0) as client:
        response = await client.post(f"http://127.0.0.1:{port}/mcp", json=message,
                                     headers={**BASE_HEADERS, **mcp_headers(message)})
    return decode_reply(response, message)


async def answering_pids(port: int, count: int) -> list[int]:
    pids = []
    for number in range(count):
        reply = await post(port, rpc("tools/call", {"name": "pid"}, id=number))
        pids.append(int(reply.result["content"][0]["text"]))
    return pids


async def converse(port: int, topic: str) -> str:
    answers = iter([{"name": "Ada"}, {"colour": "teal"}, {"age": 36}])
    params: dict = {"name": "interview", "arguments": {"topic": topic}}
    for round_number in range(1, 5):
        reply = await post(port, rpc("tools/call", params, id=round_number))
        assert reply.status == 200, reply.body
        result = reply.result
        if result["resultType"] == "complete":
            return result["content"][0]["text"]
        (key,) = result["inputRequests"]
        params = {"name": "interview", "arguments": {"topic": topic}, "requestState": result["requestState"],
                  "inputResponses": {key: {"action": "accept", "content": next(answers)}}}
    raise AssertionError("the conversation did not finish in four rounds")


@pytest.mark.parametrize("secret", ["given", "generated"])
async def test_two_workers_share_the_port_and_the_request_state_key(secret):
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key != "MRTR_SECRET"}
    if secret == "given":
        env["MRTR_SECRET"] = base64.b64encode(b"w" * 32).decode()
    code = ("from tests.http.app import build_server; from mrtr.http import run; "
            f"run(build_server(), '127.0.0.1', {port}, workers=2, shutdown_grace=2)")
    process = await trio.lowlevel.open_process([sys.executable, "-c", code], cwd=ROOT, env=env,
                                               stderr=subprocess.PIPE)
    try:
        with trio.fail_after(20):
            while True:  # wait for the first worker to listen
                try:
                    await answering_pids(port, 1)
                    break
                except httpx.TransportError:
                    await trio.sleep(0.05)
            seen: set[int] = set()
            while len(seen) < 2:  # the second worker binds a moment later
                seen.update(await answering_pids(port, 40))
            assert len(seen) == 2
            for topic in ("birds", "trees", "rivers", "stones", "clouds"):
                assert await converse(port, topic) == f"Ada/teal/36/{topic}"
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(10):
            await process.wait()
        stderr = await process.stderr.receive_some(1 << 20) if process.stderr else b""
        assert process.returncode == 0, stderr.decode(errors="replace")
        assert (b"No MRTR_SECRET configured" in stderr) is (secret == "generated"), stderr
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_single_worker_stops_cleanly_on_sigint():
    port = free_port()
    code = ("from tests.http.app import server; from mrtr.http import run; "
            f"run(server, '127.0.0.1', {port}, shutdown_grace=2)")
    process = await trio.lowlevel.open_process([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE)
    try:
        with trio.fail_after(20):
            while True:
                try:
                    pids = await answering_pids(port, 1)
                    break
                except httpx.TransportError:
                    await trio.sleep(0.05)
        assert pids == [process.pid]
        process.send_signal(signal.SIGINT)
        with trio.fail_after(10):
            await process.wait()
        stderr = await process.stderr.receive_some(1 << 20) if process.stderr else b""
        assert process.returncode == 0, stderr.decode(errors="replace")
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_run_refuses_to_start_inside_trio():
    from mrtr.http import run

    from .app import server

    with pytest.raises(RuntimeError, match="serve"):
        run(server, "127.0.0.1", 0)
