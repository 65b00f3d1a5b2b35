"""Stateless dispatch: the method table, _meta checks, result shaping, MRTR through the server."""

from __future__ import annotations

import base64
import threading
from typing import Annotated

import msgspec
import pytest

from mrtr import Elicit, Form, Sample
from mrtr.core import content
from mrtr.core import wire
from mrtr.core.jsonrpc import parse_message
from mrtr.transports.shared import run_in_thread, thread_safe
from mrtr.server import Header, RequestInfo, Server
from mrtr.core.codec import RequestStateCodec
from mrtr.testing import accept

from .conftest import meta
from .wire_schema import validate, validate_message

META = meta({"elicitation": {}, "sampling": {}, "roots": {}},
            **{wire.META_CLIENT_INFO: {"name": "test-client", "version": "1.0"}})


class Weather(msgspec.Struct):
    city: str
    celsius: float


def build() -> Server:
    server = Server("test-server", "2.0", instructions="Be nice.", secret=b"s" * 32,
                    principal=lambda info: info.headers.get("x-user"), mask_errors=False)

    @server.tool(annotations={"readOnlyHint": True})
    def echo(text: str, times: int = 1) -> str:
        """Repeat text.

        More words that are not part of the description.
        """
        return text * times

    @server.tool
    def weather(city: str) -> Weather:
        return Weather(city, 21.5)

    @server.tool
    def as_dict() -> dict:
        return {"a": 1}

    @server.tool
    def image() -> list:
        return [content.text("look"), content.image(b"\x89PNG", "image/png")]

    @server.tool
    def passthrough():
        return wire.CallToolResult(content=[wire.TextContent(text="raw")], is_error=True)

    @server.tool
    def nothing() -> None:
        return None

    @server.tool
    def broken():
        raise RuntimeError("kaput")

    @server.tool
    def deliberate():
        from mrtr.core.errors import InvalidParams

        raise InvalidParams("no such city")

    @server.tool
    def ask(ctx, plan: str):
        ctx.progress(1, total=2, message="start")
        answer = yield Elicit("Email?", Form().string("email", format="email"))
        ctx.progress(2, total=2)
        return f"{answer.content['email']}:{plan}:{ctx.principal}"

    @server.tool
    def regress(ctx):
        ctx.progress(5)
        ctx.progress(3)

    @server.tool
    def chatty(ctx):
        ctx.log("debug", "fine detail")
        ctx.log("warning", {"disk": "low"}, logger="disk")
        return "ok"

    @server.tool
    def needs_sampling(ctx):
        reply = yield Sample("hi", max_tokens=5)
        return reply.content.text

    @server.tool
    def routed(region: Annotated[str, Header("Region")], count: Annotated[int, Header("Count")] = 1) -> str:
        return f"{region}:{count}"

    @server.prompt
    def greet(who: Annotated[str, msgspec.Meta(description="Who to greet")], mood: str = "happy"):
        """A greeting."""
        return f"Hello {who}, you seem {mood}"

    @server.prompt
    def ask_context(ctx):
        answer = yield Elicit("What context?", Form().string("context"))
        return [f"Context: {answer.content['context']}", {"role": "assistant", "content": {"type": "text", "text": "ok"}}]

    @server.prompt
    def failing():
        raise ValueError("prompt broke")

    @server.resource("test://static-text", mime_type="text/plain", description="Static text")
    def static_text():
        return "static"

    @server.resource("test://static-binary", mime_type="image/png")
    def static_binary():
        return b"\x00\x01"

    @server.resource("file:///gated")
    def gated():
        answer = yield Elicit("Grant?", Form())
        return "granted" if answer.accepted else "denied"

    @server.resource_template("test://template/{id}/data", mime_type="application/json")
    def template(id: str):
        return f'{{"id": "{id}"}}'

    @server.completion
    def complete(ref, argument, context):
        return [value for value in ("python", "pytorch", "rust") if value.startswith(argument.get("value", ""))]

    return server


@pytest.fixture
def server() -> Server:
    return build()


async def rpc(server, method, params=None, *, meta=META, request_id=1, headers=None, notify=None, result_def=None):
    params = dict(params or {})
    if meta is not None:
        params["_meta"] = meta
    # Passed as every transport passes them: thread-mode servers run sync handlers in threads.
    message = await server.handle({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
                                  headers=headers, notify=thread_safe(notify) if notify else None,
                                  run_sync=run_in_thread)
    validate_message(message, result_def=result_def)
    return message


def result_of(message):
    assert "result" in message, message
    return message["result"]


def error_of(message):
    assert "error" in message, message
    return message["error"]


# -- envelope ---------------------------------------------------------------------------


async def test_discover_derives_capabilities_and_carries_caching_hints(server):
    result = result_of(await rpc(server, "server/discover", result_def="DiscoverResult"))
    assert result["supportedVersions"] == ["2026-07-28"]
    assert set(result["capabilities"]) == {"tools", "prompts", "resources", "completions", "logging"}
    assert result["instructions"] == "Be nice."
    assert result["resultType"] == "complete" and result["ttlMs"] >= 0 and result["cacheScope"] == "public"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "test-server", "version": "2.0"}


