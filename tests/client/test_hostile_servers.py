"""Hostile servers mrtr.Client must survive: silent, endless and oversized answers.

Memory bounds are measured, not assumed: tracemalloc's peak over the call, with the
message cap lowered to 1 MiB, stays within a few MiB while the server sends 48 MiB.
"""

from __future__ import annotations

import gzip
import json
import sys
import tracemalloc
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import pytest
import trio

import mrtr
from mrtr.client import ClientError

from .hostile import DISCOVER, head, serve_http

CAP = 1024 * 1024  # the message cap these tests lower MAX_MESSAGE_SIZE to
SENT = 48 * 1024 * 1024  # what a hostile server sends of one line or body before it gives up
BOUND = 8 * 1024 * 1024  # the most the client may allocate on top while refusing it


@contextmanager
def peak_allocation() -> Iterator[list[int]]:
    """The peak of memory allocated inside the block (tracemalloc), appended to the yielded list."""
    tracemalloc.start()
    measured: list[int] = []
    try:
        yield measured
    finally:
        measured.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


@pytest.fixture
def capped(monkeypatch: pytest.MonkeyPatch) -> None:
    from mrtr.client import targets

    monkeypatch.setattr(targets, "MAX_MESSAGE_SIZE", CAP)


def _endless(content_type: str, first: bytes, filler: bytes, *, gzipped: bool = False) -> Any:
    """A respond() sending ``first`` then ``filler`` until SENT bytes (decoded), never a newline."""
    body = first + filler * ((SENT - len(first)) // len(filler))
    wire = gzip.compress(body, 9) if gzipped else body
    extra = {"Content_Encoding": "gzip"} if gzipped else {}

    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        await stream.send_all(head(200, content_type, **extra))
        for start in range(0, len(wire), 65536):
            await stream.send_all(wire[start:start + 65536])

    return respond

# A "server" that reads its input and never writes a line.
SILENT = [sys.executable, "-c", "import sys\nfor _ in sys.stdin: pass"]


@pytest.mark.slow
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


@pytest.mark.slow
async def test_a_stdio_line_without_end_is_refused_not_buffered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stdio reader kept a line without a newline in memory whatever its size."""
    from mrtr.client import targets

    monkeypatch.setattr(targets, "MAX_MESSAGE_SIZE", 1024 * 1024)
    endless = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536); sys.stdout.flush()"]
    with trio.fail_after(20):
        async with mrtr.Client.stdio(endless, timeout=10) as client:
            with pytest.raises(ClientError, match="larger than"):
                await client.call_tool("add", {"a": 1, "b": 2})


@pytest.mark.parametrize("gzipped", [False, True], ids=["identity", "gzip"])
async def test_an_sse_line_that_never_ends_is_refused_within_the_cap(nursery: trio.Nursery, capped: None,
                                                                      gzipped: bool) -> None:
    """`data: xxxx...` without a newline grew the client to 2.4 GB in 8 s (gzip: as fast, on a small wire):
    the cap was checked only once a whole line had arrived."""
    url = await serve_http(nursery, _endless("text/event-stream", b"data: ", b"x" * 65536, gzipped=gzipped))
    async with mrtr.Client(url, timeout=10) as client:
        with trio.fail_after(60), peak_allocation() as peak:
            with pytest.raises(ClientError, match="larger than"):
                await client.request("server/discover")
    assert peak[0] < BOUND, f"{peak[0] / 2**20:.1f} MiB allocated to refuse a line over {CAP / 2**20:.0f} MiB"


async def test_a_gzip_json_body_is_capped_on_its_decoded_size(nursery: trio.Nursery, capped: None) -> None:
    """48 MiB of JSON in about 50 KB of gzip: the cap holds on what the body decodes to."""
    url = await serve_http(nursery, _endless("application/json", b"[", b"1," * 32768, gzipped=True))
    async with mrtr.Client(url, timeout=10) as client:
        with trio.fail_after(60), peak_allocation() as peak:
            with pytest.raises(ClientError, match="larger than"):
                await client.request("server/discover")
    assert peak[0] < BOUND, f"{peak[0] / 2**20:.1f} MiB allocated to refuse a body over {CAP / 2**20:.0f} MiB"


async def test_a_body_longer_than_the_cap_by_its_length_is_refused_unread(nursery: trio.Nursery,
                                                                         capped: None) -> None:
    """The server announces more than the cap and sends nothing: the client refuses without waiting."""
    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        await stream.send_all(head(200, Content_Length=str(CAP + 1)))
        await stream.receive_some()  # until the client hangs up

    url = await serve_http(nursery, respond)
    async with mrtr.Client(url, timeout=60) as client:
        with trio.fail_after(20), pytest.raises(ClientError, match="larger than"):
            await client.request("server/discover")


@pytest.mark.parametrize(("encoding", "body", "problem"), [
    ("gzip", b"not gzip at all", "gzip"),
    ("br", b"\x0b\x02\x80{}\x03", "Content-Encoding 'br'"),
    ("gzip, gzip", gzip.compress(gzip.compress(b"{}")), "Content-Encoding 'gzip, gzip'"),
])
async def test_a_body_that_does_not_decode_is_a_client_error(nursery: trio.Nursery, encoding: str, body: bytes,
                                                             problem: str) -> None:
    """A body claiming gzip that is not gzip escaped as httpx.DecodingError, not a ClientError."""
    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        await stream.send_all(head(200, Content_Encoding=encoding, Content_Length=str(len(body))) + body)

    url = await serve_http(nursery, respond)
    async with mrtr.Client(url, timeout=10) as client:
        with trio.fail_after(30), pytest.raises(ClientError, match=problem):
            await client.request("server/discover")


async def test_gzip_and_deflate_answers_are_read(nursery: trio.Nursery) -> None:
    bodies = {"gzip": gzip.compress, "deflate": zlib.compress,
              "deflate-raw": lambda data: zlib.compress(data)[2:-4]}  # raw deflate, as some servers send
    answers = iter(bodies.items())

    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        name, compress = next(answers)
        body = compress(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": DISCOVER}).encode())
        await stream.send_all(head(200, Content_Encoding=name.split("-")[0], Content_Length=str(len(body))) + body)

    url = await serve_http(nursery, respond)
    async with mrtr.Client(url, timeout=10) as client:
        for _ in bodies:
            assert (await client.discover())["supportedVersions"] == ["2026-07-28"]


async def test_sse_lines_end_with_cr_lf_or_crlf_even_split_across_reads(nursery: trio.Nursery) -> None:
    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        progress = json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
            "progressToken": message["id"], "progress": 1}}).encode()
        final = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": DISCOVER}).encode()
        await stream.send_all(head(200, "text/event-stream"))
        for piece in (b"\xef\xbb\xbf: hi\r", b"\ndata: " + progress + b"\r", b"\r", b"data:" + final[:10],
                      b"\r\ndata:" + final[10:] + b"\n", b"\n"):
            await stream.send_all(piece)
            await trio.sleep(0)  # each piece its own read, where the transport allows

    seen = []
    url = await serve_http(nursery, respond)
    async with mrtr.Client(url, timeout=10, on_progress=lambda *args: seen.append(args)) as client:
        with trio.fail_after(30):
            assert (await client.request("server/discover"))["capabilities"]
    assert seen == [(1, None, None)]
