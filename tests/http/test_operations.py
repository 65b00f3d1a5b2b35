"""Operability over real HTTP: the Host rule, the health route, access lines, the asyncio host."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
from functools import partial
from pathlib import Path

import httpx
import pytest
import trio

from mrtr.transports.http import ASGIApp
from mrtr.transports.http.native import serve
from mrtr.transports.http.asgi import WRONG_LOOP

from ..conftest import mrtr_process, until
from ..test_stdio import REPO
from ..wire_schema import validate_message
from .app import server as app_server
from .conftest import BASE_HEADERS, mcp_headers, rpc

ROOT = Path(__file__).resolve().parents[2]


async def post(port: int, message: dict, host: str | None = None, path: str = "/mcp",
               base: str = "127.0.0.1") -> httpx.Response:
    headers = {**BASE_HEADERS, **mcp_headers(message)}
    if host is not None:
        headers["Host"] = host
    async with httpx.AsyncClient(timeout=5.0) as client:
        return await client.post(f"http://{base}:{port}{path}", json=message, headers=headers)


# -- Host ---------------------------------------------------------------------------------------


async def test_a_loopback_server_answers_only_loopback_hosts(endpoint):
    discover = rpc("server/discover")
    for host in ("evil.example", f"evil.example:{endpoint.port}", f"127.0.0.1:{endpoint.port + 1}", "localhost",
                 "127.0.0.1.evil.example", ""):
        reply = await endpoint.post(discover, headers={"Host": host})
        assert reply.status == 421, (host, reply.status)
        assert reply.error["code"] == -32600 and "Misdirected" in reply.error["message"]
    for host in (f"127.0.0.1:{endpoint.port}", f"localhost:{endpoint.port}", f"LOCALHOST:{endpoint.port}",
                 f"[::1]:{endpoint.port}"):
        reply = await endpoint.post(discover, headers={"Host": host})
        assert reply.status == 200, (host, reply.body)


async def test_allowed_hosts_for_a_server_behind_a_proxy(nursery):
    port = await nursery.start(partial(serve, app_server, "127.0.0.1", 0,
                                       allowed_hosts=["mcp.example.com", "api.example.com:8443"]))
    discover = rpc("server/discover")
    assert (await post(port, discover, "mcp.example.com")).status_code == 200
    assert (await post(port, discover, "mcp.example.com:443")).status_code == 200  # a bare name: any port
    assert (await post(port, discover, "api.example.com:8443")).status_code == 200
    assert (await post(port, discover, "api.example.com")).status_code == 421
    assert (await post(port, discover, f"127.0.0.1:{port}")).status_code == 421  # the list replaces the default

    anything = await nursery.start(partial(serve, app_server, "127.0.0.1", 0, allowed_hosts="*"))
    assert (await post(anything, discover, "whatever.example")).status_code == 200


async def test_a_server_bound_to_all_interfaces_checks_no_host_by_default(nursery):
    port = await nursery.start(partial(serve, app_server, "0.0.0.0", 0))
    assert (await post(port, rpc("server/discover"), "mcp.example.org")).status_code == 200


def test_allowed_hosts_are_checked():
    from mrtr.transports.http import ExchangeConfig

    for bad in ([""], ["host:notaport"], ["[::1"], [3]):
        with pytest.raises(ValueError, match="allowed_hosts"):
            ExchangeConfig(allowed_hosts=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="health_path"):
        ExchangeConfig(health_path="healthz")


# -- health -------------------------------------------------------------------------------------


async def test_health_route(endpoint):
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{endpoint.port}", timeout=5.0) as client:
        answer = await client.get("/healthz")
        assert answer.status_code == 200 and answer.json() == {"status": "ok"}
        assert answer.headers["cache-control"] == "no-store"
        head = await client.head("/healthz")
        assert head.status_code == 200 and head.content == b""
        # no Host rule, no Accept or Origin rule, no authentication: a probe just asks
        assert (await client.get("/healthz", headers={"Host": "10.0.0.7:8000"})).status_code == 200
        refused = await client.post("/healthz", content=b"{}")
        assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"


async def test_health_route_can_move_or_be_turned_off(nursery):
    moved = await nursery.start(partial(serve, app_server, "127.0.0.1", 0, health_path="/ready"))
    off = await nursery.start(partial(serve, app_server, "127.0.0.1", 0, health_path=None))
    async with httpx.AsyncClient(timeout=5.0) as client:
        assert (await client.get(f"http://127.0.0.1:{moved}/ready")).status_code == 200
        assert (await client.get(f"http://127.0.0.1:{moved}/healthz")).status_code == 404
        assert (await client.get(f"http://127.0.0.1:{off}/healthz")).status_code == 404


# -- access lines --------------------------------------------------------------------------------


def access_records(caplog: pytest.LogCaptureFixture) -> list[dict]:
    return [record.mrtr for record in caplog.records if record.name == "mrtr.access"]  # type: ignore[attr-defined]


async def test_access_lines(endpoint, caplog):
    caplog.set_level(logging.INFO, logger="mrtr.access")
    first = await endpoint.call("tools/call", {"name": "interview", "arguments": {"topic": "secret-topic"}})
    token = first.result["requestState"]
    (key,) = first.result["inputRequests"]
    await endpoint.call("tools/call", {"name": "interview", "arguments": {"topic": "secret-topic"},
                                       "requestState": token,
                                       "inputResponses": {key: {"action": "accept",
                                                                "content": {"name": "Ada-the-answer"}}}}, id=2)
    await endpoint.call("tools/call", {"name": "interview"}, headers={"Mcp-Name": "other"}, id=3)
    await endpoint.call("prompts/get", {"name": "broken"}, id=4)
    await endpoint.call("tools/call", {"name": "count", "arguments": {"steps": 2}}, id=5, progressToken="p")
    await endpoint.post(rpc("notifications/cancelled", {"requestId": 9}, id=None))
    with trio.fail_after(5):
        while len(access_records(caplog)) < 6:  # the ASGI host may log after the client has its answer
            await trio.sleep(0.01)
    records = access_records(caplog)
    assert [(r["method"], r.get("target"), r["result"], r.get("status"), r.get("code"), r.get("round"))
            for r in records] == [
        ("tools/call", "interview", "input_required", 200, None, 1),
        ("tools/call", "interview", "input_required", 200, None, None),  # a retry's round is in the token
        ("tools/call", "interview", "error", 400, -32020, 1),
        ("prompts/get", "broken", "error", 200, -32603, 1),
        ("tools/call", "count", "complete", 200, None, 1),
        ("notifications/cancelled", None, "accepted", 202, None, None),
    ]
    assert all(r["transport"] == "http" and r["http_method"] == "POST" and r["path"] == "/mcp" for r in records)
    assert all(r["duration_ms"] >= 0 for r in records)
    logged = "\n".join(record.getMessage() for record in caplog.records) + json.dumps(records)
    for secret in (token, "Ada-the-answer", "secret-topic"):
        assert secret not in logged  # never tokens, answers or arguments


async def test_a_refused_request_is_logged_and_an_abandoned_one_says_aborted(nursery, caplog):
    caplog.set_level(logging.INFO, logger="mrtr.access")
    port = await nursery.start(partial(serve, app_server, "127.0.0.1", 0))
    assert (await post(port, rpc("server/discover"), host="evil.example")).status_code == 421
    message = rpc("tools/call", {"name": "slow", "arguments": {"tag": "aborted-log", "seconds": 30}})
    with trio.move_on_after(0.5):  # the client gives up and closes its connection
        await post(port, message)
    with trio.fail_after(5):
        while len(access_records(caplog)) < 2:
            await trio.sleep(0.01)
    refused, aborted = access_records(caplog)
    assert refused["result"] == "error" and refused["status"] == 421 and refused["code"] == -32600
    assert aborted["result"] == "aborted" and aborted["target"] == "slow" and "status" not in aborted


async def test_a_delivered_answer_is_never_logged_as_aborted(nursery, caplog):
    caplog.set_level(logging.INFO, logger="mrtr.access")
    port = await nursery.start(partial(serve, app_server, "127.0.0.1", 0))
    async with httpx.AsyncClient(timeout=5.0) as client:
        for number in range(50):
            message = rpc("tools/call", {"name": "count", "arguments": {"steps": 1}}, id=number, progressToken=number)
            answer = await client.post(f"http://127.0.0.1:{port}/mcp", json=message,
                                       headers={**BASE_HEADERS, **mcp_headers(message)})
            assert answer.status_code == 200
    with trio.fail_after(5):
        while len(access_records(caplog)) < 50:
            await trio.sleep(0.01)
    assert {r["result"] for r in access_records(caplog)} == {"complete"}


# -- mrtr serve over HTTP: JSON logs, the key warning once ---------------------------------------


def served_port(process: trio.Process, stderr: bytearray) -> int | None:
    """The port from the ``serving MCP on http://HOST:PORT/mcp`` log line, once it is there."""
    match = re.search(rb"serving MCP on http://[^:]+:(\d+)/mcp", stderr)
    assert match or process.returncode is None, stderr.decode()  # it exited before serving
    return int(match.group(1)) if match else None