async def test_a_server_without_prompts_does_not_offer_them():
    bare = Server("bare", secret=b"s" * 32)

    @bare.tool
    def one() -> str:
        return "1"

    result = result_of(await rpc(bare, "server/discover"))
    assert "prompts" not in result["capabilities"] and "resources" not in result["capabilities"]
    for method in ("prompts/list", "prompts/get", "resources/list", "resources/read", "completion/complete"):
        error = error_of(await rpc(bare, method, {"name": "x", "uri": "x"}))
        assert error["code"] == -32601


@pytest.mark.parametrize(
    "meta, match",
    [
        (None, "Missing required _meta"),
        ({}, "protocolVersion"),
        ({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}, "clientCapabilities"),
        ({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": []}, "clientCapabilities"),
        ({**META, "io.modelcontextprotocol/clientInfo": {"name": "x"}}, "clientInfo"),
        ({**META, "io.modelcontextprotocol/logLevel": "loud"}, "logLevel"),
        ({**META, "progressToken": 1.5}, "progressToken"),
    ],
)
async def test_a_malformed_envelope_is_invalid_params(server, meta, match):
    error = error_of(await rpc(server, "tools/list", meta=meta))
    assert error["code"] == -32602 and match in error["message"]


async def test_client_info_is_optional(server):
    meta = {key: value for key, value in META.items() if key != "io.modelcontextprotocol/clientInfo"}
    assert "result" in await rpc(server, "tools/list", meta=meta)


async def test_an_unsupported_version_lists_the_supported_ones(server):
    error = error_of(await rpc(server, "tools/list", meta={**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}))
    assert error["code"] == -32022
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "resources/subscribe", "tasks/get", "nope"])
async def test_unknown_and_removed_methods_are_method_not_found_with_the_id_kept(server, method):
    message = await rpc(server, method, request_id="abc", meta=None)
    assert message["id"] == "abc" and error_of(message)["code"] == -32601


async def test_initialize_carrying_the_modern_claim_is_a_removed_method(server):
    message = await rpc(server, "initialize", request_id=5)
    assert message["id"] == 5 and error_of(message)["code"] == -32601


@pytest.mark.parametrize("params, requested", [({"protocolVersion": "2025-06-18"}, "2025-06-18"), (None, "")])
async def test_initialize_on_the_modern_dispatch_names_the_versions_it_speaks(server, params, requested):
    """A legacy client cannot fall forward: the one error it can show its user says what the server speaks."""
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", **({"params": params} if params else {})}
    response = await server.respond(message)
    validate_message(response.message)
    assert response.status == 400 and response.message["id"] == 0
    assert error_of(response.message)["code"] == -32022
    assert error_of(response.message)["data"] == {"supported": ["2026-07-28"], "requested": requested}


async def test_every_result_carries_result_type_and_server_info(server):
    for method, params in [
        ("tools/list", {}), ("prompts/list", {}), ("resources/list", {}), ("resources/templates/list", {}),
        ("tools/call", {"name": "echo", "arguments": {"text": "a"}}),
        ("prompts/get", {"name": "greet", "arguments": {"who": "x"}}),
        ("resources/read", {"uri": "test://static-text"}),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "py"}}),
    ]:
        result = result_of(await rpc(server, method, params))
        assert result["resultType"] == "complete", method
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "test-server", method


# -- lists ------------------------------------------------------------------------------


