"""2025-era sessions on Streamable HTTP, behind both front ends: the rules of the 2025-11-25 transport.

Every test runs against the native server and against the ASGI app under hypercorn's
trio worker (the behaviour is the exchange's, so both must agree), serving the
ordinary generator handlers of ``tests/legacy/app.py``. The client is
``tests/http/sessions_client.py``: raw HTTP, every message the server sends validated
against the 2025-11-25 schema as it arrives.
"""

from __future__ import annotations

import json
import string
from functools import partial
from typing import Any

import httpx
import pytest
import trio

from mrtr import Elicit, Form
from mrtr.core.errors import LEGACY_RATE_LIMITED, RATE_LIMITED
from mrtr.middleware import RateLimit
from mrtr.server import Server
from mrtr.server.sessions import SessionRegistry

from ..conftest import meta, until
from ..legacy.app import server as legacy_server
from ..wire_schema import validate_message
from .conftest import start_front_end
from .sessions_client import Session, error_of, initialize, request, validated

PROTOCOL = "2026-07-28"


def held_server(**options: Any) -> tuple[Server, dict[str, list[str]]]:
    """A server whose ``hold`` tool asks one question and notes what ran (in memory, per tag)."""
    server = Server("held", "1.0", secret=b"h" * 32, **options)
    ran: dict[str, list[str]] = {}

    @server.tool
    def hold(tag: str):
        """Ask, wait, and say what ran."""
        ran.setdefault(tag, []).append("asked")
        try:
            answer = yield Elicit(f"Still there, {tag}?", Form().string("reply"))
            ran[tag].append(f"answered {answer.action}")
            return f"{tag}: {answer.content['reply'] if answer.accepted else answer.action}"
        finally:
            ran[tag].append("finally")

    @server.tool
    def quick() -> str:
        """Answers at once."""
        return "quick"

    @server.tool
    async def nap(seconds: float) -> str:
        """Sleeps, sending nothing."""
        await trio.sleep(seconds)
        return "slept"

    return server, ran


@pytest.fixture(params=["native", "asgi"])
def kind(request) -> str:
    return request.param


async def open_client(nursery: trio.Nursery, kind: str, server: Any, **options: Any) -> httpx.AsyncClient:
    port = await start_front_end(kind, nursery, server, **options)
    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0)
    del client.headers["accept"]
    return client


@pytest.fixture
async def client(nursery, kind):
    async with await open_client(nursery, kind, legacy_server, sse_keepalive=None) as opened:
        yield opened


# -- sessions ------------------------------------------------------------------------------------


async def test_initialize_opens_a_session_whose_id_the_server_mints(client):
    first = await Session(client).open()
    info = first.initialized["result"]
    assert info["protocolVersion"] == "2025-11-25" and info["serverInfo"]["name"] == "legacy-fixture"
    owner, _, random = first.id.partition(".")
    assert owner == "0" and len(random) >= 22  # 144 random bits in URL-safe Base64
    assert set(first.id) <= set(string.printable[:94])  # visible ASCII, 0x21 to 0x7E
    # A client-chosen id is never adopted, and each initialize gets a fresh one.
    chosen = await Session(client).open(headers={"Mcp-Session-Id": "0.chosen-by-the-client-aaaaaaaaaaaa"})
    assert chosen.id not in ("0.chosen-by-the-client-aaaaaaaaaaaa", first.id)
    listed = await first.call(1, "tools/list")
    assert "onboard" in {tool["name"] for tool in listed["result"]["tools"]}


