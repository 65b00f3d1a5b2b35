"""The ASGI adapter's own duties: lifespan, websocket refusal, mounting under a root path."""

from __future__ import annotations

import json

import pytest
import trio

from mrtr.transports.http import ASGIApp, ExchangeConfig, asgi_app

from ..wire_schema import validate_message
from .app import server
from .conftest import BASE_HEADERS, mcp_headers, rpc, start_hypercorn


async def test_lifespan_events_are_acknowledged():
    app = ASGIApp(server)
    incoming = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent = []

    async def receive():
        return next(incoming)

    async def send(message):
        sent.append(message)

    with trio.fail_after(2):
        await app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]


async def test_websockets_are_closed_and_unknown_scopes_refused():
    app = ASGIApp(server)
    sent = []

    async def send(message):
        sent.append(message)

    await app({"type": "websocket", "path": "/mcp"}, None, send)
    assert sent == [{"type": "websocket.close", "code": 1000}]
    with pytest.raises(ValueError):
        await app({"type": "mystery"}, None, send)


async def test_a_websocket_upgrade_under_hypercorn_is_refused(nursery):
    port = await start_hypercorn(nursery, ASGIApp(server), trio.Event())
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(b"GET /mcp HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    with trio.fail_after(3):
        answer = await stream.receive_some(65536)
    assert answer.startswith(b"HTTP/1.1 403")


async def call_app(app, scope_extra, message):
    """Drive the app directly with one request; return (status, headers, body)."""
    body = json.dumps(message).encode()
    headers = [(k.lower().encode(), v.encode()) for k, v in {**BASE_HEADERS, **mcp_headers(message)}.items()]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers, **scope_extra}
    incoming = [{"type": "http.request", "body": body[:10], "more_body": True},
                {"type": "http.request", "body": body[10:], "more_body": False}]
    finished = trio.Event()
    sent = []

    async def receive():
        if incoming:
            return incoming.pop(0)
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(event):
        sent.append(event)
        if event["type"] == "http.response.body" and not event.get("more_body"):
            finished.set()

    with trio.fail_after(3):
        await app(scope, receive, send)
    start = sent[0]
    return start["status"], dict(start["headers"]), b"".join(e.get("body", b"") for e in sent[1:])


async def test_a_body_in_several_messages_and_a_root_path():
    app = ASGIApp(server)
    status, _, body = await call_app(app, {"path": "/api/mcp", "root_path": "/api"}, rpc("tools/list"))
    assert status == 200
    validate_message(json.loads(body), result_def="ListToolsResult")
    status, _, _ = await call_app(app, {"path": "/api/mcp", "root_path": ""}, rpc("tools/list"))
    assert status == 404


def test_options_are_checked():
    with pytest.raises(ValueError):
        ASGIApp(server, max_body_size=0)
    with pytest.raises(ValueError):
        ASGIApp(server, path="mcp")
    assert ASGIApp(server, allowed_origins="https://a.example").config.allowed_origins == ("https://a.example",)
    with pytest.raises(TypeError, match="not both"):
        ASGIApp(server, ExchangeConfig(), path="/x")
    with pytest.raises(TypeError, match="pathh"):
        asgi_app(server, pathh="/x")
    shared = ExchangeConfig(path="/x")
    assert asgi_app(server, shared).config is shared