async def test_tools_list_describes_schemas_headers_and_output(server):
    result = result_of(await rpc(server, "tools/list", result_def="ListToolsResult"))
    tools = {tool["name"]: tool for tool in result["tools"]}
    assert tools["echo"]["description"] == "Repeat text."
    assert tools["echo"]["annotations"] == {"readOnlyHint": True}
    assert tools["echo"]["inputSchema"] == {
        "type": "object",
        "properties": {"text": {"type": "string"}, "times": {"type": "integer", "default": 1}},
        "required": ["text"],
    }
    assert tools["weather"]["outputSchema"]["properties"]["celsius"] == {"type": "number"}
    assert tools["routed"]["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"
    assert tools["routed"]["inputSchema"]["properties"]["count"]["x-mcp-header"] == "Count"
    assert server.header_parameters("routed") == {"region": "region", "count": "count"}
    assert "outputSchema" not in tools["echo"]


async def test_lists_paginate_with_opaque_cursors():
    paged = build()
    paged.page_size = 4
    seen, cursor, pages = [], None, 0
    while True:
        params = {"cursor": cursor} if cursor else {}
        result = result_of(await rpc(paged, "tools/list", params, result_def="ListToolsResult"))
        seen += [tool["name"] for tool in result["tools"]]
        pages += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert seen == list(build().catalog.tools) and pages == 4


@pytest.mark.parametrize("cursor", ["garbage!", "", 5, base64.urlsafe_b64encode(b"o999").decode()])
async def test_an_invalid_cursor_is_invalid_params(server, cursor):
    error = error_of(await rpc(server, "tools/list", {"cursor": cursor}))
    assert error == {"code": -32602, "message": "Invalid cursor"}


async def test_prompt_resource_and_template_lists(server):
    prompts = result_of(await rpc(server, "prompts/list", result_def="ListPromptsResult"))["prompts"]
    greet = next(prompt for prompt in prompts if prompt["name"] == "greet")
    assert greet["arguments"] == [{"name": "who", "description": "Who to greet", "required": True}, {"name": "mood"}]
    resources = result_of(await rpc(server, "resources/list", result_def="ListResourcesResult"))["resources"]
    assert {"uri": "test://static-text", "name": "static_text", "description": "Static text", "mimeType": "text/plain"} in resources
    templates = result_of(await rpc(server, "resources/templates/list", result_def="ListResourceTemplatesResult"))
    assert templates["resourceTemplates"][0]["uriTemplate"] == "test://template/{id}/data"


# -- tools/call -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, arguments, expected",
    [
        ("echo", {"text": "ab", "times": 2}, {"content": [{"type": "text", "text": "abab"}]}),
        ("weather", {"city": "Oslo"}, {"content": [{"type": "text", "text": '{"city":"Oslo","celsius":21.5}'}],
                                       "structuredContent": {"city": "Oslo", "celsius": 21.5}}),
        ("as_dict", {}, {"content": [{"type": "text", "text": '{"a":1}'}], "structuredContent": {"a": 1}}),
        ("image", {}, {"content": [{"type": "text", "text": "look"}, {"type": "image", "data": "iVBORw==", "mimeType": "image/png"}]}),
        ("passthrough", {}, {"content": [{"type": "text", "text": "raw"}], "isError": True}),
        ("nothing", {}, {"content": []}),
    ],
)
async def test_tool_results_are_shaped(server, name, arguments, expected):
    result = result_of(await rpc(server, "tools/call", {"name": name, "arguments": arguments}, result_def="CallToolResult"))
    result.pop("_meta")
    assert result == {**expected, "resultType": "complete"}


async def test_a_tool_exception_is_an_is_error_result(server):
    result = result_of(await rpc(server, "tools/call", {"name": "broken"}, result_def="CallToolResult"))
    assert result["isError"] is True and result["content"] == [{"type": "text", "text": "RuntimeError: kaput"}]


async def test_a_protocol_error_raised_by_a_tool_is_sent_as_that_error(server):
    assert error_of(await rpc(server, "tools/call", {"name": "deliberate"})) == {"code": -32602, "message": "no such city"}


@pytest.mark.parametrize(
    "params, message",
    [
        ({"name": "missing"}, "Unknown tool: missing"),
        ({}, 'tools/call needs a string "name"'),
        ({"name": "echo", "arguments": {}}, "Invalid arguments for tool echo: Object missing required field `text`"),
        ({"name": "echo", "arguments": {"text": 5}}, "Invalid arguments for tool echo: Expected `str`, got `int` - at `$.text`"),
        ({"name": "echo", "arguments": [1]}, "Invalid arguments for tool echo: arguments must be an object"),
    ],
)
async def test_bad_tool_calls_are_invalid_params(server, params, message):
    assert error_of(await rpc(server, "tools/call", params)) == {"code": -32602, "message": message}