async def test_a_request_without_the_session_header_is_400(client):
    session = await Session(client).open()
    for message in (request(1, "tools/list"), {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 1, "result": {}}):
        response = await session.post(message, headers={"Mcp-Session-Id": None})
        assert response.status_code == 400, response.text
        assert error_of(response)["code"] == -32600 and "Mcp-Session-Id" in error_of(response)["message"]
    twice = await client.post("/mcp", json=request(2, "tools/list"),
                              headers=[("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
                                       ("Mcp-Session-Id", session.id), ("Mcp-Session-Id", session.id)])
    assert twice.status_code == 400 and "once" in error_of(twice)["message"]
    for method in ("GET", "DELETE"):
        response = await client.request(method, "/mcp", headers={"Accept": "text/event-stream"})
        assert response.status_code == 400 and error_of(response)["code"] == -32600


async def test_an_unknown_or_ended_session_is_404(client):
    session = await Session(client).open()
    for unknown in ("0.nope", "nonsense", "7.AAAAAAAAAAAAAAAAAAAAAAAA", session.id + "x"):
        response = await session.post(request(3, "tools/list"), headers={"Mcp-Session-Id": unknown})
        assert response.status_code == 404, response.text
        assert error_of(response)["code"] == -32001
        assert response.json()["id"] == 3
    assert (await session.delete()).status_code == 200
    for response in (await session.post(request(4, "tools/list")),
                     await client.get("/mcp", headers=session.headers({"Accept": "text/event-stream"})),
                     await session.delete()):
        assert response.status_code == 404, response.text


async def test_the_protocol_version_header_may_be_absent_or_any_2025_version(client):
    session = await Session(client, version="2025-06-18").open()
    assert session.initialized["result"]["protocolVersion"] == "2025-06-18"
    for header in (None, "2025-06-18", "2025-11-25", "2025-03-26"):
        reply = await session.call(5, "ping") if header is not None else validated(
            (await session.post(request(5, "ping"), headers={"MCP-Protocol-Version": None})).json(), "ping")
        assert reply["result"] == {}
    for bad in ("1999-01-01", "2025-11-25, 2025-11-25", "garbage"):
        response = await session.post(request(6, "ping"), headers={"MCP-Protocol-Version": bad})
        assert response.status_code == 400 and "MCP-Protocol-Version" in error_of(response)["message"], bad


async def test_a_modern_header_or_claim_keeps_a_request_on_the_modern_path(client):
    session = await Session(client).open()
    # No claim, modern header: the modern era refuses what lacks its _meta (and names no session).
    response = await session.post(request(7, "tools/list"), headers={"MCP-Protocol-Version": PROTOCOL,
                                                                    "Mcp-Method": "tools/list"})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32602
    assert "mcp-session-id" not in response.headers
    # initialize with a modern header is refused, with the modern era's header error.
    response = await client.post("/mcp", json=initialize(), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32020
    validate_message(response.json())


async def test_json_rpc_errors_ride_200(client):
    session = await Session(client).open()
    for method, params, code in (("no/such/method", None, -32601),
                                 ("tools/call", {"name": "nope", "arguments": {}}, -32602),
                                 ("resources/read", {"uri": "test://missing"}, -32002),
                                 ("logging/setLevel", {"level": "loud"}, -32602)):
        response = await session.post(request(8, method, params))
        assert response.status_code == 200, (method, response.text)
        assert validated(response.json())["error"]["code"] == code


async def test_delete_ends_the_session_and_closes_its_suspended_generators(nursery, kind):
    server, ran = held_server()
    async with await open_client(nursery, kind, server) as client:
        session = await Session(client).open()
        async with session.stream(1, "tools/call", {"name": "hold", "arguments": {"tag": "d"}}) as stream:
            question = await stream.message()
            assert question["method"] == "elicitation/create"
            assert (await session.delete()).status_code == 200
            assert await stream.rest() is not None  # the stream ends without a response
            assert not [m for m in stream.messages if m.get("id") == 1 and "method" not in m]
        await until(lambda: ran["d"], lambda seen: seen == ["asked", "finally"])
        assert (await session.answer(question["id"], {"action": "accept", "content": {"reply": "x"}})).status_code == 404
        assert (await session.post(request(2, "tools/list"))).status_code == 404


async def test_a_principal_finds_only_its_own_sessions(nursery, kind):
    server = Server("owned", "1.0", secret=b"o" * 32, principal=lambda info: info.headers.get("x-user"))

    @server.tool
    def whoami(ctx) -> str:
        """The caller's principal."""
        return str(ctx.principal)

    async with await open_client(nursery, kind, server) as client:
        ada = await Session(client, always={"X-User": "ada"}).open()
        reply = await ada.call(1, "tools/call", {"name": "whoami", "arguments": {}})
        assert reply["result"]["content"][0]["text"] == "ada"
        for user in ("bob", None):  # another principal, or none, sees an unknown session
            for response in (await ada.post(request(2, "tools/list"), headers={"X-User": user}),
                             await client.get("/mcp", headers=ada.headers({"Accept": "text/event-stream",
                                                                           "X-User": user})),
                             await client.delete("/mcp", headers=ada.headers({"X-User": user}))):
                assert response.status_code == 404, (user, response.text)
        assert (await ada.post(request(3, "tools/list"))).status_code == 200


async def test_origin_and_host_rules_are_the_modern_eras(client):
    session = await Session(client).open()
    evil = await session.post(request(1, "tools/list"), headers={"Origin": "http://evil.example.com"})
    assert evil.status_code == 403
    misdirected = await client.post("/mcp", json=initialize(), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Host": "evil.example.com", "Origin": "http://evil.example.com"})
    assert misdirected.status_code in (403, 421) and "mcp-session-id" not in misdirected.headers
    listed = await client.post("/mcp", json=initialize(), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Origin": "http://localhost:6274"})
    assert listed.status_code == 200
    assert listed.headers["access-control-expose-headers"] == "Mcp-Session-Id"
    assert listed.headers["access-control-allow-origin"] == "http://localhost:6274"


async def test_a_modern_request_ignores_the_session_header_and_gets_none(client):
    session = await Session(client).open()
    modern = {"jsonrpc": "2.0", "id": 9, "method": "tools/list",
              "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": PROTOCOL,
                                   "io.modelcontextprotocol/clientCapabilities": {}}}}
    for named in (session.id, "0.unknown"):
        response = await client.post("/mcp", json=modern, headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL, "Mcp-Method": "tools/list", "Mcp-Session-Id": named})
        assert response.status_code == 200 and "mcp-session-id" not in response.headers
        assert response.json()["result"]["resultType"] == "complete"


# -- streams -------------------------------------------------------------------------------------


async def test_a_handler_that_sends_nothing_is_answered_with_json(client):
    session = await Session(client).open()
    response = await session.post(request(1, "tools/call", {"name": "profile", "arguments": {}}))
    assert response.headers["content-type"] == "application/json"
    result = validated(response.json(), "tools/call")["result"]
    assert result["structuredContent"] == {"name": "Ada", "languages": ["en", "fr"]}


async def test_a_question_goes_on_the_posts_stream_and_the_answer_comes_back_as_a_post(client):
    session = await Session(client).open()
    async with session.stream(1, "tools/call", {"name": "polite", "arguments": {}}) as stream:
        first = await stream.next()
        assert first is not None and first.priming and first.id == "1-0"  # priming: 2025-11-25 only
        question = await stream.message()
        assert question["method"] == "elicitation/create" and question["params"]["mode"] == "form"
        assert stream.events[-1].id == "1-1"
        answered = await session.answer(question["id"], {"action": "accept", "content": {"name": "Ada"}})
        assert (answered.status_code, answered.content) == (202, b"")
        final = await stream.message()
        assert final == {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "stored Ada"}]}}
        assert await stream.next() is None  # the stream ends after the response


