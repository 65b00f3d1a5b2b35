"""Fixtures for the HTTP tests: the test server behind both front ends, over real loopback HTTP.

``endpoint`` is parametrized over ``native`` (``mrtr.http.serve`` in the test's nursery
on port 0) and ``asgi`` (``ASGIApp`` under hypercorn's trio worker, in-process), so
every test that uses it runs against both; it serves both eras, as a server does by
default. ``modern_endpoint`` is the same behind a server built with ``eras="modern"``:
what a modern-only server answers (unchanged by the 2025 era). ``Endpoint.post`` mirrors the MCP headers
from the body unless told otherwise, and validates every JSON-RPC message it gets back
against the official schema (``tests/wire_schema.py``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx
import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from mrtr.transports.http import ASGIApp
from mrtr.transports.http.native import serve
from mrtr.core.mirroring import NAME_MEMBERS, encode_value, param_header
from mrtr.core.wire import META_PROTOCOL_VERSION

from ..conftest import meta as base_meta
from ..wire_schema import RESULT_DEFS, validate_message
from .app import modern_server
from .app import server as app_server

PROTOCOL = "2026-07-28"
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}}
ALLOWED_ORIGINS = ["https://app.example.com", "trusted.example.org"]
MAX_BODY = 64 * 1024


def meta(capabilities: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A request ``_meta`` for this protocol version; the capabilities default to form elicitation."""
    return base_meta(CAPABILITIES if capabilities is None else capabilities, **extra)


def rpc(method: str, params: Mapping[str, Any] | None = None, *, id: Any = 1, with_meta: bool = True,
        **meta_extra: Any) -> dict[str, Any]:
    """A JSON-RPC request; ``params._meta`` is filled in unless ``with_meta=False``."""
    body = dict(params or {})
    if with_meta and "_meta" not in body:
        body["_meta"] = meta(**meta_extra)
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": body}
    if id is not None:
        message["id"] = id
    return message


def mcp_headers(message: Mapping[str, Any]) -> dict[str, str]:
    """The standard MCP headers a conforming client derives from ``message``, whatever shape it has.

    Unlike :func:`mrtr.client.headers.request_headers` it takes any message (the fuzz
    tests send malformed ones) and reads the mirrored parameters from the test app.
    """
    headers: dict[str, str] = {}
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    meta_value = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta_value, dict) and isinstance(meta_value.get(META_PROTOCOL_VERSION), str):
        headers["MCP-Protocol-Version"] = encode_value(meta_value[META_PROTOCOL_VERSION])
    else:
        headers["MCP-Protocol-Version"] = PROTOCOL
    method = message.get("method")
    if isinstance(method, str):
        headers["Mcp-Method"] = encode_value(method)
    member = NAME_MEMBERS.get(method)  # type: ignore[arg-type]
    if member and isinstance(params.get(member), str):
        headers["Mcp-Name"] = encode_value(params[member])
    if method == "tools/call" and isinstance(params.get("name"), str):
        arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
        for header, parameter in app_server.header_parameters(params["name"]).items():
            if arguments.get(parameter) is not None:
                headers[param_header(header)] = encode_value(arguments[parameter])
    return headers