async def test_a_full_conversation_through_the_server_binds_the_principal(server):
    first = result_of(await rpc(server, "tools/call", {"name": "ask", "arguments": {"plan": "pro"}},
                                headers={"x-user": "alice"}, result_def="InputRequiredResult"))
    assert first["resultType"] == "input_required" and "ttlMs" not in first and "cacheScope" not in first
    assert first["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "test-server"
    retry = {"name": "ask", "arguments": {"plan": "pro"}, "requestState": first["requestState"],
             "inputResponses": {"elicit-1": accept(email="a@b.io")}}
    error = error_of(await rpc(server, "tools/call", retry, headers={"x-user": "mallory"}))
    assert error["code"] == -32602 and "different principal" in error["message"]
    done = result_of(await rpc(server, "tools/call", retry, headers={"x-user": "alice"}, result_def="CallToolResult"))
    assert done["content"][0]["text"] == "a@b.io:pro:alice"


async def test_a_missing_capability_is_an_error_not_a_result(server):
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": {}}
    error = error_of(await rpc(server, "tools/call", {"name": "needs_sampling"}, meta=meta))
    assert error["code"] == -32021 and error["data"] == {"requiredCapabilities": {"sampling": {}}}


# -- notifications ----------------------------------------------------------------------------


async def test_progress_goes_to_notify_only_with_a_progress_token(server):
    sent = []
    notify = lambda method, params: sent.append((method, params))  # noqa: E731
    await rpc(server, "tools/call", {"name": "ask", "arguments": {"plan": "x"}}, notify=notify)
    assert sent == []
    await rpc(server, "tools/call", {"name": "ask", "arguments": {"plan": "x"}}, notify=notify,
              meta={**META, "progressToken": "tok"})
    assert sent == [("notifications/progress", {"progressToken": "tok", "progress": 1, "total": 2, "message": "start"})]
    for method, params in sent:
        validate({"jsonrpc": "2.0", "method": method, "params": params}, "ProgressNotification")


async def test_progress_that_does_not_increase_fails_the_tool(server):
    result = result_of(await rpc(server, "tools/call", {"name": "regress"}, meta={**META, "progressToken": 1}, notify=lambda *a: None))
    assert result["isError"] is True and "strictly increase" in result["content"][0]["text"]


async def test_log_messages_only_with_a_log_level_and_at_or_above_it(server):
    sent = []
    notify = lambda method, params: sent.append((method, params))  # noqa: E731
    await rpc(server, "tools/call", {"name": "chatty"}, notify=notify)
    assert sent == []
    await rpc(server, "tools/call", {"name": "chatty"}, notify=notify, meta={**META, "io.modelcontextprotocol/logLevel": "info"})
    assert sent == [("notifications/message", {"level": "warning", "data": {"disk": "low"}, "logger": "disk"})]
    validate({"jsonrpc": "2.0", "method": sent[0][0], "params": sent[0][1]}, "LoggingMessageNotification")


# -- prompts, resources, completion -------------------------------------------------------


async def test_prompts_get(server):
    result = result_of(await rpc(server, "prompts/get", {"name": "greet", "arguments": {"who": "Ada"}}, result_def="GetPromptResult"))
    assert result["messages"] == [{"role": "user", "content": {"type": "text", "text": "Hello Ada, you seem happy"}}]
    assert result["description"] == "A greeting."


@pytest.mark.parametrize(
    "params, code, message",
    [
        ({"name": "nope"}, -32602, "Unknown prompt: nope"),
        ({"name": "greet"}, -32602, "Invalid arguments for prompt greet: missing required argument 'who'"),
        ({"name": "greet", "arguments": {"who": 1}}, -32602, "Invalid arguments for prompt greet: arguments must map names to strings"),
        ({"name": "failing"}, -32603, "Internal error: ValueError: prompt broke"),
    ],
)
async def test_prompt_errors(server, params, code, message):
    assert error_of(await rpc(server, "prompts/get", params)) == {"code": code, "message": message}


async def test_a_prompt_elicits_across_two_round_trips(server):
    first = result_of(await rpc(server, "prompts/get", {"name": "ask_context"}, result_def="InputRequiredResult"))
    done = result_of(await rpc(server, "prompts/get", {"name": "ask_context", "requestState": first["requestState"],
                                                       "inputResponses": {"elicit-1": accept(context="runbook")}},
                               result_def="GetPromptResult"))
    assert done["messages"][0]["content"]["text"] == "Context: runbook"


async def test_resources_read_text_binary_template_and_missing(server):
    text = result_of(await rpc(server, "resources/read", {"uri": "test://static-text"}, result_def="ReadResourceResult"))
    assert text["contents"] == [{"uri": "test://static-text", "text": "static", "mimeType": "text/plain"}]
    assert text["ttlMs"] == 0 and text["cacheScope"] == "public"
    binary = result_of(await rpc(server, "resources/read", {"uri": "test://static-binary"}, result_def="ReadResourceResult"))
    assert binary["contents"] == [{"uri": "test://static-binary", "blob": "AAE=", "mimeType": "image/png"}]
    templated = result_of(await rpc(server, "resources/read", {"uri": "test://template/123/data"}))
    assert templated["contents"][0]["text"] == '{"id": "123"}'
    missing = error_of(await rpc(server, "resources/read", {"uri": "test://nonexistent"}))
    assert missing == {"code": -32602, "message": "Resource not found: test://nonexistent", "data": {"uri": "test://nonexistent"}}


async def test_a_resource_elicits(server):
    first = result_of(await rpc(server, "resources/read", {"uri": "file:///gated"}, result_def="InputRequiredResult"))
    done = result_of(await rpc(server, "resources/read", {"uri": "file:///gated", "requestState": first["requestState"],
                                                          "inputResponses": {"elicit-1": accept()}}))
    assert done["contents"][0]["text"] == "granted"


async def test_completion(server):
    result = result_of(await rpc(server, "completion/complete", {"ref": {"type": "ref/prompt", "name": "greet"},
                                                                 "argument": {"name": "who", "value": "py"}},
                                 result_def="CompleteResult"))
    assert result["completion"] == {"values": ["python", "pytorch"]}
    error = error_of(await rpc(server, "completion/complete", {"ref": {"type": "ref/prompt", "name": "zzz"}, "argument": {}}))
    assert error["code"] == -32602


# -- framing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, code, request_id",
    [
        (b"{", -32700, None),
        (b"[]", -32600, None),
        (b'{"jsonrpc":"1.0","id":3,"method":"x"}', -32600, 3),
        (b'{"jsonrpc":"2.0","id":4}', -32600, 4),
        (b'{"jsonrpc":"2.0","id":5,"method":"x","params":[1]}', -32600, 5),
        (b'{"jsonrpc":"2.0","id":null,"method":"x"}', -32600, None),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', -32600, None),
    ],
)
def test_parse_message_errors(data, code, request_id):
    from mrtr.core.errors import ProtocolError

    with pytest.raises(ProtocolError) as caught:
        parse_message(data)
    assert caught.value.code == code
    assert caught.value.request_id == request_id


