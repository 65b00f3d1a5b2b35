"""The rules every transport shares, through native HTTP, the ASGI app under hypercorn and stdio.

The same cases, through each front end (stdio as a real ``mrtr serve --stdio`` subprocess
logging JSON): a notification JSON cannot hold is dropped and logged on the server while
the call answers normally; a response JSON cannot hold becomes one ``-32603`` with one
text; an error's status hint is the HTTP status; and the access records agree.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import trio

from mrtr.transports.outgoing import UNENCODABLE

from .http.conftest import BASE_HEADERS, decode_reply, mcp_headers, start_front_end
from .rules_app import server as rules_server
from .test_stdio import REPO, StdioProcess, call
from .wire_schema import validate_message

APP = "tests.rules_app:server"


@dataclass
class Answer:
    """What a client saw: the notifications before the response, the response, and the HTTP status (if any)."""

    notifications: list[dict[str, Any]]
    response: dict[str, Any]
    status: int | None


class Front:
    """One front end serving ``tests.rules_app``: ask it a message, read its access records and its server log."""

    kind: str

    async def ask(self, message: dict[str, Any]) -> Answer:
        raise NotImplementedError

    async def access(self, count: int) -> list[dict[str, Any]]:
        raise NotImplementedError

    def server_log(self) -> str:
        raise NotImplementedError

    def status(self, http: int) -> int | None:
        """The status this front end answers with where HTTP would send ``http``: none over stdio."""
        return None if self.kind == "stdio" else http


class HttpFront(Front):
    def __init__(self, kind: str, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture) -> None:
        self.kind = kind
        self.client = client
        self.caplog = caplog

    async def ask(self, message: dict[str, Any]) -> Answer:
        response = await self.client.post("/mcp", content=json.dumps(message),
                                          headers={**BASE_HEADERS, **mcp_headers(message)})
        reply = decode_reply(response, message)
        return Answer(reply.notifications, reply.message, reply.status)

    async def access(self, count: int) -> list[dict[str, Any]]:
        with trio.fail_after(5):
            while len(records := self._access()) < count:  # the ASGI host may log after the client has its answer
                await trio.sleep(0.01)
        return records

    def _access(self) -> list[dict[str, Any]]:
        return [dict(record.mrtr) for record in self.caplog.records  # type: ignore[attr-defined]
                if record.name == "mrtr.access"]

    def server_log(self) -> str:
        return "\n".join(record.getMessage() for record in self.caplog.records)


class StdioFront(Front):
    kind = "stdio"

    def __init__(self, process: StdioProcess) -> None:
        self.process = process

    async def ask(self, message: dict[str, Any]) -> Answer:
        before = len(self.process.received)
        response = await self.process.ask(message)
        notifications = [m for m in self.process.received[before:] if "method" in m]
        return Answer(notifications, response, None)

    def _records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.process.stderr.decode().splitlines() if line.startswith("{")]

    async def access(self, count: int) -> list[dict[str, Any]]:
        with trio.fail_after(5):
            while len(records := [r for r in self._records() if r["logger"] == "mrtr.access"]) < count:
                await trio.sleep(0.01)
        return records

    def server_log(self) -> str:
        return "\n".join(record["message"] for record in self._records())


# stdio runs a real `mrtr serve --stdio`: that parameter belongs to the slow tier.
@pytest.fixture(params=["native", "asgi", pytest.param("stdio", marks=pytest.mark.slow)])
async def front(request: pytest.FixtureRequest, nursery: trio.Nursery,
                caplog: pytest.LogCaptureFixture) -> AsyncIterator[Front]:
    if request.param == "stdio":
        env = {**os.environ, "MRTR_SECRET": "cnJycnJycnJycnJycnJycnJycnJycnJycnJycnJycnI="}
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "mrtr", "serve", "--stdio", APP, "--log-format", "json"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env)
        client = StdioProcess(process)
        nursery.start_soon(client.collect_stderr)
        try:
            yield StdioFront(client)
            with trio.fail_after(10):
                assert await client.finish() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        return
    caplog.set_level(logging.INFO, logger="mrtr")
    port = await start_front_end(request.param, nursery, rules_server)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
        yield HttpFront(request.param, client, caplog)


def summary(record: dict[str, Any]) -> tuple[Any, ...]:
    return record["method"], record["target"], record["result"], record.get("code")


async def test_a_notification_json_cannot_hold_is_dropped_and_the_call_answers(front: Front) -> None:
    answer = await front.ask(call(1, "unloggable", **{"io.modelcontextprotocol/logLevel": "info"}))
    validate_message(answer.response, result_def="CallToolResult")
    assert answer.response["result"]["content"] == [{"type": "text", "text": "answered"}]
    assert "isError" not in answer.response["result"]
    assert [(note["method"], note["params"]["data"]) for note in answer.notifications] == [
        ("notifications/message", "before")]
    assert answer.status == front.status(200)
    (record,) = await front.access(1)
    assert summary(record) == ("tools/call", "unloggable", "complete", None)
    assert "dropping a notifications/message notification that cannot be encoded" in front.server_log()


async def test_a_response_json_cannot_hold_is_one_internal_error(front: Front) -> None:
    answer = await front.ask(call(1, "unencodable"))
    validate_message(answer.response)
    assert answer.response == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": UNENCODABLE}}
    assert answer.notifications == [] and answer.status == front.status(200)
    (record,) = await front.access(1)
    assert summary(record) == ("tools/call", "unencodable", "error", -32603)
    assert "cannot encode the response to 1" in front.server_log()


async def test_an_error_travels_with_its_own_status_hint(front: Front) -> None:
    answer = await front.ask(call(1, "busy"))
    validate_message(answer.response)
    assert answer.response["error"] == {"code": -32000, "message": "Too many requests: try again later"}
    assert answer.status == front.status(429)
    (record,) = await front.access(1)
    assert summary(record) == ("tools/call", "busy", "error", -32000)
    assert record.get("status") == answer.status
