"""2025-era sessions across three nodes on one Redis, behind haproxy round robin, nothing sticky.

Each request of a session reaches whichever node haproxy picks; the session's record is
in Redis, and the answer to a question lands on another node than the call's stream most
of the time and must be passed on to the node whose handler waits for it. The load is
the official Python SDK 1.x client (``tests/legacy/sdk_load.py``, a new connection for
every request); the rest speaks raw HTTP so each message can be checked against the
2025-11-25 schema, and so a test can send a request to the node it chooses.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from ..conftest import clean_env, until
from ..interop.test_interop import _tail
from ..legacy.test_sdk_client import LOAD, REPO_ROOT, legacy_python  # noqa: F401  (a fixture)
from ..legacy_schema import validate_legacy_message, validate_server_message
from mrtr.carriers.tasks.redis_url import parse_redis_url, redis_client

from .cluster import nodes

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

VERSION = "2025-11-25"


def load(python: Path, url: str, sessions: int, *, calls: int, concurrency: int = 12,
         timeout: float = 60) -> dict[str, Any]:
    completed = subprocess.run([str(python), str(LOAD), "--url", url, "--sessions", str(sessions), "--calls",
                                str(calls), "--concurrency", str(concurrency), "--timeout", str(timeout)],
                               cwd=REPO_ROOT, capture_output=True, text=True, env=clean_env(), timeout=300,
                               check=False)
    assert completed.returncode == 0, _tail(completed.stderr, 40)
    return json.loads(completed.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


class Legacy:
    """One 2025-era session spoken raw through ``url``; every message the server sends is schema-checked."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http = http
        self.url = url
        self.session_id = ""
        self.ids = iter(range(1, 1 << 30))

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": VERSION, **extra}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        return headers

    async def open(self, url: str | None = None) -> Legacy:
        """``initialize`` (through the balancer, or on the node ``url`` names), then ``notifications/initialized``."""
        response = await self.post({"jsonrpc": "2.0", "id": next(self.ids), "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "nodes-test", "version": "1"}}}, url)
        assert response.status_code == 200, response.text
        self.session_id = response.headers["mcp-session-id"]
        assert (await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, url)).status_code == 202
        return self

    async def status(self, url: str) -> int:
        """The status a ``ping`` of this session gets from the node ``url`` names."""
        return (await self.post({"jsonrpc": "2.0", "id": next(self.ids), "method": "ping"}, url)).status_code

    async def post(self, body: dict[str, Any], url: str | None = None) -> httpx.Response:
        # Straight to a node, the Host is still the balancer's (the one name the nodes accept).
        return await self.http.post(url or self.url, headers=self.headers(Host=self.url.split("/")[2]),
                                    content=json.dumps(body))

    async def call(self, name: str, arguments: dict[str, Any], url: str | None = None) -> dict[str, Any]:
        """A call whose handler asks nothing: its one message, checked."""
        response = await self.post({"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call",
                                    "params": {"name": name, "arguments": arguments}}, url)
        assert response.status_code == 200, response.text
        messages = events(response.text) if response.headers["content-type"].startswith("text/event-stream") \
            else [response.json()]
        for message in messages[:-1]:
            validate_server_message(message)
        validate_legacy_message(messages[-1], "tools/call")
        return messages[-1]


def events(text: str) -> list[dict[str, Any]]:
    """The JSON messages of an SSE body (priming events carry none)."""
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]


async def test_300_sdk_sessions_round_robin_across_three_nodes(tmp_path: Path, legacy_python: Path) -> None:
    async with nodes(tmp_path) as cluster:
        outcome = await trio.to_thread.run_sync(lambda: load(legacy_python, cluster.url, 300, calls=2))
        assert outcome["errors"] == 0 and outcome["misrouted"] == 0, (outcome, cluster.logs()[-4000:])
        assert outcome["ok"] == 300
        # Round robin over three nodes: most answers reach another node than the call's.
        assert outcome["crossed"] > outcome["same node"], outcome


