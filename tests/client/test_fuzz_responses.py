"""Whatever JSON a server answers with, the client gives a result or a ClientError, nothing else.

Each example is a server (a Dispatcher in process: the client round-trips every message
through JSON as a socket would) answering with generated JSON: arbitrary values, and
values shaped like the real thing with the wrong types in the wrong places. What the
client accepts is then handed to the terminal client's printers and argument parser,
which must not fail on it either.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable
from typing import Any

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

import mrtr
from mrtr.client import ClientError
from mrtr.client.targets import _parse, _result_of
from mrtr.client.terminal import ArgumentError, Terminal, parse_arguments, show_error, show_listing, show_result
from mrtr.core.jsonrpc import encode

from ..conftest import StaticDispatcher, examples

from .hostile import head, serve_http

SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=16)

def mostly(plausible: st.SearchStrategy[Any], other: st.SearchStrategy[Any] = st.deferred(lambda: SHAPED)) \
        -> st.SearchStrategy[Any]:
    """``plausible`` seven times in eight, else ``other``: deep enough to reach the printers, wrong often."""
    return st.integers(min_value=0, max_value=7).flatmap(lambda pick: plausible if pick else other)


# Schema and result vocabulary, so examples reach past the first type check.
WORDS = st.sampled_from([
    "type", "properties", "required", "enum", "enumNames", "oneOf", "anyOf", "const", "title", "description",
    "default", "items", "minimum", "maximum", "minLength", "maxLength", "format", "x-mcp-header", "name",
    "string", "integer", "number", "boolean", "array", "object", "null", "text", "image", "resource",
    "resource_link", "content", "structuredContent", "isError", "resultType", "input_required", "complete",
    "inputRequests", "requestState", "method", "params", "elicitation/create", "message", "requestedSchema",
    "mode", "url", "uri", "mimeType", "blob", "data", "messages", "role", "user", "contents", "progress",
])
KEYS = WORDS | st.text(max_size=6)
SHAPED = st.recursive(SCALARS | WORDS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(KEYS, inner, max_size=6), max_leaves=30)
TEXT = mostly(st.text(max_size=10))
KIND = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null"])
CHOICE = st.fixed_dictionaries({"const": SCALARS}, optional={"title": TEXT, "type": mostly(KIND)})
PROPERTY = st.fixed_dictionaries({}, optional={
    "type": mostly(KIND | st.lists(KIND, max_size=3)), "enum": mostly(st.lists(SCALARS, max_size=3)),
    "enumNames": mostly(st.lists(st.text(max_size=5), max_size=3)), "oneOf": mostly(st.lists(CHOICE, max_size=3)),
    "anyOf": mostly(st.lists(CHOICE | st.fixed_dictionaries({"type": KIND}), max_size=3)), "title": TEXT,
    "description": TEXT, "default": SCALARS | SHAPED, "format": TEXT, "minimum": SCALARS, "maxLength": SCALARS,
    "minItems": SCALARS, "items": mostly(st.fixed_dictionaries({}, optional={
        "type": mostly(KIND), "enum": mostly(st.lists(SCALARS, max_size=3)), "anyOf": mostly(st.lists(CHOICE))})),
    "x-mcp-header": TEXT})
SCHEMA = mostly(st.fixed_dictionaries({"type": st.just("object")}, optional={
    "properties": mostly(st.dictionaries(KEYS, mostly(PROPERTY), max_size=3)),
    "required": mostly(st.lists(KEYS, max_size=3))}), st.dictionaries(KEYS, SHAPED, max_size=4))
ARGUMENT = st.fixed_dictionaries({"name": TEXT}, optional={"description": TEXT, "required": mostly(st.booleans())})
ITEM = mostly(st.fixed_dictionaries({"name": TEXT, "inputSchema": SCHEMA, "uri": TEXT, "uriTemplate": TEXT}, optional={
    "description": TEXT, "title": TEXT, "arguments": mostly(st.lists(mostly(ARGUMENT), max_size=3)),
    "annotations": SHAPED, "_meta": SHAPED}))


def listing(member: str) -> st.SearchStrategy[Any]:
    """A ``*/list`` result for ``member``, usually one page."""
    return mostly(st.fixed_dictionaries({"resultType": st.just("complete"), "ttlMs": st.just(0),
                                         "cacheScope": st.just("public"),
                                         member: mostly(st.lists(ITEM, max_size=4))},
                                        optional={"nextCursor": SHAPED}))


DISCOVERED = st.fixed_dictionaries({"resultType": st.just("complete"), "supportedVersions": st.just(["2026-07-28"]),
                                    "ttlMs": st.just(0), "cacheScope": st.just("public"),
                                    "capabilities": mostly(st.just({"tools": {}, "prompts": {}, "resources": {}}))},
                                   optional={"_meta": mostly(st.fixed_dictionaries(
                                       {"io.modelcontextprotocol/serverInfo": SHAPED})),
                                             "serverInfo": SHAPED, "instructions": SHAPED})
BLOCK = mostly(st.fixed_dictionaries({"type": mostly(st.sampled_from(
    ["text", "image", "audio", "resource", "resource_link"]))}, optional={
    "text": TEXT, "data": TEXT, "mimeType": TEXT, "uri": TEXT, "name": TEXT,
    "resource": mostly(st.fixed_dictionaries({"uri": TEXT}, optional={"text": TEXT, "blob": TEXT,
                                                                      "mimeType": TEXT}))}))
ELICIT = mostly(st.fixed_dictionaries({"method": st.just("elicitation/create"), "params": st.fixed_dictionaries(
    {"message": st.text(max_size=10), "requestedSchema": SCHEMA}, optional={"mode": st.just("form"), "url": TEXT})}))
RESULT = mostly(st.fixed_dictionaries({}, optional={
    "resultType": mostly(st.sampled_from(["complete", "input_required"])),
    "content": mostly(st.lists(BLOCK, max_size=3)), "structuredContent": SHAPED, "isError": mostly(st.booleans()),
    "inputRequests": mostly(st.dictionaries(KEYS, ELICIT, max_size=2)), "requestState": TEXT,
    "messages": mostly(st.lists(st.fixed_dictionaries({"role": mostly(st.sampled_from(["user", "assistant"])),
                                                       "content": BLOCK}), max_size=2)),
    "description": TEXT, "contents": mostly(st.lists(st.fixed_dictionaries({"uri": TEXT}, optional={
        "text": TEXT, "blob": TEXT, "mimeType": TEXT}), max_size=2)),
    "completion": mostly(st.fixed_dictionaries({"values": mostly(st.lists(st.text(max_size=4)))}))}))
QUESTION = mostly(st.fixed_dictionaries({"resultType": st.just("input_required"),
                                         "inputRequests": st.dictionaries(KEYS, ELICIT, min_size=1, max_size=2)},
                                        optional={"requestState": TEXT}), RESULT)
ERROR = mostly(st.fixed_dictionaries({"code": mostly(st.integers(min_value=-(2**31), max_value=2**31)),
                                      "message": TEXT}, optional={"data": SHAPED}))

FUZZ = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Generated(StaticDispatcher):
    """A Dispatcher whose answers come from ``answer(method, params)``: a result, or an ``error`` object."""

    def __init__(self, answer: Callable[[str, dict[str, Any]], Any]) -> None:
        self.answer = answer

    def serves(self, method: str) -> bool:
        return True

    def header_parameters(self, tool_name: str) -> dict[str, str]:
        return {}

    async def handle(self, message: Any, **_: Any) -> Any:
        answered = self.answer(message["method"], message["params"])
        if isinstance(answered, tuple):  # ("error", object)
            return {"jsonrpc": "2.0", "id": message["id"], "error": answered[1]}
        return {"jsonrpc": "2.0", "id": message["id"], "result": answered}


def _console() -> Console:
    return Console(file=io.StringIO(), width=80, color_system=None, soft_wrap=True)


def _piped_terminal(lines: str = "1\n\nyes\n") -> Terminal:
    return Terminal(stdin=io.StringIO(lines), console=_console(), interactive=False)


def run(body: Callable[[], Any]) -> None:
    """Run ``body`` on trio; anything it raises other than ClientError is the failure under test."""
    async def main() -> None:
        with trio.fail_after(20):
            try:
                await body()
            except ClientError as error:
                show_error(_console(), error)

    trio.run(main)


@FUZZ
@given(discovered=DISCOVERED, tools=listing("tools"), prompts=listing("prompts"), resources=listing("resources"),
       templates=listing("resourceTemplates"))
def test_any_listing_is_shown_or_refused_with_a_client_error(discovered, tools, prompts, resources, templates):
    answers = {"server/discover": discovered, "tools/list": tools, "prompts/list": prompts,
               "resources/list": resources, "resources/templates/list": templates}

    async def body() -> None:
        async with mrtr.Client(Generated(lambda method, params: answers[method])) as client:
            try:
                listed = await client.list_tools()
            except ClientError:
                listed = []
            for tool in listed:  # what `mrtr call TOOL name=value` does with each tool's schema
                try:
                    parse_arguments(["a=1", "b=x", "c=[1]", "type=true"], tool["inputSchema"])
                except ArgumentError:
                    pass
            await show_listing(_console(), client)

    run(body)


@FUZZ
@given(method=st.sampled_from(["tools/call", "prompts/get", "resources/read", "completion/complete"]),
       first=QUESTION, final=mostly(RESULT, st.tuples(st.just("error"), ERROR)),
       lines=st.lists(st.sampled_from(["1", "2", "", "yes", "x", "0", "-1", "!decline"]) | st.text(max_size=4),
                      max_size=6).map("\n".join))
def test_any_call_result_is_a_result_or_a_client_error(method, first, final, lines):
    """The first answer usually asks questions, answered by the terminal client reading piped lines."""
    seen: list[str] = []

    def answer(called: str, params: dict[str, Any]) -> Any:
        if called == "tools/list":
            return {"resultType": "complete", "tools": [{"name": "t", "inputSchema": {}}], "ttlMs": 0,
                    "cacheScope": "public"}
        seen.append(called)
        return first if len(seen) == 1 else final

    async def body() -> None:
        terminal = _piped_terminal(lines)
        async with mrtr.Client(Generated(answer), max_rounds=3, **terminal.client_options()) as client:
            if method == "tools/call":
                shown: Any = await client.call_tool("t", {})
            elif method == "prompts/get":
                shown = await client.get_prompt("p")
            elif method == "resources/read":
                shown = await client.read_resource("r://x")
            else:
                await client.complete("a", "v", prompt="p")
                return
            show_result(_console(), shown)

    run(body)


@FUZZ
@given(params=mostly(st.fixed_dictionaries({}, optional={
    "progress": mostly(st.floats() | st.integers()), "total": mostly(st.floats() | st.integers()), "message": TEXT})))
def test_any_progress_notification_is_shown_or_refused_with_a_client_error(params):
    class Noisy(Generated):
        async def handle(self, message: Any, *, notify: Any = None, **_: Any) -> Any:
            token = message["params"]["_meta"]["progressToken"]
            notify("notifications/progress", {"progressToken": token, **params} if isinstance(params, dict)
                   else params)
            return await super().handle(message)

    async def body() -> None:
        terminal = Terminal(stdin=io.StringIO(), console=Console(file=io.StringIO(), force_terminal=True, width=80),
                            interactive=True)
        server = Noisy(lambda method, _: {"content": [], "resultType": "complete"})
        try:
            async with mrtr.Client(server, **terminal.client_options()) as client:
                await client.request("tools/call", {"name": "t"})
        finally:
            terminal.pause()

    run(body)


@FUZZ
@given(message=JSON | st.fixed_dictionaries({"jsonrpc": st.just("2.0")}, optional={
    "id": SHAPED | st.just(7), "result": RESULT, "error": ERROR | SHAPED, "method": SHAPED, "params": SHAPED}))
def test_any_message_is_a_result_or_a_client_error(message):
    try:
        parsed = _parse(encode(message))
        result = _result_of(parsed, 7)
    except ClientError:
        return
    assert isinstance(result, dict)


@FUZZ
@given(data=st.binary(max_size=64))
def test_any_bytes_are_a_message_or_a_client_error(data):
    try:
        assert isinstance(_parse(data), dict)
    except ClientError:
        pass



SSE_PIECES = st.sampled_from([b"data: ", b"data:", b": keep-alive", b"event: message", b"id: 1", b"retry: x",
                              b"\n", b"\r\n", b"\r", b"\n\n", b'{"jsonrpc": "2.0", "id": 1, "result": {}}',
                              b'{"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}',
                              b'{"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "m"}}',
                              b"\xef\xbb\xbf", b"\xff", b"{", b"null"])
BODY = st.lists(SSE_PIECES, max_size=12).map(b"".join) | st.binary(max_size=200) | JSON.map(
    lambda value: encode({"jsonrpc": "2.0", "id": 1, "result": value}))


@settings(max_examples=examples(120), deadline=None)
@given(body=BODY, status=st.sampled_from([200, 202, 400, 500]),
       content_type=st.sampled_from(["application/json", "text/event-stream", "text/plain", ""]),
       coding=st.sampled_from(["", "gzip", "deflate", "br", "gzip-garbage", "gzip-truncated"]))
def test_any_http_answer_is_a_result_or_a_client_error(body: bytes, status: int, content_type: str,
                                                         coding: str) -> None:
    """Through a real loopback HTTP server: whatever bytes, type, coding and status come back."""
    wire = {"gzip": gzip.compress(body), "deflate": zlib.compress(body), "gzip-garbage": b"\x1f\x8b" + body,
            "gzip-truncated": gzip.compress(body)[:-5]}.get(coding, body)
    headers = {"Content_Encoding": coding.split("-")[0]} if coding else {}

    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        await stream.send_all(head(status, content_type, **headers) + wire)

    async def body_() -> None:
        async with trio.open_nursery() as nursery:
            url = await serve_http(nursery, respond)
            try:
                # A stream that gives only an event id is resumed, boundedly (targets.MAX_RESUMPTIONS, a pause
                # each): the deadline is what ends such an exchange within the test's time, with a ClientError.
                async with mrtr.Client(url, timeout=10, deadline=5, on_progress=lambda *_: None) as client:
                    await client.call_once("server/discover")
            except ClientError as error:  # inside the server's nursery, so it is not wrapped in a group
                show_error(_console(), error)
            finally:
                nursery.cancel_scope.cancel()

    run(body_)