async def test_older_versions_get_event_ids_but_no_priming(client):
    session = await Session(client, version="2025-06-18").open()
    async with session.stream(1, "tools/call", {"name": "polite", "arguments": {}}) as stream:
        first = await stream.next()
        assert first is not None and not first.priming and first.id == "1-1"
        assert "mode" not in first.message["params"]  # 2025-06-18 has no mode
        await session.answer(first.message["id"], {"action": "decline"})
        assert (await stream.message())["result"]["content"][0]["text"] == "declined: nothing stored"


async def test_progress_and_logs_ride_the_requests_own_stream(client):
    session = await Session(client).open()
    assert (await session.call(1, "logging/setLevel", {"level": "info"}))["result"] == {}
    async with session.stream(2, "tools/call", {"name": "count", "arguments": {"steps": 2},
                                                "_meta": {"progressToken": "p"}}) as stream:
        progress = [await stream.message(), await stream.message()]
        assert [m["params"]["progress"] for m in progress] == [1, 2]
        assert all(m["params"]["progressToken"] == "p" for m in progress)
        question = await stream.message()
        await session.answer(question["id"], {"action": "accept", "content": {"report": True}})
        assert (await stream.message())["result"]["content"][0]["text"] == "counted 2, report accept"
    response = await session.post(request(3, "tools/call", {"name": "chatty", "arguments": {}}))
    logged = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
    assert [m["params"]["level"] for m in logged[:-1]] == ["info", "error"]  # debug is below the session's level


