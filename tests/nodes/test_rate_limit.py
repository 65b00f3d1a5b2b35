"""``RateLimit`` shared by two nodes: one real redis-server, two ``mrtr serve`` processes, haproxy in front.

Round robin sends a caller's requests to both nodes in turn; each takes from the one
bucket in Redis, so a caller gets its burst once across the nodes, not once per node,
whichever node refuses it (429 with ``Retry-After`` through the balancer in the modern
era, ``-32000`` with ``data.retryAfter`` in a 2025 session whose requests both nodes
serve), and another caller's bucket is untouched.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..legacy_schema import validate_server_message
from ..tasks.redis_server import redis_cli
from ..wire_schema import validate_message
from .cluster import Caller, nodes

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

APP = "tests.middleware_app:server"
BURST = 6


async def test_a_callers_burst_is_counted_once_across_the_nodes(tmp_path: Path) -> None:
    async with nodes(tmp_path, count=2, app=APP, env={"MW_BURST": str(BURST), "MW_RATE": "0.05"}) as cluster:
        async with httpx.AsyncClient(headers={"x-tenant": "shared"}, timeout=30) as http:
            caller = Caller(http, cluster.url)
            answers = [await caller.request("tools/list", {}) for _ in range(2 * BURST)]
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                    "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                         "io.modelcontextprotocol/clientCapabilities": {}}}}
            raw = await http.post(cluster.url, content=json.dumps(body), headers={
                "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
        async with httpx.AsyncClient(headers={"x-tenant": "elsewhere"}, timeout=30) as http:
            other = [await Caller(http, cluster.url).request("tools/list", {}) for _ in range(2)]
        buckets = redis_cli(cluster.store, "KEYS", "mrtr:bucket:*").split()
    admitted = [cluster.name_of(node) for status, _, node in answers if status == 200]
    refused = [cluster.name_of(node) for status, message, node in answers
               if status == 429 and message["error"]["code"] == -31429]
    assert len(admitted) == BURST and len(refused) == BURST, answers
    assert set(admitted) == set(refused) == {"node1", "node2"}  # both nodes took from, and refused on, one bucket
    assert raw.status_code == 429 and raw.headers["x-mrtr-node"]
    validate_message(raw.json())
    assert raw.headers["retry-after"] == str(math.ceil(raw.json()["error"]["data"]["retryAfter"]))
    assert [status for status, _, _ in other] == [200, 200]
    assert len(buckets) == 2  # one per caller, in Redis (health checks are no MCP requests: no bucket)


async def test_a_2025_session_served_by_both_nodes_spends_one_bucket(tmp_path: Path) -> None:
    async with nodes(tmp_path, count=2, app=APP, env={"MW_BURST": str(BURST), "MW_RATE": "0.05"}) as cluster:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "x-tenant": "legacy"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            async def post(message: dict[str, Any], session: str | None = None) -> tuple[httpx.Response, str]:
                extra = {} if session is None else {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
                response = await http.post(cluster.url, content=json.dumps(message), headers=extra)
                return response, cluster.name_of(response.headers.get("x-mrtr-node", ""))

            opened, _ = await post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
            validate_server_message(opened.json(), "InitializeResult")
            session = opened.headers["mcp-session-id"]
            await post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
            answers = [await post({"jsonrpc": "2.0", "id": number, "method": "prompts/list"}, session)
                       for number in range(1, 2 * BURST + 1)]
    for response, _ in answers:
        assert response.status_code == 200  # every error of this era goes with 200
        validate_server_message(response.json(), "ListPromptsResult" if "result" in response.json() else None)
    admitted = [node for response, node in answers if "result" in response.json()]
    refused = [node for response, node in answers if response.json().get("error", {}).get("code") == -32000]
    assert len(admitted) == BURST and len(refused) == BURST
    assert set(admitted) == set(refused) == {"node1", "node2"}
    assert all(response.json()["error"]["data"]["retryAfter"] > 0 for response, _ in answers[BURST:])
