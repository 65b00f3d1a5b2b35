"""The built-in middleware through real processes: ``mrtr serve tests.middleware_app:server``, both eras.

The modern era over HTTP with raw JSON-RPC (status, headers, every message validated
against the 2026-07-28 schema, the tasks extension's where it applies) and with
``mrtr.Client``; over stdio with raw lines; the 2025 era with the official Python SDK 1.x
client over HTTP and stdio (every message it read validated against the 2025-11-25
schema); the task carrier through the tasks extension. The server's access lines are
read from its log; ``mrtr serve --workers`` warns of a rate limit counted in memory; an
unauthenticated 2025 client gets no new bucket by opening a new session, and takes nothing
from another address's.
``RateLimit`` shared by two nodes on Redis: tests/nodes/test_rate_limit.py.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import mrtr
from mrtr.client import ClientError

from .conftest import clean_env, pinned_venv, until
from .interop.test_interop import _mrtr_command, _tail, served
from .legacy_schema import validate_server_message
from .nodes.cluster import Caller
from .wire_schema import RESULT_DEFS, validate_message

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

APP = "tests.middleware_app:server"
ROOT = Path(__file__).resolve().parents[1]
LEGACY_VENV = ROOT / ".cache" / "legacy-venv"
LEGACY_CHECKS = ROOT / "tests" / "legacy" / "middleware_checks.py"
BURST = 6  # the app's default


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One ``mrtr serve`` of the app on a SQLite store, for the module: its URL and its log (access lines)."""
    folder = tmp_path_factory.mktemp("middleware-served")
    log = folder / "server.log"
    with served(APP, log, "--store", f"sqlite:///{folder / 'store.sqlite3'}") as url:
        yield url, log


@asynccontextmanager
async def caller(url: str, tenant: str) -> AsyncIterator[Caller]:
    async with httpx.AsyncClient(headers={"x-tenant": tenant}, timeout=30) as http:
        yield Caller(http, url)


def access_lines(log: Path, *parts: str) -> list[str]:
    return [line for line in log.read_text(errors="replace").splitlines()
            if "mrtr.access" in line and all(part in line for part in parts)]


# -- the modern era over HTTP ------------------------------------------------------------------


async def test_listings_and_calls_follow_one_rule_for_each_tenant(server):
    url, _ = server
    async with caller(url, "acme") as acme, caller(url, "root") as root:
        _, listed, _ = await acme.request("tools/list", {})
        names = {tool["name"] for tool in listed["result"]["tools"]}
        assert {"signup", "rates", "report"} <= names and not {name for name in names if name.startswith("admin_")}
        _, everything, _ = await root.request("tools/list", {})
        assert {"admin_reset", "admin_job"} <= {tool["name"] for tool in everything["result"]["tools"]}
        status, forbidden, _ = await acme.request("tools/call", {"name": "admin_reset", "arguments": {}})
        assert status == 200 and forbidden["result"]["isError"] is True
        assert forbidden["result"]["content"] == [{"type": "text", "text": 'Tool "admin_reset" is not available'}]
        _, prompt, _ = await acme.request("prompts/get", {"name": "admin_prompt"})
        assert prompt["error"] == {"code": -32603, "message": 'Prompt "admin_prompt" is not available'}
        _, read, _ = await acme.request("resources/read", {"uri": "secret://7"})
        assert read["error"]["message"] == "Resource secret://7 is not available"
        _, allowed, _ = await root.request("resources/read", {"uri": "secret://7"})
        assert allowed["result"]["contents"][0]["text"] == "secret 7"