async def test_a_group_sends_every_request_before_any_is_answered(client):
    session = await Session(client).open()
    async with session.stream(1, "tools/call", {"name": "onboard", "arguments": {"company": "acme"}}) as stream:
        answers = {"Welcome to acme! Your name?": {"name": "Ada"}, "Which plan?": {"plan": "team"}}
        for _ in range(2):
            asked = await stream.message()
            await session.answer(asked["id"], {"action": "accept", "content": answers[asked["params"]["message"]]})
        group = [await stream.message(), await stream.message()]
        assert [m["params"]["message"] for m in group] == ["How do we reach you?", "Shall we start?"]
        await session.answer(group[1]["id"], {"action": "accept", "content": {"go": True}})
        await session.answer(group[0]["id"], {"action": "accept", "content": {"email": "ada@example.com"}})
        final = await stream.message()
        assert final["result"]["content"][0]["text"] == "Ada on team (ada@example.com) at acme"


async def test_answers_reach_the_session_and_request_that_asked(client):
    one, two = await Session(client).open(), await Session(client).open()
    async with one.stream(1, "tools/call", {"name": "polite", "arguments": {}}) as first, \
            two.stream(1, "tools/call", {"name": "polite", "arguments": {}}) as second:
        asked_one, asked_two = await first.message(), await second.message()
        assert asked_one["id"] == asked_two["id"]  # each session counts its own requests
        # An answer in the wrong session, or to an id nobody asked, is accepted and dropped.
        assert (await one.answer(999, {"action": "decline"})).status_code == 202
        await two.answer(asked_two["id"], {"action": "accept", "content": {"name": "Bea"}})
        await one.answer(asked_one["id"], {"action": "accept", "content": {"name": "Ann"}})
        assert (await first.message())["result"]["content"][0]["text"] == "stored Ann"
        assert (await second.message())["result"]["content"][0]["text"] == "stored Bea"


async def test_an_invalid_answer_is_refused_as_in_2026(client):
    session = await Session(client).open()
    async with session.stream(1, "tools/call", {"name": "polite", "arguments": {}}) as stream:
        asked = await stream.message()
        await session.answer(asked["id"], {"action": "accept", "content": {"name": 42}})
        final = await stream.message()
        assert final["error"]["code"] == -32602


async def test_notifications_cancelled_closes_the_generator_and_sends_no_response(nursery, kind):
    server, ran = held_server()
    async with await open_client(nursery, kind, server) as client:
        session = await Session(client).open()
        async with session.stream(4, "tools/call", {"name": "hold", "arguments": {"tag": "c"}}) as stream:
            question = await stream.message()
            cancelled = await session.notify("notifications/cancelled", {"requestId": 4, "reason": "stop"})
            assert cancelled.status_code == 202
            await stream.rest()
        assert ran["c"] == ["asked", "finally"]
        assert not [m for m in stream.messages if m.get("id") == 4]
        withdrawn = [m for m in stream.messages if m.get("method") == "notifications/cancelled"]
        assert [m["params"]["requestId"] for m in withdrawn] == [question["id"]]
        assert (await session.call(5, "ping"))["result"] == {}  # the session goes on


