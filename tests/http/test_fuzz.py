"""Random bodies POSTed to the native server: never a 5xx, every answer valid, still serving after."""

from __future__ import annotations

import base64
import json
import logging
import threading
from functools import partial

import httpx
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrtr.core.context import LOG_LEVELS
from mrtr.transports.http.native import serve

from ..conftest import examples
from .app import server as app_server
from .conftest import (
    BASE_HEADERS,
    CAPABILITIES,
    PROTOCOL,
    decode_reply,
    mcp_headers,
    rpc,
)


@pytest.fixture(scope="module")
def live_port():
    """A native server in its own thread and trio loop, for sync hypothesis examples."""
    box: dict = {}
    ready = threading.Event()

    async def main():
        box["token"] = trio.lowlevel.current_trio_token()
        box["shutdown"] = trio.Event()
        async with trio.open_nursery() as nursery:
            box["port"] = await nursery.start(partial(serve, app_server, "127.0.0.1", 0,
                                                      shutdown_event=box["shutdown"], shutdown_grace=1))
            ready.set()

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield box["port"]
    trio.from_thread.run_sync(box["shutdown"].set, trio_token=box["token"])
    thread.join(10)


@pytest.fixture(scope="module")
def client(live_port):
    with httpx.Client(base_url=f"http://127.0.0.1:{live_port}", timeout=10.0) as client:
        yield client


leaves = (st.none() | st.booleans() | st.integers(-(2**64), 2**64)
          | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
values = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
known_methods = st.sampled_from(["tools/call", "tools/list", "prompts/get", "prompts/list", "resources/read",
                                 "resources/list", "resources/templates/list", "server/discover",
                                 "completion/complete", "initialize", "ping", "notifications/cancelled"])


def mostly(common: st.SearchStrategy, rare: st.SearchStrategy) -> st.SearchStrategy:
    """``common`` four times in five, ``rare`` otherwise."""
    return st.integers(0, 4).flatmap(lambda n: rare if n == 0 else common)


methods = mostly(known_methods, st.text(max_size=15))
# "slow" and "count" are left out: random arguments could make them run for ages
known_names = st.sampled_from(["ask_name", "interview", "chatty", "regional", "pid", "ask_model", "greeting", "broken"])
names = mostly(known_names, st.text(max_size=8))
uris = st.sampled_from(["notes://welcome", "notes://caf\u00e9", "notes://missing"]) | st.text(max_size=12)
metas = st.fixed_dictionaries({}, optional={
    "io.modelcontextprotocol/protocolVersion": st.sampled_from([PROTOCOL, "2025-06-18"]) | leaves,
    "io.modelcontextprotocol/clientCapabilities": st.sampled_from([{}, CAPABILITIES, {"sampling": {}}]) | values,
    "io.modelcontextprotocol/logLevel": st.sampled_from(LOG_LEVELS) | leaves,
    "io.modelcontextprotocol/clientInfo": st.just({"name": "fuzz", "version": "1"}) | values,
    "progressToken": st.integers() | st.text(max_size=5) | leaves,
})
arguments = st.dictionaries(st.sampled_from(["region", "count", "dry_run", "note", "name", "topic"]), leaves,
                            max_size=4) | values
good_metas = st.fixed_dictionaries(
    {"io.modelcontextprotocol/protocolVersion": st.just(PROTOCOL),
     "io.modelcontextprotocol/clientCapabilities": st.sampled_from([{}, CAPABILITIES, {"sampling": {}}])},
    optional={"io.modelcontextprotocol/logLevel": st.sampled_from(LOG_LEVELS),
              "progressToken": st.integers(0, 99) | st.text(max_size=5)},
)
params = st.fixed_dictionaries({}, optional={
    "name": names, "uri": uris, "arguments": arguments, "_meta": mostly(good_metas, metas),
    "requestState": st.text(max_size=30) | leaves, "inputResponses": values, "cursor": leaves,
})
# mostly well-formed requests (so they get past the framing checks and reach the server) ...
requests = st.fixed_dictionaries({
    "jsonrpc": st.just("2.0"), "method": methods, "id": st.integers(-(10**6), 10**6) | st.text(max_size=6),
    "params": st.builds(lambda base, meta: {**base, "_meta": meta}, params, mostly(good_metas, metas)),
})
# ... and some with anything in any member
wild = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0") | leaves, "method": methods | leaves},
    optional={"id": st.integers() | st.text(max_size=6) | leaves, "params": params | values},
)
anything = st.one_of(
    st.binary(max_size=120),
    values.map(lambda value: json.dumps(value).encode()),
    wild,
)


