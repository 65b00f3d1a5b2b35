"""The built-in middleware (``mrtr.middleware``), their semantics in both eras, in process.

``RateLimit``, ``Timing``, ``Authorize`` and ``Cache`` around the same handlers: modern
requests through ``Server.respond`` (its status and headers) or real loopback HTTP behind
both front ends in this process, 2025-era requests through a session of the legacy era,
the task carrier through the tasks extension. Every message the server sends is checked
against the schema of its era. Through real processes: tests/test_middleware_served.py.
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any

import httpx
import pytest
import trio

import mrtr
from mrtr import Elicit, Form, Server
from mrtr.core.errors import LEGACY_RATE_LIMITED, RATE_LIMITED
from mrtr.core.jsonrpc import Response, parse_message
from mrtr.middleware import Authorize, Cache, Component, Incoming, RateLimit, Timing, caller_of, refused
from mrtr.server.pipeline import MAX_NOTES, Shared
from mrtr.testing import TEST_SECRET
from mrtr.transports.logs import AccessRecord, JsonFormatter

from .conftest import meta, until
from .http.conftest import start_front_end
from .legacy.test_legacy_server import Session, text
from .legacy_schema import validate_server_message
from .wire_schema import RESULT_DEFS, validate_message

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
ELICIT = {"elicitation": {}}
TENANT = "x-tenant"


class Counting:
    """Counts what reached it, per method and name: the requests a middleware before it let through."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []

    async def __call__(self, request: Incoming, call_next: Any) -> Any:
        self.seen.append((request.method, request.name))
        return await call_next(request)

    def count(self, method: str, name: str | None = None) -> int:
        return sum(1 for seen in self.seen if seen[0] == method and (name is None or seen[1] == name))


def build(*middleware: Any, **options: Any) -> Server:
    """A server whose principal is the ``x-tenant`` header, with ``middleware`` registered in order."""
    options.setdefault("principal", lambda info: info.headers.get(TENANT))
    options.setdefault("store_url", "memory:")  # each test its own buckets (the default is a file per server name)
    server = Server("builtins", "1.0.0", secret=TEST_SECRET, **options)
    calls: dict[str, int] = {}
    server.calls = calls  # type: ignore[attr-defined]

    @server.tool
    def signup(plan: str) -> Any:
        """Two questions."""
        name = yield Elicit("Your name?", Form().string("name"))
        email = yield Elicit("Your email?", Form().string("email"))
        return f"{name.content['name']} <{email.content['email']}> on {plan}"

    @server.tool(annotations={"readOnlyHint": True})
    def rates(currency: str) -> str:
        """Read only: safe to cache."""
        calls["rates"] = calls.get("rates", 0) + 1
        return f"{currency}:{calls['rates']}"

    @server.tool(annotations={"idempotentHint": True})
    def set_limit(amount: int) -> str:
        """Idempotent, not read only: never cached."""
        calls["set_limit"] = calls.get("set_limit", 0) + 1
        return f"limit {amount}"

    @server.tool
    def echo(words: str) -> str:
        return words

    @server.tool(annotations={"readOnlyHint": True})
    def flaky(n: int) -> str:
        """Read only, failing: its error result is never kept."""
        calls["flaky"] = calls.get("flaky", 0) + 1
        raise mrtr.PublicError(f"try again ({calls['flaky']})")

    @server.tool(annotations={"readOnlyHint": True})
    def lookup(city: str) -> Any:
        """Read only, but it asks: what the user said is part of its answer."""
        calls["lookup"] = calls.get("lookup", 0) + 1
        unit = yield Elicit("Which unit?", Form().string("unit"))
        return f"{city} in {unit.content['unit']}"

    @server.tool(task="optional", annotations={"readOnlyHint": True})
    def report(n: int) -> int:
        calls["report"] = calls.get("report", 0) + 1
        return n * 2

    @server.tool
    def admin_reset() -> str:
        return "reset"

    @server.prompt
    def summary(topic: str) -> str:
        return f"Summarize {topic}"

    @server.prompt
    def admin_prompt() -> str:
        return "secret prompt"

    @server.resource("config://app")
    def config() -> str:
        return "{}"

    @server.resource_template("secret://{key}")
    def secret(key: str) -> str:
        return f"secret {key}"

    @server.completion
    def complete(ref: Any, argument: Any, context: Any) -> list[str]:
        return ["alpha", "beta"]

    for stage in middleware:
        server.middleware(stage)
    return server