async def test_a_request_id_in_flight_is_not_reused(nursery, kind):
    server, ran = held_server()
    async with await open_client(nursery, kind, server) as client:
        session = await Session(client).open()
        async with session.stream(1, "tools/call", {"name": "hold", "arguments": {"tag": "r"}}) as stream:
            await stream.message()
            again = await session.post(request(1, "tools/call", {"name": "quick", "arguments": {}}))
            assert again.status_code == 200 and validated(again.json())["error"]["code"] == -32600


# -- the GET stream ------------------------------------------------------------------------------


async def test_list_changes_and_resource_updates_go_on_the_get_stream_only(client):
    session = await Session(client).open()
    assert (await session.call(1, "resources/subscribe", {"uri": "test://static"}))["result"] == {}
    async with session.listen() as standalone:
        priming = await standalone.next()
        assert priming is not None and priming.priming and priming.id == "0-0"
        second = await client.get("/mcp", headers=session.headers({"Accept": "text/event-stream"}))
        assert second.status_code == 409
        async with session.stream(2, "tools/call", {"name": "polite", "arguments": {}}) as call:
            asked = await call.message()
            legacy_server.notify_tools_changed()
            legacy_server.notify_resource_updated("test://static")
            legacy_server.notify_resource_updated("test://other")  # not subscribed: not sent
            assert (await standalone.message())["method"] == "notifications/tools/list_changed"
            updated = await standalone.message()
            assert updated == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                               "params": {"uri": "test://static"}}
            await session.answer(asked["id"], {"action": "decline"})
            assert "result" in await call.message()  # the call's stream carried none of them
            assert all("result" in m or m["method"] == "elicitation/create" for m in call.messages)
    # Once that connection is gone, the stream may be opened again.
    async with session.listen() as again:
        assert (await again.next()).priming


async def test_notifications_before_the_get_stream_wait_for_it(client):
    session = await Session(client).open()
    legacy_server.notify_prompts_changed()
    async with session.listen() as standalone:
        assert (await standalone.message())["method"] == "notifications/prompts/list_changed"


async def test_a_get_stream_must_accept_event_streams(client):
    session = await Session(client).open()
    response = await client.get("/mcp", headers=session.headers({"Accept": "application/json", "Content-Type": None}))
    assert response.status_code == 406


# -- resumption, polling, keep-alives ------------------------------------------------------------


async def test_a_dropped_stream_is_not_a_cancellation_and_resumes_with_last_event_id(nursery, kind):
    server, ran = held_server()
    async with await open_client(nursery, kind, server) as client:
        session = await Session(client).open()
        async with session.stream(1, "tools/call", {"name": "hold", "arguments": {"tag": "v"}}) as stream:
            question = await stream.message()
            seen = stream.last_id
        # The connection is gone; the call waits on. A resumption from the priming id replays the question.
        async with session.listen("1-0", "tools/call") as resumed:
            assert (await resumed.message()) == question
            async with session.listen(seen, "tools/call") as later:  # a newer resumption takes the stream over
                assert await resumed.next() is None  # the superseded connection ends
                await session.answer(question["id"], {"action": "accept", "content": {"reply": "here"}})
                final = await later.message()
                assert final["result"]["content"][0]["text"] == "v: here"
                assert await later.next() is None
        assert ran["v"] == ["asked", "answered accept", "finally"]
        # A late resumption still gets the response; another stream's events are never replayed.
        async with session.listen(seen, "tools/call") as late:
            assert (await late.message())["id"] == 1
            assert [m for m in late.messages if "method" in m] == []  # nothing of another stream


