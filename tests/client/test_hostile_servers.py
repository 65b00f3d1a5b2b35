"""Hostile servers mrtr.Client must survive: silent, endless and oversized answers."""

from __future__ import annotations

import sys
from functools import partial

import pytest
import trio

import mrtr
from mrtr.client import ClientError

# A "server" that reads its input and never writes a line.
SILENT = [sys.executable, "-c", "import sys\nfor _ in sys.stdin: pass"]


async def test_a_stdio_server_that_never_answers_is_bounded_by_timeout() -> None:
    """Client.stdio took timeout= and ignored it: a silent server hung the call (and `mrtr call --stdio`)
    forever. The call must fail with a ClientError once `timeout` passes without a word from the server."""
    with trio.fail_after(20):  # the guard for the old behaviour, not the bound under test
        async with mrtr.Client.stdio(SILENT, timeout=0.5) as client:
            with pytest.raises(ClientError, match="no answer"):
                await client.call_tool("add", {"a": 1, "b": 2})


async def _endless_event_server(stream: trio.SocketStream) -> None:
    """Answers every POST with an SSE event whose data lines never end (discover included)."""
    received = b""
    with trio.move_on_after(15):
        while b"\r\n\r\n" not in received:
            received += await stream.receive_some(65536)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n")
        line = b"data: " + b"x" * 65536 + b"\n"
        try:
            while True:
                await stream.send_all(b"%x\r\n%s\r\n" % (len(line), line))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


async def test_an_sse_event_without_end_is_refused_not_buffered(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server streaming one SSE event forever grew the client's memory without bound (200 MB in 2 s
    seen with `mrtr call`). Past MAX_MESSAGE_SIZE the call must fail with a ClientError."""
    from mrtr.client import targets

    monkeypatch.setattr(targets, "MAX_MESSAGE_SIZE", 1024 * 1024)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, _endless_event_server, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        with trio.fail_after(20):
            with pytest.raises(ClientError, match="larger than"):
                async with mrtr.Client(f"http://127.0.0.1:{port}/mcp", timeout=10) as client:
                    await client.call_tool("t", {})
        nursery.cancel_scope.cancel()


async def test_a_stdio_line_without_end_is_refused_not_buffered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stdio reader kept a line without a newline in memory whatever its size."""
    from mrtr.client import targets

    monkeypatch.setattr(targets, "MAX_MESSAGE_SIZE", 1024 * 1024)
    endless = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536); sys.stdout.flush()"]
    with trio.fail_after(20):
        async with mrtr.Client.stdio(endless, timeout=10) as client:
            with pytest.raises(ClientError, match="larger than"):
                await client.call_tool("add", {"a": 1, "b": 2})
