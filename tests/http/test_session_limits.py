"""The bounds of 2025 sessions over Streamable HTTP, behind both front ends.

A question nobody answers, a client that vanishes mid-question, ten thousand sessions
left idle, one client opening sessions in a loop: each ends in a clear answer (an
error with its reason, a ``404`` the client recovers from by initializing again, a
``503`` while every session is busy), the process holds a bounded number of sessions
and of their transport state, and the sessions of other clients go on as before. The
cases where a stream is dropped and resumed, or dropped for good, are in
``test_sessions.py`` (``test_a_dropped_stream_is_not_a_cancellation...`` and
``test_a_client_that_vanishes_mid_question...``).
"""

from __future__ import annotations

import gc
import json

import httpx
import trio

from mrtr.server.sessions import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_SUSPENDED_PER_CLIENT,
    DEFAULT_MAX_SUSPENDED_PER_SESSION,
    SessionRegistry,
)
from mrtr.transports.http import sessions as http_sessions

from ..conftest import until
from .sessions_client import Session, Stream, error_of, initialize, request, validated
from .test_sessions import held_server, kind, open_client  # noqa: F401  (kind is a fixture)

OTHER_ADDRESS = "127.0.0.2"
"""A second loopback address: a second client, as the server counts clients without a principal."""


def live_transport_sessions() -> int:
    """How many 2025 sessions' HTTP state (streams, buffers, pending requests) is still alive."""
    gc.collect()
    return sum(1 for thing in gc.get_objects() if isinstance(thing, http_sessions._Session) and thing.id)


def other_client(port: int) -> httpx.AsyncClient:
    """A client whose connections come from :data:`OTHER_ADDRESS`."""
    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0,
                               transport=httpx.AsyncHTTPTransport(local_address=OTHER_ADDRESS))
    del client.headers["accept"]
    return client


