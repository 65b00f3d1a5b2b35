"""The native server's HTTP/1.1 parsing on hostile and unusual input, over raw loopback sockets.

Every framing error is answered 400 (505 for a version other than 1.0/1.1) and the
connection is closed, so bytes hidden in a body are never served as a request.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from functools import partial

import h11
import pytest
import trio

from mrtr.transports.http.native import serve

from ..wire_schema import validate_message
from .conftest import raw_post, rpc
from .test_native import RawClient, header, start


async def read_all(client: RawClient) -> bytes:
    data = b""
    with trio.fail_after(5):
        while True:
            try:
                chunk = await client.stream.receive_some(65536)
            except trio.BrokenResourceError:
                break
            if not chunk:
                break
            data += chunk
    return data


def smuggled(port: int) -> bytes:
    """A complete request that would be served if a body were read by the wrong length."""
    return raw_post(rpc("tools/call", {"name": "pid"}, id=99), port)


FRAMING = {
    "CL+TE": lambda inner: (b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                            b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + inner),
    "TE+CL": lambda inner: (b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                            b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + inner),
    "duplicate CL": lambda inner: (b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n"
                                   b"Content-Length: %d\r\n\r\n" % len(inner) + inner),
    "comma-listed CL": lambda inner: (b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 0, %d\r\n\r\n"
                                      % len(inner) + inner),
    "obs-fold": lambda inner: (b"POST /mcp HTTP/1.1\r\nHost: a\r\nX-Folded: a\r\n b\r\nContent-Length: 0\r\n\r\n"
                               + inner),
    "bare LF": lambda inner: b"POST /mcp HTTP/1.1\nHost: a\nContent-Length: 0\n\n" + inner,
    "malformed request line": lambda inner: b"POST /mcp\r\nHost: a\r\n\r\n" + inner,
    "no method": lambda inner: b"/mcp HTTP/1.1\r\nHost: a\r\n\r\n" + inner,
    "space in header name": lambda inner: b"POST /mcp HTTP/1.1\r\nHost : a\r\nContent-Length: 0\r\n\r\n" + inner,
    "negative CL": lambda inner: b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n" + inner,
}


@pytest.mark.parametrize("case", sorted(FRAMING))
async def test_a_framing_error_is_400_and_the_connection_is_closed(nursery, case):
    port, _ = await start(nursery)
    client = await RawClient.connect(port)
    await client.send(FRAMING[case](smuggled(port)))
    data = await read_all(client)
    assert data.startswith(b"HTTP/1.1 400 "), data
    assert data.count(b"HTTP/1.1 ") == 1, data  # the request hidden behind it was not served
    assert b"connection: close" in data.lower()


@pytest.mark.parametrize("version", [b"HTTP/9.9", b"HTTP/2.0", b"HTTP/3.1"])
async def test_an_unsupported_http_version_is_505(nursery, version):
    port, _ = await start(nursery)
    client = await RawClient.connect(port)
    await client.send(raw_post(rpc("tools/list"), port).replace(b"HTTP/1.1", version, 1) + smuggled(port))
    data = await read_all(client)
    assert data.startswith(b"HTTP/1.1 505 "), data
    assert data.count(b"HTTP/1.1 ") == 1, data


async def test_pipelined_requests_are_answered_in_order(nursery):
    port, _ = await start(nursery)
    client = await RawClient.connect(port)
    messages = [
        rpc("tools/call", {"name": "pid"}, id=1),
        rpc("tools/call", {"name": "count", "arguments": {"steps": 2}}, id=2, progressToken="p"),  # an SSE answer
        rpc("tools/list", id=3),
        rpc("notifications/cancelled", {"requestId": 9}, id=None),  # 202, no body
        rpc("tools/call", {"name": "pid"}, id=5),
    ]
    await client.send(b"".join(raw_post(message, port) for message in messages))
    seen = []
    with trio.fail_after(5):
        for _ in messages:
            # tell the h11 client a request went out (the bytes already did, all at once)
            client.conn.send(h11.Request(method="POST", target="/mcp", headers=[("Host", "a"), ("Content-Length", "0")]))
            client.conn.send(h11.EndOfMessage())
            response, body = await client.response()
            client.conn.start_next_cycle()
            if response.status_code == 202:
                seen.append("accepted")
                continue
            assert response.status_code == 200
            if header(response, b"content-type") == b"text/event-stream":
                last = [chunk for chunk in body.decode().split("\n\n") if chunk][-1]
                reply = json.loads(last[len("data: "):])
            else:
                reply = json.loads(body)
            validate_message(reply)
            seen.append(reply["id"])
    assert seen == [1, 2, 3, "accepted", 5]


async def test_a_chunked_request_body_is_read(nursery):
    port, _ = await start(nursery)
    data = raw_post(rpc("tools/list"), port)
    head, _, body = data.partition(b"\r\n\r\n")
    head = b"\r\n".join(line for line in head.split(b"\r\n") if not line.startswith(b"Content-Length"))
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7]) for i in range(0, len(body), 7))
    client = await RawClient.connect(port)
    await client.send(head + b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n")
    with trio.fail_after(5):
        response, answer = await client.response()
    assert response.status_code == 200
    validate_message(json.loads(answer), result_def="ListToolsResult")


async def test_connection_close_is_honoured(nursery):
    port, _ = await start(nursery)
    client = await RawClient.connect(port)
    await client.send(raw_post(rpc("tools/list"), port, {"Connection": "close"}) + smuggled(port))
    data = await read_all(client)
    assert data.startswith(b"HTTP/1.1 200 ") and data.count(b"HTTP/1.1 ") == 1
    assert b"\r\nConnection: close\r\n" in data


async def test_http_1_0_gets_its_answer_and_the_connection_closes(nursery):
    port, _ = await start(nursery)
    client = await RawClient.connect(port)
    await client.send(raw_post(rpc("tools/list"), port).replace(b"HTTP/1.1", b"HTTP/1.0", 1))
    data = await read_all(client)
    assert data.startswith(b"HTTP/1.1 200 ") and b"\r\nConnection: close\r\n" in data


async def test_a_slow_sender_within_the_deadline_is_served(nursery):
    port, _ = await start(nursery, request_timeout=5)
    client = await RawClient.connect(port)
    data = raw_post(rpc("tools/list"), port)
    for start_at in range(0, len(data), 40):  # a trickle of small writes, each its own segment
        await client.send(data[start_at:start_at + 40])
        await trio.sleep(0.002)
    with trio.fail_after(5):
        response, _ = await client.response()
    assert response.status_code == 200


async def test_a_header_trickled_past_the_limit_is_431(nursery):
    port, _ = await start(nursery, max_header_size=2048)
    client = await RawClient.connect(port)
    await client.send(b"POST /mcp HTTP/1.1\r\nHost: a\r\nX-Long: ")
    with trio.fail_after(5):
        sent = 0
        while True:
            try:
                await client.send(b"a" * 256)
            except trio.BrokenResourceError:
                break
            sent += 256
            if sent > 8192:
                break
        data = await read_all(client)
    assert data.startswith(b"HTTP/1.1 431 "), data


async def test_an_upgrade_request_is_answered_and_the_connection_closed(nursery):
    port, _ = await start(nursery)
    client = await RawClient.connect(port)
    await client.send(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"
                      % port)
    data = await read_all(client)
    assert data.startswith(b"HTTP/1.1 406 "), data  # a GET stream of a 2025 session must accept text/event-stream


async def test_query_strings_and_absolute_targets_reach_the_endpoint(nursery):
    port, _ = await start(nursery)
    for target in (b"/mcp?x=1", b"http://127.0.0.1/mcp"):
        client = await RawClient.connect(port)
        await client.send(raw_post(rpc("tools/list"), port).replace(b"POST /mcp ", b"POST " + target + b" ", 1))
        with trio.fail_after(5):
            response, _ = await client.response()
        assert response.status_code == 200, target



async def _raw_answer(port: int, data: bytes) -> bytes:
    client = await RawClient.connect(port)
    await client.send(data)
    return await read_all(client)


async def test_the_inline_path_writes_the_same_bytes_as_the_task_path(nursery):
    """A sync handler on the inline path (no task) and in a worker thread (the path with a
    watcher and a stream writer) must put the very same bytes on the wire."""
    from .app import build_server

    # Both answer Host "h", so the two requests are byte for byte the same.
    inline = await nursery.start(partial(serve, build_server(secret=b"s" * 32), "127.0.0.1", 0,
                                         allowed_hosts=("h",)))
    threaded = await nursery.start(partial(serve, build_server(secret=b"s" * 32, sync_handlers="thread"),
                                           "127.0.0.1", 0, allowed_hosts=("h",)))
    requests = {
        "json": rpc("tools/call", {"name": "ask_name"}),
        "sse": rpc("tools/call", {"name": "chatty"}, **{"io.modelcontextprotocol/logLevel": "info"}),
        "error": rpc("prompts/get", {"name": "broken"}),
    }
    for name, message in requests.items():
        answers = []
        for port in (inline, threaded):
            raw = raw_post(message, port, {"Connection": "close"})
            answers.append(await _raw_answer(port, raw.replace(b"127.0.0.1:%d" % port, b"h")))
        assert answers[0].startswith(b"HTTP/1.1 "), answers[0]
        if name == "sse":
            assert b"content-type: text/event-stream" in answers[0] and b"Transfer-Encoding: chunked" in answers[0]
        if name != "json":  # ask_name's answer holds a freshly sealed token
            assert answers[0] == answers[1], name
        else:
            assert answers[0].split(b"\r\n\r\n")[0] == answers[1].split(b"\r\n\r\n")[0]


async def test_a_head_over_the_limit_after_a_pipelined_request_is_431(nursery):
    # The first request is served; the second head, begun in the same read and still open
    # after it, is bounded by what its fields add up to, not by the bytes of the first.
    port, _ = await start(nursery, max_header_size=2048)
    client = await RawClient.connect(port)
    second = b"POST /mcp HTTP/1.1\r\nHost: a\r\n" + b"".join(b"X-F%d: %s\r\n" % (i, b"v" * 100) for i in range(30))
    await client.send(raw_post(rpc("tools/list"), port) + second)
    data = await read_all(client)
    assert data.startswith(b"HTTP/1.1 200 "), data[:200]
    assert b"HTTP/1.1 431 " in data, data[-300:]


async def test_a_head_under_the_limit_in_many_reads_is_served(nursery):
    # Counted by what it holds, a head just under the limit is served whatever the reads it came in.
    port, _ = await start(nursery, max_header_size=4096)
    client = await RawClient.connect(port)
    request = raw_post(rpc("tools/list"), port)
    head, _, body = request.partition(b"\r\n\r\n")
    filler = b"X-Pad: " + b"p" * (3800 - len(head)) + b"\r\n"
    data = head + b"\r\n" + filler + b"\r\n" + body
    for start_at in range(0, len(data), 700):
        await client.send(data[start_at:start_at + 700])
        await trio.sleep(0.002)
    with trio.fail_after(5):
        response, _ = await client.response()
    assert response.status_code == 200


@pytest.mark.parametrize("spelling", [b"content-length", b"CONTENT-LENGTH", b"Content-length"])
async def test_the_declared_length_is_read_whatever_its_case(nursery, spelling):
    port, _ = await start(nursery, max_body_size=1000)
    client = await RawClient.connect(port)
    await client.send(b"POST /mcp HTTP/1.1\r\nHost: a\r\n" + spelling + b": 5000\r\n\r\n")
    with trio.fail_after(3):
        response, _ = await client.response()
    assert response.status_code == 413


async def _continued_with(nursery, fields: bytes) -> None:
    """A tools/list head with ``fields`` added gets 100 Continue, then its body is answered 200."""
    port, _ = await start(nursery)
    client = await RawClient.connect(port)
    body = json.dumps(rpc("tools/list")).encode()
    head = raw_post(rpc("tools/list"), port).partition(b"\r\n\r\n")[0]
    await client.send(head + b"\r\n" + fields + b"\r\n")
    with trio.fail_after(3):
        interim = await client.stream.receive_some(65536)
    assert interim.startswith(b"HTTP/1.1 100 Continue"), interim
    await client.send(body)
    with trio.fail_after(3):
        response, _ = await client.response()
    assert response.status_code == 200


@pytest.mark.parametrize("spelling", [b"expect", b"EXPECT", b"Expect"])
async def test_expect_100_continue_is_read_whatever_its_case(nursery, spelling):
    await _continued_with(nursery, spelling + b": 100-continue\r\n")


def _chunked(port: int, trailers: bytes) -> bytes:
    """A chunked tools/list request whose last chunk is followed by ``trailers``."""
    head, _, body = raw_post(rpc("tools/list"), port).partition(b"\r\n\r\n")
    head = b"\r\n".join(line for line in head.split(b"\r\n") if not line.startswith(b"Content-Length"))
    return head + b"\r\nTransfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n" + trailers


async def test_trailer_fields_count_toward_the_head_limit(nursery):
    # Trailers arrive after the body: bounded with the head's fields, or a client could send them forever.
    port, _ = await start(nursery, max_header_size=4096)
    client = await RawClient.connect(port)
    await client.send(_chunked(port, b""))
    for number in range(40):
        await client.send(b"X-T%d: %s\r\n" % (number, b"v" * 200))
    await client.send(b"\r\n")
    with trio.fail_after(5):
        response, _ = await client.response()
    assert response.status_code == 431
    # a few short trailers are read and the request is served
    client = await RawClient.connect(port)
    await client.send(_chunked(port, b"X-Checksum: abc\r\nX-Other: d\r\n\r\n"))
    with trio.fail_after(5):
        response, answer = await client.response()
    assert response.status_code == 200
    validate_message(json.loads(answer), result_def="ListToolsResult")


@pytest.mark.parametrize("reads", [1, 7])
async def test_a_head_is_measured_the_same_in_one_read_or_many(nursery, reads):
    # Fields sent without the optional space: the head is exactly at the limit in wire bytes, so it is
    # served however the reads split it (a count above the wire bytes would refuse it in one case only).
    port, _ = await start(nursery, max_header_size=2048)
    head, _, body = raw_post(rpc("tools/list"), port).partition(b"\r\n\r\n")
    fields = b"".join(b"X%03d:v\r\n" % number for number in range(150))
    pad = 2048 - len(head) - 2 - len(fields) - len(b"Y:\r\n") - 2
    data = head + b"\r\n" + fields + b"Y:" + b"p" * pad + b"\r\n\r\n"
    assert len(data) == 2048
    data += body
    client = await RawClient.connect(port)
    step = -(-len(data) // reads)
    for start_at in range(0, len(data), step):
        await client.send(data[start_at:start_at + step])
        if reads > 1:
            await trio.sleep(0.002)
    with trio.fail_after(5):
        response, _ = await client.response()
    assert response.status_code == 200


async def test_any_expect_field_asking_for_100_continue_is_honoured(nursery):
    await _continued_with(nursery, b"Expect: 100-continue\r\nExpect: something-else\r\n")


# -- found by attacking the front end: what a client may send after the head, and when --------


async def test_an_unfinished_trailer_field_is_bounded_like_a_head(nursery):
    # llhttp keeps a trailer field's value until its line ends: a client that never ends it must not
    # grow the connection's memory until it stops, but be refused once it passes the head limit.
    port, _ = await start(nursery, max_header_size=4096)
    client = await RawClient.connect(port)
    await client.send(_chunked(port, b"X-T: "))
    with trio.fail_after(5):
        sent = 0
        while sent < 64 * 1024:
            try:
                await client.send(b"a" * 1024)
            except trio.BrokenResourceError:
                break
            sent += 1024
        data = await read_all(client)
    assert data.startswith(b"HTTP/1.1 431 "), data


_FLOOD = """
import socket, sys
port = int(sys.argv[1])
sock = socket.create_connection(("127.0.0.1", port))
sock.sendall(b"POST /mcp HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\nContent-Type: application/json\\r\\n"
             b"Transfer-Encoding: chunked\\r\\n\\r\\n" % port)
