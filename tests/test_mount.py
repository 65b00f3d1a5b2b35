"""Servers mounted in servers: a child's catalogue under a namespace, served in both eras, in process.

The parent lists the child's tools and prompts as ``<namespace>_<name>`` and its resources
with the namespace after the scheme; a call reaches the child's handler through the parent's
middleware, then the child's, with the child's lifespan; questions, Steps, ``once=True``,
progress, logs, tasks and list changes work as unmounted. Clashes are refused naming both
registrations.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import mrtr
from mrtr import Elicit, Form, Server, Step
from mrtr.core.errors import RATE_LIMITED
from mrtr.core.jsonrpc import parse_message
from mrtr.middleware import Incoming
from mrtr.server.catalog import mounted_uri, unmounted_uri
from mrtr.testing import TEST_SECRET

from .conftest import meta
from .legacy.test_legacy_server import Session, text
from .wire_schema import validate_message

STEPS: list[str] = []


def lookup(invoice: str) -> int:
    STEPS.append(invoice)
    return 42


def billing_server(seen: list[str] | None = None) -> Server:
    child = Server("billing", "1.0.0", secret=TEST_SECRET)

    @child.lifespan
    async def ledger(server: Server) -> Any:
        yield {"currency": "EUR"}

    @child.tool
    def refund(ctx, invoice: str) -> Any:
        amount = yield Step(lookup, invoice)
        ctx.progress(1, 2, "found the invoice")
        ctx.log("info", f"refund of {invoice}")
        why = yield Elicit(f"Why refund {invoice}?", Form().string("reason"))
        sure = yield Elicit(f"Refund {amount} {ctx.lifespan['currency']}?", Form().boolean("ok"))
        if not sure.content["ok"]:
            return "kept"
        return f"refunded {amount} {ctx.lifespan['currency']} for {why.content['reason']} ({ctx.target})"

    @child.tool(once=True)
    def close(account: str) -> str:
        STEPS.append(f"close {account}")
        return f"closed {account}"

    @child.tool(task="optional")
    def report(month: str) -> str:
        return f"report {month}"

    @child.prompt
    def dunning(customer: str) -> str:
        return f"Remind {customer} to pay"

    @child.resource_template("invoice://{number}")
    def invoice(number: str) -> str:
        return f"invoice {number}"

    @child.resource("config://billing")
    def settings() -> str:
        return "{}"

    @child.completion
    def complete(ref: Any, argument: Any, context: Any) -> list[str]:
        return [name for name in ("acme", "acorn") if name.startswith(argument["value"])]

    if seen is not None:
        @child.middleware
        async def inner(request: Incoming, call_next: Any) -> Any:
            seen.append(f"child {request.method} {request.name}")
            return await call_next(request)

    return child


def parent_server(seen: list[str] | None = None, **options: Any) -> Server:
    parent = Server("shop", "1.0.0", secret=TEST_SECRET, **options)

    @parent.tool
    def ping() -> str:
        return "pong"

    if seen is not None:
        @parent.middleware
        async def outer(request: Incoming, call_next: Any) -> Any:
            seen.append(f"parent {request.method} {request.name}")
            return await call_next(request)

    parent.mount(billing_server(seen), "billing")
    return parent


async def wire(server: Server, method: str, params: dict[str, Any] | None = None,
               capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": meta(capabilities or {})}}
    message = await server.handle(parse_message(json.dumps(body).encode()))
    validate_message(message)
    return message


def test_uris_are_renamed_after_the_scheme_and_back_exactly():
    for uri, shown in (("weather://forecast", "weather://billing/forecast"),
                       ("file:///etc/app", "file://billing//etc/app"),
                       ("invoice://{number}", "invoice://billing/{number}"),
                       ("urn:isbn:123", "urn:billing/isbn:123")):
        assert mounted_uri("billing", uri) == shown
        assert unmounted_uri("billing", shown) == uri
    assert unmounted_uri("billing", "weather://forecast") is None
    assert unmounted_uri("billing", "weather://sales/forecast") is None


async def test_the_parent_lists_the_childs_entries_renamed_in_both_eras():
    server = parent_server()
    async with mrtr.Client(server, era="modern") as client:
        tools = [tool["name"] for tool in await client.list_tools()]
        prompts = [prompt["name"] for prompt in await client.list_prompts()]
        resources = [resource["uri"] for resource in await client.list_resources()]
        templates = [template["uriTemplate"] for template in await client.list_resource_templates()]
    assert tools == ["ping", "billing_refund", "billing_close", "billing_report"]
    assert prompts == ["billing_dunning"]
    assert resources == ["config://billing/billing"]
    assert templates == ["invoice://billing/{number}"]
    session = Session(server)
    opened = await session.open()
    assert set(opened["result"]["capabilities"]) >= {"tools", "prompts", "resources", "completions"}
    listed = await session.result("tools/list")
    assert [tool["name"] for tool in listed["tools"]] == tools


async def test_a_two_question_conversation_through_the_mount_in_the_modern_era():
    STEPS.clear()
    seen: list[str] = []
    server = parent_server(seen)
    progress: list[Any] = []
    logs: list[Any] = []

    def answer(request: Any) -> Any:
        return mrtr.accept(reason="damaged") if "Why" in request.message else mrtr.accept(ok=True)

    async with server.running():
        async with mrtr.Client(server, era="modern", on_elicit=answer,
                               on_progress=lambda done, total, message: progress.append((done, total, message)),
                               on_log=lambda level, logger, data: logs.append((level, data))) as client:
            result = await client.call_tool("billing_refund", {"invoice": "INV-7"})
    assert result.text == "refunded 42 EUR for damaged (refund)"
    assert STEPS == ["INV-7"]  # the Step ran once across three rounds
    assert (1, 2, "found the invoice") in progress and ("info", "refund of INV-7") in logs
    # Each round: the parent's middleware with the name the client used, then the child's with its own.
    assert seen == ["parent tools/call billing_refund", "child tools/call refund"] * 3


async def test_the_same_conversation_in_a_legacy_session():
    STEPS.clear()
    seen: list[str] = []
    server = parent_server(seen)
    session = Session(server)
    await session.open()

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        if "Why" in request["params"]["message"]:
            return {"action": "accept", "content": {"reason": "late"}}
        return {"action": "accept", "content": {"ok": True}}

    async with server.running():
        result = await session.call("billing_refund", {"invoice": "INV-8"}, answer=reply)
    assert text(result) == "refunded 42 EUR for late (refund)"
    assert STEPS == ["INV-8"]
    assert [entry for entry in seen if "tools/call" in entry] == ["parent tools/call billing_refund",
                                                                  "child tools/call refund"]


async def test_prompts_resources_templates_and_completion_through_the_mount():
    server = parent_server()
    async with server.running():
        prompt = await wire(server, "prompts/get", {"name": "billing_dunning", "arguments": {"customer": "Ada"}})
        assert prompt["result"]["messages"][0]["content"]["text"] == "Remind Ada to pay"
        read = await wire(server, "resources/read", {"uri": "invoice://billing/17"})
        assert read["result"]["contents"][0]["text"] == "invoice 17"
        assert read["result"]["contents"][0]["uri"] == "invoice://17"  # the child's own name of what it read
        static = await wire(server, "resources/read", {"uri": "config://billing/billing"})
        assert static["result"]["contents"][0]["text"] == "{}"
        completed = await wire(server, "completion/complete", {"ref": {"type": "ref/prompt", "name": "billing_dunning"},
                                                               "argument": {"name": "customer", "value": "ac"}})
        assert completed["result"]["completion"]["values"] == ["acme", "acorn"]
        unknown = await wire(server, "tools/call", {"name": "billing_nosuch", "arguments": {}})
        assert unknown["error"]["message"] == "Unknown tool: billing_nosuch"
        missing = await wire(server, "resources/read", {"uri": "invoice://sales/1"})
        assert missing["error"]["code"] == -32602 and missing["error"]["data"] == {"uri": "invoice://sales/1"}


async def test_once_and_tasks_of_a_mounted_server_use_the_parents_store():
    STEPS.clear()
    server = parent_server(store_url="memory:")
    async with server.running():
        async with mrtr.Client(server, era="modern", tasks=True) as client:
            handle = await client.start_task("billing_report", {"month": "May"})
            done = await handle.wait()
            closed = await client.call_tool("billing_close", {"account": "A1"})
    assert done.text == "report May" and closed.text == "closed A1"
    assert STEPS == ["close A1"]


async def test_a_token_is_bound_to_the_name_the_client_used():
    server = Server("shop", "1.0.0", secret=TEST_SECRET)
    server.mount(billing_server(), "billing")
    server.mount(billing_server(), "sales")
    async with server.running():
        first = await wire(server, "tools/call", {"name": "billing_refund", "arguments": {"invoice": "X"}},
                           {"elicitation": {}})
        token = first["result"]["requestState"]
        replayed = await wire(server, "tools/call", {
            "name": "sales_refund", "arguments": {"invoice": "X"}, "requestState": token,
            "inputResponses": {"elicit-2": {"action": "accept", "content": {"reason": "x"}}}}, {"elicitation": {}})
    assert replayed["error"]["code"] == -32602 and "different target" in replayed["error"]["message"]


async def test_list_changes_and_resource_updates_of_the_child_reach_the_parents_sessions_renamed():
    server = parent_server()
    child = billing_server()
    server.mount(child, "again")
    session = Session(server)
    await session.open()
    await session.result("resources/subscribe", {"uri": "invoice://again/5"})
    child.notify_tools_changed()
    child.notify_resource_updated("invoice://5")
    child.notify_resource_updated("invoice://6")  # nobody subscribed to it
    assert {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}} in session.outlet
    updates = [note["params"]["uri"] for note in session.outlet if note["method"] == "notifications/resources/updated"]
    assert updates == ["invoice://again/5"]


def test_names_both_would_list_are_refused_naming_both_registrations():
    parent = Server("shop", "1.0.0", secret=TEST_SECRET)

    @parent.tool(name="billing_refund")
    def mine(invoice: str) -> str:
        return invoice

    with pytest.raises(ValueError, match=r"tool 'billing_refund': registered here by .*mine .*test_mount.py.* and "
                                         r"in the server mounted as 'billing' as 'refund' by .*refund"):
        parent.mount(billing_server(), "billing")
    assert "billing" not in parent.catalog.mounts  # nothing half mounted
    parent.mount(billing_server(), "money")
    with pytest.raises(ValueError, match="already listed here by the server mounted as 'money'"):
        @parent.tool(name="money_close")
        def other(account: str) -> str:
            return account
    with pytest.raises(ValueError, match="would share names with the server mounted as 'money'"):
        parent.mount(billing_server(), "money_x")
    with pytest.raises(ValueError, match="cannot be mounted in itself"):
        parent.mount(parent, "self")
    with pytest.raises(ValueError, match="a namespace is"):
        parent.mount(billing_server(), "bad name")


async def test_a_clash_registered_on_the_child_after_mounting_stops_the_parent_at_start():
    parent = Server("shop", "1.0.0", secret=TEST_SECRET)
    child = billing_server()
    parent.mount(child, "billing")

    @parent.tool(name="billing_later")
    def later() -> str:
        return "parent"

    @child.tool(name="later")
    def theirs() -> str:
        return "child"

    with pytest.raises(ValueError, match="billing_later"):
        async with parent.running():
            pass


async def test_mounts_nest_and_the_middle_servers_middleware_runs_in_order():
    seen: list[str] = []
    inner = billing_server(seen)
    middle = Server("finance", "1.0.0", secret=TEST_SECRET)

    @middle.middleware
    async def middle_mw(request: Incoming, call_next: Any) -> Any:
        seen.append(f"middle {request.method} {request.name}")
        return await call_next(request)

    middle.mount(inner, "billing")
    top = Server("shop", "1.0.0", secret=TEST_SECRET)
    top.mount(middle, "finance")
    async with top.running():
        result = await wire(top, "prompts/get", {"name": "finance_billing_dunning", "arguments": {"customer": "B"}})
        listed = await wire(top, "tools/list")
    assert result["result"]["messages"][0]["content"]["text"] == "Remind B to pay"
    assert seen[:2] == ["middle prompts/get billing_dunning", "child prompts/get dunning"]
    assert "finance_billing_refund" in [tool["name"] for tool in listed["result"]["tools"]]


async def test_a_mounted_servers_rate_limit_gets_the_store_and_its_notes_reach_the_response():
    from mrtr.middleware import RateLimit, Timing

    child = billing_server()
    child.middleware(RateLimit(per_second=0.01, burst=1, methods={"tools/call"}))
    child.middleware(Timing())
    parent = Server("shop", "1.0.0", secret=TEST_SECRET, store_url="memory:")
    parent.mount(child, "billing")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "billing_close", "arguments": {"account": "A"}, "_meta": meta({})}}
    async with parent.running():
        first = await parent.respond(parse_message(json.dumps(body).encode()), client="10.0.0.1")
        second = await parent.respond(parse_message(json.dumps(body).encode()), client="10.0.0.1")
        other = await parent.respond(parse_message(json.dumps(body).encode()), client="10.0.0.2")
    for response in (first, second, other):
        validate_message(response.message)
    # The child's limit keeps buckets in the parent's store and keys them by the transport's client name.
    assert first.status == 200 and "result" in first.message
    assert second.status == 429 and second.message["error"]["code"] == RATE_LIMITED
    assert other.status == 200 and "result" in other.message
    # What the child's middleware noted goes with the parent's response (for its access line).
    assert first.notes is not None and first.notes["timing_ms"] >= 0