def test_parse_message_returns_responses_for_the_transport_to_drop():
    from mrtr.core.jsonrpc import is_request

    for data in (b'{"jsonrpc":"2.0","id":1,"result":{}}', b'{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"m"}}',
                 # a peer that could not read a request of ours: an error with a null id, never answered
                 # (an answer to it could be answered in turn, forever)
                 b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'):
        assert not is_request(parse_message(data))
    assert is_request(parse_message(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'))
    assert not is_request(parse_message(b'{"jsonrpc":"2.0","method":"notifications/cancelled"}'))


def test_registration_errors():
    server = Server("x", secret=b"s" * 32)

    @server.tool
    def a() -> str:
        return ""

    with pytest.raises(ValueError, match="already registered"):
        server.tool(a)
    with pytest.raises(TypeError, match="x-mcp-header"):
        @server.tool
        def bad(value: Annotated[float, Header("V")]):
            return value
    with pytest.raises(ValueError, match="HTTP token"):
        Header("bad header")
    with pytest.raises(ValueError, match="answers"):
        Server("x", answers="loose")


async def test_the_principal_source_sees_the_request_and_empty_headers_without_a_transport():
    seen: list[RequestInfo] = []

    async def principal(info: RequestInfo) -> str | None:  # an async source is awaited
        seen.append(info)
        return info.headers.get("x-user")

    custom = Server("who", secret=b"s" * 32, principal=principal)

    @custom.tool
    def whoami(ctx, note: str = "") -> str:
        return f"{ctx.principal}:{note}"

    params = {"name": "whoami", "arguments": {"note": "n"}}
    anonymous = result_of(await rpc(custom, "tools/call", params, result_def="CallToolResult"))
    assert anonymous["content"][0]["text"] == "None:n"
    named = result_of(await rpc(custom, "tools/call", params, headers={"x-user": "ada"}, result_def="CallToolResult"))
    assert named["content"][0]["text"] == "ada:n"
    # Without transport headers (stdio, in-process) the source still gets a mapping to read.
    assert [(info.method, info.params["name"], info.params["arguments"], dict(info.headers)) for info in seen] == [
        ("tools/call", "whoami", {"note": "n"}, {}),
        ("tools/call", "whoami", {"note": "n"}, {"x-user": "ada"}),
    ]


async def test_a_hand_written_input_schema_is_published_as_given_and_hints_still_decode():
    custom = Server("custom", secret=b"s" * 32)
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
              "properties": {"n": {"type": "integer"}}, "if": {"required": ["n"]}, "then": {}, "additionalProperties": False}

    @custom.tool(input_schema=schema)
    def count(n: int = 0) -> str:
        return str(n + 1)

    listed = result_of(await rpc(custom, "tools/list", result_def="ListToolsResult"))["tools"][0]
    assert listed["inputSchema"] == schema
    assert result_of(await rpc(custom, "tools/call", {"name": "count", "arguments": {"n": 2}}))["content"][0]["text"] == "3"
    assert error_of(await rpc(custom, "tools/call", {"name": "count", "arguments": {"n": "x"}}))["code"] == -32602
    with pytest.raises(ValueError, match="object schema"):
        custom.tool(lambda: None, name="bad", input_schema={"type": "string"})


async def test_a_hand_written_input_schema_is_enforced_before_the_handler_runs():
    custom = Server("custom", secret=b"s" * 32)
    calls = []
    # What type hints cannot say: "unit" is required exactly when "amount" is present.
    schema = {"type": "object", "properties": {"amount": {"type": "number", "exclusiveMinimum": 0},
                                               "unit": {"enum": ["kg", "lb"]}},
              "dependentRequired": {"amount": ["unit"]}, "additionalProperties": False}

    @custom.tool(input_schema=schema)
    def weigh(amount: float = 0, unit: str = "kg") -> str:
        calls.append((amount, unit))
        return f"{amount} {unit}"

    assert result_of(await rpc(custom, "tools/call", {"name": "weigh", "arguments": {"amount": 2, "unit": "lb"}}))
    for arguments, fragment in (({"amount": 2}, "'unit' is a dependency of 'amount'"),
                                ({"amount": -1, "unit": "kg"}, "amount: -1 is less than or equal to"),
                                ({"colour": "red"}, "Additional properties are not allowed")):
        error = error_of(await rpc(custom, "tools/call", {"name": "weigh", "arguments": arguments}))
        assert error["code"] == -32602
        assert error["message"].startswith("Invalid arguments for tool weigh: ")
        assert fragment in error["message"]
    assert calls == [(2, "lb")]
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        custom.tool(lambda: None, name="broken", input_schema={"type": "object", "properties": {"a": {"type": 7}}})


def test_ttl_from_the_environment_applies_to_a_secret_given_in_code(monkeypatch):
    monkeypatch.setenv("MRTR_TTL", "7")
    for secret in (base64.b64encode(b"k" * 32).decode(), b"k" * 32, [b"k" * 32]):
        assert Server("a", secret=secret).token_carrier.codec.ttl == 7.0
    assert Server("b", secret=b"k" * 32, ttl=3).token_carrier.codec.ttl == 3.0


def test_a_codec_excludes_secret_and_ttl():
    codec = RequestStateCodec([b"k" * 32])
    with pytest.raises(ValueError, match="either codec or secret"):
        Server("a", codec=codec, ttl=5)
    assert Server("b", codec=codec).token_carrier.codec is codec


def threaded_server(mode: str, release: threading.Event | None = None,
                    threads: list[int] | None = None) -> Server:
    server = Server("threads", secret=b"s" * 32, sync_handlers=mode)

    @server.tool
    def blocking(ctx) -> str:
        if threads is not None:
            threads.append(threading.get_ident())
        ctx.progress(1, message="blocked")
        # Blocking code, as in a sync database driver: it holds its thread until released.
        if release is not None and not release.wait(10):
            raise TimeoutError("never released")
        return "blocking"

    @server.tool
    def fast() -> str:
        return "fast"

    @server.tool
    def ask():
        answer = yield Elicit("Name?", Form().string("name"))
        return f"hello {answer.content['name']}"

    return server


async def test_a_blocked_sync_handler_in_thread_mode_does_not_hold_up_other_requests():
    import trio

    release, threads = threading.Event(), []
    server = threaded_server("thread", release, threads)
    started = trio.Event()
    finished, sent = [], []

    def notify(method, params):
        sent.append((method, params))
        started.set()

    async def call(name, meta, notify=None):
        await rpc(server, "tools/call", {"name": name}, meta=meta, notify=notify)
        finished.append(name)

    try:
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, "blocking", {**META, "progressToken": "t"}, notify)
                await started.wait()  # the handler is running and blocked in its thread
                await call("fast", META)
                assert finished == ["fast"]
                release.set()
    finally:
        release.set()
    assert finished == ["fast", "blocking"]
    assert threads and threads[0] != threading.get_ident()
    assert sent == [("notifications/progress", {"progressToken": "t", "progress": 1, "message": "blocked"})]


async def test_inline_mode_runs_sync_handlers_on_the_event_loop_thread_even_when_given_run_sync():
    release, threads = threading.Event(), []
    release.set()
    server = threaded_server("inline", release, threads)
    done = result_of(await rpc(server, "tools/call", {"name": "blocking"}, result_def="CallToolResult"))
    assert done["content"][0]["text"] == "blocking"
    assert threads == [threading.get_ident()]


async def test_a_sync_generator_converses_from_a_worker_thread():
    server = threaded_server("thread")
    first = result_of(await rpc(server, "tools/call", {"name": "ask"}, result_def="InputRequiredResult"))
    done = result_of(await rpc(server, "tools/call", {"name": "ask", "requestState": first["requestState"],
                                                     "inputResponses": {"elicit-1": accept(name="Ada")}}))
    assert done["content"][0]["text"] == "hello Ada"
    with pytest.raises(ValueError, match="sync_handlers"):
        Server("x", sync_handlers="pool")


# -- content helpers and typed results, through the server --------------------------------------


def typed_server() -> Server:
    server = Server("typed", secret=b"s" * 32)

    @server.tool
    def blocks():
        return [
            content.embedded_blob("file:///a.bin", b"\x00\xff"),
            content.embedded_blob("file:///b.png", "iVBORw==", mime_type="image/png"),
            content.embedded_blob("file:///c", b"\x01", mime_type=None),
            content.resource_link("file:///d.txt", "d", title="D", description="the d file", mime_type="text/plain"),
            content.resource_link("file:///e", "e"),
        ]

    @server.tool
    def assembled():
        return content.tool_result(content.text("partial"), content.resource_link("file:///log", "log"),
                                   structured={"done": 3, "failed": 1}, is_error=True)

    @server.tool
    def plain_assembled():
        return content.tool_result(content.text("fine"))

    @server.prompt
    def typed_prompt(topic: str):
        """The docstring, which a typed result's own description overrides."""
        return wire.GetPromptResult(
            messages=[wire.PromptMessage(role="user", content=wire.TextContent(text=f"About {topic}")),
                      wire.PromptMessage(role="assistant", content=wire.ResourceLink(uri="file:///t", name="t"))],
            description="typed description",
        )

    @server.prompt
    def typed_prompt_without_description():
        """Used when the typed result has no description."""
        return wire.GetPromptResult(messages=[wire.PromptMessage(role="user", content=wire.TextContent(text="hi"))])

    @server.prompt
    def prompt_with_blocks():
        return [{"role": "user", "content": content.embedded_blob("file:///p.bin", b"\x02")},
                {"role": "user", "content": content.resource_link("file:///q", "q")}]

    @server.resource("file:///typed", mime_type="text/plain")
    def typed_resource():
        return wire.ReadResourceResult(contents=[
            wire.TextResourceContents(uri="file:///typed", text="typed text", mime_type="text/plain"),
            wire.BlobResourceContents(uri="file:///typed#blob", blob="AAE=", mime_type="application/octet-stream"),
        ])

    return server


async def test_embedded_blobs_and_resource_links_reach_the_client_as_built():
    result = result_of(await rpc(typed_server(), "tools/call", {"name": "blocks"}, result_def="CallToolResult"))
    assert result["content"] == [
        {"type": "resource", "resource": {"uri": "file:///a.bin", "blob": "AP8=", "mimeType": "application/octet-stream"}},
        {"type": "resource", "resource": {"uri": "file:///b.png", "blob": "iVBORw==", "mimeType": "image/png"}},
        {"type": "resource", "resource": {"uri": "file:///c", "blob": "AQ=="}},
        {"type": "resource_link", "uri": "file:///d.txt", "name": "d", "title": "D", "description": "the d file",
         "mimeType": "text/plain"},
        {"type": "resource_link", "uri": "file:///e", "name": "e"},
    ]
    for block in result["content"]:
        validate(block, "ContentBlock")


def test_a_blob_given_as_text_must_already_be_base64():
    import binascii

    with pytest.raises(binascii.Error):
        content.embedded_blob("file:///x", "not base64!")


async def test_a_tool_result_built_with_content_tool_result_is_sent_as_built():
    server = typed_server()
    result = result_of(await rpc(server, "tools/call", {"name": "assembled"}, result_def="CallToolResult"))
    result.pop("_meta")
    assert result == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "partial"}, {"type": "resource_link", "uri": "file:///log", "name": "log"}],
        "structuredContent": {"done": 3, "failed": 1},
        "isError": True,
    }
    plain = result_of(await rpc(server, "tools/call", {"name": "plain_assembled"}, result_def="CallToolResult"))
    assert plain["content"] == [{"type": "text", "text": "fine"}]
    assert "isError" not in plain and "structuredContent" not in plain