async def test_a_session_is_served_by_every_node_and_expires_in_redis(tmp_path: Path) -> None:
    async with nodes(tmp_path) as cluster, httpx.AsyncClient(timeout=30) as http:
        session = Legacy(http, cluster.url)
        await session.open()
        direct = [f"http://127.0.0.1:{node.port}/mcp" for node in cluster.nodes]
        seen = set()
        for url in direct:  # initialize went through the balancer; every node serves the rest
            message = await session.call("whoami", {}, url)
            seen.add(message["result"]["content"][0]["text"])
        assert len(seen) == 3 and "None" not in seen
        # Another principal cannot exist here (no auth); an unknown id is 404 on every node.
        stranger = Legacy(http, cluster.url)
        stranger.session_id = session.session_id[:-2] + ("AA" if not session.session_id.endswith("AA") else "BB")
        response = await stranger.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, direct[1])
        assert response.status_code == 404 and response.json()["error"]["code"] == -32001
        # Gone from Redis (its TTL ran out): 404 everywhere, at once.
        key = f"mrtr:session:{session.session_id}"
        async with redis_client(parse_redis_url(cluster.store)) as redis:
            assert await redis.exists([key]) == 1
            assert 0 < await redis.pttl(key) <= 1800 * 1000  # the idle timeout, moved by each request
            await redis.delete([key])
        for url in direct:
            response = await session.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, url)
            assert response.status_code in (404, 200), response.text
        # A node that read the record a moment ago may still hold its copy for that moment (_FRESH).
        async def gone_everywhere() -> bool:
            for url in direct:
                if (await session.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, url)).status_code != 404:
                    return False
            return True

        await until(gone_everywhere)


