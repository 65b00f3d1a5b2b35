"""The native server's own duties: keep-alive, limits, timeouts, malformed HTTP, shutdown."""

from __future__ import annotations

import json
from functools import partial

import h11
import pytest
import trio

from mrtr.transports.http import ExchangeConfig, ServerConfig
from mrtr.transports.http.native import serve

from ..conftest import until
from ..wire_schema import validate_message
from .app import GATES, SLOW
from .app import server as app_server
from .conftest import raw_post, rpc


async def start(nursery, **options) -> tuple[int, trio.Event]:
    shutdown = trio.Event()
    port = await nursery.start(partial(serve, app_server, "127.0.0.1", 0, shutdown_event=shutdown, **options))
    return port, shutdown


class RawClient:
    """An HTTP/1.1 client on a bare socket, reading responses with h11."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.conn = h11.Connection(h11.CLIENT)

    @classmethod
    async def connect(cls, port: int) -> RawClient:
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def response(self) -> tuple[h11.Response, bytes]:
        head = None
        body = b""
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(await self.stream.receive_some(65536))
                continue
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                assert head is not None
                return head, body

    async def send_request(self, message: dict, port: int, extra: dict | None = None) -> None:
        """Send a POST of ``message`` with the MCP headers mirrored (and ``extra``)."""
        data = raw_post(message, port, extra)
        head_bytes, _, body = data.partition(b"\r\n\r\n")
        lines = head_bytes.decode("latin-1").split("\r\n")[1:]
        headers = [tuple(line.split(": ", 1)) for line in lines]
        wire = self.conn.send(h11.Request(method="POST", target="/mcp", headers=headers))
        wire += self.conn.send(h11.Data(data=body)) + self.conn.send(h11.EndOfMessage())
        await self.send(wire)

    async def request(self, message: dict, port: int, extra: dict | None = None) -> tuple[h11.Response, bytes]:
        await self.send_request(message, port, extra)
        with trio.fail_after(5):
            return await self.response()

    async def at_eof(self) -> bool:
        """Read until EOF; True when the server closed the connection."""
        while True:
            try:
                data = await self.stream.receive_some(65536)
            except trio.BrokenResourceError:
                return True
            if not data:
                return True


def header(response: h11.Response, name: bytes) -> bytes | None:
    for key, value in response.headers:
        if key == name:
            return value
    return None


async def test_keep_alive_serves_several_requests_on_one_connection(nursery):
    port, _ = await start(nursery)
    client = await RawClient.connect(port)
    for number in (1, 2, 3):
        response, body = await client.request(rpc("tools/call", {"name": "pid"}, id=number), port)
        assert response.status_code == 200
        message = json.loads(body)
        validate_message(message, result_def="CallToolResult")
        assert message["id"] == number
        client.conn.start_next_cycle()
    await client.stream.aclose()


async def test_malformed_http_is_400_and_the_connection_closes(nursery):
    port, _ = await start(nursery)
    for garbage in (b"GARBAGE\r\n\r\n", b"POST /mcp HTTP/1.1\r\nHost x\r\n\r\n",
                    b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: nope\r\n\r\n"):
        client = await RawClient.connect(port)
        await client.send(garbage)
        with trio.fail_after(3):
            data = b""
            while True:
                chunk = await client.stream.receive_some(65536)
                if not chunk:
                    break
                data += chunk
        assert data.startswith(b"HTTP/1.1 400 "), data


async def test_a_head_over_the_header_limit_is_431(nursery):
    port, _ = await start(nursery, max_header_size=4096)
    client = await RawClient.connect(port)
    await client.send(b"POST /mcp HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * 8000 + b"\r\n\r\n")
    with trio.fail_after(3):
        response, _ = await client.response()
    assert response.status_code == 431
    with trio.fail_after(3):
        assert await client.at_eof()
    # a head that arrives in pieces trips h11's own bound on an incomplete event
    client = await RawClient.connect(port)
    await client.send(b"POST /mcp HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * 5000)
    with trio.fail_after(3):
        response, _ = await client.response()
    assert response.status_code == 431


async def test_a_declared_body_over_the_limit_is_413_before_it_is_sent(nursery):
    port, _ = await start(nursery, max_body_size=1000)
    client = await RawClient.connect(port)
    await client.send(b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                      b"Expect: 100-continue\r\nContent-Length: 1000000\r\n\r\n")
    with trio.fail_after(3):
        response, body = await client.response()
    assert response.status_code == 413
    assert b"1000" in body


async def test_a_chunked_body_growing_over_the_limit_is_413(nursery):
    port, _ = await start(nursery, max_body_size=1000)
    client = await RawClient.connect(port)
    await client.send(b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
    with trio.fail_after(3):
        for _ in range(3):
            await client.send(b"190\r\n" + b"x" * 400 + b"\r\n")
        response, _ = await client.response()
    assert response.status_code == 413


async def test_expect_100_continue_gets_an_interim_response(nursery):
    port, _ = await start(nursery)
    message = rpc("tools/list")
    data = raw_post(message, port, {"Expect": "100-continue"})
    head, _, body = data.partition(b"\r\n\r\n")
    client = await RawClient.connect(port)
    await client.send(head + b"\r\n\r\n")
    with trio.fail_after(3):
        interim = await client.stream.receive_some(65536)
    assert interim.startswith(b"HTTP/1.1 100 ")
    await client.send(body)
    with trio.fail_after(3):
        client.conn = h11.Connection(h11.CLIENT)
        client.conn.send(h11.Request(method="POST", target="/mcp",
                                     headers=[("Host", "a"), ("Content-Length", str(len(body)))]))
        client.conn.send(h11.Data(data=body))
        client.conn.send(h11.EndOfMessage())
        response, _ = await client.response()
    assert response.status_code == 200


async def test_a_client_that_stalls_mid_request_is_timed_out(nursery):
    port, _ = await start(nursery, request_timeout=0.4)
    for partial_request in (b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Ty",
                            b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\""):
        client = await RawClient.connect(port)
        await client.send(partial_request)
        started = trio.current_time()
        with trio.fail_after(3):
            response, _ = await client.response()
            assert response.status_code == 408
            assert await client.at_eof()
        assert trio.current_time() - started >= 0.3


async def test_a_connection_that_sends_nothing_is_closed_after_the_first_byte_timeout(nursery):
    port, _ = await start(nursery, first_byte_timeout=0.3, keep_alive_timeout=5)
    client = await RawClient.connect(port)
    with trio.fail_after(3):
        assert await client.at_eof()


async def test_an_idle_keep_alive_connection_is_closed(nursery):
    port, _ = await start(nursery, keep_alive_timeout=0.3)
    client = await RawClient.connect(port)
    response, _ = await client.request(rpc("tools/list"), port)
    assert response.status_code == 200
    started = trio.current_time()
    with trio.fail_after(3):
        assert await client.at_eof()
    assert trio.current_time() - started >= 0.25


async def test_connections_beyond_the_limit_get_503_when_none_is_idle(nursery):
    port, _ = await start(nursery, max_connections=2)
    held = [await RawClient.connect(port) for _ in range(2)]
    for client in held:  # both accepted, counted, and busy reading a request (not idle)
        response, _ = await client.request(rpc("tools/list"), port)
        assert response.status_code == 200
        client.conn.start_next_cycle()
        await client.send(b"POST /mcp HTTP/1.1\r\nHost: a\r\n")
    extra = await RawClient.connect(port)
    with trio.fail_after(3):
        response, body = await extra.response()
    assert response.status_code == 503 and header(response, b"retry-after") == b"1"
    # Half-close and wait for the server's close: it frees the slot before it closes.
    await held[0].stream.send_eof()
    with trio.fail_after(3):
        assert await held[0].at_eof()
    again = await RawClient.connect(port)
    response, _ = await again.request(rpc("tools/list"), port)
    assert response.status_code == 200


async def test_a_full_server_closes_its_longest_idle_connection_for_a_new_one(nursery):
    port, _ = await start(nursery, max_connections=2)
    held = [await RawClient.connect(port) for _ in range(2)]
    for client in held:
        response, _ = await client.request(rpc("tools/list"), port)
        assert response.status_code == 200
        client.conn.start_next_cycle()
    newcomer = await RawClient.connect(port)
    response, _ = await newcomer.request(rpc("tools/list"), port)
    assert response.status_code == 200
    with trio.fail_after(3):
        assert await held[0].at_eof()  # idle the longest: closed to make room
    response, _ = await held[1].request(rpc("tools/list"), port)
    assert response.status_code == 200


async def test_connections_per_client_address_are_capped(nursery):
    port, _ = await start(nursery, max_connections_per_client=2)
    held = [await RawClient.connect(port) for _ in range(2)]
    for client in held:  # busy: a request head has started
        await client.send(b"POST /mcp HTTP/1.1\r\nHost: a\r\n")
    extra = await RawClient.connect(port)
    with trio.fail_after(3):
        response, _ = await extra.response()
    assert response.status_code == 503


async def test_head_is_405_without_a_body(nursery):
    port, _ = await start(nursery)
    client = await RawClient.connect(port)
    host = f"127.0.0.1:{port}"
    await client.send(f"HEAD /mcp HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    client.conn.send(h11.Request(method="HEAD", target="/mcp", headers=[("Host", host)]))
    client.conn.send(h11.EndOfMessage())
    with trio.fail_after(3):
        response, body = await client.response()
    assert response.status_code == 405 and body == b""
    assert header(response, b"allow") == b"GET, POST, DELETE"  # the test server serves 2025 sessions too


async def test_graceful_shutdown_lets_in_flight_requests_finish(nursery):
    done = trio.Event()
    shutdown = trio.Event()

    async def run_server(task_status=trio.TASK_STATUS_IGNORED):
        await serve(app_server, "127.0.0.1", 0, shutdown_event=shutdown, shutdown_grace=5,
                    task_status=task_status)
        done.set()

    port = await nursery.start(run_server)
    idle = await RawClient.connect(port)
    response, _ = await idle.request(rpc("tools/list"), port)
    assert response.status_code == 200
    busy = await RawClient.connect(port)
    tag = "graceful"
    await busy.send_request(rpc("tools/call", {"name": "slow", "arguments": {"tag": tag, "seconds": 0.5}}), port)
    await until(lambda: SLOW.get(tag) == "started")
    shutdown.set()
    with trio.fail_after(1):
        assert await idle.at_eof()  # the idle keep-alive connection is closed at once
    with pytest.raises(OSError):
        await trio.open_tcp_stream("127.0.0.1", port)  # no new connections
    with trio.fail_after(3):
        response, body = await busy.response()
    assert response.status_code == 200
    assert header(response, b"connection") == b"close"
    message = json.loads(body)
    validate_message(message, result_def="CallToolResult")
    assert message["result"]["content"][0]["text"] == "slept 0.5"
    assert SLOW[tag] == "finished"
    with trio.fail_after(3):
        await done.wait()


async def test_requests_still_running_after_the_grace_period_are_cancelled(nursery):
    shutdown = trio.Event()
    done = trio.Event()

    async def run_server(task_status=trio.TASK_STATUS_IGNORED):
        await serve(app_server, "127.0.0.1", 0, shutdown_event=shutdown, shutdown_grace=0.2,
                    task_status=task_status)
        done.set()

    port = await nursery.start(run_server)
    busy = await RawClient.connect(port)
    tag = "grace-expired"
    await busy.send_request(rpc("tools/call", {"name": "slow", "arguments": {"tag": tag, "seconds": 30}}), port)
    await until(lambda: SLOW.get(tag) == "started")
    shutdown.set()
    with trio.fail_after(3):
        await done.wait()
    assert SLOW[tag] == "cancelled"


async def test_a_quiet_sse_stream_gets_keep_alive_comments(nursery):
    port, _ = await start(nursery, sse_keepalive=0.05)
    GATES["keepalive"] = trio.Event()
    client = await RawClient.connect(port)
    await client.send_request(rpc("tools/call", {"name": "gated", "arguments": {"tag": "keepalive"}},
                                  progressToken=1), port)
    seen = b""
    with trio.fail_after(3):
        while seen.count(b": keep-alive") < 2:
            client.conn.receive_data(await client.stream.receive_some(65536))
            while True:
                event = client.conn.next_event()
                if event is h11.NEED_DATA:
                    break
                if isinstance(event, h11.Data):
                    seen += event.data
        GATES["keepalive"].set()
        while True:
            event = client.conn.next_event()
            if event is h11.NEED_DATA:
                client.conn.receive_data(await client.stream.receive_some(65536))
            elif isinstance(event, h11.Data):
                seen += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
    events = [chunk for chunk in seen.decode().split("\n\n") if chunk]
    assert events[0].startswith("data: ") and events[-1].startswith("data: ")
    messages = [json.loads(event[len("data: "):]) for event in events if event.startswith("data: ")]
    for message in messages:
        validate_message(message)
    assert [m.get("method") for m in messages] == ["notifications/progress", "notifications/progress", None]
    assert messages[-1]["result"]["content"][0]["text"] == "opened"


def test_options_are_checked():
    with pytest.raises(TypeError, match="max_bdy_size"):
        ServerConfig.from_options({"max_bdy_size": 1})
    with pytest.raises(ValueError):
        ServerConfig(max_body_size=0)
    with pytest.raises(ValueError):
        ServerConfig.from_options({"path": "mcp"})
    with pytest.raises(ValueError):
        ServerConfig(exchange=ExchangeConfig(allowed_origins=("ftp://x",)))
    with pytest.raises(TypeError, match="not both"):
        ServerConfig.from_options({"exchange": ExchangeConfig(), "path": "/x"})
    config = ServerConfig.from_options({"allowed_origins": "*", "max_body_size": 10})
    assert config.exchange.allowed_origins == ("*",) and config.max_body_size == 10
    shared = ExchangeConfig(path="/x", allowed_origins=["a.example"])
    assert ServerConfig.from_options({"exchange": shared}).exchange is shared
    assert shared.allowed_origins == ("a.example",) and shared.origin_allowed("https://a.example:8443")


async def test_any_origin_can_be_allowed(nursery):
    port, _ = await start(nursery, allowed_origins=["*"])
    client = await RawClient.connect(port)
    response, _ = await client.request(rpc("tools/list"), port, {"Origin": "https://anything.example"})
    assert response.status_code == 200
