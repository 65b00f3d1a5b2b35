"""Hostile servers written byte by byte, for the client to survive.

:func:`serve_http` is a real HTTP/1.1 server on a loopback port: it reads each request,
hands the JSON-RPC message to a ``respond(message, stream)`` coroutine that writes
whatever bytes it likes, and closes the connection. :data:`STDIO` is a real subprocess
speaking newline-delimited JSON-RPC whose answers come from a JSON file of scripted
replies (``{"tools/list": [reply, ...], ...}``, used in order, the last one repeated;
a reply is ``{"result": ...}``, ``{"error": ...}`` or ``{"raw": "bytes as text"}``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio

Respond = Callable[[dict[str, Any], trio.SocketStream], Awaitable[None]]

HERE = Path(__file__).resolve().parent
STDIO = [sys.executable, str(HERE / "hostile_stdio.py")]

DISCOVER = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "ttlMs": 0, "cacheScope": "public",
            "capabilities": {"tools": {}, "prompts": {}, "resources": {}}}


DEFAULTS: dict[str, dict[str, Any]] = {"server/discover": {"result": DISCOVER}}


def listing(member: str, items: list[Any]) -> dict[str, Any]:
    """A complete one-page ``*/list`` result."""
    return {"resultType": "complete", member: items, "ttlMs": 0, "cacheScope": "public"}


DEFAULTS["tools/list"] = {"result": listing("tools", [])}


async def _read_request(stream: trio.SocketStream) -> tuple[dict[str, Any], str | None] | None:
    """The request's JSON-RPC message (a GET's or DELETE's method, for a body-less one) and its Mcp-Session-Id."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = 0
    session = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        elif name.strip().lower() == b"mcp-session-id":
            session = value.strip().decode()
    while len(body) < length:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        body += chunk
    if length == 0:  # a GET (a 2025 client's standalone stream) or a DELETE: no message, just the method
        return {"_http_method": head.split(b" ", 1)[0].decode()}, session
    message: dict[str, Any] = json.loads(body[:length])
    return message, session


async def _connection(respond: Respond, stream: trio.SocketStream, *, with_session: bool = False) -> None:
    async with stream:
        try:
            read = await _read_request(stream)
            if read is not None:
                message, session = read
                await (respond(message, stream, session) if with_session else respond(message, stream))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client gave up: what these servers are for


async def serve_http(nursery: trio.Nursery, respond: Callable[..., Awaitable[None]], *,
                     with_session: bool = False) -> str:
    """Serve ``respond`` on a loopback port in ``nursery``; return the endpoint URL.

    With ``with_session``, ``respond`` is also given the request's ``Mcp-Session-Id`` (or ``None``).
    """
    handler = partial(_connection, respond, with_session=with_session)
    listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    return f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"


def head(status: int = 200, content_type: str = "application/json", **headers: str) -> bytes:
    """A response head that ends the body with the connection (no length, no chunking)."""
    lines = [f"HTTP/1.1 {status} X", f"Content-Type: {content_type}", "Connection: close",
             *(f"{name.replace('_', '-')}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def send_json(stream: trio.SocketStream, value: Any, status: int = 200) -> None:
    """Answer with one JSON body and close."""
    body = json.dumps(value).encode()
    await stream.send_all(head(status, Content_Length=str(len(body))) + body)


def result(message: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC response carrying ``value`` for ``message``."""
    return {"jsonrpc": "2.0", "id": message["id"], "result": value}


def scripted(replies: dict[str, list[dict[str, Any]]]) -> Respond:
    """A ``respond`` answering each method from ``replies`` (as the stdio script does)."""
    used: dict[str, int] = {}

    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        method = message["method"]
        unknown = {"error": {"code": -32601, "message": "no such method"}}
        options = replies.get(method) or [DEFAULTS.get(method, unknown)]
        reply = options[min(used.get(method, 0), len(options) - 1)]
        used[method] = used.get(method, 0) + 1
        if "raw" in reply:
            body = reply["raw"].encode()
            await stream.send_all(head(Content_Length=str(len(body))) + body)
            return
        await send_json(stream, {"jsonrpc": "2.0", "id": reply.get("id", message["id"]),
                                 **{k: v for k, v in reply.items() if k != "id"}})

    return respond