class Stream:
    """The SSE response of one call, read event by event as it comes; every message schema-checked."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.lines = response.aiter_lines()
        self.last_id: str | None = None

    async def message(self) -> dict[str, Any] | None:
        """The next message, or ``None`` when the stream ended (or dropped) first."""
        try:
            async for line in self.lines:
                if line.startswith("id:"):
                    self.last_id = line[3:].strip()
                elif line.startswith("data:") and line[5:].strip():
                    message = json.loads(line[5:])
                    if "method" in message:
                        validate_server_message(message)
                    else:
                        validate_legacy_message(message, "tools/call")
                    return message  # type: ignore[no-any-return]
        except httpx.TransportError:
            pass
        return None


def direct(cluster: Any) -> list[str]:
    return [f"http://127.0.0.1:{node.port}/mcp" for node in cluster.nodes]


async def ask(session: Legacy, url: str, nonce: str, stack: Any) -> tuple[Stream, dict[str, Any]]:
    """Start ``secret_code`` on the node ``url`` names; its stream and the question it asked."""
    body = {"jsonrpc": "2.0", "id": next(session.ids), "method": "tools/call",
            "params": {"name": "secret_code", "arguments": {"nonce": nonce}}}
    response = await stack.enter_async_context(session.http.stream(
        "POST", url, headers=session.headers(Host=session.url.split("/")[2]), content=json.dumps(body)))
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    stream = Stream(response)
    question = await stream.message()
    assert question is not None and question["method"] == "elicitation/create"
    return stream, question


async def test_the_calls_suspended_on_a_killed_node_are_adopted_by_the_others(tmp_path: Path) -> None:
    from contextlib import AsyncExitStack

    async with nodes(tmp_path) as cluster, httpx.AsyncClient(timeout=30) as http, AsyncExitStack() as stack:
        urls = direct(cluster)
        sessions = [Legacy(http, cluster.url) for _ in range(6)]
        calls = []
        for number, session in enumerate(sessions):
            await session.open()
            home = number % 3  # two calls suspended on each node
            stream, question = await ask(session, urls[home], f"n{number}", stack)
            calls.append((session, home, stream, question, number))
        # The server's request ids name the node that asked: two distinct names per node, same on each.
        named = {home: {str(question["id"]).partition(".")[0] for _, h, _, question, _ in calls if h == home}
                 for home in range(3)}
        assert all(len(names) == 1 for names in named.values()) and len(set.union(*named.values())) == 3
        cluster.kill(cluster.nodes[0])
        for session, home, stream, question, number in calls:
            other = urls[1] if home != 1 else urls[2]  # a live node, never the call's own
            answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept",
                                                                      "content": {"code": "c" + str(home)}}}
            response = await session.post(answer, other)
            assert response.status_code == 202, response.text  # recorded in Redis before its 202
            if home == 0:
                # Its node died with its handler; the call was recorded: a live node adopts it, replayed to its
                # question, with the answer that arrived, and its stream, resumed there, carries the result.
                assert await stream.message() is None  # its stream dropped with the node
                assert stream.last_id is not None
                resumed = await http.get(other, headers={**session.headers(Host=session.url.split("/")[2]),
                                                         "Accept": "text/event-stream",
                                                         "Last-Event-ID": stream.last_id})
                assert resumed.status_code == 200, resumed.text
                (final,) = events(resumed.text)
                validate_legacy_message(final, "tools/call")
                assert final["id"] == json.loads(stream.response.request.content)["id"]  # the call's own id
                assert final["result"]["content"][0]["text"] == f"n{number}=c0"
            else:
                final = await stream.message()
                assert final is not None and final["result"]["content"][0]["text"].endswith(f"=c{home}")
        for session, home, _, _, _ in calls:  # every session goes on, on the nodes alive
            for url in urls[1:]:
                result = (await session.call("whoami", {}, url))["result"]
                assert result.get("isError") is not True and result["content"][0]["text"].isdigit()


async def test_cancelled_and_delete_reach_the_nodes_holding_the_session(tmp_path: Path) -> None:
    from contextlib import AsyncExitStack

    async with nodes(tmp_path) as cluster, httpx.AsyncClient(timeout=30) as http, AsyncExitStack() as stack:
        urls = direct(cluster)
        session = Legacy(http, cluster.url)
        await session.open()
        # notifications/cancelled on node 2 ends the call suspended on node 1: no response, the stream ends.
        stream, question = await ask(session, urls[0], "cancel-me", stack)
        call_id = json.loads(stream.response.request.content)["id"]
        cancelled = await session.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                        "params": {"requestId": call_id, "reason": "changed my mind"}}, urls[1])
        assert cancelled.status_code == 202
        withdrawn = await stream.message()  # the question is withdrawn, then the stream ends with no response
        assert withdrawn is not None and withdrawn["method"] == "notifications/cancelled"
        assert withdrawn["params"]["requestId"] == question["id"]
        assert await stream.message() is None
        # DELETE through the balancer ends what every node holds: a call on node 1, the GET stream on node 3.
        held, _ = await ask(session, urls[0], "held", stack)
        listening = await stack.enter_async_context(http.stream(
            "GET", urls[2], headers={**session.headers(Host=session.url.split("/")[2]), "Accept": "text/event-stream"}))
        assert listening.status_code == 200
        deleted = await http.delete(cluster.url, headers=session.headers())
        assert deleted.status_code == 200
        assert await held.message() is None

        with trio.fail_after(10):
            await listening.aread()  # the GET stream ends (its node ended its copy of the session)
        for url in urls:
            response = await session.post({"jsonrpc": "2.0", "id": 9, "method": "ping"}, url)
            assert response.status_code == 404 and response.json()["error"]["code"] == -32001


async def test_redis_away_gives_clear_errors_and_sessions_recover(tmp_path: Path) -> None:
    async with nodes(tmp_path) as cluster, httpx.AsyncClient(timeout=30) as http:
        session = Legacy(http, cluster.url)
        await session.open()
        cluster.stop_redis()
        urls = direct(cluster)
        for url in urls:
            # A node that read the record a moment ago may still serve from its copy: ask what reads it.
            async def refused(url: str = url) -> httpx.Response | None:
                response = await session.post({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, url)
                return response if response.status_code != 200 else None

            response = await until(refused)
            assert response.status_code == 503, response.text
            validate_legacy_message(response.json())
            assert response.json()["error"] == {"code": -32603,
                                                "message": "Internal error: the task store is unavailable"}
        opened = await http.post(urls[0], headers={**Legacy(http, cluster.url).headers(),
                                                   "Host": cluster.url.split("/")[2]}, content=json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        assert opened.status_code == 503 and opened.json()["error"]["code"] == -32603
        assert "mcp-session-id" not in opened.headers
        cluster.start_redis()
        # Back without a restart; the session (kept on Redis's disk) goes on, on every node.
        for url in urls:
            async def served(url: str = url) -> bool:
                response = await session.post({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}, url)
                return response.status_code == 200

            await until(served, timeout=20)


async def test_an_answer_reaches_only_the_session_and_request_it_was_sent_for(tmp_path: Path) -> None:
    from contextlib import AsyncExitStack

    async with nodes(tmp_path) as cluster, httpx.AsyncClient(timeout=30) as http, AsyncExitStack() as stack:
        urls = direct(cluster)
        mine, theirs = Legacy(http, cluster.url), Legacy(http, cluster.url)
        await mine.open()
        await theirs.open()
        _, first = await ask(mine, urls[0], "first", stack)  # my session's questions: <node>.1, then <node>.2
        my_stream, my_question = await ask(mine, urls[0], "mine", stack)
        their_stream, their_question = await ask(theirs, urls[0], "theirs", stack)  # theirs: <node>.1 only
        assert their_question["id"] == first["id"] != my_question["id"]
        # Their session names my question's id, on another node: passed on, and dropped by the owner,
        # since an answer is for (its own session, that id), and their session asked no such question.
        stray = {"jsonrpc": "2.0", "id": my_question["id"], "result": {"action": "accept",
                                                                      "content": {"code": "stolen"}}}
        assert (await theirs.post(stray, urls[1])).status_code == 202
        for session, question, stream, code in ((mine, my_question, my_stream, "m"),
                                                (theirs, their_question, their_stream, "t")):
            answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept",
                                                                        "content": {"code": code}}}
            assert (await session.post(answer, urls[2])).status_code == 202
            final = await stream.message()
            assert final is not None and final["result"]["content"][0]["text"] == \
                f"{'mine' if code == 'm' else 'theirs'}={code}"


async def test_workers_of_one_node_serve_every_session_with_redis(tmp_path: Path, redis_url: str,
                                                                  legacy_python: Path) -> None:
    from ..conftest import stop
    from ..tasks.redis_server import free_port

    port = free_port()
    log = tmp_path / "workers.log"
    with open(log, "wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "mrtr", "serve", "tests.nodes.app:server", "--port", str(port), "--workers", "2",
             "--store", redis_url + "?prefix=workers:", "--log-level", "warning", "--no-access-log"],
            cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT),
                                "MRTR_SECRET": base64.b64encode(os.urandom(32)).decode()},
            stdout=subprocess.DEVNULL, stderr=errors)
    try:
        async def serving() -> bool:
            try:
                async with httpx.AsyncClient(timeout=1) as http:
                    return (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
            except httpx.TransportError:
                return False

        await until(serving, timeout=30)
        outcome = await trio.to_thread.run_sync(
            lambda: load(legacy_python, f"http://127.0.0.1:{port}/mcp", 40, calls=2, concurrency=8))
        assert outcome["errors"] == 0 and outcome["misrouted"] == 0 and outcome["ok"] == 40, (
            outcome, log.read_text(errors="replace")[-3000:])
        assert len(outcome["owners"]) == 2  # both workers opened sessions; the kernel spread the rest
    finally:
        stop(process)


async def test_sdk_sessions_lose_no_call_of_a_killed_node(tmp_path: Path, legacy_python: Path) -> None:
    gate = tmp_path / "gate"
    async with nodes(tmp_path) as cluster, httpx.AsyncClient(timeout=30) as http:
        probe = Legacy(http, cluster.url)
        await probe.open()
        doomed = (await probe.call("whoami", {}, direct(cluster)[0]))["result"]["content"][0]["text"]
        process = subprocess.Popen([str(legacy_python), str(REPO_ROOT / "tests" / "nodes" / "sdk_kill.py"), "--url",
                                    cluster.url, "--sessions", "9", "--gate", str(gate)],
                                   cwd=REPO_ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        try:
            assert process.stdout is not None
            first = await trio.to_thread.run_sync(process.stdout.readline)
            assert json.loads(first) == {"asked": 9}, first + (process.stderr.read() if process.stderr else "")
            cluster.kill(cluster.nodes[0])
            gate.write_text("go")
            out, err = await trio.to_thread.run_sync(lambda: process.communicate(timeout=120))
        finally:
            if process.poll() is None:
                process.kill()
        records = [json.loads(line) for line in out.splitlines() if line.strip()]
        assert len(records) == 9, err[-3000:]
        assert all("failed" not in record for record in records), (records, err[-3000:])  # nothing hung
        for record in records:
            # A call that waited on the killed node is adopted by a live one, which takes the answer the SDK
            # sent and finishes it on the stream the SDK resumes there; the session goes on.
            assert record["call"] == "ok" and record["next"] == "ok", record
        assert any(record["asker"] == doomed for record in records)  # round robin: some waited on it


async def test_a_last_event_id_the_server_did_not_mint_opens_the_sessions_stream(tmp_path: Path) -> None:
    """Issue 34, 8: a forged id naming a node that never existed (or another session's stream) is as if absent.

    Event ids of a call's stream carry a mark only a node holding the server's key makes
    (over the session, the node and the request); a resumption whose id lacks it opens the
    session's own GET stream, as a GET without ``Last-Event-ID`` would: no made-up error for a
    request the session never sent, no 409 or 410 about a stream that never was.
    """
    from contextlib import AsyncExitStack

    async with nodes(tmp_path, count=2) as cluster, httpx.AsyncClient(timeout=30) as http, \
            AsyncExitStack() as stack:
        urls = direct(cluster)
        session, other = Legacy(http, cluster.url), Legacy(http, cluster.url)
        await session.open()
        await other.open()
        held, question = await ask(session, urls[0], "held", stack)
        minted = held.last_id
        assert minted is not None and minted.count(".") == 3  # <node>.<request>.<mark>.<stream>-<position>
        node, request, mark, cursor = minted.split(".")
        get = {**session.headers(Host=session.url.split("/")[2]), "Accept": "text/event-stream"}

        async def only_one(url: str, headers: dict[str, str]) -> None:
            """A GET without Last-Event-ID is 409: the session's GET stream is open already."""
            async with http.stream("GET", url, headers=headers) as second:
                assert second.status_code == 409, (second.status_code, second.headers)

        async def opens_the_sessions_stream(last_event_id: str, url: str) -> None:
            with trio.fail_after(10):
                async with http.stream("GET", url, headers={**get, "Last-Event-ID": last_event_id}) as response:
                    assert response.status_code == 200, (last_event_id, await response.aread())
                    assert response.headers["content-type"].startswith("text/event-stream")
                    assert "content-length" not in response.headers, (last_event_id, await response.aread())
                    first = Stream(response)
                    await only_one(url, get)
                    with trio.move_on_after(0.5):
                        assert await first.message() is None, last_event_id  # nothing made up for it

        never = "999999999999"
        forged = [
            f"{never}.MQ.{cursor}",  # the form without a mark: request id 1, which this session never sent
            f"{never}.{request}.{mark}.{cursor}",  # a node that never existed, with a real mark of another
            f"{never}.MQ.AAAAAAAAAAAAAAAA.{cursor}",
            f"{node}.{request}.{mark[:-1]}{'A' if mark[-1] != 'A' else 'B'}.{cursor}",  # the real id, marked wrong
        ]
        for last_event_id in forged:
            await opens_the_sessions_stream(last_event_id, urls[1])
        # Another session presenting this session's real id: not minted for it.
        other_get = {**other.headers(Host=other.url.split("/")[2]), "Accept": "text/event-stream"}
        with trio.fail_after(10):
            async with http.stream("GET", urls[1], headers={**other_get, "Last-Event-ID": minted}) as response:
                assert response.status_code == 200 and "content-length" not in response.headers
                await only_one(urls[1], other_get)
        # The real id, on the node that does not hold the stream while its node lives: the stream is served from
        # the store there (its calls are recorded), following what its node adds.
        followed = Stream(await stack.enter_async_context(http.stream(
            "GET", urls[1], headers={**get, "Last-Event-ID": minted})))
        assert followed.response.status_code == 200
        # And the call goes on: answered, it completes on its own stream, and on the one following it.
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"code": "ok"}}}
        assert (await session.post(answer, urls[1])).status_code == 202
        final = await held.message()
        assert final is not None and final["result"]["content"][0]["text"] == "held=ok"
        with trio.fail_after(10):
            assert await followed.message() == final



