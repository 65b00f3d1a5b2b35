"""A 2025-era client over raw HTTP, for the tests of 2025 sessions on Streamable HTTP.

It speaks the wire as the 2025-11-25 transports page has it, with no SDK in between, so
a test can do what SDKs do not (drop a stream mid-question, resume it from any event id,
name another session, send headers a client should not) and see every byte. Every
JSON-RPC message the server sends it is validated against the 2025-11-25 schema
(``tests/legacy_schema.py``) as it arrives.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import trio

from ..legacy_schema import RESULT_DEFS, validate_server_message

VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def initialize(version: str = VERSION, capabilities: Mapping[str, Any] | None = None, *, id: Any = 0,
               name: str = "sessions-test") -> dict[str, Any]:
    """An ``initialize`` request as a 2025 client sends it."""
    return {"jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {"protocolVersion": version,
                       "capabilities": dict({"elicitation": {}, "sampling": {}, "roots": {}}
                                            if capabilities is None else capabilities),
                       "clientInfo": {"name": name, "version": "1.0"}}}


def request(id: Any, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


def validated(message: dict[str, Any], method: str | None = None) -> dict[str, Any]:
    """``message`` after checking it against the 2025-11-25 schema (the result of ``method`` when given)."""
    final = "result" in message and "method" not in message
    validate_server_message(message, RESULT_DEFS.get(method) if final and method else None)
    return message


@dataclass
class Event:
    """One SSE event or field block: its id, its JSON-RPC message (``None`` for priming), retry, comments."""

    id: str | None = None
    message: dict[str, Any] | None = None
    retry: int | None = None
    comment: str | None = None

    @property
    def priming(self) -> bool:
        return self.id is not None and self.message is None


class Stream:
    """An SSE response read event by event as it arrives (with a deadline per event)."""

    def __init__(self, response: httpx.Response, method: str | None) -> None:
        self.response = response
        self.method = method
        self.events: list[Event] = []
        self.ended = False
        self._lines = response.aiter_lines()

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [event.message for event in self.events if event.message is not None]

    @property
    def last_id(self) -> str | None:
        ids = [event.id for event in self.events if event.id is not None]
        return ids[-1] if ids else None

    async def next(self, timeout: float = 10.0) -> Event | None:
        """The next event, ``None`` once the response ended."""
        event = Event()
        data: list[str] = []
        with trio.fail_after(timeout):
            while True:
                try:
                    line = await self._lines.__anext__()
                except StopAsyncIteration:
                    self.ended = True
                    return None
                if line == "":
                    if event.id is None and not data and event.retry is None and event.comment is None:
                        continue
                    if data and "".join(data).strip():
                        event.message = validated(json.loads("\n".join(data)), self.method)
                    self.events.append(event)
                    return event
                if line.startswith(":"):
                    event.comment = line[1:].strip()
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "id":
                    event.id = value
                elif name == "data":
                    data.append(value)
                elif name == "retry":
                    event.retry = int(value)

    async def message(self, timeout: float = 10.0) -> dict[str, Any]:
        """The next JSON-RPC message (skipping priming events, retry fields and comments)."""
        with trio.fail_after(timeout):
            while True:
                event = await self.next(timeout)
                assert event is not None, f"the stream ended; it carried {self.messages}"
                if event.message is not None:
                    return event.message

    async def rest(self, timeout: float = 10.0) -> list[Event]:
        """Every event until the response ends."""
        found = []
        while (event := await self.next(timeout)) is not None:
            found.append(event)
        return found


@dataclass
class Session:
    """One 2025 session: its id and version, and the HTTP client it talks through."""

    client: httpx.AsyncClient
    version: str = VERSION
    id: str | None = None
    initialized: dict[str, Any] = field(default_factory=dict)
    path: str = "/mcp"
    always: dict[str, str] = field(default_factory=dict)  # sent on every request (credentials, say)

    def headers(self, extra: Mapping[str, str | None] | None = None, *, version: bool = True) -> dict[str, str]:
        sent = {"Content-Type": "application/json", "Accept": ACCEPT, **self.always}
        if self.id is not None:
            sent["Mcp-Session-Id"] = self.id
        if version:
            sent["MCP-Protocol-Version"] = self.version
        for name, value in (extra or {}).items():
            for existing in [key for key in sent if key.lower() == name.lower()]:
                del sent[existing]
            if value is not None:
                sent[name] = value
        return sent

    async def open(self, capabilities: Mapping[str, Any] | None = None, *, ready: bool = True,
                   headers: Mapping[str, str | None] | None = None) -> Session:
        """``initialize``, then ``notifications/initialized`` (unless ``ready=False``)."""
        response = await self.client.post(self.path, json=initialize(self.version, capabilities),
                                          headers=self.headers(headers, version=False))
        assert response.status_code == 200, (response.status_code, response.text)
        assert response.headers["content-type"] == "application/json"
        self.initialized = validated(response.json(), "initialize")
        self.id = response.headers["mcp-session-id"]
        if ready:
            accepted = await self.notify("notifications/initialized")
            assert accepted.status_code == 202, accepted.text
        return self

    async def post(self, message: Any, headers: Mapping[str, str | None] | None = None) -> httpx.Response:
        """POST one message and read the whole answer (JSON, or an SSE stream to its end)."""
        return await self.client.post(self.path, content=json.dumps(message).encode(), headers=self.headers(headers))

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> httpx.Response:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        return await self.post(message)

    async def answer(self, request_id: Any, result: Any = None, *, error: Mapping[str, Any] | None = None
                     ) -> httpx.Response:
        """Answer one of the server's requests (a POST of its own, ``202``)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = dict(error)
        else:
            message["result"] = result
        return await self.post(message)

    async def call(self, id: Any, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A request whose answer comes whole: JSON, or a stream carrying only notifications before it."""
        response = await self.post(request(id, method, params))
        assert response.status_code == 200, (response.status_code, response.text)
        if response.headers["content-type"] == "application/json":
            return validated(response.json(), method)
        messages = [json.loads(line[5:]) for line in response.text.splitlines()
                    if line.startswith("data:") and line[5:].strip()]
        for message in messages:
            validated(message, method)
        return messages[-1]

    @asynccontextmanager
    async def stream(self, id: Any, method: str, params: Mapping[str, Any] | None = None,
                     headers: Mapping[str, str | None] | None = None) -> AsyncIterator[Stream]:
        """POST a request and read its SSE answer as it comes; leaving the block drops the connection."""
        body = json.dumps(request(id, method, params)).encode()
        async with self.client.stream("POST", self.path, content=body, headers=self.headers(headers)) as response:
            assert response.status_code == 200, (response.status_code, await response.aread())
            assert response.headers["content-type"] == "text/event-stream", response.headers
            yield Stream(response, method)

    @asynccontextmanager
    async def listen(self, last_event_id: str | None = None, method: str | None = None,
                     headers: Mapping[str, str | None] | None = None) -> AsyncIterator[Stream]:
        """``GET`` the standalone stream, or resume one with ``Last-Event-ID``."""
        sent = self.headers({"Accept": "text/event-stream", "Content-Type": None, **(headers or {})})
        if last_event_id is not None:
            sent["Last-Event-ID"] = last_event_id
        async with self.client.stream("GET", self.path, headers=sent) as response:
            assert response.status_code == 200, (response.status_code, await response.aread())
            yield Stream(response, method)

    async def delete(self) -> httpx.Response:
        return await self.client.delete(self.path, headers=self.headers({"Content-Type": None}))


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC error a transport refusal carries (validated as a 2025 message)."""
    assert response.headers["content-type"] == "application/json", response.headers
    return validated(response.json())["error"]  # type: ignore[no-any-return]
