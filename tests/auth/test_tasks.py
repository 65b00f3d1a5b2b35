"""Tasks on a protected server: a tool's scopes guard its task, over real HTTP and in process.

Alice starts a task of a ``scopes=["files:write"]`` tool with a token that has the scope.
A token of hers with only ``mcp:read`` used to see the task's questions (``tasks/get``),
answer them so the write ran (``tasks/update``), cancel it (``tasks/cancel``) and hear its
result on a listen stream. Every one of those is now the 403 the call itself gets, decided
by the transport before dispatch, and refused by the server for in-process callers.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx
import msgspec
import pytest
import trio

from mrtr import Elicit, Form, Step
from mrtr.auth import AccessToken, JWTVerifier, ResourceServer
from mrtr.http import ASGIApp
from mrtr.transports.http.native import serve
from mrtr.server import Server
from mrtr.transports.shared import lifespan

from ..http.conftest import BASE_HEADERS, start_hypercorn
from ..tasks.tasks_schema import validate_task
from ..wire_schema import validate_message
from .idp import RESOURCE, IdentityProvider, SigningKey, mint

ISSUER = "http://issuer.test"
PRM_URL = "http://127.0.0.1:8123/.well-known/oauth-protected-resource/mcp"
SECRET = base64.b64encode(bytes(range(32))).decode()
TASKS = "io.modelcontextprotocol/tasks"
CAPABILITIES = {"elicitation": {"form": {}}, "extensions": {TASKS: {}}}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": CAPABILITIES}
WRITER = "mcp:read files:write"
READER = "mcp:read"
TASK_RESULTS = {"tasks/get": "GetTaskResult", "tasks/update": "UpdateTaskResult", "tasks/cancel": "CancelTaskResult"}


def guarded_server(idp: IdentityProvider, written: list[str]) -> Server:
    verifier = JWTVerifier(jwks_uri=idp.jwks_uri, issuer=ISSUER, audience=RESOURCE, leeway=0)
    server = Server("files", "1.0.0", secret=SECRET, auth=ResourceServer(
        verifier, resource=RESOURCE, authorization_servers=[ISSUER],
        scopes_supported=["mcp:read", "files:write"], required_scopes=["mcp:read"]), tasks_url="memory:")

    @server.tool(task="required", scopes=["files:write"])
    def write_file(path: str) -> Any:
        yield Step(lambda: path)  # the task starts here; the question below is asked through tasks/get
        text = yield Elicit(f"What goes into {path}?", Form().string("text"))
        yield Step(written.append, f"{path}: {text.content['text']}")
        return f"wrote {path}"

    @server.tool(task="required")
    def count() -> Any:
        yield Step(lambda: 0)
        first = yield Elicit("First?", Form().string("a"))
        second = yield Elicit("Second?", Form().string("b"))
        return first.content["a"] + second.content["b"]

    return server


@dataclass
class Guarded:
    kind: str
    client: httpx.AsyncClient
    keys: dict[str, SigningKey]
    server: Server
    written: list[str] = field(default_factory=list)

    def token(self, scope: str, **claims: Any) -> str:
        return mint(self.keys["rsa"], iss=ISSUER, scope=scope, **claims)

    def headers(self, method: str, params: dict[str, Any], token: str) -> dict[str, str]:
        headers = {**BASE_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method,
                   "Authorization": f"Bearer {token}"}
        target = params.get("name", params.get("taskId"))
        if isinstance(target, str):
            headers["Mcp-Name"] = target
        return headers

    def message(self, method: str, params: dict[str, Any], id: Any = 1) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": id, "method": method, "params": {**params, "_meta": META}}

    async def post(self, method: str, params: dict[str, Any], token: str) -> httpx.Response:
        return await self.client.post("/mcp", content=json.dumps(self.message(method, params)),
                                      headers=self.headers(method, params, token))

    async def ok(self, method: str, params: dict[str, Any], token: str) -> dict[str, Any]:
        response = await self.post(method, params, token)
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        if method in TASK_RESULTS:
            validate_task(TASK_RESULTS[method], result)
        elif result.get("resultType") == "task":
            validate_task("CreateTaskResult", result)
        return result

    async def until(self, task_id: str, status: str, token: str) -> dict[str, Any]:
        with trio.fail_after(10):
            while True:
                task = await self.ok("tasks/get", {"taskId": task_id}, token)
                if task["status"] == status:
                    return task
                await trio.sleep(0.02)

    async def start(self, token: str) -> tuple[str, str]:
        """A write_file task waiting for its question: (task id, input key)."""
        created = await self.ok("tools/call", {"name": "write_file", "arguments": {"path": "notes.txt"}}, token)
        assert created["resultType"] == "task"
        task = await self.until(created["taskId"], "input_required", token)
        (key,) = task["inputRequests"]
        return created["taskId"], key


@pytest.fixture(params=["native", "asgi"])
async def guarded(request: Any, nursery: trio.Nursery, idp: IdentityProvider,
                  keys: dict[str, SigningKey]) -> AsyncIterator[Guarded]:
    written: list[str] = []
    server = guarded_server(idp, written)
    if request.param == "native":
        port = await nursery.start(partial(serve, server, "127.0.0.1", 0))
    else:
        port = await start_hypercorn(nursery, ASGIApp(server), trio.Event())
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
        del client.headers["accept"]
        yield Guarded(request.param, client, keys, server, written)
    await server.auth.verifier.aclose()  # type: ignore[union-attr]


def assert_forbidden(response: httpx.Response, operation: str) -> None:
    """The call's own 403: insufficient_scope naming every scope of the task's tool."""
    assert response.status_code == 403, response.text
    assert response.headers.get_list("www-authenticate") == [
        f'Bearer error="insufficient_scope", scope="files:write", '
        f'error_description="files:write required for {operation}", resource_metadata="{PRM_URL}"']
    assert response.json() == {"error": "insufficient_scope", "error_description": f"files:write required for {operation}"}


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


async def test_the_call_and_its_task_need_the_same_scopes(guarded: Guarded) -> None:
    writer, reader = guarded.token(WRITER), guarded.token(READER)
    assert_forbidden(await guarded.post("tools/call", {"name": "write_file", "arguments": {"path": "x"}}, reader),
                     "tools/call write_file")
    task_id, key = await guarded.start(writer)

    assert_forbidden(await guarded.post("tasks/get", {"taskId": task_id}, reader), "tasks/get")
    update = {"taskId": task_id, "inputResponses": {key: accept(text="from the reader")}}
    assert_forbidden(await guarded.post("tasks/update", update, reader), "tasks/update")
    assert_forbidden(await guarded.post("tasks/cancel", {"taskId": task_id}, reader), "tasks/cancel")
    listen = {"notifications": {"taskIds": [task_id], "toolsListChanged": True}}
    assert_forbidden(await guarded.post("subscriptions/listen", listen, reader), "subscriptions/listen")

    # None of it reached the task: it still waits, nothing was written, nothing cancelled.
    task = await guarded.ok("tasks/get", {"taskId": task_id}, writer)
    assert task["status"] == "input_required" and list(task["inputRequests"]) == [key]
    assert guarded.written == []

    await guarded.ok("tasks/update", {"taskId": task_id, "inputResponses": {key: accept(text="hello")}}, writer)
    done = await guarded.until(task_id, "completed", writer)
    assert done["result"]["content"] == [{"type": "text", "text": "wrote notes.txt"}]
    assert guarded.written == ["notes.txt: hello"]
    # a finished task's result is guarded as well
    assert_forbidden(await guarded.post("tasks/get", {"taskId": task_id}, reader), "tasks/get")


async def test_another_callers_task_stays_unknown_whatever_the_scopes(guarded: Guarded) -> None:
    task_id, _ = await guarded.start(guarded.token(WRITER))
    # Mallory learns nothing from the scopes of a task that is not hers: no 403 that would say it exists.
    for scope in (READER, WRITER):
        mallory = guarded.token(scope, sub="mallory")
        for method, params in (("tasks/get", {"taskId": task_id}), ("tasks/cancel", {"taskId": task_id}),
                               ("tasks/update", {"taskId": task_id, "inputResponses": {}})):
            response = await guarded.post(method, params, mallory)
            assert response.status_code == 400, (scope, method, response.text)
            validate_message(response.json())
            assert response.json()["error"] == {"code": -32602, "message": "Unknown task"}
    unknown = await guarded.post("tasks/get", {"taskId": "A" * 22}, guarded.token(READER))
    assert unknown.status_code == 400 and unknown.json()["error"]["message"] == "Unknown task"
    # a task of a tool without scopes is open to any of alice's tokens
    created = await guarded.ok("tools/call", {"name": "count"}, guarded.token(READER))
    assert (await guarded.until(created["taskId"], "input_required", guarded.token(READER)))["status"] \
        == "input_required"


def access(scopes: str, subject: str = "alice") -> AccessToken:
    return AccessToken(subject=subject, client_id="client-1", issuer=ISSUER, scopes=frozenset(scopes.split()))


async def test_in_process_callers_are_refused_too(idp: IdentityProvider) -> None:
    written: list[str] = []
    server = guarded_server(idp, written)
    writer, reader = access(WRITER), access(READER)

    def message(method: str, params: dict[str, Any], id: int = 1) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": id, "method": method, "params": {**params, "_meta": META}}

    async with lifespan(server):
        created = await server.handle(message("tools/call", {"name": "write_file", "arguments": {"path": "p"}}),
                                      auth=writer)
        task_id = created["result"]["taskId"]
        with trio.fail_after(10):
            while (task := (await server.handle(message("tasks/get", {"taskId": task_id}), auth=writer))["result"]
                   )["status"] != "input_required":
                await trio.sleep(0.01)
        (key,) = task["inputRequests"]
        notes: list[tuple[str, dict[str, Any]]] = []
        one = "Forbidden: this task needs the scopes files:write"
        for method, params, refusal in (
            ("tasks/get", {"taskId": task_id}, one),
            ("tasks/update", {"taskId": task_id, "inputResponses": {key: accept(text="x")}}, one),
            ("tasks/cancel", {"taskId": task_id}, one),
            ("subscriptions/listen", {"notifications": {"taskIds": ["A" * 22, task_id]}},
             "Forbidden: the tasks listed need the scopes files:write"),
        ):
            refused = await server.handle(message(method, params), auth=reader,
                                          notify=lambda method, params: notes.append((method, params)))
            validate_message(refused)
            assert refused["error"] == {"code": -32600, "message": refusal}, method
        assert notes == []  # the listen stream was never acknowledged
        task = (await server.handle(message("tasks/get", {"taskId": task_id}), auth=writer))["result"]
        assert task["status"] == "input_required" and written == []


async def test_a_task_stored_without_scopes_is_guarded_by_its_tools_scopes(idp: IdentityProvider) -> None:
    """A record written before scopes were recorded (or by an older node) still needs the tool's scopes."""
    server = guarded_server(idp, [])
    writer, reader = access(WRITER), access(READER)
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "write_file", "arguments": {"path": "p"}, "_meta": META}}
    async with lifespan(server):
        task_id = (await server.handle(message, auth=writer))["result"]["taskId"]
        assert server.tasks is not None
        store = server.tasks.store
        with trio.fail_after(10):
            while True:
                record = await store.get(task_id)
                assert record is not None
                if record.status == "input_required":
                    break
                await trio.sleep(0.01)
        assert record.scopes == ("files:write",)  # recorded when the task was created
        legacy = msgspec.structs.replace(record, scopes=(), version=record.version + 1)
        assert await store.replace(legacy)
        fresh = Server("files", secret=SECRET, auth=server.auth)  # a node that never saw this task
        fresh.catalog.tools = server.catalog.tools
        fresh._tasks = server.tasks
        get = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": task_id, "_meta": META}}
        assert await fresh.required_scopes(get, auth=reader) == ("files:write",)
        assert (await fresh.handle(get, auth=reader))["error"]["code"] == -32600
        assert (await fresh.handle(get, auth=writer))["result"]["status"] == "input_required"


SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


class Stream:
    """The JSON-RPC messages of one SSE response, in order; ``None`` once it ended."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.aiter_lines()
        self.data: list[str] = []

    async def next(self, timeout: float = 10) -> dict[str, Any] | None:
        with trio.fail_after(timeout):
            async for line in self.lines:
                if line.startswith("data:"):
                    self.data.append(line[5:].lstrip(" "))
                elif not line and self.data:
                    message = json.loads("\n".join(self.data))
                    self.data = []
                    if message.get("method") == "notifications/tasks":
                        validate_task("TaskStatusNotification", message)
                    else:
                        validate_message(message, result_def="SubscriptionsListenResult" if "result" in message else None)
                    return message
        return None


async def test_a_listen_stream_ends_when_its_token_expires(guarded: Guarded) -> None:
    """It used to go on delivering the task's news after requests with its token got 401."""
    writer = guarded.token(WRITER)
    created = await guarded.ok("tools/call", {"name": "count"}, writer)
    task_id = created["taskId"]
    (first,) = (await guarded.until(task_id, "input_required", writer))["inputRequests"]
    expires = int(time.time()) + 3
    short = guarded.token(READER, exp=expires)  # this verifier allows no leeway: refused from exp on
    params = {"notifications": {"taskIds": [task_id], "toolsListChanged": True}}
    listen = guarded.message("subscriptions/listen", params, id="sub-1")
    async with guarded.client.stream("POST", "/mcp", content=json.dumps(listen),
                                     headers=guarded.headers("subscriptions/listen", params, short)) as response:
        assert response.status_code == 200
        stream = Stream(response)
        ack = await stream.next()
        assert ack is not None and ack["params"]["notifications"] == {"taskIds": [task_id], "toolsListChanged": True}
        # while the token is good, the stream carries the task's news
        await guarded.ok("tasks/update", {"taskId": task_id, "inputResponses": {first: accept(a="x")}}, writer)
        while True:
            note = await stream.next()
            assert note is not None and note["method"] == "notifications/tasks", note
            if note["params"]["status"] == "input_required":
                break
        assert time.time() < expires
        (second,) = note["params"]["inputRequests"]
        # at the token's expiry the stream ends the way the spec ends one the server closes: with its result
        final = await stream.next()
        ended = time.time()
        assert final is not None and final["id"] == "sub-1", final
        assert final["result"]["resultType"] == "complete"
        assert final["result"]["_meta"][SUBSCRIPTION_ID] == "sub-1"
        assert ended >= expires - 0.05
        assert await stream.next() is None
    refused = await guarded.post("tasks/get", {"taskId": task_id}, short)
    assert refused.status_code == 401 and refused.json()["error_description"] == "token expired"
    # the task goes on for a token that is still good
    await guarded.ok("tasks/update", {"taskId": task_id, "inputResponses": {second: accept(b="y")}}, writer)
    done = await guarded.until(task_id, "completed", writer)
    assert done["result"]["content"] == [{"type": "text", "text": "xy"}]