def from_address(address: str) -> httpx.AsyncClient:
    """An HTTP client whose connections come from ``address`` (a loopback one): a client of its own to the server."""
    return httpx.AsyncClient(timeout=30, transport=httpx.AsyncHTTPTransport(local_address=address))


async def session_keys(cluster: Any) -> list[str]:
    """The session records in Redis."""
    async with redis_client(parse_redis_url(cluster.store)) as redis:
        return [key.decode() for key in await redis.keys("mrtr:session:*")]


async def gone_everywhere(session: Legacy, urls: list[str]) -> bool:
    """Whether every node answers the session ``404`` (a node that read its record a moment ago may still serve it)."""
    return all([await session.status(url) == 404 for url in urls])


async def test_a_clients_sessions_are_bounded_across_nodes_and_one_ended_to_make_room_is_gone_everywhere(
        tmp_path: Path) -> None:
    """Issue 34, 2: the bound per client (100) is counted in Redis, not per node, and an evicted session is 404 on
    every node, its record gone, its GET stream on the other node ended; one client keeps 100 records, no more."""
    from contextlib import AsyncExitStack

    from mrtr.server.sessions import DEFAULT_MAX_SESSIONS_PER_CLIENT as BOUND

    async with nodes(tmp_path, count=2) as cluster, from_address("127.0.0.2") as http, \
            from_address("127.0.0.3") as flooder, AsyncExitStack() as stack:
        urls = direct(cluster)
        first = await Legacy(http, cluster.url).open(urls[0])
        listening = await stack.enter_async_context(http.stream(
            "GET", urls[1], headers={**first.headers(Host=first.url.split("/")[2]), "Accept": "text/event-stream"}))
        assert listening.status_code == 200
        rest = [await Legacy(http, cluster.url).open(urls[number % 2]) for number in range(1, BOUND)]
        # Every record is there (counted in Redis: a request to a session would be activity, and could make
        # another one the least recently active when the machine is slow enough to read records again).
        assert len(await session_keys(cluster)) == BOUND
        newest = await Legacy(http, cluster.url).open(urls[0])  # the 101st of this client, half of them on each node
        await until(lambda: gone_everywhere(first, urls))
        with trio.fail_after(10):
            await listening.aread()  # the GET stream on the other node ended with the session
        for session in (rest[0], rest[-1], newest):
            assert await session.status(urls[0]) == 200 and await session.status(urls[1]) == 200
        # One node alone: a flood of initialize on node 1 ends the flooder's oldest, and node 2 agrees.
        flood = [await Legacy(flooder, cluster.url).open(urls[0]) for _ in range(BOUND + 5)]
        for ended in flood[:5]:
            await until(lambda ended=ended: gone_everywhere(ended, urls))
        assert await flood[5].status(urls[1]) == 200 and await flood[-1].status(urls[1]) == 200
        assert len(await session_keys(cluster)) == 2 * BOUND  # each client's bound of records in Redis, no more