async def test_a_typed_get_prompt_result_is_sent_as_returned():
    server = typed_server()
    result = result_of(await rpc(server, "prompts/get", {"name": "typed_prompt", "arguments": {"topic": "tides"}},
                                 result_def="GetPromptResult"))
    assert result["resultType"] == "complete"
    assert result["description"] == "typed description"
    assert result["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "About tides"}},
        {"role": "assistant", "content": {"type": "resource_link", "uri": "file:///t", "name": "t"}},
    ]
    bare = result_of(await rpc(server, "prompts/get", {"name": "typed_prompt_without_description"},
                               result_def="GetPromptResult"))
    assert bare["description"] == "Used when the typed result has no description."
    blocks = result_of(await rpc(server, "prompts/get", {"name": "prompt_with_blocks"}, result_def="GetPromptResult"))
    assert [message["content"]["type"] for message in blocks["messages"]] == ["resource", "resource_link"]


async def test_a_typed_read_resource_result_is_sent_with_the_caching_hints_the_schema_requires():
    result = result_of(await rpc(typed_server(), "resources/read", {"uri": "file:///typed"},
                                 result_def="ReadResourceResult"))
    assert result["contents"] == [
        {"uri": "file:///typed", "text": "typed text", "mimeType": "text/plain"},
        {"uri": "file:///typed#blob", "blob": "AAE=", "mimeType": "application/octet-stream"},
    ]
    assert result["resultType"] == "complete" and result["ttlMs"] == 0 and result["cacheScope"] == "public"