async def test_a_read_only_tool_is_answered_from_the_cache_and_the_access_line_says_so(server):
    url, log = server
    async with caller(url, "cachey") as cachey, caller(url, "other") as other:
        _, first, _ = await cachey.request("tools/call", {"name": "rates", "arguments": {"currency": "EUR"}})
        _, second, _ = await cachey.request("tools/call", {"name": "rates", "arguments": {"currency": "EUR"}})
        _, theirs, _ = await other.request("tools/call", {"name": "rates", "arguments": {"currency": "EUR"}})
    validate_message(first, result_def=RESULT_DEFS["tools/call"])
    assert first["result"]["content"] == second["result"]["content"] == [{"type": "text", "text": "EUR run 1"}]
    assert theirs["result"]["content"] == [{"type": "text", "text": "EUR run 2"}]  # keyed by principal
    lines = await until(lambda: access_lines(log, 'tools/call "rates"'), lambda found: len(found) >= 3)
    assert [line.split("cache=")[1].split()[0] for line in lines[:3]] == ["miss", "hit", "miss"]
    assert all(" timing_ms=" in line for line in lines)


async def test_a_conversations_answers_are_never_refused_and_the_next_one_is(server):
    url, _ = server
    answers = {"Your name?": {"name": "Ada"}, "Your email?": {"email": "ada@example.com"}}
    async with caller(url, "conv") as conv:
        for _ in range(BURST - 2):  # the client lists the tools once (for the headers it mirrors): one more
            assert (await conv.request("prompts/list", {}))[0] == 200
    async with mrtr.Client(url, headers={"x-tenant": "conv"}, era="modern",
                           on_elicit=lambda request: mrtr.accept(**answers[request.message])) as client:
        result = await client.call_tool("signup", {"plan": "pro"})  # round 1 takes the last token; 2 and 3 pass
        assert result.text == "Ada <ada@example.com> on pro"
        with pytest.raises(ClientError) as refused:
            await client.list_prompts()
    assert refused.value.status == 429 and refused.value.code == -31429
    assert refused.value.data["retryAfter"] > 0