async def test_the_servers_bound_holds_across_nodes_and_a_busy_session_never_makes_room(tmp_path: Path) -> None:
    """Six sessions at most across both nodes: the seventh ends the least recently active idle one (a session
    waiting for its answer on the other node is busy and stays), and with every one busy initialize is 503."""
    from contextlib import AsyncExitStack

    async with nodes(tmp_path, count=2, env={"NODES_MAX_SESSIONS": "6"}) as cluster, AsyncExitStack() as stack:
        urls = direct(cluster)
        clients = [await stack.enter_async_context(from_address(f"127.0.0.{number}")) for number in range(2, 9)]
        busy = await Legacy(clients[0], cluster.url).open(urls[0])
        held, question = await ask(busy, urls[1], "held", stack)  # the oldest, waiting on node 2
        idle = [await Legacy(clients[number], cluster.url).open(urls[number % 2]) for number in range(1, 6)]
        seventh = await Legacy(clients[6], cluster.url).open(urls[0])
        await until(lambda: gone_everywhere(idle[0], urls))  # the least recently active idle one, not the busy one
        assert await busy.status(urls[0]) == 200 and await seventh.status(urls[1]) == 200
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"code": "k"}}}
        assert (await busy.post(answer, urls[0])).status_code == 202
        final = await held.message()
        assert final is not None and final["result"]["content"][0]["text"] == "held=k"
        # Every one of the six busy: the next initialize is refused on either node, and nothing is ended.
        live = [busy, *idle[1:], seventh]
        streams = [await ask(session, urls[number % 2], f"b{number}", stack) for number, session in enumerate(live)]
        for url in urls:
            refused = await Legacy(clients[1], cluster.url).post({
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, url)
            assert refused.status_code == 503, refused.text
            validate_legacy_message(refused.json())
            assert "the server holds 6 sessions, all of them busy" in refused.json()["error"]["message"]
        assert all([await session.status(urls[1]) == 200 for session in live])
        for (stream, question), session in zip(streams, live, strict=True):
            decline = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}}
            assert (await session.post(decline, urls[0])).status_code == 202
            assert (await stream.message()) is not None


