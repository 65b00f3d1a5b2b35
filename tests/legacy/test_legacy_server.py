"""The legacy era of the server, in process: initialize, the utilities, results and errors per version.

Each test opens a session with ``Server.legacy.initialize`` and sends requests with
``Server.legacy.respond``, answering the server's own requests through a real
``PendingRequests`` (``conftest.Wire``). Every message the server sends (responses,
requests, notifications, the session's outlet) is validated against the 2025-11-25
schema, with the result's own ``$def``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio

from mrtr import Elicit, Form
from mrtr.server import Server
from mrtr.server.sessions import SessionRegistry

from ..conftest import until
from ..legacy_schema import RESULT_DEFS, validate_server_message
from .app import server as app
from .conftest import Wire, answering

EVERYTHING = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": True}}


class Session:
    """One session of a legacy client, in process."""

    def __init__(self, server: Server, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None,
                 principal_headers: dict[str, str] | None = None, client: str | None = None) -> None:
        self.server = server
        self.client = client  # the address a transport would name (None: served in this process)
        self.version = version
        self.capabilities = EVERYTHING if capabilities is None else capabilities
        self.headers = principal_headers or {}
        self.wire = Wire()
        self.notes: list[dict[str, Any]] = []
        self.outlet: list[dict[str, Any]] = []
        self.id: str | None = None
        self.next_id = 0

    def _note(self, into: list[dict[str, Any]]) -> Callable[[str, dict[str, Any]], None]:
        def notify(method: str, params: dict[str, Any]) -> None:
            message = {"jsonrpc": "2.0", "method": method, "params": params}
            validate_server_message(message)
            into.append(message)
        return notify

    async def open(self, **params: Any) -> dict[str, Any]:
        assert self.server.legacy is not None
        message = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": self.version, "capabilities": self.capabilities,
                              "clientInfo": {"name": "test", "version": "1"}, **params}}
        response, self.id = await self.server.legacy.initialize(message, outlet=self._note(self.outlet),
                                                                headers=self.headers, client=self.client)
        validate_server_message(response.message, "InitializeResult" if self.id else None)
        await self.server.legacy.notification(self.id, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                                              headers=self.headers)
        return response.message

    async def request(self, method: str, params: dict[str, Any] | None = None, *, status: int = 200) -> dict[str, Any]:
        assert self.server.legacy is not None
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        response = await self.server.legacy.respond(self.id, message, peer=self.wire.pending.peer(),
                                                    notify=self._note(self.notes), headers=self.headers)
        assert response.status == status
        validate_server_message(response.message, RESULT_DEFS.get(method) if "result" in response.message else None)
        return response.message

    async def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message = await self.request(method, params)
        assert "result" in message, message
        return message["result"]

    async def error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message = await self.request(method, params)
        assert "error" in message, message
        return message["error"]

    async def call(self, tool: str, arguments: dict[str, Any] | None = None,
                   answer: Callable[[dict[str, Any]], Any] | None = None, **params: Any) -> dict[str, Any]:
        async with trio.open_nursery() as nursery:
            if answer is not None:
                nursery.start_soon(answering, self.wire, answer)
            result = await self.result("tools/call", {"name": tool, "arguments": arguments or {}, **params})
            nursery.cancel_scope.cancel()
        return result


def text(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


def accept(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}


# -- initialize -----------------------------------------------------------------------------


@pytest.mark.parametrize("asked, answered", [
    ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
    ("2024-11-05", "2025-11-25"), ("2026-07-28", "2025-11-25"), ("1.0.0", "2025-11-25"),
])
async def test_initialize_negotiates_as_the_lifecycle_says(asked, answered):
    opened = await Session(app, asked).open()
    result = opened["result"]
    assert result["protocolVersion"] == answered
    assert result["capabilities"] == {"tools": {"listChanged": True}, "prompts": {"listChanged": True},
                                      "resources": {"listChanged": True, "subscribe": True}, "logging": {},
                                      "completions": {}}
    assert result["instructions"] == "Both eras, one set of handlers."
    expected = {"name": "legacy-fixture", "version": "1.2.3"}
    if answered != "2025-03-26":
        expected["title"] = "Legacy fixture"  # Implementation.title is 2025-06-18 and later
    assert result["serverInfo"] == expected


@pytest.mark.parametrize("params, problem", [
    ({"protocolVersion": None}, "Unsupported protocol version"),
    ({"protocolVersion": 20251125}, "Unsupported protocol version"),
    ({"capabilities": []}, "capabilities must be an object"),
    ({"clientInfo": {"name": "x"}}, "clientInfo needs string name and version"),
    # what a session would keep for its life: a few kilobytes of JSON that are a million objects
    ({"capabilities": {"experimental": {"x": [{}] * 300}}}, "capabilities and clientInfo are too large"),
    ({"capabilities": {"experimental": {"x": "y" * 17_000}}}, "capabilities and clientInfo are too large"),
    ({"clientInfo": {"name": "x", "version": "1", "extra": "y" * 17_000}}, "capabilities and clientInfo are too large"),
])
async def test_a_malformed_initialize_is_invalid_params_and_opens_nothing(params, problem):
    session = Session(app)
    registry = app.legacy.sessions  # type: ignore[union-attr]
    before = len(registry)
    opened = await session.open(**params)
    assert opened["error"]["code"] == -32602 and problem in opened["error"]["message"]
    assert session.id is None and len(registry) == before
    if "protocolVersion" in params:
        assert opened["error"]["data"]["supported"] == ["2025-11-25", "2025-06-18", "2025-03-26"]


async def test_a_declaration_within_the_bound_opens_a_session():
    session = Session(app)
    opened = await session.open(capabilities={"experimental": {"x": [{}] * 200, "y": "z" * 12_000}},
                                clientInfo={"name": "x", "version": "1"})
    assert "result" in opened and session.id is not None


async def test_capabilities_follow_what_is_registered_and_never_name_modern_features():
    bare = Server("bare", secret=b"b" * 32)

    @bare.tool
    def only(x: int) -> int:
        """Just a tool."""
        return x

    result = (await Session(bare).open())["result"]
    assert result["capabilities"] == {"tools": {"listChanged": True}, "logging": {}}
    assert "instructions" not in result


async def test_ping_answers_exactly_an_empty_object_before_and_after_initialize():
    session = Session(app)
    assert await session.result("ping") == {}
    assert await session.result("ping", {}) == {}
    await session.open()
    assert await session.result("ping") == {}


async def test_before_initialize_only_ping_is_served():
    session = Session(app)
    error = await session.error("tools/list")
    assert error["code"] == -32600 and "before initialize" in error["message"]
    assert (await session.error("no/such/method"))["code"] == -32601
    await session.open()
    again = await session.error("initialize", {"protocolVersion": "2025-11-25"})
    assert again["code"] == -32600 and "already initialized" in again["message"]


@pytest.mark.parametrize("method", ["server/discover", "subscriptions/listen", "tasks/get", "tasks/cancel"])
async def test_modern_only_methods_do_not_exist_in_a_session(method):
    session = Session(app)
    await session.open()
    assert (await session.error(method, {}))["code"] == -32601


# -- logging ----------------------------------------------------------------------------------


async def test_set_level_answers_an_empty_object_and_filters_the_sessions_log():
    session = Session(app)
    await session.open()
    await session.call("chatty")
    assert [note["params"]["level"] for note in session.notes] == ["debug", "info", "error"]
    assert session.notes[1]["params"] == {"level": "info", "data": {"step": "working"}, "logger": "chatty"}
    assert await session.result("logging/setLevel", {"level": "warning"}) == {}
    session.notes.clear()
    await session.call("chatty")
    assert [note["params"]["level"] for note in session.notes] == ["error"]
    error = await session.error("logging/setLevel", {"level": "loud"})
    assert error["code"] == -32602


# -- lists ------------------------------------------------------------------------------------


async def test_lists_carry_nothing_only_the_modern_era_defines_and_page_with_cursors():
    paged = Server("paged", secret=b"p" * 32, page_size=2)
    for index in range(5):
        paged.tool(name=f"tool{index}", description=f"tool {index}")(lambda: "listed")
    session = Session(paged)
    await session.open()
    names, cursor = [], None
    while True:
        result = await session.result("tools/list", {"cursor": cursor} if cursor else {})
        assert set(result) <= {"tools", "nextCursor"}
        names += [tool["name"] for tool in result["tools"]]
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert names == [f"tool{index}" for index in range(5)]
    assert (await session.error("tools/list", {"cursor": "bogus"}))["code"] == -32602


async def test_every_list_validates_for_every_version():
    for version in ("2025-11-25", "2025-06-18", "2025-03-26"):
        session = Session(app, version)
        await session.open()
        tools = (await session.result("tools/list"))["tools"]
        prompts = (await session.result("prompts/list"))["prompts"]
        resources = (await session.result("resources/list"))["resources"]
        templates = (await session.result("resources/templates/list"))["resourceTemplates"]
        assert {tool["name"] for tool in tools} >= {"onboard", "ask_model", "profile", "batch"}
        assert [prompt["name"] for prompt in prompts] == ["interview"]
        assert [resource["uri"] for resource in resources] == ["test://static"]
        assert [template["uriTemplate"] for template in templates] == ["test://notes/{id}"]
        if version == "2025-03-26":  # no titles, no output schemas before 2025-06-18
            assert not any("outputSchema" in tool or "title" in tool for tool in tools)


# -- tools/call -------------------------------------------------------------------------------


async def test_a_conversation_runs_live_and_its_step_once():
    session = Session(app)
    await session.open()

    def answer(request: dict[str, Any]) -> Any:
        message = request["params"]["message"]
        if "Your name" in message:
            return accept({"name": "Ada"})
        if message == "Which plan?":
            assert request["params"]["requestedSchema"]["properties"]["plan"]["oneOf"][1] == {"const": "team",
                                                                                             "title": "Team"}
            return accept({"plan": "team"})
        if message.startswith("How do we reach"):
            return accept({"email": "ada@example.com"})
        return accept({"go": True})

    result = await session.call("onboard", {"company": "acme"}, answer)
    assert text(result) == "Ada on team (ada@example.com) at acme"
    assert set(result) == {"content"}
    asked = [request["params"]["message"] for request in session.wire.requests]
    assert asked == ["Welcome to acme! Your name?", "Which plan?", "How do we reach you?", "Shall we start?"]


async def test_on_2025_06_18_a_titled_choice_goes_out_as_enum_names():
    session = Session(app, "2025-06-18")
    await session.open()

    def answer(request: dict[str, Any]) -> Any:
        assert "mode" not in request["params"]
        properties = request["params"]["requestedSchema"]["properties"]
        if "plan" in properties:
            assert properties["plan"] == {"type": "string", "enum": ["free", "team", "enterprise"],
                                          "enumNames": ["Free", "Team", "Enterprise"]}
            return accept({"plan": "free"})
        if "go" in properties:
            assert properties["go"] == {"type": "boolean", "default": True}
            return {"action": "decline"}
        return accept({"name": "Ada"} if "name" in properties else {"email": "a@b.c"})

    assert text(await session.call("onboard", {"company": "x"}, answer)) == "Ada: not started"


async def test_progress_goes_to_the_requests_progress_token():
    session = Session(app)
    await session.open()
    result = await session.call("count", {"steps": 3}, lambda request: accept({"report": True}),
                                _meta={"progressToken": "p-1"})
    assert text(result) == "counted 3, report accept"
    progress = [note["params"] for note in session.notes if note["method"] == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [("p-1", 1, 3), ("p-1", 2, 3),
                                                                                  ("p-1", 3, 3)]
    assert (await session.error("tools/call", {"name": "count", "_meta": {"progressToken": True}}))["code"] == -32602


async def test_structured_content_only_when_it_is_an_object():
    for version in ("2025-11-25", "2025-03-26"):
        session = Session(app, version)
        await session.open()
        profile = await session.call("profile")
        numbers = await session.call("numbers")
        assert "structuredContent" not in numbers and text(numbers) == "[1, 2, 3]"
        if version == "2025-03-26":
            assert "structuredContent" not in profile
        else:
            assert profile["structuredContent"] == {"name": "Ada", "languages": ["en", "fr"]}


async def test_a_resource_link_becomes_text_on_2025_03_26():
    session = Session(app, "2025-03-26")
    await session.open()
    assert (await session.call("linked"))["content"] == [{"type": "text", "text": "see"},
                                                         {"type": "text", "text": "static: test://static"}]
    newer = Session(app)
    await newer.open()
    assert (await newer.call("linked"))["content"][1]["type"] == "resource_link"


async def test_a_failing_handler_is_a_tool_error_result_masked_as_in_the_modern_era():
    session = Session(app)
    await session.open()
    result = await session.call("broken", answer=lambda request: accept({"ready": True}))
    assert result["isError"] is True and "tool broken failed with an internal error (reference" in text(result)
    assert "database" not in text(result)
    public = await session.call("refuse", {"expense": 42}, answer=lambda request: accept({"sure": True}))
    assert public["isError"] is True and text(public) == "No expense 42 in your account"
    assert (await session.error("tools/call", {"name": "nope"}))["code"] == -32602


async def test_a_capability_the_session_lacks_is_a_tool_error_naming_it():
    session = Session(app, capabilities={"elicitation": {}})
    await session.open()
    result = await session.call("ask_model", {"topic": "tea"})
    assert result["isError"] is True and "sampling" in text(result) and "initialize" in text(result)
    assert text(result) == ("This call needs the client's sampling capability, which this session's initialize "
                            "did not declare")  # in words, not a Python dict
    assert session.wire.sent == []  # nothing was asked
    old = Session(app, "2025-03-26", capabilities=EVERYTHING)
    await old.open()
    refused = await old.call("polite")  # 2025-03-26 has no elicitation, whatever the client declared
    assert refused["isError"] is True and "elicitation" in text(refused)


async def test_a_capability_the_session_lacks_is_minus_32603_with_data_for_a_prompt_or_a_resource():
    session = Session(app, capabilities={})
    await session.open()
    prompt = await session.error("prompts/get", {"name": "interview", "arguments": {"role": "editor"}})
    assert prompt["code"] == -32603
    assert prompt["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    assert prompt["message"] == ("This call needs the client's elicitation capability (form), which this "
                                 "session's initialize did not declare")
    resource = await session.error("resources/read", {"uri": "test://notes/7"})
    assert resource["code"] == -32603 and resource["data"]["requiredCapabilities"]


async def test_a_task_only_tool_is_a_tool_error_in_a_session():
    session = Session(app)
    await session.open()
    result = await session.call("batch")
    assert result["isError"] is True and "task" in text(result)


async def test_an_answer_timeout_is_a_tool_error_and_the_handler_finally_runs():
    quick = Server("quick", secret=b"q" * 32, answer_timeout=0.2)
    cleaned = []

    @quick.tool
    def wait():
        """Ask and wait."""
        try:
            yield Elicit("Hello?", Form().boolean("ok"))
        finally:
            cleaned.append("finally")

    session = Session(quick)
    await session.open()
    result = await session.call("wait")
    assert result["isError"] is True and "within 0.2 s" in text(result)
    assert cleaned == ["finally"] and session.wire.cancels == [session.wire.requests[0]["id"]]


async def test_a_url_elicitation_has_its_id_and_its_completion():
    session = Session(app)
    await session.open()

    def answer(request: dict[str, Any]) -> Any:
        return {"action": "accept"} if request["params"]["mode"] == "url" else accept({"name": "Ada"})

    assert text(await session.call("sign_in", answer=answer)) == "signed in as Ada"
    url, _ = session.wire.requests
    assert url["params"]["url"] == "https://auth.example.com/sign-in?flow=42"
    assert session.notes == [{"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                              "params": {"elicitationId": url["params"]["elicitationId"]}}]


# -- prompts, resources, completion -------------------------------------------------------------


async def test_a_prompt_and_a_resource_read_ask_live_too():
    session = Session(app)
    await session.open()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answering, session.wire, lambda request: accept(
            {"level": "senior"} if "Seniority" in request["params"]["message"] else {"show": True}))
        prompt = await session.result("prompts/get", {"name": "interview", "arguments": {"role": "editor"}})
        read = await session.result("resources/read", {"uri": "test://notes/7"})
        nursery.cancel_scope.cancel()
    assert prompt["messages"][0]["content"]["text"] == "Interview a senior editor."
    assert read == {"contents": [{"uri": "test://notes/7", "text": "note 7", "mimeType": "text/plain"}]}


async def test_a_resource_that_does_not_exist_is_minus_32002_with_its_uri():
    session = Session(app)
    await session.open()
    error = await session.error("resources/read", {"uri": "test://missing"})
    assert error == {"code": -32002, "message": "Resource not found: test://missing", "data": {"uri": "test://missing"}}


async def test_completion_answers_without_modern_members():
    session = Session(app)
    await session.open()
    result = await session.result("completion/complete", {"ref": {"type": "ref/prompt", "name": "interview"},
                                                           "argument": {"name": "role", "value": "e"}})
    assert result == {"completion": {"values": ["engineer", "editor"]}}


# -- subscriptions and list changes -------------------------------------------------------------


async def test_resource_updates_reach_only_the_sessions_subscribed_and_list_changes_reach_all():
    watcher, other = Session(app), Session(app)
    await watcher.open()
    await other.open()
    assert await watcher.result("resources/subscribe", {"uri": "test://static"}) == {}
    app.notify_resource_updated("test://static")
    app.notify_resource_updated("test://elsewhere")
    app.notify_tools_changed()
    assert watcher.outlet == [
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "test://static"}},
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}},
    ]
    assert other.outlet == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}]
    assert await watcher.result("resources/unsubscribe", {"uri": "test://static"}) == {}
    watcher.outlet.clear()
    app.notify_resource_updated("test://static")
    assert watcher.outlet == []
    missing = await watcher.error("resources/subscribe", {"uri": "test://missing"})
    assert missing["code"] == -32002 and missing["data"] == {"uri": "test://missing"}
    assert (await watcher.error("resources/subscribe", {}))["code"] == -32602


async def test_a_list_change_of_a_family_the_server_does_not_offer_goes_nowhere():
    bare = Server("bare", secret=b"b" * 32)
    bare.tool(name="t", description="t")(lambda: 1)
    session = Session(bare)
    await session.open()
    bare.notify_prompts_changed()
    bare.notify_tools_changed()
    assert [note["method"] for note in session.outlet] == ["notifications/tools/list_changed"]


# -- principals and sessions --------------------------------------------------------------------


async def test_a_session_belongs_to_the_principal_that_opened_it():
    guarded = Server("guarded", secret=b"g" * 32, principal=lambda info: info.headers.get("x-user"))
    guarded.tool(name="whoami", description="who")(lambda: "me")
    alice = Session(guarded, principal_headers={"x-user": "alice"})
    await alice.open()
    assert guarded.legacy is not None
    assert await guarded.legacy.version_of(alice.id or "", headers={"x-user": "alice"}) == "2025-11-25"
    assert await guarded.legacy.version_of(alice.id or "", headers={"x-user": "mallory"}) is None
    mallory = Session(guarded, principal_headers={"x-user": "mallory"})
    mallory.id = alice.id  # another principal presenting alice's session id
    error = await mallory.error("tools/list")
    assert error["code"] == -32600 and "unknown or expired session" in error["message"]
    assert not await guarded.legacy.close(alice.id or "", headers={"x-user": "mallory"})
    assert await guarded.legacy.close(alice.id or "", headers={"x-user": "alice"})
    assert (await alice.error("tools/list"))["code"] == -32600


async def test_a_flood_of_initialize_from_one_client_leaves_other_sessions_alone():
    crowded = Server("crowded", secret=b"c" * 32, sessions=SessionRegistry(max_sessions=50, max_per_client=3))
    crowded.tool(name="t", description="t")(lambda: "ok")
    assert crowded.legacy is not None
    steady = Session(crowded)
    response, steady.id = await crowded.legacy.initialize(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}}}, outlet=lambda *args: None,
        client="10.0.0.9")
    for index in range(200):
        response, session_id = await crowded.legacy.initialize(
            {"jsonrpc": "2.0", "id": index, "method": "initialize",
             "params": {"protocolVersion": "2025-11-25", "capabilities": {}}}, outlet=lambda *args: None,
            client="10.0.0.1")
        assert session_id is not None
    assert len(crowded.legacy.sessions) == 4
    assert text(await steady.call("t")) == "ok"


async def test_a_busy_server_refuses_initialize_with_a_clear_error_and_503():
    full = Server("full", secret=b"f" * 32, sessions=SessionRegistry(max_sessions=1))
    full.tool(name="hold", description="hold")(app.catalog.tools["hold"].fn)
    first = Session(full)
    await first.open()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(first.call, "hold", {"marker": "m"})
        await first.wire.wait_requests(1)  # the first session is busy now
        assert full.legacy is not None
        response, session_id = await full.legacy.initialize(
            {"jsonrpc": "2.0", "id": 5, "method": "initialize",
             "params": {"protocolVersion": "2025-11-25", "capabilities": {}}}, outlet=lambda *args: None)
        assert session_id is None and response.status == 503
        validate_server_message(response.message)
        assert response.message["error"]["code"] == -32603 and "Server busy" in response.message["error"]["message"]
        first.wire.answer(first.wire.requests[0], {"action": "decline"})


async def test_the_modern_era_alone_has_no_legacy_side():
    modern = Server("modern", secret=b"m" * 32, eras="modern")
    assert modern.legacy is None and modern.eras == ("modern",)
    assert Server("both", secret=b"b" * 32, eras=["modern", "legacy"]).eras == ("modern", "legacy")
    for wrong in ("legacy", ["legacy"], "everything"):
        with pytest.raises(ValueError, match="eras"):
            Server("x", eras=wrong)
    with pytest.raises(ValueError, match="legacy era"):
        Server("x", eras="modern", answer_timeout=5)


async def test_modern_only_codes_never_reach_a_session():
    strict = Server("strict", secret=b"s" * 32)

    @strict.prompt
    def raises():
        """A prompt raising the modern missing-capability error itself."""
        from mrtr import MissingRequiredClientCapability
        raise MissingRequiredClientCapability("needs more", {"sampling": {}})

    session = Session(strict)
    await session.open()
    error = await session.error("prompts/get", {"name": "raises"})
    assert error["code"] == -32603


async def test_idle_sessions_expire_and_are_then_unknown():
    clock_now = [0.0]
    expiring = Server("expiring", secret=b"e" * 32,
                      sessions=SessionRegistry(idle_timeout=30, clock=lambda: clock_now[0]))
    expiring.tool(name="t", description="t")(lambda: "ok")
    session = Session(expiring)
    await session.open()
    assert text(await session.call("t")) == "ok"
    clock_now[0] += 31
    assert (await session.error("tools/list"))["code"] == -32600
    await until(lambda: len(expiring.legacy.sessions) == 0)  # type: ignore[union-attr]
