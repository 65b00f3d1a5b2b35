"""Middleware: one pipeline around every request of both eras, in process.

What a middleware sees (method, name, arguments, principal, era, round, task, capabilities),
its order, and what it may do: pass on, change what the method reads, answer itself, refuse.
The same middleware serves a 2026-07-28 conversation (a request per round, ``round`` counting
them) and a 2025 session (one request, the questions live inside it). Every message the server
sends is checked against the schema of its era.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import mrtr
from mrtr import Elicit, Form, PublicError, Server
from mrtr.core.jsonrpc import parse_message
from mrtr.middleware import Incoming
from mrtr.testing import TEST_SECRET

from .conftest import meta, until
from .legacy.test_legacy_server import Session, text
from .wire_schema import RESULT_DEFS, validate_message

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
ELICIT = {"elicitation": {}}


def build(seen: list[Incoming] | None = None, **options: Any) -> Server:
    server = Server("layers", "1.0.0", secret=TEST_SECRET, **options)

    @server.tool
    def signup(ctx, plan: str) -> Any:
        name = yield Elicit("Your name?", Form().string("name"))
        email = yield Elicit("Your email?", Form().string("email"))
        return f"{name.content['name']} <{email.content['email']}> on {plan}"

    @server.tool
    def echo(words: str) -> str:
        return words

    @server.tool(task="optional")
    def background(n: int) -> int:
        return n * 2

    @server.prompt
    def summary(topic: str) -> str:
        return f"Summarize {topic}"

    @server.resource("config://app")
    def config() -> str:
        return "{}"

    if seen is not None:
        @server.middleware
        async def record(request: Incoming, call_next: Any) -> Any:
            seen.append(request)
            return await call_next(request)

    return server


async def wire(server: Server, method: str, params: dict[str, Any] | None = None,
               capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 7, "method": method,
            "params": {**(params or {}), "_meta": meta(capabilities or {})}}
    message = await server.handle(parse_message(json.dumps(body).encode()))
    final = "result" in message and message["result"].get("resultType") == "complete" \
        and "task" not in message["result"]
    validate_message(message, result_def=RESULT_DEFS.get(method) if final else None)
    return message


def answer(asked: dict[str, Any], params: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    result = asked["result"]
    (key,) = result["inputRequests"]
    return {**params, "requestState": result["requestState"],
            "inputResponses": {key: {"action": "accept", "content": content}}}


# -- what a middleware sees -----------------------------------------------------------------


async def test_each_round_of_a_modern_conversation_is_one_request_and_says_its_round():
    seen: list[Incoming] = []
    server = build(seen)
    params = {"name": "signup", "arguments": {"plan": "pro"}}
    first = await wire(server, "tools/call", params, ELICIT)
    second = await wire(server, "tools/call", answer(first, params, {"name": "Ada"}), ELICIT)
    third = await wire(server, "tools/call", answer(second, params, {"email": "ada@example.com"}), ELICIT)
    assert third["result"]["content"][0]["text"] == "Ada <ada@example.com> on pro"
    assert [(view.method, view.name, view.round, view.era) for view in seen] == [
        ("tools/call", "signup", 1, "modern"), ("tools/call", "signup", 2, "modern"),
        ("tools/call", "signup", 3, "modern")]
    assert all(view.arguments == {"plan": "pro"} and view.client_capabilities == ELICIT for view in seen)
    assert not any(view.is_task or view.is_notification or view.session_id for view in seen)


async def test_a_token_that_does_not_open_is_a_first_round_and_is_refused_after_the_middleware():
    seen: list[Incoming] = []
    server = build(seen)
    refused = await wire(server, "tools/call", {"name": "signup", "arguments": {"plan": "pro"},
                                                 "requestState": "not-a-token", "inputResponses": {}}, ELICIT)
    assert refused["error"]["code"] == -32602
    assert [view.round for view in seen] == [1]


async def test_every_method_of_the_modern_era_goes_through_the_pipeline():
    seen: list[Incoming] = []
    server = build(seen)
    await wire(server, "server/discover")
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
        await wire(server, method)
    await wire(server, "prompts/get", {"name": "summary", "arguments": {"topic": "MCP"}})
    await wire(server, "resources/read", {"uri": "config://app"})
    assert [(view.method, view.name) for view in seen] == [
        ("server/discover", None), ("tools/list", None), ("prompts/list", None), ("resources/list", None),
        ("resources/templates/list", None), ("prompts/get", "summary"), ("resources/read", "config://app")]
    assert seen[5].arguments == {"topic": "MCP"} and seen[6].arguments == {}  # a generic hook meets no tool shape


async def test_the_call_that_creates_a_task_and_the_task_methods_say_so():
    seen: list[Incoming] = []
    server = build(seen, store_url="memory:")
    async with server.running():
        created = await wire(server, "tools/call", {"name": "background", "arguments": {"n": 21}}, TASKS)
        task_id = created["result"]["taskId"]

        async def done() -> dict[str, Any]:
            return (await wire(server, "tasks/get", {"taskId": task_id}, TASKS))["result"]

        finished = await until(done, lambda task: task["status"] == "completed")
    assert finished["status"] == "completed"
    assert seen[0].method == "tools/call" and seen[0].is_task is True
    assert {view.method for view in seen[1:]} == {"tasks/get"}
    assert all(view.is_task and view.name == task_id for view in seen[1:])
    plain = []
    server = build(plain, store_url="memory:")
    async with server.running():
        await wire(server, "tools/call", {"name": "background", "arguments": {"n": 1}})  # no tasks extension
    assert plain[0].is_task is False


# -- order, answers of its own, changes, refusals ------------------------------------------


async def test_the_first_registered_is_the_outermost():
    order: list[str] = []
    server = build()
    for name in ("outer", "middle", "inner"):
        def stage(label: str) -> Any:
            async def mw(request: Incoming, call_next: Any) -> Any:
                order.append(f"{label} in")
                result = await call_next(request)
                order.append(f"{label} out")
                return result
            return mw
        server.middleware(stage(name))
    await wire(server, "tools/call", {"name": "echo", "arguments": {"words": "hi"}})
    assert order == ["outer in", "middle in", "inner in", "inner out", "middle out", "outer out"]


async def test_a_middleware_may_answer_itself_and_change_what_the_method_reads():
    server = build()
    ran: list[str] = []

    @server.middleware
    async def shout(request: Incoming, call_next: Any) -> Any:
        if request.name == "echo":
            return await call_next(request.replace(arguments={"words": request.arguments["words"].upper()}))
        if request.method == "prompts/list":
            # answered here (a whole result, cache hints included): the method never runs
            return {"resultType": "complete", "prompts": [], "ttlMs": 0, "cacheScope": "private"}
        return await call_next(request)

    @server.prompt
    def never() -> str:
        ran.append("never")
        return "x"

    echoed = await wire(server, "tools/call", {"name": "echo", "arguments": {"words": "hi"}})
    assert echoed["result"]["content"][0]["text"] == "HI"
    listed = await wire(server, "prompts/list")
    assert listed["result"]["prompts"] == [] and ran == []


async def test_a_public_error_refuses_as_a_handler_raising_it_does():
    server = build()

    @server.middleware
    async def closed(request: Incoming, call_next: Any) -> Any:
        if request.method in ("tools/call", "prompts/get"):
            raise PublicError("Closed for maintenance until 18:00")
        return await call_next(request)

    tool = await wire(server, "tools/call", {"name": "echo", "arguments": {"words": "hi"}})
    assert tool["result"]["isError"] is True
    assert tool["result"]["content"][0]["text"] == "Closed for maintenance until 18:00"
    prompt = await wire(server, "prompts/get", {"name": "summary", "arguments": {"topic": "x"}})
    assert prompt["error"]["code"] == -32603 and prompt["error"]["message"] == "Closed for maintenance until 18:00"


async def test_a_failing_middleware_is_a_masked_handler_failure_with_a_reference_in_the_log(caplog):
    server = build()

    @server.middleware
    async def broken(request: Incoming, call_next: Any) -> Any:
        raise RuntimeError("the audit database at db://secret:hunter2@audit is down")

    tool = await wire(server, "tools/call", {"name": "echo", "arguments": {"words": "hi"}})
    shown = tool["result"]["content"][0]["text"]
    assert tool["result"]["isError"] is True and "hunter2" not in shown
    assert shown.startswith("tool echo failed with an internal error (reference ")
    listing = await wire(server, "tools/list")
    assert listing["error"]["code"] == -32603 and "hunter2" not in json.dumps(listing)
    assert listing["error"]["message"].startswith("Internal error: tools/list failed with an internal error")
    reference = shown.split("reference ")[1][:8]
    assert any(reference in record.getMessage() and "hunter2" in record.getMessage() for record in caplog.records)


async def test_a_protocol_error_a_middleware_raises_is_the_requests_error_with_its_status():
    server = build()

    @server.middleware
    async def strict(request: Incoming, call_next: Any) -> Any:
        raise mrtr.InvalidParams("this server takes no requests today")

    response = await server.respond(parse_message(json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}).encode()))
    assert response.status == 400 and response.message["error"]["code"] == -32602


async def test_what_the_method_raises_passes_through_the_middleware_unchanged():
    server = build([])
    unknown = await wire(server, "tools/call", {"name": "nosuch", "arguments": {}})
    assert unknown["error"] == {"code": -32602, "message": "Unknown tool: nosuch"}


def test_a_middleware_that_cannot_be_a_stage_is_refused_at_registration():
    server = build()
    with pytest.raises(TypeError, match="must be async"):
        server.middleware(lambda request, call_next: None)
    with pytest.raises(TypeError, match=r"two arguments, \(request, call_next\)"):
        async def one(request: Incoming) -> None: ...
        server.middleware(one)

    class Stage:
        def __init__(self) -> None:
            self.calls = 0

        async def __call__(self, request: Incoming, call_next: Any) -> Any:
            self.calls += 1
            return await call_next(request)

    stage = Stage()
    assert server.middleware(stage) is stage


# -- the 2025 era: the same middleware around a session's requests ---------------------------


async def test_a_legacy_session_goes_through_the_same_pipeline_with_its_questions_inside_one_request():
    seen: list[Incoming] = []
    server = build(seen)
    session = Session(server)
    await session.open()

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        field = "name" if request["params"]["message"] == "Your name?" else "email"
        return {"action": "accept", "content": {field: "Ada" if field == "name" else "ada@example.com"}}

    result = await session.call("signup", {"plan": "pro"}, answer=reply)
    assert text(result) == "Ada <ada@example.com> on pro"
    calls = [view for view in seen if view.method == "tools/call"]
    assert [(view.era, view.round, view.name, view.session_id) for view in calls] == [
        ("legacy", 1, "signup", session.id)]
    assert seen[0].method == "notifications/initialized" and seen[0].is_notification is True
    assert calls[0].client_capabilities["elicitation"] == {"form": {}, "url": {}}


async def test_a_legacy_refusal_is_that_eras_error_or_tool_result():
    server = build()

    @server.middleware
    async def closed(request: Incoming, call_next: Any) -> Any:
        if request.method in ("tools/call", "prompts/get"):
            raise PublicError("Closed")
        return await call_next(request)

    session = Session(server)
    await session.open()
    tool = await session.result("tools/call", {"name": "echo", "arguments": {"words": "hi"}})
    assert tool == {"content": [{"type": "text", "text": "Closed"}], "isError": True}
    error = await session.error("prompts/get", {"name": "summary", "arguments": {"topic": "x"}})
    assert error["code"] == -32603 and error["message"] == "Closed"