async def test_a_session_idle_past_its_timeout_is_ended_on_every_node(tmp_path: Path, nursery: trio.Nursery) -> None:
    """Idle expiry is the record's, for every node: once Redis expired it, the next initialize anywhere forgets it
    and every node ends its copy (the GET stream another node held ends); it is 404 everywhere, nothing left."""
    from contextlib import AsyncExitStack

    async with nodes(tmp_path, count=2, env={"NODES_IDLE_TIMEOUT": "1"}) as cluster, \
            httpx.AsyncClient(timeout=30) as http, AsyncExitStack() as stack:
        urls = direct(cluster)
        idle = await Legacy(http, cluster.url).open(urls[0])
        listening = await stack.enter_async_context(http.stream(
            "GET", urls[1], headers={**idle.headers(Host=idle.url.split("/")[2]), "Accept": "text/event-stream"}))
        assert listening.status_code == 200
        ended = trio.Event()

        async def read() -> None:
            with contextlib.suppress(httpx.TransportError):
                await listening.aread()
            ended.set()

        nursery.start_soon(read)

        async def forgotten() -> bool:
            await Legacy(http, cluster.url).open(urls[0])  # each initialize forgets records Redis expired
            return ended.is_set()

        await until(forgotten, timeout=20, every=0.2)
        assert await idle.status(urls[0]) == 404 and await idle.status(urls[1]) == 404
        async with redis_client(parse_redis_url(cluster.store)) as redis:
            assert await redis.exists([f"mrtr:session:{idle.session_id}"]) == 0
            assert await redis.zscore("mrtr:sessions:live", idle.session_id) is None
            assert await redis.hget("mrtr:sessions:owners", idle.session_id) is None