async def test_a_stream_with_nothing_left_to_resume_is_gone(client):
    session = await Session(client).open()
    async with session.stream(1, "tools/call", {"name": "polite", "arguments": {}}) as stream:
        await session.answer((await stream.message())["id"], {"action": "decline"})
        await stream.rest()
    headers = session.headers({"Accept": "text/event-stream", "Content-Type": None})
    for gone in (stream.last_id, "1-5", "99-3"):  # sent whole, past its end, or never there
        response = await client.get("/mcp", headers={**headers, "Last-Event-ID": gone})
        assert response.status_code == 410, (gone, response.text)
        assert error_of(response)["code"] == -32600
    # An id this server never mints opens the GET stream, as no Last-Event-ID would.
    async with session.listen("not-an-id") as standalone:
        first = await standalone.next()
        assert first is not None and first.id == "0-0"


async def test_a_resumption_of_the_get_stream_takes_it_over(client):
    session = await Session(client).open()
    async with session.listen() as first:
        assert (await first.next()).priming
        legacy_server.notify_tools_changed()
        changed = await first.next()
        assert changed.message["method"] == "notifications/tools/list_changed" and changed.id == "0-1"
        async with session.listen("0-0") as again:  # the client lost the first connection, and says so
            assert await first.next() is None
            replayed = await again.message()
            assert replayed == changed.message and again.events[-1].id == "0-1"


async def poll_until_answered(session: Session, last_id: str | None) -> dict[str, Any]:
    """Resume a stream as a polling client does (each connection may end for polling) until its response."""
    with trio.fail_after(10):
        while True:
            async with session.listen(last_id, "tools/call") as resumed:
                events = await resumed.rest()
            for event in events:
                if event.message is not None and "method" not in event.message:
                    return event.message
            assert events and events[-1].retry is not None, "a resumed stream ended neither answered nor polled"
            last_id = resumed.last_id or last_id


async def test_polling_closes_a_connection_with_retry_and_the_stream_goes_on(nursery, kind):
    server, ran = held_server()
    async with await open_client(nursery, kind, server, sse_poll_after=0.3, sse_retry=0.25) as client:
        session = await Session(client).open()
        async with session.stream(1, "tools/call", {"name": "hold", "arguments": {"tag": "p"}}) as stream:
            events = await stream.rest()
        assert events[0].priming and events[1].message["method"] == "elicitation/create"
        assert events[-1].retry == 250 and not [e for e in events if e.message and "result" in e.message]
        question = events[1].message
        await session.answer(question["id"], {"action": "accept", "content": {"reply": "polled"}})
        final = await poll_until_answered(session, stream.last_id)
        assert final["result"]["content"][0]["text"] == "p: polled"
        quick = await session.post(request(2, "tools/call", {"name": "quick", "arguments": {}}))
        assert quick.headers["content-type"] == "application/json"  # finished in time: JSON
        # A call still silent when its connection is due to close gets a stream, closed for polling at once.
        async with session.stream(4, "tools/call", {"name": "nap", "arguments": {"seconds": 0.6}}) as stream:
            events = await stream.rest()
        assert events[0].priming and events[-1].retry == 250 and not [e for e in events if e.message]
        assert (await poll_until_answered(session, stream.last_id))["result"]["content"][0]["text"] == "slept"
        # 2025-06-18 sessions are never polled: they cannot resume from a priming event.
        older = await Session(client, version="2025-06-18").open()
        async with older.stream(3, "tools/call", {"name": "hold", "arguments": {"tag": "o"}}) as stream:
            question = await stream.message()
            await trio.sleep(0.6)  # twice the poll time: a polled connection would have ended by now
            await older.answer(question["id"], {"action": "accept", "content": {"reply": "kept"}})
            rest = await stream.rest()
            assert [event.retry for event in rest] == [None]
            assert rest[0].message["result"]["content"][0]["text"] == "o: kept"