chunks = b"2\\r\\n  \\r\\n" * 8192
sock.settimeout(20)
try:
    while True:
        sock.sendall(chunks)
except OSError:
    pass
try:
    sys.stdout.buffer.write(sock.recv(65536)[:40])
except OSError:
    pass
"""


@pytest.mark.slow
async def test_a_request_that_keeps_arriving_is_held_to_its_deadline_and_starves_no_one(nursery):
    # A client whose bytes are always there (a process of its own sending two-byte chunks as fast as
    # the socket takes them) never makes a read wait, where the deadline and the loop's other tasks
    # would get their turn: it gets its 408, and other connections are served meanwhile.
    port, _ = await start(nursery, request_timeout=2.0, max_body_size=64 << 20)
    flooder = subprocess.Popen([sys.executable, "-c", _FLOOD, str(port)], stdout=subprocess.PIPE)
    try:
        await trio.sleep(0.3)  # let the flood fill the socket
        # Wall-clock bounds: a starved loop cannot run trio's own deadlines (they fire at a checkpoint).
        began = time.monotonic()
        client = await RawClient.connect(port)
        await client.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
        response, _ = await client.response()
        assert response.status_code == 200
        assert time.monotonic() - began < 3, "another connection waited for the flood"
        while flooder.poll() is None:
            assert time.monotonic() - began < 15, "the flooding request was not held to its deadline"
            await trio.sleep(0.05)
        assert flooder.stdout is not None
        assert flooder.stdout.read().startswith(b"HTTP/1.1 408 ")
    finally:
        flooder.kill()
        flooder.wait()


async def test_a_pipelined_request_has_a_deadline_of_its_own(nursery):
    # The second request's first bytes come in the read that ends the first: its deadline runs from
    # then, not from when the first request began.
    port, _ = await start(nursery, request_timeout=1.0)
    first, second = raw_post(rpc("tools/list", id=1), port), raw_post(rpc("tools/list", id=2), port)
    head, _, body = first.partition(b"\r\n\r\n")
    line, _, rest = second.partition(b"\r\n")
    client = await RawClient.connect(port)
    await client.send(head + b"\r\n\r\n")
    await trio.sleep(0.6)
    await client.send(body + line + b"\r\n")
    await trio.sleep(0.6)  # 1.2 s after the first request began, 0.6 s after the second did
    await client.send(rest)
    data = await read_all_of(client, 2)
    assert [part.split(b"\r\n", 1)[0] for part in data.split(b"HTTP/1.1 ")[1:]] == [b"200 OK", b"200 OK"], data


async def read_all_of(client: RawClient, responses: int) -> bytes:
    data = b""
    with trio.fail_after(5):
        while data.count(b"HTTP/1.1 ") < responses or not data.endswith(b"}"):
            chunk = await client.stream.receive_some(65536)
            if not chunk:
                break
            data += chunk
    return data


async def test_a_large_head_with_trailers_is_measured_once_whatever_the_reads(nursery):
    # A head near the limit arriving in the same read as its chunked body and a trailer: its fields
    # were counted twice, and the request refused only when the reads fell that way.
    port, _ = await start(nursery, max_header_size=16384)
    head, _, body = raw_post(rpc("tools/list"), port).partition(b"\r\n\r\n")
    head = b"\r\n".join(line for line in head.split(b"\r\n") if not line.startswith(b"Content-Length"))
    body += b" " * 8000  # JSON may end in whitespace: the read holding head and body passes the limit
    data = (head + b"\r\nX-Pad: " + b"p" * 9000 + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"%x\r\n" % len(body) + body + b"\r\n0\r\nX-Checksum: abc\r\n\r\n")
    assert len(data) > 16384
    for split in (False, True):
        client = await RawClient.connect(port)
        if split:
            head, _, rest = data.partition(b"\r\n\r\n")
            await client.send(head + b"\r\n\r\n")
            await trio.sleep(0.05)
            await client.send(rest)
        else:
            await client.send(data)
        with trio.fail_after(5):
            response, _ = await client.response()
        assert response.status_code == 200, split


async def test_an_absolute_target_is_read_whatever_the_case_of_its_scheme(nursery, caplog):
    port, _ = await start(nursery)
    for target in (b"HTTP://127.0.0.1/mcp", b"Http://alice:pw@127.0.0.1/mcp", b"hTTpS://127.0.0.1/mcp?x=1"):
        client = await RawClient.connect(port)
        await client.send(raw_post(rpc("tools/list"), port).replace(b"POST /mcp ", b"POST " + target + b" ", 1))
        with trio.fail_after(5):
            response, _ = await client.response()
        assert response.status_code == 200, target


@pytest.mark.parametrize("value", [b"100-continue ", b"100-continue\t", b"100-Continue \t"])
async def test_expect_100_continue_is_read_without_the_whitespace_around_it(nursery, value):
    await _continued_with(nursery, b"Expect: " + value + b"\r\n")


async def test_an_upgrade_offer_after_a_pipelined_request_is_answered_too(nursery):
    port, _ = await start(nursery)
    upgrade = raw_post(rpc("tools/list", id=2), port, {"Connection": "upgrade", "Upgrade": "websocket"})
    client = await RawClient.connect(port)
    await client.send(raw_post(rpc("tools/list", id=1), port) + upgrade)
    data = await read_all(client)
    assert [part.split(b"\r\n", 1)[0] for part in data.split(b"HTTP/1.1 ")[1:]] == [b"200 OK", b"200 OK"], data
    assert b'"id":2' in data


async def test_a_request_pipelined_behind_a_slow_one_is_timed_from_when_it_is_read(nursery):
    # Nothing is read while a handler runs: the request behind it, begun in the same read, is not to
    # blame for that wait. Its deadline runs from when reading resumes.
    port, _ = await start(nursery, request_timeout=1.0)
    slow = raw_post(rpc("tools/call", {"name": "slow", "arguments": {"tag": "a", "seconds": 1.5}}, id=1), port)
    body = b" " * 200_000 + json.dumps(rpc("tools/list", id=2)).encode()  # JSON may start with whitespace
    head = raw_post(rpc("tools/list", id=2), port).partition(b"\r\n\r\n")[0]
    head = b"\r\n".join(line for line in head.split(b"\r\n") if not line.startswith(b"Content-Length"))
    big = head + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body  # many reads long
    client = await RawClient.connect(port)
    await client.send(slow + big[:200])
    await trio.sleep(0.1)
    await client.send(big[200:])
    data = await read_all_of(client, 2)
    assert [part.split(b"\r\n", 1)[0] for part in data.split(b"HTTP/1.1 ")[1:]] == [b"200 OK", b"200 OK"], data


async def test_blank_lines_before_a_request_do_not_start_its_clock_early(nursery):
    port, _ = await start(nursery, request_timeout=1.0)
    data = raw_post(rpc("tools/list"), port)
    client = await RawClient.connect(port)
    for part in (b"\r\n", data[:50], data[50:]):  # each its own read
        await client.send(part)
        await trio.sleep(0.05)
    with trio.fail_after(5):
        response, _ = await client.response()
    assert response.status_code == 200