async def test_in_process_a_listen_stream_ends_at_the_tokens_expiry(idp: IdentityProvider) -> None:
    server = guarded_server(idp, [])
    assert server.auth is not None
    assert server.auth.accepted_until(access(READER)) is None  # a token without expiry: no end
    soon = AccessToken(subject="alice", client_id="client-1", issuer=ISSUER, scopes=frozenset({"mcp:read"}),
                       expires_at=time.time() + 0.5)
    assert server.auth.accepted_until(soon) == soon.expires_at  # leeway=0
    notes: list[str] = []
    message = {"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
               "params": {"notifications": {"toolsListChanged": True}, "_meta": META}}
    async with lifespan(server):
        with trio.fail_after(10):
            response = await server.handle(message, auth=soon, notify=lambda method, params: notes.append(method))
    assert time.time() >= soon.expires_at - 0.05  # type: ignore[operator]
    assert notes == ["notifications/subscriptions/acknowledged"]
    assert response["result"]["resultType"] == "complete" and response["id"] == 7


async def test_a_stream_lasts_as_long_as_a_request_with_its_token_would_pass(keys: dict[str, SigningKey]) -> None:
    verifier = JWTVerifier(public_key=keys["rsa"].public_pem(), issuer=ISSUER, audience=RESOURCE, leeway=20)
    rs = ResourceServer(verifier, resource=RESOURCE, authorization_servers=[ISSUER])
    token = await verifier.verify(mint(keys["rsa"], iss=ISSUER))
    assert token.expires_at is not None
    assert rs.accepted_until(token) == token.expires_at + 20  # the leeway new requests get
