"""A deadline on each exchange: a server that trickles bytes cannot keep a call alive forever.

``timeout`` bounds each read (and, over stdio, the wait between progress notifications);
``deadline`` bounds one request and its response, however the server paces it. The time
an answerer (a person) takes between rounds is not the server's and is not counted.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import mrtr
from mrtr.client import ClientError
from mrtr.client.client import DEFAULT_DEADLINE

from .app import server as app_server
from .hostile import DISCOVER, head, listing, result, send_json, serve_http
from .test_malformed_responses import REPO, one_line_failure

GUARD = 30  # seconds: the bound for a hang, not the behaviour under test
PACE = 0.05  # seconds between the bytes a trickling server sends


async def trickle_sse(message: dict[str, Any], stream: trio.SocketStream) -> None:
    """An event stream of keep-alive comments, one every PACE, never a response."""
    if message["method"] == "tools/list":
        await send_json(stream, result(message, listing("tools", [{"name": "t", "inputSchema": {}}])))
        return
    await stream.send_all(head(200, "text/event-stream"))
    while True:
        await stream.send_all(b":\n")
        await trio.sleep(PACE)


async def trickle_body(message: dict[str, Any], stream: trio.SocketStream) -> None:
    """A JSON body announced at 100 kB and sent one byte every PACE."""
    await stream.send_all(head(200, Content_Length="100000"))
    while True:
        await stream.send_all(b" ")
        await trio.sleep(PACE)


@pytest.mark.parametrize("respond", [trickle_sse, trickle_body], ids=["sse-comments", "json-body"])
async def test_a_trickling_http_server_is_cut_by_the_deadline(nursery: trio.Nursery, respond: Any) -> None:
    """`timeout` bounds each read; a byte every 50 ms kept the call alive forever."""
    url = await serve_http(nursery, respond)
    async with mrtr.Client(url, timeout=10, deadline=1) as client:
        with trio.fail_after(GUARD), pytest.raises(ClientError, match="within the 1 s deadline") as caught:
            await client.request("server/discover")
    assert caught.value.code == -32603


STDIO_TRICKLE = textwrap.dedent("""
    import json, os, sys, threading, time
    log = open(sys.argv[1], "a")
    started = threading.Event()
    def read():
        for line in sys.stdin:
            log.write(line); log.flush()
            message = json.loads(line)
            if "id" in message:
                started.request = message; started.set()
        os._exit(0)
    threading.Thread(target=read, daemon=True).start()
    started.wait()
    token = started.request["params"]["_meta"]["progressToken"]
    progress = 0
    while True:  # progress forever: each note restarts the per-answer timeout
        progress += 1
        note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token,
                                                                                 "progress": progress}}
        sys.stdout.write(json.dumps(note) + "\\n"); sys.stdout.flush()
        time.sleep(%r)
""" % PACE)


@pytest.mark.slow
async def test_a_stdio_server_reporting_progress_forever_is_cut_and_told(tmp_path: Path) -> None:
    """Progress restarts the stdio timeout, so a server reporting progress forever was never cut."""
    log = tmp_path / "received.jsonl"
    argv = [sys.executable, "-c", STDIO_TRICKLE, str(log)]
    notes: list[float] = []
    async with mrtr.Client.stdio(argv, timeout=10, deadline=1, on_progress=lambda p, t, m: notes.append(p),
                                 era="modern") as client:
        with trio.fail_after(GUARD), pytest.raises(ClientError, match="deadline"):
            await client.call_tool("t", {})
    assert notes, "the server did report progress"
    received = [json.loads(line) for line in log.read_text().splitlines()]
    assert received[-1]["method"] == "notifications/cancelled"
    assert received[-1]["params"]["requestId"] == received[0]["id"]


async def test_a_deadline_given_to_one_call_overrides_the_clients(nursery: trio.Nursery) -> None:
    url = await serve_http(nursery, trickle_sse)
    async with mrtr.Client(url, deadline=None, era="modern") as client:
        with trio.fail_after(GUARD), pytest.raises(ClientError, match="within the 0.5 s deadline"):
            await client.call_tool("t", {}, deadline=0.5)


async def test_time_spent_answering_is_not_the_servers(mock_clock: trio.testing.MockClock) -> None:
    """The deadline covers each exchange: a person taking ten deadlines to answer does not fail the call."""
    def slow_person(request: Any) -> dict[str, Any]:
        mock_clock.jump(10 * 5)  # the person thinks for ten deadlines over each question
        fields = request.requested_schema["properties"]
        return mrtr.accept(name="Ada") if "name" in fields else mrtr.accept(colour="red") if "colour" in fields \
            else mrtr.accept(age=36)

    async with mrtr.Client(app_server, deadline=5, on_elicit=slow_person) as client:
        called = await client.call_tool("interview", {"topic": "owls"})
    assert called.text == "Ada/red/36/owls"


def test_deadlines_are_checked_when_given() -> None:
    assert mrtr.Client("http://127.0.0.1:1/mcp").deadline == DEFAULT_DEADLINE
    for bad in (0, -1, float("nan"), "5"):
        with pytest.raises((ValueError, TypeError)):
            mrtr.Client("http://127.0.0.1:1/mcp", deadline=bad)  # type: ignore[arg-type]


@pytest.mark.slow
async def test_mrtr_call_timeout_bounds_each_exchange(nursery: trio.Nursery) -> None:
    url = await serve_http(nursery, trickle_sse)
    with trio.fail_after(GUARD):
        done = await trio.run_process([sys.executable, "-m", "mrtr", "call", "--timeout", "1", url, "t"],
                                      capture_stdout=True, capture_stderr=True, check=False, cwd=str(REPO),
                                      stdin=b"")
    assert "within the 1 s deadline" in one_line_failure(done)
    for bad in ("0", "soon"):
        with trio.fail_after(GUARD):
            refused = await trio.run_process([sys.executable, "-m", "mrtr", "call", "--timeout", bad, url, "t"],
                                             capture_stdout=True, capture_stderr=True, check=False, cwd=str(REPO))
        assert refused.returncode == 2 and b"--timeout" in refused.stderr, refused.stderr


async def test_a_server_answering_in_time_is_unaffected(nursery: trio.Nursery) -> None:
    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        await send_json(stream, result(message, DISCOVER))

    url = await serve_http(nursery, respond)
    async with mrtr.Client(url, deadline=5) as client:
        assert (await client.discover())["supportedVersions"] == ["2026-07-28"]


async def test_a_pooled_connection_is_let_go_before_a_server_would_close_it(nursery):
    # Same figure on both sides is a race: the client reuses a connection at the moment the server
    # (or a balancer) closes it idle, and a POST is lost unanswered. The client lets its go first.
    from mrtr.client.targets import KEEPALIVE_EXPIRY
    from mrtr.transports.http.config import ServerConfig

    client = mrtr.Client("http://127.0.0.1:9/mcp")
    await client.target.open(nursery)
    try:
        pool = client.target.http._transport._pool
        assert pool._keepalive_expiry == KEEPALIVE_EXPIRY < ServerConfig().keep_alive_timeout
    finally:
        await client.target.aclose()
