"""A new 2025 session over HTTP waits for the server to answer its standalone GET, within bounds.

A 2025 server may ask a question outside any request's stream, on the standalone GET
stream, and drops it while that stream is not open (the TypeScript SDK's server does).
These loopback servers answer the GET late or never; every call of the session must
wait for the GET's answer, and no call may wait longer than a second or the client's
deadline. A session started again, because the server forgot the last one, closes the
last one's stream, and calls in flight together in the forgotten session go on in one new
session. Everything the client sends is validated against the 2025-11-25 schema.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

import mrtr
import mrtr.client.client as client_module
from mrtr.core.eras import LEGACY

from ..conftest import until
from ..legacy_schema import validate_legacy_message
from .hostile import head, result, send_json, serve_http

GUARD = 20
INITIALIZED = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
               "serverInfo": {"name": "slow-get", "version": "1"}}
TOOLS = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}


async def refuse_discover(stream: trio.SocketStream) -> None:
    """Answer the era probe as a 2025 server does."""
    body = b"Bad Request: Missing session ID"
    await stream.send_all(head(400, "text/plain", Content_Length=str(len(body))) + body)


async def open_session(message: dict[str, Any], stream: trio.SocketStream, session: str) -> None:
    """Answer ``initialize``, opening ``session``."""
    body = json.dumps(result(message, INITIALIZED)).encode()
    await stream.send_all(head(Content_Length=str(len(body)), Mcp_Session_Id=session) + body)


async def hold_open(stream: trio.SocketStream, session: str | None, open_gets: list[str | None]) -> None:
    """Answer a standalone GET and keep it open until the client closes it, its session in ``open_gets`` meanwhile."""
    open_gets.append(session)
    try:
        await stream.send_all(head(200, "text/event-stream"))
        while await stream.receive_some(65536):
            pass
    finally:
        open_gets.remove(session)


class SlowGet:
    """A 2025 server that answers its standalone GET after ``get_delay`` seconds (never, if ``None``).

    A ``tools/call`` asks its question (id 1000 + the call's id) on the standalone stream
    and answers with the client's answer; with no stream open it answers ``"dropped"``.
    """

    def __init__(self, get_delay: float | None) -> None:
        self.get_delay = get_delay
        self.stream: trio.SocketStream | None = None
        self.writing = trio.Lock()  # calls ask on the one stream, one event at a time
        self.answers: dict[Any, trio.MemorySendChannel[Any]] = {}
        self.sent: list[tuple[dict[str, Any], str | None]] = []  # what the client sent, and what it answers

    async def respond(self, message: dict[str, Any], stream: trio.SocketStream) -> None:
        method = message.get("method") or message.get("_http_method")
        if method not in ("GET", "DELETE", "server/discover"):  # the era probe is 2026's, checked elsewhere
            answering = "elicitation/create" if "id" in message and method is None else None
            self.sent.append((message, answering))
        if method == "server/discover":
            await refuse_discover(stream)
        elif method == "initialize":
            await open_session(message, stream, "s1")
        elif method == "GET":
            if self.get_delay is None:
                await trio.sleep_forever()
            await trio.sleep(self.get_delay)  # the server's own pace: what the client must wait for
            await stream.send_all(head(200, "text/event-stream"))
            self.stream = stream
            await trio.sleep_forever()
        elif method == "tools/list":
            await send_json(stream, result(message, TOOLS))
        elif method == "tools/call":
            if self.stream is None:
                await send_json(stream, result(message, {"content": [{"type": "text", "text": "dropped"}]}))
                return
            question = {"jsonrpc": "2.0", "id": 1000 + message["id"], "method": "elicitation/create",
                        "params": {"message": "Name?", "requestedSchema": {
                            "type": "object", "properties": {"name": {"type": "string"}}}}}
            sending, receiving = trio.open_memory_channel[Any](1)
            self.answers[question["id"]] = sending
            async with self.writing:
                await self.stream.send_all(b"data: " + json.dumps(question).encode() + b"\n\n")
            answer = await receiving.receive()
            await send_json(stream, result(message, {"content": [{"type": "text", "text": json.dumps(answer)}]}))
        elif method is None and "result" in message:  # the client's answer to a question
            await self.answers[message["id"]].send(message["result"])
            await stream.send_all(head(202, Content_Length="0"))
        else:  # notifications/initialized, DELETE
            await stream.send_all(head(202, Content_Length="0"))

    def validate(self) -> None:
        assert self.sent, "the client sent nothing"
        for message, answering in self.sent:
            validate_legacy_message(message, answering)


def named(request: Any) -> Any:
    return mrtr.accept(name="Grace")


async def test_a_question_on_the_standalone_stream_is_not_lost_to_a_slow_get(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "STANDALONE_WAIT", 30.0)  # the server's 0.3 s, however loaded the machine
    server = SlowGet(get_delay=0.3)
    url = await serve_http(nursery, server.respond)
    async with mrtr.Client(url, on_elicit=named) as client:
        with trio.fail_after(GUARD):
            called = await client.call_tool("t")
        assert client.era == LEGACY
    assert called.text != "dropped", "the call went out before the server had answered the standalone GET"
    assert json.loads(called.text) == {"action": "accept", "content": {"name": "Grace"}}
    server.validate()


async def test_calls_started_while_the_session_opens_all_wait_for_the_get(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two waiting on the session's start, and one started once the session has its
    # InitializeResult but its GET is still unanswered: none may go out before the GET's answer.
    monkeypatch.setattr(client_module, "STANDALONE_WAIT", 30.0)
    server = SlowGet(get_delay=0.5)
    url = await serve_http(nursery, server.respond)
    texts: list[str] = []

    async def call(client: mrtr.Client) -> None:
        texts.append((await client.call_tool("t")).text)

    async with mrtr.Client(url, on_elicit=named) as client:
        with trio.fail_after(GUARD):
            async with trio.open_nursery() as calls:
                for _ in range(2):
                    calls.start_soon(call, client)
                await until(lambda: client.server is not None, every=0.005)
                assert server.stream is None  # the session is open, its GET not answered yet
                calls.start_soon(call, client)
    assert "dropped" not in texts
    assert [json.loads(text) for text in texts] == [{"action": "accept", "content": {"name": "Grace"}}] * 3
    server.validate()


@pytest.mark.parametrize(("wait", "deadline"), [(0.2, None), (600.0, 0.5)], ids=["its own bound", "the deadline"])
async def test_a_get_never_answered_holds_the_session_no_longer_than_its_bound(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, wait: float, deadline: float | None) -> None:
    # STANDALONE_WAIT is the bound, and the client's deadline when it is shorter.
    monkeypatch.setattr(client_module, "STANDALONE_WAIT", wait)
    server = SlowGet(get_delay=None)
    url = await serve_http(nursery, server.respond)
    options = {} if deadline is None else {"deadline": deadline}
    async with mrtr.Client(url, on_elicit=named, **options) as client:
        started = trio.current_time()
        with trio.fail_after(GUARD):
            called = await client.call_tool("t")
        waited = trio.current_time() - started
    assert called.text == "dropped"  # no stream ever opened: the server had nowhere to ask
    if deadline is None:
        assert waited >= wait
    server.validate()


class Forgetful:
    """A 2025 server that forgets the session its first ``tools/call`` names (404) and keeps every GET stream open.

    ``open_gets`` names the session of each standalone stream the client holds open now,
    ``gets`` those of all it opened.
    """

    def __init__(self) -> None:
        self.sessions = 0
        self.calls = 0
        self.gets: list[str | None] = []
        self.open_gets: list[str | None] = []
        self.sent: list[tuple[dict[str, Any], str | None]] = []

    async def respond(self, message: dict[str, Any], stream: trio.SocketStream, session: str | None) -> None:
        method = message.get("method") or message.get("_http_method")
        if method not in ("GET", "DELETE", "server/discover"):
            self.sent.append((message, None))
        if method == "server/discover":
            await refuse_discover(stream)
        elif method == "initialize":
            self.sessions += 1
            await open_session(message, stream, f"s{self.sessions}")
        elif method == "GET":
            self.gets.append(session)
            await hold_open(stream, session, self.open_gets)
        elif method == "tools/list":
            await send_json(stream, result(message, TOOLS))
        elif method == "tools/call":
            self.calls += 1
            if self.calls == 1:  # the session is gone: the client starts another, as the 2025 transport says
                await stream.send_all(head(404, Content_Length="0"))
                return
            await send_json(stream, result(message, {"content": [{"type": "text", "text": "called"}]}))
        else:  # notifications/initialized, DELETE
            await stream.send_all(head(202, Content_Length="0"))


@pytest.mark.parametrize("remembered", [False, True], ids=["probed", "era remembered"])
async def test_a_new_session_closes_the_standalone_stream_of_the_one_the_server_forgot(
        nursery: trio.Nursery, remembered: bool) -> None:
    # The old session's stream would otherwise stay open beside the new one's, for as long as
    # the server kept it: one more open connection, and one more listener, per restart. With
    # the era remembered, the 404 makes the client probe the era again before the new session.
    server = Forgetful()
    url = await serve_http(nursery, server.respond, with_session=True)
    eras = mrtr.client.EraMemory()
    if remembered:
        eras.remember(url, LEGACY)
    async with mrtr.Client(url, eras=eras) as client:
        with trio.fail_after(GUARD):
            called = await client.call_tool("t")
        assert called.text == "called" and server.sessions == 2
        await until(lambda: server.gets == ["s1", "s2"] and server.open_gets == ["s2"])
    for message, answering in server.sent:
        validate_legacy_message(message, answering)


class Restarted:
    """A 2025 server that forgets session ``s1`` while the client has ``together`` calls in flight in it.

    Each ``tools/call`` naming ``s1`` is answered 404 once all ``together`` have come, so the
    client reads their 404s at once; the last ``held`` of them wait further, until a call names
    the session the client opened next. A call of a live session answers with the session's
    id. ``open_gets`` names the session of each standalone stream the client holds open now.
    """

    def __init__(self, together: int, held: int = 0) -> None:
        self.together = together
        self.held = held
        self.sessions = 0
        self.stale = 0
        self.came = trio.Event()  # ``together`` calls named s1
        self.renewed = trio.Event()  # a call named a session after s1
        self.open_gets: list[str | None] = []
        self.sent: list[tuple[dict[str, Any], str | None]] = []

    async def respond(self, message: dict[str, Any], stream: trio.SocketStream, session: str | None) -> None:
        method = message.get("method") or message.get("_http_method")
        if method not in ("GET", "DELETE"):
            self.sent.append((message, "tools/list" if method is None and "result" in message else None))
        if method == "initialize":
            self.sessions += 1
            await open_session(message, stream, f"s{self.sessions}")
        elif method == "GET":
            await hold_open(stream, session, self.open_gets)
        elif method == "tools/list":
            await send_json(stream, result(message, TOOLS))
        elif method == "tools/call" and session == "s1":
            self.stale += 1
            place = self.stale
            if place == self.together:
                self.came.set()
            await self.came.wait()
            if place > self.together - self.held:
                await self.renewed.wait()
            await stream.send_all(head(404, Content_Length="0"))
        elif method == "tools/call":
            self.renewed.set()
            await send_json(stream, result(message, {"content": [{"type": "text", "text": str(session)}]}))
        else:  # notifications/initialized
            await stream.send_all(head(202, Content_Length="0"))


@pytest.mark.parametrize(("together", "held"), [(3, 0), (2, 1)],
                         ids=["404s read together", "a 404 read once the next session is up"])
async def test_calls_that_meet_a_forgotten_session_together_go_on_in_one_new_session(
        nursery: trio.Nursery, together: int, held: int) -> None:
    # Calls in flight when the server forgets the session all read 404. One of them starts the
    # next session and the others go on in it: none fails with the 404, and none starts one of
    # its own, ending the standalone stream of the session the others went on in.
    server = Restarted(together, held)
    url = await serve_http(nursery, server.respond, with_session=True)
    answered: list[str] = []

    async def call(client: mrtr.Client) -> None:
        answered.append((await client.call_tool("t")).text)

    async with mrtr.Client(url, era="legacy") as client:
        with trio.fail_after(GUARD):
            await client.list_tools()  # the session s1 opens, its stream with it
            async with trio.open_nursery() as calls:
                for _ in range(server.together):
                    calls.start_soon(call, client)
        assert answered == ["s2"] * server.together and server.sessions == 2
        await until(lambda: server.open_gets == ["s2"])
    for message, answering in server.sent:
        validate_legacy_message(message, answering)