BASE_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@dataclass
class Reply:
    """An HTTP answer with its JSON-RPC messages (one for JSON, all events for SSE)."""

    status: int
    headers: httpx.Headers
    body: bytes
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_sse(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

    @property
    def message(self) -> dict[str, Any]:
        """The final JSON-RPC message (the response)."""
        assert self.messages, f"no JSON-RPC message in {self.status} {self.body[:200]!r}"
        return self.messages[-1]

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.message, self.message
        return self.message["result"]

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.message, self.message
        return self.message["error"]

    @property
    def notifications(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if "method" in m]


def parse_sse(body: bytes) -> list[dict[str, Any]]:
    messages = []
    for event in body.decode("utf-8").split("\n\n"):
        data = [line[len("data:"):].lstrip(" ") for line in event.split("\n") if line.startswith("data:")]
        if data:
            messages.append(json.loads("\n".join(data)))
    return messages


def decode_reply(response: httpx.Response, request: Any = None) -> Reply:
    reply = Reply(response.status_code, response.headers, response.content)
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("application/json") and response.content:
        reply.messages = [json.loads(response.content)]
    elif content_type.startswith("text/event-stream"):
        reply.messages = parse_sse(response.content)
    method = request.get("method") if isinstance(request, dict) else None
    for position, message in enumerate(reply.messages):
        final = position == len(reply.messages) - 1
        result_def = None
        if final and "result" in message:
            if message["result"].get("resultType") == "input_required":
                result_def = "InputRequiredResult"
            else:
                result_def = RESULT_DEFS.get(method)
        validate_message(message, result_def=result_def)
        if not final:
            assert "method" in message, f"only notifications may precede the response: {message}"
    return reply


@dataclass
class Endpoint:
    kind: str
    port: int
    client: httpx.AsyncClient

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def post(self, message: Any, *, headers: Mapping[str, str | bytes | None] | None = None,
                   mirror: bool = True, path: str = "/mcp") -> Reply:
        """POST ``message`` (a dict, or raw bytes) with the usual headers, overridden by ``headers``.

        A ``None`` value in ``headers`` removes that header.
        """
        sent: dict[str, Any] = dict(BASE_HEADERS)
        if isinstance(message, (bytes, bytearray)):
            body = bytes(message)
        else:
            body = json.dumps(message).encode()
            if mirror and isinstance(message, dict):
                sent.update(mcp_headers(message))
        for name, value in (headers or {}).items():
            for existing in [key for key in sent if key.lower() == name.lower()]:
                del sent[existing]
            if value is not None:
                sent[name] = value
        response = await self.client.post(path, content=body, headers=sent)
        return decode_reply(response, message)

    async def call(self, method: str, params: Mapping[str, Any] | None = None, *, id: Any = 1,
                   headers: Mapping[str, str | bytes | None] | None = None, mirror: bool = True,
                   **meta_extra: Any) -> Reply:
        """POST a request for ``method``; ``meta_extra`` goes into ``params._meta``."""
        return await self.post(rpc(method, params, id=id, **meta_extra), headers=headers, mirror=mirror)


def raw_post(message: dict, port: int, extra: dict | None = None) -> bytes:
    body = json.dumps(message).encode()
    headers = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "Content-Length": str(len(body)),
               **mcp_headers(message), **(extra or {})}
    head = "POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode("latin-1") + body


async def start_native(nursery: trio.Nursery, **options: Any) -> int:
    return await nursery.start(partial(serve, app_server, "127.0.0.1", 0, **options))


async def start_hypercorn(nursery: trio.Nursery, app: Any, shutdown: trio.Event) -> int:
    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 0.2
    binds = await nursery.start(partial(hypercorn_serve, app, config, shutdown_trigger=shutdown.wait))
    return int(binds[0].rsplit(":", 1)[1])


async def start_front_end(kind: str, nursery: trio.Nursery, server: Any, **options: Any) -> int:
    """Serve ``server`` on a free loopback port behind one front end: ``native``, or ``asgi`` under hypercorn."""
    if kind == "native":
        return await nursery.start(partial(serve, server, "127.0.0.1", 0, **options))
    return await start_hypercorn(nursery, ASGIApp(server, **options), trio.Event())


@pytest.fixture(params=["native", "asgi"])
async def endpoint(request, nursery):
    """The test server behind one front end, and a client for it."""
    port = await start_front_end(request.param, nursery, app_server, allowed_origins=ALLOWED_ORIGINS,
                                 max_body_size=MAX_BODY)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
        del client.headers["accept"]  # httpx sends "Accept: */*" unless told otherwise
        yield Endpoint(request.param, port, client)


@pytest.fixture(params=["native", "asgi"])
async def modern_endpoint(request, nursery):
    """The test server built with ``eras="modern"`` behind one front end, and a client for it."""
    port = await start_front_end(request.param, nursery, modern_server, allowed_origins=ALLOWED_ORIGINS,
                                 max_body_size=MAX_BODY)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
        del client.headers["accept"]
        yield Endpoint(request.param, port, client)


@pytest.fixture(autouse=True)
def _quiet_hypercorn():
    logging.getLogger("hypercorn.error").setLevel(logging.WARNING)
    yield