@pytest.mark.slow
async def test_mrtr_serve_json_logs_over_http():
    env = {key: value for key, value in os.environ.items() if key != "MRTR_SECRET"}
    args = ["serve", "tests.ops_app:server", "--port", "0", "--log-format", "json"]
    async with mrtr_process(args, cwd=REPO, env=env) as (process, stderr):
        with trio.fail_after(20):
            port = await until(lambda: served_port(process, stderr), timeout=20)
            answer = await post(port, rpc("tools/call", {"name": "explode"}))
            assert answer.status_code == 200 and answer.json()["result"]["isError"] is True
            validate_message(answer.json(), result_def="CallToolResult")
            await until(lambda: b"mrtr.access" in stderr, timeout=20)
            process.terminate()
            assert await process.wait() == 0
    records = [json.loads(line) for line in stderr.decode().splitlines()]  # every line is JSON
    assert len([r for r in records if "MRTR_SECRET" in r["message"]]) == 1
    (access,) = [r for r in records if r["logger"] == "mrtr.access"]
    assert access["status"] == 200 and access["result"] == "tool_error" and access["target"] == "explode"
    (failure,) = [r for r in records if r["level"] == "error"]
    assert "ValueError: disk on fire" in failure["traceback"]


# -- the wrong event loop -------------------------------------------------------------------------