async def open_many(client: httpx.AsyncClient, count: int, *, lanes: int = 8) -> list[str]:
    """``count`` sessions opened with ``initialize`` and left idle; their ids, oldest first."""
    body = json.dumps(initialize()).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    ids: list[str] = []

    async def lane(share: int) -> None:
        for _ in range(share):
            response = await client.post("/mcp", content=body, headers=headers)
            assert response.status_code == 200, response.text
            ids.append(response.headers["mcp-session-id"])

    async with trio.open_nursery() as nursery:
        for number in range(lanes):
            nursery.start_soon(lane, count // lanes + (number < count % lanes))
    return ids


async def test_an_unanswered_question_holds_only_its_own_call(nursery, kind):
    registry = SessionRegistry()
    server, ran = held_server(answer_timeout=1.0, sessions=registry)
    async with await open_client(nursery, kind, server) as client:
        waiting, busy = await Session(client).open(), await Session(client).open()
        async with waiting.stream(1, "tools/call", {"name": "hold", "arguments": {"tag": "silent"}}) as silent:
            question = await silent.message()
            assert question["method"] == "elicitation/create" and registry.suspended == 1
            # While it waits, another session asks and is answered, and calls what needs no answer.
            assert (await busy.call(1, "tools/call", {"name": "quick", "arguments": {}}))["result"]["content"][0][
                "text"] == "quick"
            async with busy.stream(2, "tools/call", {"name": "hold", "arguments": {"tag": "loud"}}) as loud:
                await busy.answer((await loud.message())["id"], {"action": "accept", "content": {"reply": "yes"}})
                assert (await loud.message())["result"]["content"][0]["text"] == "loud: yes"
            withdrawn = await silent.message()
            assert withdrawn["method"] == "notifications/cancelled"
            assert withdrawn["params"]["requestId"] == question["id"]
            final = await silent.message()
        assert final["id"] == 1 and final["result"]["isError"] is True
        assert "1 s" in final["result"]["content"][0]["text"]
        assert ran["silent"] == ["asked", "finally"] and registry.suspended == 0
        assert (await waiting.call(2, "ping"))["result"] == {}  # the session itself lives on


async def test_idle_sessions_at_the_process_bound_make_room_and_a_busy_one_survives(nursery, kind):
    """At the process bound the idle session idle the longest makes room; one waiting for an answer never does.

    Natively with the default bound, 10,000 sessions; behind hypercorn (slower to open
    them, and the bound is the registry's, not the front end's) with 2,000.
    """
    count = DEFAULT_MAX_SESSIONS if kind == "native" else 2_000
    registry = SessionRegistry(max_sessions=count, max_per_client=2 * count)
    server, ran = held_server(sessions=registry)
    async with await open_client(nursery, kind, server) as client:
        held = await Session(client).open()
        async with held.stream(1, "tools/call", {"name": "hold", "arguments": {"tag": "held"}}) as stream:
            question = await stream.message()
            ids = await open_many(client, count, lanes=1)  # one lane: ids in the order opened
            assert len(registry) == count and len(set(ids)) == count
            assert live_transport_sessions() == count  # the evicted one's streams and buffers went with it
            first = Session(client, id=ids[0])
            gone = await first.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert gone.status_code == 404 and "Session not found" in error_of(gone)["message"]
            last = Session(client, id=ids[-1])
            assert (await last.call(1, "ping"))["result"] == {}
            # The held session was the oldest of all, but busy: it still gets its answer.
            await held.answer(question["id"], {"action": "accept", "content": {"reply": "still here"}})
            assert (await stream.message())["result"]["content"][0]["text"] == "held: still here"
        assert ran["held"] == ["asked", "answered accept", "finally"]


async def test_an_initialize_flood_from_one_client_ends_only_its_own_sessions(nursery, kind):
    registry = SessionRegistry(max_per_client=50)
    server, _ = held_server(sessions=registry)
    port_client = await open_client(nursery, kind, server)
    async with port_client as client, other_client(int(str(port_client.base_url.port))) as elsewhere:
        bystander = await Session(elsewhere).open()
        flooded = await open_many(client, 500)
        assert len(registry) == 51 and live_transport_sessions() == 51
        # The flooder's newest 50 live; its older ones are 404, and it recovers by initializing again.
        statuses = [(await Session(client, id=opened).post({"jsonrpc": "2.0", "id": 1, "method": "ping"})).status_code
                    for opened in flooded]
        assert statuses.count(200) == 50 and statuses.count(404) == 450, statuses
        assert set(statuses[:400]) == {404}  # the first opened were the first ended
        # The other client's session was the oldest idle one in the process, and is untouched.
        assert (await bystander.call(1, "ping"))["result"] == {}


async def test_a_client_whose_sessions_are_all_busy_is_refused_with_503_and_others_are_not(nursery, kind):
    registry = SessionRegistry(max_per_client=3)
    server, ran = held_server(sessions=registry)
    port_client = await open_client(nursery, kind, server)
    questions: list[tuple[Session, dict]] = []

    async def ask(session: Session, tag: str) -> None:
        async with session.stream(1, "tools/call", {"name": "hold", "arguments": {"tag": tag}}) as stream:
            questions.append((session, await stream.message()))
            await stream.message()

    async with port_client as client, other_client(int(str(port_client.base_url.port))) as elsewhere:
        async with trio.open_nursery() as waits:
            for number in range(3):
                waits.start_soon(ask, await Session(client).open(), f"t{number}")
            await until(lambda: len(questions), lambda seen: seen == 3)
            refused = await client.post("/mcp", json=initialize(),
                                        headers={"Accept": "application/json, text/event-stream"})
            assert refused.status_code == 503, refused.text
            error = error_of(refused)
            assert error["code"] == -32603 and "all of them busy" in error["message"]
            assert "mcp-session-id" not in refused.headers
            # Another client opens and works meanwhile.
            assert (await (await Session(elsewhere).open()).call(1, "ping"))["result"] == {}
            for session, question in questions:
                await session.answer(question["id"], {"action": "decline"})
        assert registry.suspended == 0
        assert sorted(ran) == ["t0", "t1", "t2"] and all(steps[-1] == "finally" for steps in ran.values())
        # Once they are idle again, the client opens a session: its oldest idle one makes room.
        assert len(registry) == 4
        await Session(client).open()
        assert len(registry) == 4 and live_transport_sessions() == 4


async def _one_call(session: Session, call_id: int) -> dict | None:
    """Start ``hold``; drop the connection as soon as its question arrives (``None``), or its answer when refused.

    A dropped connection is not a cancellation in this era: the call goes on waiting for
    its answer, and the connection bound per address never counts it again.
    """
    body = json.dumps(request(call_id, "tools/call", {"name": "hold", "arguments": {"tag": f"c{call_id}"}})).encode()
    async with session.client.stream("POST", session.path, content=body, headers=session.headers()) as response:
        assert response.status_code == 200, await response.aread()
        if response.headers["content-type"] == "application/json":
            return validated(json.loads(await response.aread()), "tools/call")
        async for line in response.aiter_lines():
            if line.startswith("data:") and line[5:].strip():
                message = validated(json.loads(line[5:]))
                assert message["method"] == "elicitation/create", message
                return None  # asked: drop the connection with the call waiting
    raise AssertionError("the stream ended without a question")


async def someone_else_is_asked(port: int) -> None:
    """A client at another address opens a session, is asked its question, answers, and gets the result."""
    async with other_client(port) as elsewhere:
        session = await Session(elsewhere).open()
        answer = await session.post(request(1, "tools/call", {"name": "quick", "arguments": {}}))
        assert answer.json()["result"]["content"][0]["text"] == "quick"
        body = json.dumps(request(2, "tools/call", {"name": "hold", "arguments": {"tag": "bystander"}})).encode()
        async with elsewhere.stream("POST", "/mcp", content=body, headers=session.headers()) as response:
            if response.headers["content-type"] == "application/json":  # refused at once: no slot was left
                raise AssertionError(f"another client's question was not asked: {(await response.aread())!r}")
            stream = Stream(response, "tools/call")
            question = await stream.message()
            assert question["method"] == "elicitation/create", question
            await session.answer(question["id"], {"action": "accept", "content": {"reply": "here"}})
            assert (await stream.message())["result"]["content"][0]["text"] == "bystander: here"


async def test_one_session_dropping_its_waiting_calls_holds_only_its_own_share(nursery, kind):
    """Issue 34, 1: one session starts more waiting calls than the process holds, each on a dropped connection.

    Its own share fills (the bound per session), the rest of its calls fail at once naming
    that bound and the option that raises it, and another client's question is still asked.
    """
    registry = SessionRegistry(max_suspended=60)
    server, _ = held_server(sessions=registry)
    port_client = await open_client(nursery, kind, server)
    async with port_client as client:
        attacker = await Session(client).open()
        refused = [answer for number in range(1, 71) if (answer := await _one_call(attacker, number)) is not None]
        await someone_else_is_asked(int(str(port_client.base_url.port)))
        share = DEFAULT_MAX_SUSPENDED_PER_SESSION
        assert registry.suspended == share and len(refused) == 70 - share
        text = refused[0]["result"]["content"][0]["text"]
        assert refused[0]["result"]["isError"] is True
        assert f"This session holds {share} calls waiting" in text and "max_suspended_per_session" in text, text
        # The attacker's session itself is still served.
        assert (await attacker.call(100, "tools/call", {"name": "quick", "arguments": {}}))["result"]["content"][0][
            "text"] == "quick"


async def test_one_client_over_many_sessions_holds_only_its_own_share(nursery, kind):
    """The same from one address spread over five sessions: the bound per client stops it, not the process's."""
    registry = SessionRegistry(max_suspended=150)
    server, _ = held_server(sessions=registry)
    port_client = await open_client(nursery, kind, server)
    async with port_client as client:
        refused = []
        for _ in range(5):
            session = await Session(client).open()
            refused += [answer for number in range(1, DEFAULT_MAX_SUSPENDED_PER_SESSION + 1)
                        if (answer := await _one_call(session, number)) is not None]
        await someone_else_is_asked(int(str(port_client.base_url.port)))
        share = DEFAULT_MAX_SUSPENDED_PER_CLIENT
        assert registry.suspended == share and len(refused) == 5 * DEFAULT_MAX_SUSPENDED_PER_SESSION - share
        text = refused[-1]["result"]["content"][0]["text"]
        assert f"This client holds {share} calls waiting" in text and "max_suspended_per_client" in text, text
