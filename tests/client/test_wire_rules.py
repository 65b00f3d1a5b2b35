"""The client's wire duties, against scripted servers that do what mrtr's own server never does.

A scripted server is a small :class:`~mrtr.core.jsonrpc.Dispatcher`; it is reached in
process and, through ``mrtr.http.serve``, over real loopback HTTP, so the same
checks cover the JSON framing of both targets.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import pytest
import trio

import mrtr
from mrtr.client.headers import request_headers
from mrtr.core.mirroring import encode_value, mirrored_parameters
from mrtr.transports.http.native import serve
from mrtr.core.jsonrpc import result_response

from ..conftest import StaticDispatcher

from .conftest import check_sent
from .hostile import DISCOVER

Script = Callable[[dict[str, Any], Mapping[str, str]], dict[str, Any]]


class Scripted(StaticDispatcher):
    """A Dispatcher whose results come from ``script(params, headers)``; it records what arrived."""

    def __init__(self, script: Script, tools: list[dict[str, Any]] | None = None) -> None:
        self.script = script
        self.tools = tools or []
        self.received: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    def serves(self, method: str) -> bool:
        return True

    def header_parameters(self, tool_name: str) -> Mapping[str, str]:
        return {}

    async def handle(self, message: Mapping[str, Any], *, headers: Mapping[str, str] | None = None,
                     notify: Any = None, run_sync: Any = None, client: str | None = None) -> dict[str, Any]:
        check_sent(message)
        self.received.append(dict(message))
        self.headers.append({name.lower(): value for name, value in (headers or {}).items()})
        if message["method"] == "tools/list":
            return result_response(message["id"], {"resultType": "complete", "tools": self.tools})
        if message["method"] == "server/discover":  # every modern server answers it: the client probes with it
            return result_response(message["id"], DISCOVER)
        return result_response(message["id"], self.script(message["params"], headers or {}))


@pytest.fixture(params=["inprocess", "http"])
async def reach(request: Any, nursery: trio.Nursery) -> Callable[..., mrtr.Client]:
    async def make(server: Scripted, **options: Any) -> mrtr.Client:
        if request.param == "inprocess":
            return mrtr.Client(server, **options)
        port = await nursery.start(partial(serve, server, "127.0.0.1", 0))
        return mrtr.Client(f"http://127.0.0.1:{port}/mcp", **options)

    return make


ASK = {"method": "elicitation/create",
       "params": {"message": "Name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}}


async def test_state_only_round_is_retried_with_just_the_state(reach):
    def script(params: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
        state = params.get("requestState")
        if state is None:
            return {"resultType": "input_required", "requestState": "shed-1"}
        if state == "shed-1":
            assert "inputResponses" not in params
            return {"resultType": "input_required", "requestState": "shed-2", "inputRequests": {"who": ASK}}
        assert state == "shed-2" and params["inputResponses"] == {"who": {"action": "accept", "content": {"name": "A"}}}
        return {"content": [{"type": "text", "text": "done"}]}  # no resultType: complete

    server = Scripted(script)
    async with await reach(server, on_elicit=lambda request: mrtr.accept(name="A")) as client:
        result = await client.call_tool("t")
    assert result.text == "done"
    assert [params.get("requestState") for params in (m["params"] for m in server.received
                                                      if m["method"] == "tools/call")] == [None, "shed-1", "shed-2"]


async def test_state_is_echoed_byte_for_byte_and_never_invented(reach):
    odd_state = "ä \u2028 \\\" {}=?base64?x?=" * 50

    def script(params: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
        if "inputResponses" not in params:
            return {"resultType": "input_required", "inputRequests": {"k1": ASK}, "requestState": odd_state}
        if "requestState" in params and params["requestState"] == odd_state and "k1" in params["inputResponses"]:
            return {"resultType": "input_required", "inputRequests": {"k2": ASK}}  # no state this time
        assert "requestState" not in params and list(params["inputResponses"]) == ["k2"]
        return {"resultType": "complete", "content": []}

    server = Scripted(script)
    async with await reach(server, on_elicit=lambda request: mrtr.accept(name="A")) as client:
        assert (await client.call_tool("t", {"a": 1})).content == []
    calls = [m for m in server.received if m["method"] == "tools/call"]
    assert [m["params"]["arguments"] for m in calls] == [{"a": 1}] * 3
    assert len({m["id"] for m in calls}) == 3


@pytest.mark.parametrize("result, message", [
    ({"resultType": "task", "task": {}}, "Invalid task from the server"),
    ({"resultType": "pending"}, "unknown resultType 'pending'"),
    ({"resultType": "input_required"}, "neither inputRequests nor requestState"),
    ({"resultType": "input_required", "requestState": 5}, "requestState a string"),
    ({"resultType": "complete", "content": "text"}, "Invalid CallToolResult"),
])
async def test_results_the_client_refuses(reach, result, message):
    async with await reach(Scripted(lambda params, headers: result)) as client:
        with pytest.raises(mrtr.ClientError, match=message) as caught:
            await client.call_tool("t")
    assert caught.value.code == -32600


async def test_an_undeclared_request_kind_is_refused(reach):
    sample = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    server = Scripted(lambda params, headers: {"resultType": "input_required", "inputRequests": {"s": sample}})
    async with await reach(server, on_elicit=lambda request: mrtr.decline()) as client:
        with pytest.raises(mrtr.ClientError, match="asked for sampling"):
            await client.call_tool("t")


async def test_malformed_input_request_is_refused(reach):
    bad = {"method": "elicitation/create", "params": {"message": 5}}
    server = Scripted(lambda params, headers: {"resultType": "input_required", "inputRequests": {"e": bad}})
    async with await reach(server, on_elicit=lambda request: mrtr.decline()) as client:
        with pytest.raises(mrtr.ClientError, match=r"Invalid inputRequests\['e'\]"):
            await client.call_tool("t")


async def test_pages_are_all_fetched(reach):
    def script(params: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
        if params.get("cursor") is None:
            return {"resultType": "complete", "prompts": [{"name": "a"}], "nextCursor": "2"}
        return {"resultType": "complete", "prompts": [{"name": "b"}]}

    async with await reach(Scripted(script)) as client:
        assert [prompt["name"] for prompt in await client.list_prompts()] == ["a", "b"]


# -- HTTP headers ----------------------------------------------------------------------------


REGIONAL = {"name": "regional", "inputSchema": {"type": "object", "properties": {
    "region": {"type": "string", "x-mcp-header": "Region"},
    "options": {"type": "object", "properties": {"fast": {"type": "boolean", "x-mcp-header": "Fast"}}},
    "list": {"type": "array", "items": {"type": "string"}},
}}}


def test_request_headers_mirror_the_body():
    message = {"method": "tools/call", "params": {"name": "regional", "arguments": {
        "region": "Zürich", "options": {"fast": False}}, "_meta": {}}}
    headers = request_headers(message, mirrored_parameters(REGIONAL))
    assert headers["Mcp-Name"] == "regional" and headers["Mcp-Method"] == "tools/call"
    assert headers["Mcp-Param-Region"] == encode_value("Zürich") and headers["Mcp-Param-Fast"] == "false"
    assert headers["MCP-Protocol-Version"] == "2026-07-28"


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_task_methods_name_their_task_as_the_server_requires(method):
    headers = request_headers({"method": method, "params": {"taskId": "t-1", "_meta": {}}})
    assert headers["Mcp-Name"] == "t-1"


async def test_http_sends_param_headers_and_drops_invalid_tools(nursery, caplog):
    bad = {"name": "bad", "inputSchema": {"type": "object", "properties": {"x": {"type": "number",
                                                                                 "x-mcp-header": "X"}}}}
    server = Scripted(lambda params, headers: {"resultType": "complete", "content": []}, tools=[REGIONAL, bad])
    port = await nursery.start(partial(serve, server, "127.0.0.1", 0))
    with caplog.at_level(logging.WARNING, logger="mrtr.client"):
        async with mrtr.Client(f"http://127.0.0.1:{port}/mcp") as client:
            await client.call_tool("regional", {"region": " Zürich", "options": {"fast": True}})
            assert [tool["name"] for tool in await client.list_tools()] == ["regional"]
    assert "leaving out tool 'bad'" in caplog.text
    sent = server.headers[-2]  # the tools/call (tools/list came first, and again at the end)
    assert sent["mcp-method"] == "tools/call" and sent["mcp-name"] == "regional"
    assert sent["mcp-param-region"] == encode_value(" Zürich") and sent["mcp-param-fast"] == "true"
    assert sent["mcp-protocol-version"] == "2026-07-28"


def test_missing_client_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(ImportError, match=r"'client' extra: pip install 'mrtr\[client\]'"):
        mrtr.Client("http://127.0.0.1:9/mcp")


async def test_complete_sends_the_reference(reach):
    def script(params: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
        assert params["ref"] == {"type": "ref/prompt", "name": "review"}
        assert params["argument"] == {"name": "language", "value": "py"}
        assert params["context"] == {"arguments": {"focus": "style"}}
        return {"resultType": "complete", "completion": {"values": ["python"], "hasMore": False}}

    async with await reach(Scripted(script)) as client:
        completion = await client.complete("language", "py", prompt="review", context={"focus": "style"})
    assert completion == {"values": ["python"], "hasMore": False}


def test_a_target_must_be_a_url_a_server_or_a_target():
    with pytest.raises(TypeError, match="a Client target is"):
        mrtr.Client(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_rounds"):
        mrtr.Client("http://127.0.0.1:9/mcp", max_rounds=0)