async def test_a_refused_request_is_429_with_retry_after_and_its_access_line(server):
    url, log = server
    async with httpx.AsyncClient(headers={"x-tenant": "flood"}, timeout=30) as http:
        flood = Caller(http, url)
        statuses = [(await flood.request("tools/list", {}))[0] for _ in range(BURST)]
        body = {"jsonrpc": "2.0", "id": 99, "method": "tools/list", "params": {"_meta": mrtr_meta()}}
        response = await http.post(url, content=json.dumps(body), headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
    assert statuses == [200] * BURST
    assert response.status_code == 429 and response.headers["content-type"] == "application/json"
    refused = response.json()
    validate_message(refused)
    assert refused["id"] == 99 and refused["error"]["code"] == -31429
    wait = refused["error"]["data"]["retryAfter"]
    assert 0 < wait <= 20 and response.headers["retry-after"] == str(math.ceil(wait))  # 0.05 a second: 20 s a token
    line = (await until(lambda: access_lines(log, "tools/list", "error -31429 429"), bool))[0]
    assert "timing_ms=" in line


async def test_an_unauthenticated_2025_client_gets_no_new_bucket_with_a_new_session(server):
    # No x-tenant: no principal, so the caller is the address each session was opened from.
    url, _ = server
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        async def opened() -> str:
            response = await http.post(url, content=json.dumps({
                "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
            validate_server_message(response.json(), "InitializeResult")
            session = response.headers["mcp-session-id"]
            await http.post(url, content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                            headers={"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
            return session

        async def listed(session: str, number: int) -> dict[str, Any]:
            response = await http.post(url, content=json.dumps({"jsonrpc": "2.0", "id": number,
                                                                 "method": "prompts/list"}),
                                       headers={"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
            assert response.status_code == 200  # every error of this era goes with 200
            answer: dict[str, Any] = response.json()
            validate_server_message(answer, "ListPromptsResult" if "result" in answer else None)
            return answer

        first = await opened()
        answers = [await listed(first, number) for number in range(1, BURST + 2)]
        fresh = [await listed(await opened(), 100 + number) for number in range(3)]
    # Another address (127.0.0.2, loopback too) keeps a bucket of its own, whatever this one spent.
    elsewhere = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx.AsyncClient(headers=headers, timeout=30, transport=elsewhere) as http:
        others = [await listed(await opened(), 200 + number) for number in range(BURST)]
    admitted = ["result" in answer for answer in answers]
    # BURST at most: a probe of the fixture's, from this address too, may have taken one.
    assert admitted[0] and not admitted[-1] and admitted == sorted(admitted, reverse=True), admitted
    for refused in [answers[-1], *fresh]:  # the new sessions spend the same, empty, bucket
        assert refused["error"]["code"] == -32000 and refused["error"]["data"]["retryAfter"] > 0
    assert all("result" in answer for answer in others), others


async def test_the_task_carrier_counts_the_call_and_never_its_polls(server):
    url, log = server
    async with caller(url, "tasker") as tasker:
        _, created, _ = await tasker.request("tools/call", {"name": "report", "arguments": {"n": 2}})
        assert created["result"]["resultType"] == "task"
        task_id = created["result"]["taskId"]
        polls = [await tasker.request("tasks/get", {"taskId": task_id}) for _ in range(BURST + 4)]
        assert all(status == 200 for status, _, _ in polls)
        await until(lambda: tasker.request("tasks/get", {"taskId": task_id}),
                    lambda answer: answer[1]["result"]["status"] == "completed")
        _, forbidden, _ = await tasker.request("tools/call", {"name": "admin_job", "arguments": {"n": 1}})
        assert forbidden["result"]["isError"] is True and "task" not in forbidden["result"]  # no task was made
        assert forbidden["result"]["content"][0]["text"] == 'Tool "admin_job" is not available'
        created_again = [await tasker.request("tools/call", {"name": "report", "arguments": {"n": 2}})
                         for _ in range(BURST - 2)]
        assert all(answer[1]["result"]["resultType"] == "task" for answer in created_again)  # never cached
        status, refused, _ = await tasker.request("tools/call", {"name": "report", "arguments": {"n": 2}})
    assert status == 429 and refused["error"]["code"] == -31429
    assert access_lines(log, "tasks/get", "timing_ms=")
    async with mrtr.Client(url, headers={"x-tenant": "tasker2"}, era="modern") as client:
        done = await client.call_tool("report", {"n": 5})  # through the client: a task, awaited
    assert done.text.startswith("report 5 run ")


# -- the modern era over stdio -------------------------------------------------------------------


def _over_stdio(tmp_path: Path, store: str, log: str) -> list[dict[str, Any]]:
    """Four requests to one ``mrtr serve --stdio`` of the app (3 tokens a caller), its answers in order."""
    env = {**clean_env(), "MW_BURST": "3", "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([_mrtr_command(), "serve", APP, "--stdio", "--store", store], cwd=ROOT, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=(tmp_path / log).open("wb"))
    assert process.stdin is not None and process.stdout is not None
    answers = []
    try:
        for number, (method, params) in enumerate([
                ("tools/list", {}), ("tools/call", {"name": "admin_reset", "arguments": {}}),
                ("tools/call", {"name": "rates", "arguments": {"currency": "JPY"}}),
                ("tools/list", {})], start=1):
            line = {"jsonrpc": "2.0", "id": number, "method": method, "params": {**params, "_meta": mrtr_meta()}}
            process.stdin.write(json.dumps(line).encode() + b"\n")
            process.stdin.flush()
            answer = json.loads(process.stdout.readline())
            final = "result" in answer and answer["result"].get("resultType") == "complete"
            validate_message(answer, result_def=RESULT_DEFS.get(method) if final else None)
            answers.append(answer)
    finally:
        process.stdin.close()
        process.wait(timeout=20)
    return answers


def test_over_stdio_the_process_at_the_other_end_is_the_caller(tmp_path: Path):
    # Two processes in turn, keeping their buckets in one store (as the SQLite file a server with
    # task tools uses by default): each serves its own client, with a bucket of its own.
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    for log in ("first.stderr", "second.stderr"):
        listed, forbidden, cached, refused = _over_stdio(tmp_path, store, log)  # a refused call took a token too
        assert "admin_reset" not in {tool["name"] for tool in listed["result"]["tools"]}, log
        assert forbidden["result"]["content"][0]["text"] == 'Tool "admin_reset" is not available'
        assert cached["result"]["content"][0]["text"] == "JPY run 1"
        assert refused["error"]["code"] == -31429 and refused["error"]["data"]["retryAfter"] > 0
        stderr = (tmp_path / log).read_text()
        assert 'tools/call "rates" complete' in stderr and "cache=miss" in stderr and "timing_ms=" in stderr


# -- the 2025 era: the official SDK 1.x client -------------------------------------------------------


@pytest.fixture(scope="module")
def legacy_python() -> Path:
    """The python of ``.cache/legacy-venv``, with ``mcp==1.30.0`` (tests/legacy/requirements.txt)."""
    return pinned_venv(LEGACY_VENV, ROOT / "tests" / "legacy" / "requirements.txt", "mcp", "1.30.0")


def run_checks(legacy_python: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    completed = subprocess.run([str(legacy_python), str(LEGACY_CHECKS), "--mrtr", _mrtr_command(), "--out", str(out),
                                *extra], cwd=ROOT, capture_output=True, text=True, env={**clean_env(), **(env or {})},
                               timeout=300, check=False)
    records = {}
    for line in completed.stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        records[record["scenario"]] = record
    for scenario in ("listing", "refused", "cached", "conversation", "flood"):
        record = records.get(scenario)
        assert record is not None, f"{scenario} never reported:\n{_tail(completed.stderr, 40)}"
        assert record["ok"], f"{scenario} failed:\n{record['detail']}"
    messages = [json.loads(line) for line in (out / "stdout-1.jsonl").read_text().splitlines() if line.strip()]
    for message in messages:
        validate_server_message(message, "InitializeResult" if message.get("id") == 0 and "result" in message
                                else None)
    assert any(message.get("error", {}).get("code") == -32000 for message in messages)  # the refusal, as sent
    return records


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_the_official_sdk_meets_the_same_rules_in_a_2025_session(transport: str, legacy_python: Path,
                                                                  tmp_path: Path):
    env = {"MW_BURST": "20"}  # the scenarios before the flood spend a dozen requests
    if transport == "stdio":
        records = run_checks(legacy_python, tmp_path / "out", env=env)
    else:
        with served(APP, tmp_path / "server.log", "--store", "memory:", env=env) as url:
            records = run_checks(legacy_python, tmp_path / "out", "--url", url, "--tenant", "legacy")
        lines = access_lines(tmp_path / "server.log", 'tools/call "rates"')
        assert [line.split("cache=")[1].split()[0] for line in lines] == ["miss", "hit"], lines
        served_lines = [line for line in access_lines(tmp_path / "server.log", "POST /mcp")
                        if " tools/" in line or " prompts/" in line or " resources/" in line]
        assert served_lines and all(" timing_ms=" in line for line in served_lines)  # initialize is no request of
        # the pipeline's (the session is opened before it), a notification has no line to note on
    flood = records["flood"]["detail"]
    assert 1 <= flood["admitted"] < 20 and flood["retryAfter"] > 0


def mrtr_meta() -> dict[str, Any]:
    from .conftest import meta

    return meta({"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}})



def test_workers_sharing_a_rate_limit_in_memory_are_warned(tmp_path: Path):
    # A server whose only state is its RateLimit: memory unless a store is named (with task tools it would
    # be the server's own SQLite file, which the workers of one host share).
    (tmp_path / "limited_app.py").write_text(
        "from mrtr import Server\nfrom mrtr.middleware import RateLimit\n"
        "server = Server('limited')\nserver.middleware(RateLimit(per_second=5))\n"
        "@server.tool\ndef ping() -> str:\n    return 'pong'\n")
    env = {"PYTHONPATH": str(tmp_path)}
    with served("limited_app:server", tmp_path / "memory.log", "--workers", "2", env=env):
        pass
    assert "warning: a RateLimit counts in memory, one bucket per worker: 2 workers admit up to 2 times its rate" \
        in (tmp_path / "memory.log").read_text()
    with served("limited_app:server", tmp_path / "shared.log", "--workers", "2", "--store",
                f"sqlite:///{tmp_path / 's.sqlite3'}", env=env):
        pass
    assert "RateLimit counts in memory" not in (tmp_path / "shared.log").read_text()