async def test_keepalives_while_a_generator_waits_for_its_human(nursery, kind):
    server, _ = held_server()
    async with await open_client(nursery, kind, server, sse_keepalive=0.05) as client:
        session = await Session(client).open()
        async with session.stream(1, "tools/call", {"name": "hold", "arguments": {"tag": "k"}}) as stream:
            question = await stream.message()
            comments = [await stream.next(), await stream.next()]
            assert [event.comment for event in comments] == ["keep-alive", "keep-alive"]
            await session.answer(question["id"], {"action": "decline"})
            assert (await stream.message())["result"]["content"][0]["text"] == "k: decline"


async def test_the_answer_timeout_fails_the_call_and_withdraws_the_question(nursery, kind):
    server, ran = held_server(answer_timeout=0.3)
    async with await open_client(nursery, kind, server) as client:
        session = await Session(client).open()
        async with session.stream(1, "tools/call", {"name": "hold", "arguments": {"tag": "t"}}) as stream:
            question = await stream.message()
            withdrawn = await stream.message()
            assert withdrawn["method"] == "notifications/cancelled"
            assert withdrawn["params"]["requestId"] == question["id"]
            final = await stream.message()
        assert final["result"]["isError"] is True and "0.3 s" in final["result"]["content"][0]["text"]
        assert ran["t"] == ["asked", "finally"]
        assert (await session.answer(question["id"], {"action": "decline"})).status_code == 202  # too late: dropped


async def test_a_client_that_vanishes_mid_question_and_never_returns_is_ended_by_the_timeout(nursery, kind):
    registry = SessionRegistry()
    server, ran = held_server(answer_timeout=0.3, sessions=registry)
    async with await open_client(nursery, kind, server) as client:
        session = await Session(client).open()
        async with session.stream(1, "tools/call", {"name": "hold", "arguments": {"tag": "gone"}}) as stream:
            await stream.message()
            assert registry.suspended == 1
        await until(lambda: ran["gone"], lambda seen: seen == ["asked", "finally"])
        assert registry.suspended == 0 and len(registry) == 1
        assert (await session.call(2, "ping"))["result"] == {}


@pytest.mark.parametrize("kind", ["native", "asgi"])
async def test_an_unauthenticated_address_spends_one_bucket_whatever_sessions_it_opens(nursery, kind):
    # initialize is no request of the pipeline's: the sessions an address opens, ends and opens
    # again all spend that address's bucket, as does a modern request naming one of them; another
    # address (127.0.0.2, loopback too) has a bucket of its own. Both front ends name the address.
    limited = Server("limited", "1.0.0")
    limited.middleware(RateLimit(per_second=0.01, burst=2))

    @limited.tool
    def ping() -> str:
        """Pong."""
        return "pong"

    port = await start_front_end(kind, nursery, limited)

    def http(address: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0,
                                 transport=httpx.AsyncHTTPTransport(local_address=address))

    async def refused(session: Session, id: int) -> None:
        error = (await session.call(id, "tools/list"))["error"]
        assert error["code"] == LEGACY_RATE_LIMITED and error["data"]["retryAfter"] > 0, error

    async with http("127.0.0.1") as here, http("127.0.0.2") as there:
        first = await Session(here).open()
        assert "result" in await first.call(1, "tools/list")
        assert "result" in await first.call(2, "tools/list")
        await refused(first, 3)
        await refused(await Session(here).open(), 4)  # a new session: the same, empty, bucket
        assert (await first.delete()).status_code in (200, 202, 204)
        await refused(await Session(here).open(), 5)  # after DELETE too
        modern = await here.post("/mcp", content=json.dumps(
            {"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"_meta": meta()}}), headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list", "Mcp-Session-Id": first.id or ""})
        assert modern.status_code == 429 and validate_message(modern.json()) is None
        assert modern.json()["error"]["code"] == RATE_LIMITED
        elsewhere = await Session(there).open()
        assert "result" in await elsewhere.call(7, "tools/list")
        assert "result" in await elsewhere.call(8, "tools/list")