@pytest.mark.slow
async def test_an_asyncio_hypercorn_fails_at_start_saying_how_to_run_it():
    with trio.fail_after(30):  # it stops by itself instead of serving 500s
        process = await trio.run_process(
            [sys.executable, "-m", "hypercorn", "tests.conformance.asgi:app", "--bind", "127.0.0.1:0"],
            cwd=ROOT, capture_stdout=True, capture_stderr=True, check=False)
    output = process.stderr + process.stdout
    assert b"Lifespan failure in startup" in output and b"--worker-class trio" in output


def test_an_asyncio_host_without_lifespan_gets_500_saying_why():
    app = ASGIApp(app_server)
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 500
    assert WRONG_LOOP.encode() in sent[1]["body"] and b"--worker-class trio" in sent[1]["body"]


@pytest.mark.slow
async def test_mrtr_serve_allowed_host_flag():
    args = ["serve", "tests.stdio_server:server", "--port", "0", "--allowed-host", "mcp.example.com"]
    async with mrtr_process(args, cwd=REPO, env=os.environ) as (process, stderr):
        with trio.fail_after(20):
            port = await until(lambda: served_port(process, stderr), timeout=20)
            refused = await post(port, rpc("server/discover"))
            assert refused.status_code == 421
            assert (await post(port, rpc("server/discover"), host="mcp.example.com")).status_code == 200
            process.terminate()
            assert await process.wait() == 0


def test_a_malformed_allowed_host_is_a_usage_error(capsys):
    from mrtr.cli import main

    assert main(["serve", "tests.stdio_server:server", "--port", "1", "--allowed-host", "host:notaport"]) == 2
    assert "allowed_hosts" in capsys.readouterr().err
