"""stdio keeps its memory bounded when the client stops reading stdout."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mrtr.server import Server
from mrtr.transports.stdio import serve_stdio

from .test_stdio import REPO, call, text_of
from .wire_schema import validate_message


class CountingStdin(trio.abc.ReceiveStream):
    """Hands out one request line per read, as many as asked for, and counts them."""

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines
        self.given = 0

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        if self.given == len(self.lines):
            return b""
        self.given += 1
        return self.lines[self.given - 1]

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


class StalledStdout(trio.abc.SendStream):
    """A stdout nobody reads until ``drain`` is set."""

    def __init__(self) -> None:
        self.drain = trio.Event()
        self.data = bytearray()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.drain.wait()
        self.data += data

    async def wait_send_all_might_not_block(self) -> None:
        await self.drain.wait()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def counting_server() -> tuple[Server, list[int]]:
    server = Server("bounded", secret=b"b" * 32)
    calls = [0]

    @server.tool
    def echo(text: str) -> str:
        calls[0] += 1
        return text

    return server, calls


async def test_a_stalled_stdout_stops_stdin_from_being_read() -> None:
    server, calls = counting_server()
    total = 2_000
    stdin = CountingStdin([json.dumps(call(n, "echo", {"text": "x" * 100})).encode() + b"\n" for n in range(total)])
    stdout = StalledStdout()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: serve_stdio(server, stdin=stdin, stdout=stdout, max_in_flight=8))
            await trio.testing.wait_all_tasks_blocked()
            # Eight lines hold the eight places until their answers are written; nothing
            # more is read while stdout does not drain.
            assert calls[0] == 8
            assert stdin.given == 8
            stdout.drain.set()
    answers = [json.loads(line) for line in stdout.data.splitlines()]
    assert len(answers) == total and stdin.given == total
    assert sorted(answer["id"] for answer in answers) == list(range(total))
    for answer in answers[:5]:
        validate_message(answer, result_def="CallToolResult")


async def test_notifications_behind_a_stalled_stdout_are_capped_responses_are_not() -> None:
    server = Server("chatty", secret=b"c" * 32)

    @server.tool
    async def chatty(ctx: Any) -> str:
        for step in range(1_000):
            ctx.progress(step, total=1_000)
        return "done"

    stdout = StalledStdout()
    stdin = CountingStdin([json.dumps(call(1, "chatty", progressToken="p")).encode() + b"\n"])
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: serve_stdio(server, stdin=stdin, stdout=stdout, notification_buffer=10))
            await trio.testing.wait_all_tasks_blocked()
            stdout.drain.set()
    messages = [json.loads(line) for line in stdout.data.splitlines()]
    assert len(messages) == 11  # ten notifications kept, then the response
    assert text_of(messages[-1]) == "done"


@pytest.mark.slow
async def test_a_client_that_never_reads_cannot_grow_the_server() -> None:
    """Through ``mrtr serve --stdio``: requests with big answers, stdout never read."""
    big = "y" * 8_000
    line = json.dumps(call(0, "echo", {"text": big})).encode() + b"\n"
    total = 5_000  # 40 MB of requests and as much in answers if nothing held the server back
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "mrtr", "serve", "--stdio", "tests.stdio_server:server"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO)
    sent = 0
    try:
        async def flood() -> None:
            nonlocal sent
            for number in range(total):
                await process.stdin.send_all(line.replace(b'"id": 0', b'"id": %d' % number))
                sent += 1

        # The writes stall once the server stops reading; give them a generous deadline.
        with trio.move_on_after(5):
            await flood()
        assert sent < total // 10, f"the server read {sent} of {total} requests with nobody reading its answers"
        rss_kib = _rss_kib(process.pid)
        assert rss_kib < 150 * 1024, f"the server grew to {rss_kib} KiB"
        # Everything read so far is still answered once the client reads.
        reader = process.stdout
        buffer = bytearray()
        answered = 0
        with trio.fail_after(20):
            await process.stdin.aclose()
            while data := await reader.receive_some(1 << 20):
                buffer += data
            for raw in buffer.splitlines():
                message = json.loads(raw)
                if "error" in message:  # the line cut short when the flood was stopped
                    assert message["error"]["code"] == -32700 and "id" not in message
                    continue
                assert text_of(message) == big
                answered += 1
        assert answered >= sent
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def _rss_kib(pid: int) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1])
    return math.inf  # type: ignore[return-value]
