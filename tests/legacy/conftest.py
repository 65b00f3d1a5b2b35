"""What the legacy-era tests share: the client's end of a session's pending requests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import trio

from mrtr.transports.pending import PendingRequests

from ..conftest import until
from ..legacy_schema import validate_server_message


class Wire:
    """The client's end: every message the server wrote, and a way to answer requests by id."""

    def __init__(self) -> None:
        self.pending = PendingRequests(self.write)
        self.pending.mark_ready()
        self.sent: list[dict[str, Any]] = []
        self.arrived = trio.Event()

    def write(self, data: bytes) -> None:
        message = json.loads(data)
        validate_server_message(message)
        self.sent.append(message)
        self.arrived.set()

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [message for message in self.sent if "id" in message and "method" in message]

    @property
    def cancels(self) -> list[Any]:
        return [message["params"]["requestId"] for message in self.sent if message.get("method") == "notifications/cancelled"]

    def answer(self, request: dict[str, Any], result: Any = None, *, error: dict[str, Any] | None = None) -> bool:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if error is not None:
            reply["error"] = error
        else:
            reply["result"] = result
        return self.pending.answer(reply)

    async def wait_requests(self, count: int) -> list[dict[str, Any]]:
        return await until(lambda: self.requests, lambda found: len(found) >= count)


async def answering(wire: Wire, answer: Callable[[dict[str, Any]], Any]) -> None:
    """Answer every request as it arrives, forever."""
    done: set[Any] = set()
    while True:
        await wire.arrived.wait()
        wire.arrived = trio.Event()
        for request in wire.requests:
            if request["id"] not in done:
                done.add(request["id"])
                wire.answer(request, answer(request))