async def test_a_typed_read_resource_result_keeps_its_own_caching_hints():
    server = Server("cache", secret=b"s" * 32)

    @server.resource("file:///mine")
    def mine():
        return wire.ReadResourceResult(contents=[wire.TextResourceContents(uri="file:///mine", text="per user")],
                                       ttl_ms=60_000, cache_scope="private")

    result = result_of(await rpc(server, "resources/read", {"uri": "file:///mine"}, result_def="ReadResourceResult"))
    assert (result["ttlMs"], result["cacheScope"]) == (60_000, "private")


async def test_a_round_reads_its_envelope_and_its_token_binding_once(monkeypatch):
    from mrtr.carriers import sealed as token
    from mrtr.server import modern

    reads: dict[str, int] = {}

    def count(module, name):
        original = getattr(module, name)

        def counted(*args, **kwargs):
            reads[name] = reads.get(name, 0) + 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    for module, name in ((modern, "_read_envelope"), (token, "target_of"), (token, "arguments_of")):
        count(module, name)
    server = Server("once", secret=b"s" * 32, tasks_url="memory:")

    @server.tool(task="optional")
    def two():
        first = yield Elicit("First?", Form().string("a"))
        second = yield Elicit("Second?", Form().string("b"))
        return first.content["a"] + second.content["b"]

    meta = {**META, "io.modelcontextprotocol/clientCapabilities": {
        "elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}}
    call = {"name": "two", "arguments": {}, "_meta": meta}
    async with server.running():
        asked = result_of(await server.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}))
        reads.clear()
        # A retry that restores a token and seals the next one: one envelope, one binding.
        again = result_of(await server.handle({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            **call, "requestState": asked["requestState"], "inputResponses": {"elicit-1": accept(a="x")}}}))
    assert list(again["inputRequests"]) == ["elicit-2"]
    assert reads == {"_read_envelope": 1, "target_of": 1, "arguments_of": 1}


async def test_task_settings_come_from_the_constructor_or_a_running_block(tmp_path):
    from mrtr import Step

    server = Server("settings", secret=b"s" * 32, tasks_url="memory:", task_lease=5, task_ttl=60)

    @server.tool(task="required")
    def job():
        yield Step(str, "x")
        return "done"

    assert (server.tasks_url, server.task_lease, server.tasks) == ("memory:", 5, None)
    async with server.running():
        assert (server.tasks.store.url, server.tasks.lease, server.tasks.ttl_ms) == ("memory:", 5.0, 60_000)
    url = f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    async with server.running(tasks_url=url, task_lease=2):
        assert (server.tasks.store.url, server.tasks.lease, server.tasks.ttl_ms) == (url, 2.0, 60_000)
    assert server.tasks is None
    with pytest.raises(AttributeError):
        server.tasks_url = "memory:"  # set through the constructor or running(), not on the object
    for bad in ({"task_lease": 0}, {"task_ttl": -1}, {"task_max_bytes": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Server("bad", secret=b"s" * 32, **bad)
