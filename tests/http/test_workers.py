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

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

ROOT = Path(__file__).resolve().parents[2]


def listening_socket(reuse_port: bool = False) -> socket.socket:
    """A socket bound to port 0 and listening, to hand to the server process (no port race)."""
    sock = socket.socket()
    if reuse_port:  # the other workers bind the same port
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


async def start_process(code: str, sock: socket.socket, env: dict | None = None) -> trio.Process:
    """Run ``code`` in a Python child that finds the listening socket as ``sock``."""
    prologue = f"import socket; sock = socket.socket(fileno={sock.fileno()}); "
    try:
        return await trio.lowlevel.open_process([sys.executable, "-c", prologue + code], cwd=ROOT, env=env,
                                                stderr=subprocess.PIPE, pass_fds=[sock.fileno()])
    finally:
        sock.close()  # the child holds it now


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
    sock = listening_socket(reuse_port=True)
    port = sock.getsockname()[1]
    env = {key: value for key, value in os.environ.items() if key != "MRTR_SECRET"}
    if secret == "given":
        env["MRTR_SECRET"] = base64.b64encode(b"w" * 32).decode()
    code = ("from tests.http.app import build_server; from mrtr.transports.http.workers import run; "
            "run(build_server(), sock=sock, workers=2, shutdown_grace=2)")
    process = await start_process(code, sock, env)
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
        # without a key, one generated before the fork serves every worker, and it is said once, in one line
        warned = [line for line in stderr.splitlines() if b"MRTR_SECRET" in line]
        assert len(warned) == (1 if secret == "generated" else 0), stderr
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_single_worker_stops_cleanly_on_sigint():
    sock = listening_socket()
    port = sock.getsockname()[1]
    code = ("from tests.http.app import server; from mrtr.transports.http.workers import run; "
            "run(server, sock=sock, shutdown_grace=2)")
    process = await start_process(code, sock)
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
    from mrtr.transports.http.workers import run

    from .app import server

    with pytest.raises(RuntimeError, match="serve"):
        run(server, "127.0.0.1", 0)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its reaper counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


async def collect(stream, into: bytearray) -> None:
    while data := await stream.receive_some(65536):
        into += data


async def serving_pids(port: int, want: int) -> set[int]:
    seen: set[int] = set()
    while len(seen) < want:
        try:
            seen.update(await answering_pids(port, 20))
        except httpx.TransportError:
            await trio.sleep(0.05)
    return seen


async def two_workers(nursery: trio.Nursery) -> tuple[trio.Process, int, bytearray]:
    """A supervisor of two workers serving the test app on a fresh port, with its stderr collected."""
    sock = listening_socket(reuse_port=True)
    port = sock.getsockname()[1]
    code = ("from tests.http.app import server; from mrtr.transports.http.workers import run; "
            "run(server, sock=sock, workers=2, shutdown_grace=2)")
    process = await start_process(code, sock)
    stderr = bytearray()
    nursery.start_soon(collect, process.stderr, stderr)
    return process, port, stderr


async def test_workers_exit_when_the_supervisor_is_killed(nursery):
    process, port, stderr = await two_workers(nursery)
    try:
        with trio.fail_after(20):
            workers = await serving_pids(port, 2)
        assert process.pid not in workers  # the supervisor serves nothing itself
        process.kill()  # SIGKILL: no chance to pass anything on
        await process.wait()
        with trio.fail_after(10):  # the workers go within seconds, not when someone notices
            while any(alive(pid) for pid in workers):
                await trio.sleep(0.05)
        with socket.socket() as probe:  # nobody holds the port any more
            probe.bind(("127.0.0.1", port))
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        for pid in workers if "workers" in locals() else ():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


async def test_a_dead_worker_is_logged_at_once_and_replaced(nursery):
    process, port, stderr = await two_workers(nursery)
    try:
        with trio.fail_after(20):
            first = await serving_pids(port, 2)
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        with trio.fail_after(5):  # logged as it happens, not at shutdown
            while f"(pid {victim}) exited unexpectedly with signal SIGKILL".encode() not in stderr:
                await trio.sleep(0.02)
        with trio.fail_after(20):
            while True:
                pids = await serving_pids(port, 2)
                if victim not in pids and len(pids - first) == 1:
                    break
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            assert await process.wait() == 0, stderr.decode(errors="replace")
        assert not any(alive(pid) for pid in pids)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        for pid in (first if "first" in locals() else set()) | (pids if "pids" in locals() else set()):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_port_held_without_listening_takes_no_connections():
    from mrtr.transports.http.config import ServerConfig
    from mrtr.transports.http.native import bind

    held = bind("127.0.0.1", 0, ServerConfig(), reuse_port=True, listen=False)
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(held.getsockname()[:2], timeout=2).close()
    finally:
        held.close()


def test_connections_right_after_start_are_all_answered_by_the_workers():
    """The supervisor holds the port without listening, so no connection waits in a queue
    nobody accepts from and is reset when the supervisor lets go of it."""
    import re
    import time

    env = {**os.environ, "MRTR_SECRET": base64.b64encode(b"w" * 32).decode()}
    process = subprocess.Popen([sys.executable, "-m", "mrtr", "serve", "--port", "0", "--workers", "2",
                                "--no-access-log"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        seen, port, deadline = b"", None, time.monotonic() + 20
        while port is None:
            assert time.monotonic() < deadline, seen
            seen += process.stderr.read1(4096)  # type: ignore[union-attr]
            match = re.search(rb"serving MCP on http://[^:]+:(\d+)/mcp", seen)
            port = int(match.group(1)) if match else None
        answers = []
        for _ in range(300):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
                client.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % port)
                answers.append(client.recv(64)[:12])
        assert answers == [b"HTTP/1.1 200"] * 300
    finally:
        process.terminate()
        process.wait(15)
