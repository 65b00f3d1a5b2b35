"""A 2025-era session's call spoken raw over HTTP, resuming its stream the way the spec tells a client to.

:class:`Conversation` opens a session, starts a call and reads its SSE stream message by
message; when the stream ends without the call's response (its node died, or stopped and
handed the call over with ``retry:``) it comes back with ``GET`` and ``Last-Event-ID``,
through whatever ``url`` is (a balancer, or one node), as often as needed. It keeps every
event id and message it received, so a test can see that nothing was sent twice, and
checks every message against the 2025-11-25 schema.
"""

from __future__ import annotations

import json
from itertools import count
from typing import Any

import httpx
import trio

from ..legacy_schema import validate_legacy_message, validate_server_message

VERSION = "2025-11-25"


class Conversation:
    """One session and one call in it, through ``url`` (``host`` the ``Host`` the nodes accept)."""

    def __init__(self, http: httpx.AsyncClient, url: str, *, host: str | None = None) -> None:
        self.http = http
        self.url = url
        self.host = host or url.split("/")[2]
        self.session_id = ""
        self.ids = count(1)
        self.call_id: int | None = None
        self.response: httpx.Response | None = None
        self.lines: Any = None
        self.last_id: str | None = None
        self.seen_ids: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self.resumptions = 0
        self.served_by: list[str] = []  # X-Mrtr-Node of each response that carried the stream

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": VERSION, "Host": self.host, **extra}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        return headers

    async def post(self, body: dict[str, Any], url: str | None = None) -> httpx.Response:
        return await self.http.post(url or self.url, headers=self.headers(), content=json.dumps(body))

    async def open(self, url: str | None = None) -> Conversation:
        response = await self.post({"jsonrpc": "2.0", "id": next(self.ids), "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "adoption-test", "version": "1"}}}, url)
        assert response.status_code == 200, response.text
        validate_legacy_message(response.json(), "initialize")
        self.session_id = response.headers["mcp-session-id"]
        assert (await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, url)).status_code == 202
        return self

    async def start(self, tool: str, arguments: dict[str, Any], url: str | None = None) -> dict[str, Any]:
        """Start the call (on ``url``, or through the balancer); its first message (a question)."""
        self.call_id = next(self.ids)
        body = {"jsonrpc": "2.0", "id": self.call_id, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}}
        request = self.http.build_request("POST", url or self.url, headers=self.headers(), content=json.dumps(body))
        self.response = await self.http.send(request, stream=True)
        assert self.response.status_code == 200, await self.response.aread()
        assert self.response.headers["content-type"].startswith("text/event-stream")
        self.served_by.append(self.response.headers.get("x-mrtr-node", ""))
        self.lines = self.response.aiter_lines()
        return await self.next()

    async def next(self, *, resume_for: float = 30.0) -> dict[str, Any]:
        """The call's next message, resuming the stream (for up to ``resume_for`` seconds) when it ends first."""
        with trio.fail_after(resume_for):
            while True:
                if self.lines is not None:
                    try:
                        async for line in self.lines:
                            if line.startswith("id:"):
                                self.last_id = line[3:].strip()  # a priming event (no data) names the cursor
                            elif line.startswith("data:") and line[5:].strip():
                                assert self.last_id not in self.seen_ids, f"event {self.last_id} came twice"
                                self.seen_ids.append(str(self.last_id))
                                message: dict[str, Any] = json.loads(line[5:])
                                if "method" in message:
                                    validate_server_message(message)
                                else:
                                    validate_legacy_message(message, "tools/call")
                                self.messages.append(message)
                                return message
                    except httpx.TransportError:
                        pass
                    await self.close_stream()
                await self.resume()

    async def resume(self) -> None:
        """``GET`` with ``Last-Event-ID``, until a node answers it with the stream."""
        assert self.last_id is not None, "nothing to resume from"
        pause = 0.05
        while True:
            request = self.http.build_request("GET", self.url, headers=self.headers(
                Accept="text/event-stream", **{"Last-Event-ID": self.last_id}))
            try:
                response = await self.http.send(request, stream=True)
            except httpx.TransportError:
                await trio.sleep(pause)
                continue
            if response.status_code == 200:
                self.resumptions += 1
                self.response = response
                self.served_by.append(response.headers.get("x-mrtr-node", ""))
                self.lines = response.aiter_lines()
                return
            body = await response.aread()
            await response.aclose()
            assert response.status_code == 503, (response.status_code, body)  # only a store away is worth waiting
            await trio.sleep(pause)
            pause = min(pause * 2, 0.5)

    async def answer(self, question: dict[str, Any], content: dict[str, Any]) -> None:
        """Answer one of the server's questions (accept with ``content``); the answer is accepted (202)."""
        assert question.get("method") == "elicitation/create", question
        response = await self.post({"jsonrpc": "2.0", "id": question["id"],
                                    "result": {"action": "accept", "content": content}})
        assert response.status_code == 202, response.text

    async def cancel(self) -> None:
        response = await self.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                    "params": {"requestId": self.call_id, "reason": "changed my mind"}})
        assert response.status_code == 202

    async def delete(self) -> None:
        response = await self.http.delete(self.url, headers=self.headers())
        assert response.status_code == 200, response.text

    async def ended(self, *, within: float = 30.0) -> None:
        """Read to the stream's end (a cancelled call: no response comes), resuming as needed."""
        with trio.fail_after(within):
            while self.lines is not None:
                try:
                    async for line in self.lines:
                        if line.startswith("data:") and line[5:].strip():
                            self.messages.append(json.loads(line[5:]))
                except httpx.TransportError:
                    pass
                await self.close_stream()

    async def close_stream(self) -> None:
        if self.response is not None:
            await self.response.aclose()
        self.response = None
        self.lines = None

    def questions(self) -> list[Any]:
        """The ids of every question this call was asked, in order (a question asked twice shows)."""
        return [message["id"] for message in self.messages if message.get("method") == "elicitation/create"]
