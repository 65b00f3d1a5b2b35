"""2025-era sessions across three nodes on one Redis, behind haproxy round robin, nothing sticky.

Each request of a session reaches whichever node haproxy picks; the session's record is
in Redis, and the answer to a question lands on another node than the call's stream most
of the time and must be passed on to the node whose handler waits for it. The load is
the official Python SDK 1.x client (``tests/legacy/sdk_load.py``, a new connection for
every request); the rest speaks raw HTTP so each message can be checked against the
2025-11-25 schema, and so a test can send a request to the node it chooses.
"""

from __future__ import annotations

import json
import subprocess
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

    async def open(self) -> None:
        response = await self.post({"jsonrpc": "2.0", "id": next(self.ids), "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "nodes-test", "version": "1"}}})
        assert response.status_code == 200, response.text
        self.session_id = response.headers["mcp-session-id"]
        assert (await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})).status_code == 202

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