def post(client: httpx.Client, body, mirror: bool) -> None:
    headers = dict(BASE_HEADERS)
    if isinstance(body, dict):
        if mirror:
            headers.update(mcp_headers(body))
        content = json.dumps(body).encode()
    else:
        content = body
    response = client.post("/mcp", content=content, headers=headers)
    assert response.status_code < 500, response.text
    decode_reply(response, body)  # validates every JSON-RPC message against the schema


@settings(max_examples=examples(120), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=anything, mirror=st.booleans())
def test_random_bodies_never_get_a_5xx_and_every_answer_is_valid(client, body, mirror):
    post(client, body, mirror)


@settings(max_examples=examples(250), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=requests, mirror=st.booleans())
def test_random_requests_never_get_a_5xx_and_every_answer_is_valid(client, body, mirror):
    post(client, body, mirror)


def test_the_server_still_serves_after_the_fuzzing(client):
    message = rpc("tools/call", {"name": "pid"})
    response = client.post("/mcp", json=message, headers={**BASE_HEADERS, **mcp_headers(message)})
    assert response.status_code == 200


header_bytes = st.binary(max_size=30).map(lambda raw: bytes(byte for byte in raw if byte >= 0x21 and byte != 0x7F))
sentinels = st.binary(max_size=20).map(lambda raw: b"=?base64?" + base64.b64encode(raw) + b"?=") \
    | st.text(alphabet="ABCDEFGHabcdefgh0123456789+/=?", max_size=16).map(lambda text: f"=?base64?{text}?=".encode())
numbers = st.integers(-(2**53), 2**53).map(lambda n: str(n).encode()) | header_bytes


@settings(max_examples=examples(200), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(region=st.text(max_size=10), count=st.integers(-(2**53), 2**53),
       region_header=st.none() | header_bytes | sentinels, count_header=st.none() | numbers | sentinels)
def test_random_mcp_param_headers_get_200_or_32020(client, region, count, region_header, count_header):
    message = rpc("tools/call", {"name": "regional", "arguments": {"region": region, "count": count}})
    headers = {**BASE_HEADERS, **mcp_headers(message)}
    if region_header is not None:
        headers["Mcp-Param-Region"] = region_header
    if count_header is not None:
        headers["Mcp-Param-Count"] = count_header
    response = client.post("/mcp", json=message, headers=headers)
    reply = decode_reply(response, message)
    if region_header is None and count_header is None:
        assert reply.status == 200
    else:
        assert reply.status in (200, 400), reply.body
        if reply.status == 400:
            assert reply.error["code"] == -32020


def _raw_exchange(port: int, data: bytes) -> bytes:
    """Send raw bytes, half-close, and read whatever comes back until the server closes."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may close early on garbage; what it answered is still readable
        answer = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            answer += chunk
    return answer


head_lines = st.sampled_from([
    b"POST /mcp HTTP/1.1", b"GET /mcp HTTP/1.1", b"POST /mcp HTTP/1.0", b"POST /mcp HTTP/9.9", b"POST /mcp",
    b"POST  /mcp HTTP/1.1", b"\x00\xff", b"",
])
header_lines = st.lists(st.sampled_from([
    b"Host: a", b"Content-Length: 5", b"Content-Length: 0", b"Content-Length: -1", b"Content-Length: 5, 5",
    b"Transfer-Encoding: chunked", b"Transfer-Encoding: gzip", b" folded", b"Expect: 100-continue",
    b"Connection: close", b"Content-Type: application/json", b"X: \x01", b"Bad Header",
]) | st.binary(max_size=20), max_size=6)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=head_lines, headers=header_lines, body=st.binary(max_size=40),
       sep=st.sampled_from([b"\r\n", b"\n", b"\r"]))
def test_random_http_framing_never_gets_a_5xx_but_505(live_port, caplog, line, headers, body, sep):
    answer = _raw_exchange(live_port, sep.join([line, *headers]) + sep + sep + body)
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR], caplog.text
    for status_line in [part.split(b"\r\n", 1)[0] for part in answer.split(b"HTTP/1.1 ")[1:]]:
        status = int(status_line[:3])
        assert status < 500 or status == 505, answer