def message(method: str, params: dict[str, Any] | None = None, capabilities: dict[str, Any] | None = None,
            request_id: int = 7) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": request_id, "method": method,
            "params": {**(params or {}), "_meta": meta(capabilities or {})}}
    return parse_message(json.dumps(body).encode())


def checked(response: Response, method: str) -> dict[str, Any]:
    reply = response.message
    final = "result" in reply and reply["result"].get("resultType") == "complete" and "task" not in reply["result"]
    validate_message(reply, result_def=RESULT_DEFS.get(method) if final else None)
    return reply


async def respond(server: Server, method: str, params: dict[str, Any] | None = None, *, tenant: str | None = None,
                  capabilities: dict[str, Any] | None = None, client: str | None = None) -> Response:
    headers = {TENANT: tenant} if tenant is not None else {}
    response = await server.respond(message(method, params, capabilities), headers=headers, client=client)
    checked(response, method)
    return response


async def wire(server: Server, method: str, params: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    return (await respond(server, method, params, **options)).message


def answered(asked: dict[str, Any], params: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    result = asked["result"]
    (key,) = result["inputRequests"]
    return {**params, "requestState": result["requestState"],
            "inputResponses": {key: {"action": "accept", "content": content}}}


def is_rate_limited(response: Response) -> bool:
    return response.status == 429 and response.message.get("error", {}).get("code") == RATE_LIMITED


# -- RateLimit ---------------------------------------------------------------------------------


async def test_a_refused_request_says_when_to_retry_with_429_and_retry_after():
    server = build(RateLimit(per_second=0.01, burst=2))
    async with server.running():
        first = await respond(server, "tools/call", {"name": "echo", "arguments": {"words": "a"}}, tenant="acme")
        second = await respond(server, "tools/list", tenant="acme")
        refused_ = await respond(server, "tools/call", {"name": "echo", "arguments": {"words": "a"}}, tenant="acme")
    assert first.status == second.status == 200 and "result" in first.message and "result" in second.message
    assert is_rate_limited(refused_)
    error = refused_.message["error"]
    assert 99 < error["data"]["retryAfter"] <= 100  # one token at 0.01 a second
    assert error["message"].startswith("Too many requests: rate limited; retry after ")
    (header,) = refused_.headers
    assert header[0] == "retry-after" and header[1] == str(math.ceil(error["data"]["retryAfter"]))


async def test_each_principal_has_its_own_bucket_and_never_one_for_everyone():
    server = build(RateLimit(per_second=0.01, burst=1))
    async with server.running():
        assert "result" in await wire(server, "tools/list", tenant="acme")
        assert is_rate_limited(await respond(server, "tools/list", tenant="acme"))
        assert "result" in await wire(server, "tools/list", tenant="globex")  # another principal: another bucket
        # Without a principal: the client's address, as the transport names it; none at all: "local".
        assert "result" in await wire(server, "tools/list", client="10.0.0.1")
        assert "result" in await wire(server, "tools/list", client="10.0.0.2")
        assert is_rate_limited(await respond(server, "tools/list", client="10.0.0.1"))
        assert "result" in await wire(server, "tools/list")
        assert is_rate_limited(await respond(server, "tools/list"))
        # A principal spelt like an address is another bucket.
        assert "result" in await wire(server, "tools/list", tenant="10.0.0.2")


def test_the_default_key_is_principal_then_address_then_session():
    def view(**options: Any) -> Incoming:
        return Incoming("tools/list", {}, auth=None, era="legacy", client_capabilities={}, **options)

    assert caller_of(view(principal="ada", session_id="s1", client="10.0.0.1")) == "principal:ada"
    assert caller_of(view(principal=None, session_id="s1", client="10.0.0.1")) == "client:10.0.0.1"
    assert caller_of(view(principal=None, client="10.0.0.1")) == "client:10.0.0.1"
    assert caller_of(view(principal=None, session_id="s1")) == "session:s1"
    assert caller_of(view(principal=None)) == "local"


@pytest.mark.parametrize(("client", "key"), [
    ("2001:db8::1", "client:2001:db8::/64"),
    ("2001:db8::ffff:2", "client:2001:db8::/64"),  # the same host's /64: the same bucket
    ("2001:db8:0:1::1", "client:2001:db8:0:1::/64"),  # the next /64: another
    ("fe80::1%eth0", "client:fe80::/64"),
    ("::ffff:10.0.0.1", "client:10.0.0.1"),  # IPv4 mapped into IPv6 is that IPv4 address
    ("10.0.0.1", "client:10.0.0.1"),
    ("stdio:4242", "client:stdio:4242"),  # no IP address: as the transport named it
])
def test_an_ipv6_client_counts_by_its_64_which_one_host_holds_whole(client, key):
    # Keyed by the exact address, a host given a /64 could send each request from a new one.
    view = Incoming("tools/list", {}, principal=None, auth=None, era="modern", client_capabilities={}, client=client)
    assert caller_of(view) == key


async def test_only_the_first_round_of_a_conversation_counts():
    server = build(RateLimit(per_second=0.01, burst=1))
    params = {"name": "signup", "arguments": {"plan": "pro"}}
    async with server.running():
        first = await wire(server, "tools/call", params, tenant="acme", capabilities=ELICIT)
        assert first["result"]["resultType"] == "input_required"  # took the one token
        second = await wire(server, "tools/call", answered(first, params, {"name": "Ada"}), tenant="acme",
                            capabilities=ELICIT)
        third = await wire(server, "tools/call", answered(second, params, {"email": "ada@example.com"}),
                           tenant="acme", capabilities=ELICIT)
        assert third["result"]["content"][0]["text"] == "Ada <ada@example.com> on pro"  # answers never refused
        again = await respond(server, "tools/call", params, tenant="acme", capabilities=ELICIT)
    assert is_rate_limited(again)  # a new conversation is a first round


async def test_the_call_creating_a_task_counts_and_its_task_methods_never_do():
    server = build(RateLimit(per_second=0.01, burst=1), store_url="memory:")
    async with server.running():
        created = await wire(server, "tools/call", {"name": "report", "arguments": {"n": 21}}, tenant="acme",
                             capabilities=TASKS)
        task_id = created["result"]["taskId"]

        async def status() -> dict[str, Any]:
            return (await wire(server, "tasks/get", {"taskId": task_id}, tenant="acme", capabilities=TASKS))["result"]

        done = await until(status, lambda task: task["status"] == "completed")
        for _ in range(5):
            assert (await status())["status"] == "completed"  # polls an admitted task: never refused
        refused_ = await respond(server, "tools/call", {"name": "report", "arguments": {"n": 1}}, tenant="acme",
                                 capabilities=TASKS)
    assert done["status"] == "completed" and server.calls["report"] == 1  # type: ignore[attr-defined]
    assert is_rate_limited(refused_)


async def test_methods_limits_those_methods_alone_and_two_limits_keep_their_own_buckets():
    calls = RateLimit(per_second=0.01, burst=1, methods={"tools/call"})
    everything = RateLimit(per_second=0.01, burst=4)
    server = build(everything, calls)
    async with server.running():
        assert "result" in await wire(server, "tools/call", {"name": "echo", "arguments": {"words": "a"}},
                                      tenant="acme")
        assert is_rate_limited(await respond(server, "tools/call", {"name": "echo", "arguments": {"words": "a"}},
                                             tenant="acme"))
        assert "result" in await wire(server, "tools/list", tenant="acme")  # not a limited method for `calls`
        assert "result" in await wire(server, "prompts/list", tenant="acme")
        assert is_rate_limited(await respond(server, "resources/list", tenant="acme"))  # `everything`: 4 taken
    assert calls.name != everything.name


async def test_tokens_come_back_at_the_rate():
    server = build(RateLimit(per_second=50, burst=1))
    async with server.running():
        assert "result" in await wire(server, "tools/list", tenant="acme")
        assert is_rate_limited(await respond(server, "tools/list", tenant="acme"))

        async def admitted() -> bool:
            return not is_rate_limited(await respond(server, "tools/list", tenant="acme"))

        assert await until(admitted, every=0.005, timeout=5)


async def test_a_key_may_exempt_a_request_and_must_return_a_string():
    exempt = RateLimit(per_second=0.01, burst=1, key=lambda request: None if request.principal == "ops" else
                       f"tenant:{request.principal}")
    server = build(exempt)
    async with server.running():
        for _ in range(3):
            assert "result" in await wire(server, "tools/list", tenant="ops")

    async def broken_key(request: Incoming) -> Any:
        return 42

    server = build(RateLimit(per_second=1, key=broken_key))
    async with server.running():
        failed = await wire(server, "tools/list", tenant="acme")
    message = re.sub(r"\(reference [0-9a-f]+;", "(reference;", failed["error"]["message"])  # random hex: may hold 42
    assert failed["error"]["code"] == -32603 and "(reference;" in message
    assert "42" not in message and "got int" not in message


async def test_without_the_running_store_a_rate_limit_refuses_rather_than_lets_everyone_through():
    server = build(RateLimit(per_second=1))
    refused_ = await wire(server, "tools/list", tenant="acme")  # not inside server.running()
    assert refused_["error"]["code"] == -32603
    assert "Server.running()" in refused_["error"]["message"]


async def test_a_store_that_fails_refuses_the_request_and_never_lets_it_through_unlimited(caplog):
    from mrtr.carriers.tasks.store import store_failed

    class Away:
        async def take_token(self, bucket: str, per_second: float, burst: float) -> float:
            raise store_failed("redis://:hunter2@redis.internal:6379/0", ConnectionError("connection refused"))

    limit = RateLimit(per_second=1)
    ran: list[str] = []
    server = build(limit)

    @server.tool
    def counted() -> str:
        ran.append("ran")
        return "ran"

    limit.use_store(Away())  # what Server.running() hands it, here a store that cannot be reached
    refused_ = await respond(server, "tools/call", {"name": "counted", "arguments": {}}, tenant="acme")
    assert refused_.message["error"] == {"code": -32603, "message": "Internal error: the task store is unavailable"}
    assert ran == [] and "hunter2" not in json.dumps(refused_.message)
    assert any("redis://:***@redis.internal" in record.getMessage() for record in caplog.records)


def test_rate_limit_settings_are_checked():
    for bad in (0, -1, math.inf, math.nan, True, "5"):
        with pytest.raises(ValueError, match="per_second"):
            RateLimit(per_second=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 1"):
        RateLimit(per_second=1, burst=0.5)
    with pytest.raises(TypeError, match="collection"):
        RateLimit(per_second=1, methods="tools/call")
    assert RateLimit(per_second=0.2).burst == 1.0 and RateLimit(per_second=30).burst == 30.0


async def test_a_legacy_session_is_refused_with_that_eras_error_and_notifications_never_count():
    server = build(RateLimit(per_second=0.01, burst=2), principal=None)
    async with server.running():
        session = Session(server)
        await session.open()  # notifications/initialized: a notification, never counted
        for _ in range(5):
            await server.legacy.notification(session.id, {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        assert await session.result("tools/list", {})
        assert await session.result("prompts/list", {})
        error = await session.error("tools/list", {})  # status 200: every error of this era
        assert error["code"] == LEGACY_RATE_LIMITED and 99 < error["data"]["retryAfter"] <= 100
        other = Session(server)  # served in this process, no address: each session is its own caller
        await other.open()
        assert await other.result("tools/list", {})


async def test_an_unauthenticated_client_opening_another_session_keeps_its_bucket():
    # initialize is no request of the pipeline's: keyed by session, a client could open one
    # per request and never be limited. Keyed by the address each was opened from, it cannot.
    server = build(RateLimit(per_second=0.01, burst=2), principal=None)
    async with server.running():
        first = Session(server, client="10.0.0.1")
        await first.open()
        assert await first.result("tools/list", {})
        assert await first.result("tools/list", {})
        assert (await first.error("tools/list", {}))["code"] == LEGACY_RATE_LIMITED
        for _ in range(3):
            again = Session(server, client="10.0.0.1")
            await again.open()  # opening is never refused for rate, and gives no new bucket
            error = await again.error("tools/list", {})
            assert error["code"] == LEGACY_RATE_LIMITED and error["data"]["retryAfter"] > 0
        elsewhere = Session(server, client="10.0.0.2")  # another address: its own bucket
        await elsewhere.open()
        assert await elsewhere.result("tools/list", {})


async def test_a_legacy_call_asking_live_is_one_request():
    server = build(RateLimit(per_second=0.01, burst=1), principal=None)
    async with server.running():
        session = Session(server)
        await session.open()

        def reply(request: dict[str, Any]) -> dict[str, Any]:
            field = "name" if request["params"]["message"] == "Your name?" else "email"
            return {"action": "accept", "content": {field: "Ada" if field == "name" else "ada@example.com"}}

        result = await session.call("signup", {"plan": "pro"}, answer=reply)
        assert text(result) == "Ada <ada@example.com> on pro"
        assert (await session.error("tools/list", {}))["code"] == LEGACY_RATE_LIMITED


@pytest.mark.parametrize("front_end", ["native", "asgi"])
async def test_both_front_ends_answer_429_with_retry_after_and_key_by_the_remote_address(front_end, nursery):
    server = build(RateLimit(per_second=0.01, burst=1), principal=None)
    port = await start_front_end(front_end, nursery, server)
    body = message("tools/list")
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list",
               "Origin": "http://localhost:3000"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
        admitted = await http.post("/mcp", content=json.dumps(body), headers=headers)
        refused_ = await http.post("/mcp", content=json.dumps(body), headers=headers)
    # Another address on the loopback network is another client: its own bucket.
    elsewhere = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5, transport=elsewhere) as http:
        other = await http.post("/mcp", content=json.dumps(body), headers=headers)
    assert other.status_code == 200
    assert admitted.status_code == 200 and "retry-after" not in admitted.headers
    validate_message(admitted.json(), result_def="ListToolsResult")
    assert refused_.status_code == 429
    validate_message(refused_.json())
    assert refused_.json()["error"]["code"] == RATE_LIMITED
    assert refused_.headers["retry-after"] == str(math.ceil(refused_.json()["error"]["data"]["retryAfter"]))
    assert "retry-after" in refused_.headers["access-control-expose-headers"].lower()  # a browser may read it
    assert refused_.headers["content-length"] == str(len(refused_.content))


# -- Timing and notes on the access line -------------------------------------------------------


async def test_timing_notes_how_long_the_rest_took_in_both_eras():
    server = build(Timing(), Timing(field="handler_ms"))
    response = await respond(server, "tools/call", {"name": "echo", "arguments": {"words": "a"}})
    assert response.notes is not None and set(response.notes) == {"timing_ms", "handler_ms"}
    assert response.notes["timing_ms"] >= response.notes["handler_ms"] >= 0
    refused_ = await respond(server, "tools/call", {"name": "nosuch", "arguments": {}})  # an error is timed too
    assert "error" in refused_.message and "timing_ms" in (refused_.notes or {})
    session = Session(server)
    await session.open()
    legacy = await server.legacy.respond(session.id, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                         peer=session.wire.pending.peer())
    validate_server_message(legacy.message, "ListToolsResult")
    assert set(legacy.notes or {}) == {"timing_ms", "handler_ms"}
    plain = Server("plain", secret=TEST_SECRET)

    @plain.tool
    def hello() -> str:
        return "hi"

    assert (await plain.respond(message("tools/call", {"name": "hello"}))).notes is None  # no middleware: nothing


def test_notes_go_on_the_access_line_in_text_and_json_as_logging_would_write_them():
    record = AccessRecord("http", "POST", "/mcp")
    record.request({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}})
    record.response({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "content": []}})
    record.note({"timing_ms": 2.125, "cache": "hit", "tenant": "acme corp", "retried": False, "size": 3})
    line = record.message(4.0)
    assert line.endswith('round=1 timing_ms=2.125 cache=hit tenant="acme corp" retried=false size=3')
    fields = record.fields(4.0)
    formatted = logging.LogRecord("mrtr.access", logging.INFO, __file__, 1, "%s", (line,), None)
    formatted.mrtr = fields  # type: ignore[attr-defined]
    expected = json.loads(JsonFormatter().format(formatted))
    fast = json.loads(record.json_line(formatted.created, line, 4.0))
    assert {key: value for key, value in fast.items() if key != "time"} == \
        {key: value for key, value in expected.items() if key != "time"}
    assert fast["timing_ms"] == 2.125 and fast["tenant"] == "acme corp" and fast["retried"] is False


def test_a_note_is_checked_and_bounded():
    view = Incoming("tools/list", {}, principal=None, auth=None, era="modern", client_capabilities={})
    for name in ("method", "duration_ms", "Timing", "2fast", "a-b", "x" * 41):
        with pytest.raises(ValueError, match="lower-case identifier"):
            view.note(name, 1)
    with pytest.raises(ValueError, match="finite"):
        view.note("ratio", math.inf)
    with pytest.raises(ValueError, match="a str, a bool or a number"):
        view.note("thing", object())  # type: ignore[arg-type]
    view.note("long", "x" * 1000)
    for number in range(MAX_NOTES - 1):
        view.note(f"n{number}", number)
    with pytest.raises(ValueError, match=f"at most {MAX_NOTES}"):
        view.note("one_more", 1)
    view.note("long", "replaced")  # noting a name again is not one more
    shared = view._shared
    assert len(shared.notes) == MAX_NOTES and shared.notes["long"] == "replaced"
    assert view.replace(params={"cursor": "x"})._shared is shared  # every view notes on the same line


# -- Authorize -----------------------------------------------------------------------------------


def no_admin(request: Incoming, component: Component) -> bool:
    return not component.name.startswith(("admin_", "secret://")) or request.principal == "root"


async def test_a_caller_is_not_listed_what_it_may_not_use_in_any_listing():
    server = build(Authorize(no_admin))
    tools = await wire(server, "tools/list", tenant="acme")
    assert "admin_reset" not in {tool["name"] for tool in tools["result"]["tools"]}
    assert "echo" in {tool["name"] for tool in tools["result"]["tools"]}
    prompts = await wire(server, "prompts/list", tenant="acme")
    assert [prompt["name"] for prompt in prompts["result"]["prompts"]] == ["summary"]
    templates = await wire(server, "resources/templates/list", tenant="acme")
    assert templates["result"]["resourceTemplates"] == []
    root = await wire(server, "tools/list", tenant="root")
    assert "admin_reset" in {tool["name"] for tool in root["result"]["tools"]}


async def test_a_refused_call_reads_as_one_to_something_that_does_not_exist(caplog):
    server = build(Authorize(no_admin))
    caplog.set_level(logging.INFO, logger="mrtr")
    forbidden = await wire(server, "tools/call", {"name": "admin_reset", "arguments": {}}, tenant="acme")
    unknown = await wire(server, "tools/call", {"name": "admin_nosuch", "arguments": {}}, tenant="acme")
    assert forbidden["result"] == {"resultType": "complete", "isError": True, "_meta": forbidden["result"]["_meta"],
                                   "content": [{"type": "text", "text": 'Tool "admin_reset" is not available'}]}
    assert unknown["result"]["content"][0]["text"] == 'Tool "admin_nosuch" is not available'
    prompt = await wire(server, "prompts/get", {"name": "admin_prompt"}, tenant="acme")
    assert prompt["error"] == {"code": -32603, "message": 'Prompt "admin_prompt" is not available'}
    read = await wire(server, "resources/read", {"uri": "secret://42"}, tenant="acme")
    assert read["error"] == {"code": -32603, "message": "Resource secret://42 is not available"}  # not the template
    completion = await wire(server, "completion/complete", {"ref": {"type": "ref/prompt", "name": "admin_prompt"},
                                                            "argument": {"name": "x", "value": ""}}, tenant="acme")
    assert completion["error"]["message"] == 'Prompt "admin_prompt" is not available'
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]  # a refusal is no failure
    allowed = await wire(server, "tools/call", {"name": "admin_reset", "arguments": {}}, tenant="root")
    assert allowed["result"]["content"][0]["text"] == "reset"
    shape = await wire(server, "tools/call", {"arguments": {}}, tenant="acme")  # no name: the method's -32602
    assert shape["error"]["code"] == -32602


async def test_authorize_pages_keep_their_cursor_and_an_async_rule_reads_the_request():
    async def only_summary(request: Incoming, component: Component) -> bool:
        await trio.lowlevel.checkpoint()
        return component.kind != "tool" or component.name in ("echo", "rates")

    server = build(Authorize(only_summary), page_size=3)
    first = await wire(server, "tools/list")
    names = [tool["name"] for tool in first["result"]["tools"]]
    assert "nextCursor" in first["result"] and set(names) <= {"echo", "rates"}
    seen = list(names)
    cursor = first["result"].get("nextCursor")
    while cursor:
        page = await wire(server, "tools/list", {"cursor": cursor})
        seen += [tool["name"] for tool in page["result"]["tools"]]
        cursor = page["result"].get("nextCursor")
    assert sorted(seen) == ["echo", "rates"]

    def not_a_bool(request: Incoming, component: Component) -> Any:
        return "yes"

    broken = build(Authorize(not_a_bool))
    failed = await wire(broken, "tools/call", {"name": "echo", "arguments": {"words": "a"}})
    assert failed["result"]["isError"] is True and "yes" not in failed["result"]["content"][0]["text"]


async def test_authorize_in_a_legacy_session_gives_that_eras_shapes():
    server = build(Authorize(no_admin), principal=None)
    session = Session(server)
    await session.open()
    listed = await session.result("tools/list", {})
    assert "admin_reset" not in {tool["name"] for tool in listed["tools"]}
    forbidden = await session.result("tools/call", {"name": "admin_reset", "arguments": {}})
    assert forbidden == {"content": [{"type": "text", "text": 'Tool "admin_reset" is not available'}], "isError": True}
    error = await session.error("resources/read", {"uri": "secret://1"})
    assert error == {"code": -32603, "message": "Resource secret://1 is not available"}
    subscribe = await session.error("resources/subscribe", {"uri": "secret://1"})
    assert subscribe["message"] == "Resource secret://1 is not available"


def test_refused_needs_words_for_the_caller():
    view = Incoming("tools/call", {"name": "x"}, principal=None, auth=None, era="legacy", client_capabilities={})
    assert refused(view, "no") == {"content": [{"type": "text", "text": "no"}], "isError": True}
    with pytest.raises(TypeError):
        refused(view, "")


# -- Cache ---------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_read_only_tool_is_answered_from_the_cache_per_principal_and_arguments():
    clock = Clock()
    cache = Cache(ttl=30, clock=clock)
    server = build(Timing(), cache)
    calls = server.calls  # type: ignore[attr-defined]
    first = await respond(server, "tools/call", {"name": "rates", "arguments": {"currency": "EUR"}}, tenant="acme")
    again = await respond(server, "tools/call", {"name": "rates", "arguments": {"currency": "EUR"}}, tenant="acme")
    assert first.message["result"]["content"] == again.message["result"]["content"] == \
        [{"type": "text", "text": "EUR:1"}]
    assert calls["rates"] == 1 and (first.notes or {})["cache"] == "miss" and (again.notes or {})["cache"] == "hit"
    await wire(server, "tools/call", {"name": "rates", "arguments": {"currency": "USD"}}, tenant="acme")
    await wire(server, "tools/call", {"name": "rates", "arguments": {"currency": "EUR"}}, tenant="globex")
    assert calls["rates"] == 3  # other arguments, another principal: their own entries
    clock.now += 31
    expired = await wire(server, "tools/call", {"name": "rates", "arguments": {"currency": "EUR"}}, tenant="acme")
    assert expired["result"]["content"][0]["text"] == "EUR:4"


async def test_only_tools_marked_safe_are_cached_and_never_their_errors():
    server = build(Cache(ttl=30, tools=["echo"]))
    calls = server.calls  # type: ignore[attr-defined]
    for _ in range(2):
        await wire(server, "tools/call", {"name": "set_limit", "arguments": {"amount": 5}})  # idempotent only
        failed = await wire(server, "tools/call", {"name": "flaky", "arguments": {"n": 1}})
    assert calls["set_limit"] == 2 and calls["flaky"] == 2
    assert failed["result"]["content"][0]["text"] == "try again (2)"
    named = Counting()
    server = build(Cache(ttl=30, tools=["echo"], read_only=False), named)
    for _ in range(2):
        await wire(server, "tools/call", {"name": "echo", "arguments": {"words": "a"}})
        await wire(server, "tools/call", {"name": "rates", "arguments": {"currency": "EUR"}})
    assert named.count("tools/call", "echo") == 1 and named.count("tools/call", "rates") == 2


async def test_listings_are_cached_until_their_ttl_or_clear():
    clock = Clock()
    cache = Cache(ttl=10, clock=clock)
    below = Counting()
    server = build(cache, below)
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
        first = await wire(server, method)
        second = await wire(server, method)
        assert first["result"] == second["result"] and below.count(method) == 1
    await wire(server, "tools/list", {"cursor": None})  # other params: another entry (a null cursor included)
    assert below.count("tools/list") == 2
    cache.clear()
    await wire(server, "tools/list")
    clock.now += 11
    await wire(server, "tools/list")
    assert below.count("tools/list") == 4
    unlisted = build(Cache(ttl=10, listings=False), below := Counting())
    await wire(unlisted, "tools/list")
    await wire(unlisted, "tools/list")
    assert below.count("tools/list") == 2


async def test_a_round_carrying_answers_a_question_and_a_task_are_never_cached():
    server = build(Cache(ttl=30), store_url="memory:")
    calls = server.calls  # type: ignore[attr-defined]
    params = {"name": "lookup", "arguments": {"city": "Paris"}}
    for unit in ("celsius", "kelvin"):
        asked = await wire(server, "tools/call", params, capabilities=ELICIT)
        assert asked["result"]["resultType"] == "input_required"
        final = answered(asked, params, {"unit": unit})
        done = await wire(server, "tools/call", final, capabilities=ELICIT)
        assert done["result"]["content"][0]["text"] == f"Paris in {unit}"  # the user's answer, never another's
        retried = await respond(server, "tools/call", final, capabilities=ELICIT)  # the same round again
        assert retried.message["result"]["content"] == done["result"]["content"] and retried.notes is None
    assert calls["lookup"] == 6  # each round ran its handler: none was answered from the cache
    async with server.running():
        for _ in range(2):
            created = await wire(server, "tools/call", {"name": "report", "arguments": {"n": 1}}, capabilities=TASKS)
            assert created["result"]["resultType"] == "task"
        await until(lambda: calls.get("report", 0), lambda count: count == 2)


async def test_a_legacy_call_that_asked_is_not_kept_and_one_that_did_not_is():
    server = build(Cache(ttl=30), principal=None)
    calls = server.calls  # type: ignore[attr-defined]
    session = Session(server)
    await session.open()
    for unit in ("celsius", "kelvin"):
        result = await session.call("lookup", {"city": "Paris"}, answer=lambda request, unit=unit: {
            "action": "accept", "content": {"unit": unit}})
        assert text(result) == f"Paris in {unit}"  # asked again: the first answer was not kept
    assert calls["lookup"] == 2
    for _ in range(2):
        assert text(await session.call("rates", {"currency": "EUR"})) == "EUR:1"
    assert calls["rates"] == 1
    modern = await wire(server, "tools/call", {"name": "rates", "arguments": {"currency": "EUR"}})
    assert calls["rates"] == 2  # an era of its own: its result has another shape
    assert modern["result"]["resultType"] == "complete"


async def test_the_cache_is_bounded_in_entries_and_bytes():
    cache = Cache(ttl=30, max_entries=2)
    server = build(cache)
    for currency in ("A", "B", "C"):
        await wire(server, "tools/call", {"name": "rates", "arguments": {"currency": currency}})
    assert cache.size[0] == 2
    await wire(server, "tools/call", {"name": "rates", "arguments": {"currency": "A"}})  # evicted: runs again
    assert server.calls["rates"] == 4  # type: ignore[attr-defined]
    small = Cache(ttl=30, max_item_bytes=50)
    server = build(small)
    await wire(server, "tools/list")
    assert small.size == (0, 0)  # a listing of eleven tools is more than 50 bytes: not kept
    with pytest.raises(ValueError):
        Cache(ttl=0)
    with pytest.raises(ValueError):
        Cache(ttl=1, max_entries=0)
    with pytest.raises(TypeError):
        Cache(ttl=1, tools="echo")


# -- the order: what each sees -------------------------------------------------------------------


async def test_authorize_before_cache_filters_a_cached_listing_for_each_caller():
    below = Counting()
    server = build(Authorize(no_admin), Cache(ttl=30), below)
    acme = await wire(server, "tools/list", tenant="acme")
    root = await wire(server, "tools/list", tenant="root")
    again = await wire(server, "tools/list", tenant="acme")
    assert "admin_reset" in {tool["name"] for tool in root["result"]["tools"]}
    assert acme["result"]["tools"] == again["result"]["tools"]
    assert "admin_reset" not in {tool["name"] for tool in again["result"]["tools"]}
    assert below.count("tools/list") == 2  # one per principal


async def test_a_component_is_what_the_request_names_as_registered():
    seen: list[Component | None] = []

    async def look(request: Incoming, call_next: Any) -> Any:
        seen.append(request.component)
        return await call_next(request)

    server = build(look)
    await wire(server, "tools/call", {"name": "rates", "arguments": {"currency": "EUR"}})
    await wire(server, "resources/read", {"uri": "secret://7"})
    await wire(server, "resources/read", {"uri": "config://app"})
    await wire(server, "completion/complete", {"ref": {"type": "ref/resource", "uri": "secret://{key}"},
                                               "argument": {"name": "key", "value": ""}})
    await wire(server, "tools/call", {"name": "nosuch", "arguments": {}})
    await wire(server, "tools/list")
    rates, template, static, completed, unknown, listing = seen
    assert (rates.kind, rates.name, rates.definition["annotations"]) == ("tool", "rates", {"readOnlyHint": True})
    assert (template.kind, template.name) == ("template", "secret://{key}")
    assert (static.kind, static.name) == ("resource", "config://app")
    assert (completed.kind, completed.name) == ("template", "secret://{key}")
    assert unknown is None and listing is None
    with pytest.raises(TypeError):
        rates.definition["name"] = "other"  # type: ignore[index]


def test_carries_answers_says_whether_the_clients_answers_are_in_the_request():
    def view(params: dict[str, Any], shared: Shared | None = None) -> Incoming:
        return Incoming("tools/call", params, principal=None, auth=None, era="modern", client_capabilities={},
                        shared=shared)

    assert not view({"name": "x"}).carries_answers
    assert view({"name": "x", "requestState": "t"}).carries_answers
    assert view({"name": "x", "inputResponses": {}}).carries_answers
    shared = Shared()
    live = view({"name": "x"}, shared)
    shared.asked = True
    assert live.carries_answers


async def test_a_refused_answer_still_notes_its_timing_in_process():
    # The notes of a refused request reach its line: RateLimit after Timing.
    server = build(Timing(), RateLimit(per_second=0.01, burst=1))
    async with server.running():
        await respond(server, "tools/list", tenant="acme")
        refused_ = await respond(server, "tools/list", tenant="acme")
    assert is_rate_limited(refused_) and "timing_ms" in (refused_.notes or {})

