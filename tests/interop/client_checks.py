"""Interoperability checks: the official ``mcp`` client against an mrtr server.

Run with the python of the interop virtualenv (which has ``mcp==2.3.0``), never
imported by the project's own test process:

    .cache/interop-venv/bin/python tests/interop/client_checks.py --url http://127.0.0.1:8000/mcp
    .cache/interop-venv/bin/python tests/interop/client_checks.py --stdio

The server is ``tests.interop.fixture_server:server``. With ``--stdio`` the client
starts it itself (``mrtr serve --stdio``). Each scenario prints one JSON line on stdout:
``{"transport": ..., "scenario": ..., "ok": bool, "detail": ...}``. The exit status is
0 even when scenarios fail; only a crash of the script itself is non-zero.

Two kinds of scenarios:

- ``auto_*`` go through ``mcp.Client.call_tool``, which answers every
  ``InputRequiredResult`` through the callbacks below and retries on its own;
- ``manual_*`` drive the loop by hand with
  ``client.session.call_tool(..., allow_input_required=True)`` to check what the server
  does with replayed, tampered or mismatched retries.

The transport is wrapped in a tap that records every JSON-RPC message sent and
received, so a scenario can check the rounds on the wire (how many ``tools/call``
requests, which ``inputResponses`` keys each carried, the ``requestState`` echo).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Self

import anyio
import httpx2
from mcp import Client, MCPError, StdioServerParameters, types
from mcp.client import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_SPEC = "tests.interop.fixture_server:server"
INVALID_PARAMS = -32602

# -- what the scripted user answers --------------------------------------------------------

# (pattern on the elicitation message, answer): an answer is the accepted content, or
# "decline" / "cancel". The first matching rule wins; an unknown question is refused
# with an error, which aborts the call.
ELICIT_RULES: list[tuple[str, Any]] = [
    (r"^What is your name\?$", {"name": "Ada"}),
    (r"^What is your favourite colour\?$", {"colour": "blue"}),
    (r"^Group: your name\?$", {"name": "Grace"}),
    (r"^Group: your age\?$", {"age": 36}),
    (r"^Which city\?$", {"city": "Paris"}),
    (r"^How many days\?$", {"days": 3}),
    (r"^Run [0-9a-f]{12}: which size\?$", {"size": "M"}),
    (r"^Run [0-9a-f]{12}: confirm\?$", {"ok": True}),
    (r"\[decline-me\]$", "decline"),
    (r"\[cancel-me\]$", "cancel"),
    (r"^Really delete .*\?", {"confirm": True}),
    (r"^Proceed after progress\?$", {"go": True}),
    (r"^Confirm bad-answer\?$", {"ok": "not a boolean"}),
    (r"^Confirm .*\?$", {"ok": True}),
]

SAMPLED_TEXT = "Paris"
SAMPLED_MODEL = "interop-model"
ROOT_URI = "file:///interop/root"
ROOT_NAME = "Interop Root"


class Trace:
    """Everything observable about one scenario: wire messages and callback calls, in order."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def reset(self) -> None:
        self.events = []

    def add(self, kind: str, **data: Any) -> None:
        self.events.append({"kind": kind, **data})

    def sent_calls(self, method: str = "tools/call") -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == "send" and e.get("method") == method]

    def http(self, mcp_method: str = "tools/call") -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == "http" and e.get("mcp_method") == mcp_method]

    def callbacks(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] in ("elicit", "sample", "roots")]


TRACE = Trace()
TRANSPORT = {"name": ""}


# -- the transport tap ---------------------------------------------------------------------


def _dump(message: Any) -> dict[str, Any]:
    if hasattr(message, "model_dump"):
        return message.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dict(message)


class _TapWrite:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, item: Any, /) -> None:
        raw = _dump(item.message)
        if "method" in raw:
            params = raw.get("params") or {}
            TRACE.add(
                "send",
                method=raw["method"],
                id=raw.get("id"),
                params=params,
                has_request_state="requestState" in params,
                response_keys=sorted((params.get("inputResponses") or {}).keys()),
            )
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._inner.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _TapRead:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def _record(self, item: Any) -> Any:
        message = getattr(item, "message", None)
        if message is not None:
            raw = _dump(message)
            if "error" in raw:
                TRACE.add("recv_error", id=raw.get("id"), error=raw["error"])
            elif "result" in raw:
                result = raw["result"] or {}
                TRACE.add(
                    "recv_result",
                    id=raw.get("id"),
                    result_type=result.get("resultType"),
                    request_keys=sorted((result.get("inputRequests") or {}).keys()),
                    has_request_state="requestState" in result,
                )
            elif raw.get("method") == "notifications/progress":
                TRACE.add("recv_progress", params=raw.get("params"))
            elif "method" in raw:
                TRACE.add("recv_other", method=raw["method"], has_id="id" in raw)
        return item

    async def receive(self) -> Any:
        return self._record(await self._inner.receive())

    def __aiter__(self) -> _TapRead:
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None
        return self._record(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._inner.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextlib.asynccontextmanager
async def tapped(inner: Any) -> AsyncIterator[tuple[Any, Any]]:
    async with inner as (read_stream, write_stream):
        yield _TapRead(read_stream), _TapWrite(write_stream)


async def _on_http_response(response: httpx2.Response) -> None:
    request = response.request
    TRACE.add(
        "http",
        verb=request.method,
        mcp_method=request.headers.get("mcp-method"),
        mcp_name=request.headers.get("mcp-name"),
        protocol_version=request.headers.get("mcp-protocol-version"),
        status=response.status_code,
        content_type=response.headers.get("content-type", "").split(";")[0],
    )


@contextlib.asynccontextmanager
async def tapped_http(url: str) -> AsyncIterator[tuple[Any, Any]]:
    """Streamable HTTP with an HTTP client that records each exchange's status and content type."""
    timeout = httpx2.Timeout(30.0, read=300.0)
    hooks = {"response": [_on_http_response]}
    async with (
        httpx2.AsyncClient(timeout=timeout, event_hooks=hooks) as http,
        tapped(streamable_http_client(url, http_client=http)) as streams,
    ):
        yield streams


# -- the callbacks -------------------------------------------------------------------------


async def on_elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
    message = params.message
    TRACE.add("elicit", key=str(context.request_id), message=message)
    for pattern, answer in ELICIT_RULES:
        if re.search(pattern, message):
            if answer in ("decline", "cancel"):
                return types.ElicitResult(action=answer)
            return types.ElicitResult(action="accept", content=dict(answer))
    return types.ErrorData(code=-32603, message=f"the interop client has no scripted answer for {message!r}")


async def on_sample(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    texts = [getattr(m.content, "text", None) for m in params.messages]
    TRACE.add(
        "sample", key=str(context.request_id), texts=texts,
        max_tokens=params.max_tokens, system_prompt=params.system_prompt,
    )
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=SAMPLED_TEXT),
        model=SAMPLED_MODEL,
        stop_reason="endTurn",
    )


async def on_roots(context: ClientRequestContext) -> types.ListRootsResult:
    TRACE.add("roots", key=str(context.request_id))
    return types.ListRootsResult(roots=[types.Root(uri=ROOT_URI, name=ROOT_NAME)])


# -- helpers -------------------------------------------------------------------------------


class CheckFailed(Exception):
    pass


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise CheckFailed(what)


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", None) == "text")


def completed_text(result: Any, what: str) -> str:
    expect(isinstance(result, types.CallToolResult), f"{what}: expected a CallToolResult, got {type(result).__name__}")
    expect(not result.is_error, f"{what}: isError result: {text_of(result)!r}")
    return text_of(result)


def rounds_summary() -> list[dict[str, Any]]:
    return [
        {"responses": c["response_keys"], "requestState": c["has_request_state"]}
        for c in TRACE.sent_calls()
    ]


def accept(**content: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content=content)


def error_detail(error: MCPError) -> dict[str, Any]:
    return {"code": error.code, "message": error.message, "data": error.data}


async def expect_invalid_params(call: Awaitable[Any], needle: str) -> dict[str, Any]:
    """Await ``call`` and require an MCPError -32602 whose message contains ``needle``."""
    try:
        result = await call
    except MCPError as error:
        detail = error_detail(error)
        expect(error.code == INVALID_PARAMS, f"expected code {INVALID_PARAMS}, got {detail}")
        expect(needle.lower() in error.message.lower(), f"expected {needle!r} in the message, got {detail}")
        raw = [e["error"] for e in TRACE.events if e["kind"] == "recv_error"]
        outcome: dict[str, Any] = {"error": detail, "raw_errors": raw}
        if TRANSPORT["name"] == "http":
            # docs/security.md: every retry-validation failure is HTTP 400 on Streamable HTTP.
            statuses = [(e["status"], e["content_type"]) for e in TRACE.http()]
            expect(statuses[-1] == (400, "application/json"), f"the failed retry got HTTP {statuses[-1]}")
            outcome["http"] = statuses
        return outcome
    raise CheckFailed(f"expected an MCPError {INVALID_PARAMS}, got {type(result).__name__}: {_short(result)}")


def _short(result: Any) -> Any:
    if isinstance(result, types.CallToolResult):
        return {"text": text_of(result), "isError": result.is_error}
    if isinstance(result, types.InputRequiredResult):
        return {"inputRequests": sorted((result.input_requests or {}).keys())}
    return repr(result)[:300]


# -- scenarios through the automatic loop -------------------------------------------------

Scenario = Callable[[Client], Awaitable[Any]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        SCENARIOS[name] = fn
        return fn
    return register


@scenario("auto_plain")
async def auto_plain(client: Client) -> Any:
    text = completed_text(await client.call_tool("plain", {"text": "hi"}), "plain")
    expect(text == "plain:hi", f"unexpected result {text!r}")
    expect(len(TRACE.sent_calls()) == 1, f"expected one tools/call, got {rounds_summary()}")
    return {"result": text}


@scenario("auto_multi_round")
async def auto_multi_round(client: Client) -> Any:
    text = completed_text(await client.call_tool("two_questions", {}), "two_questions")
    expect(text == "name=Ada colour=blue", f"unexpected result {text!r}")
    asked = [e["message"] for e in TRACE.callbacks()]
    expect(asked == ["What is your name?", "What is your favourite colour?"], f"callback saw {asked}")
    calls = TRACE.sent_calls()
    expect(len(calls) == 3, f"expected 3 tools/call requests, got {rounds_summary()}")
    expect(not calls[0]["has_request_state"] and not calls[0]["response_keys"], "first call carried MRTR fields")
    expect(calls[1]["response_keys"] == ["elicit-1"], f"second call answered {calls[1]['response_keys']}")
    expect(calls[2]["response_keys"] == ["elicit-2"], f"third call answered {calls[2]['response_keys']}")
    states = [c["params"].get("requestState") for c in calls[1:]]
    expect(all(isinstance(s, str) and s for s in states), "a retry lacked requestState")
    expect(states[0] != states[1], "the requestState did not change between rounds")
    ids = [c["id"] for c in calls]
    expect(len(set(ids)) == 3, f"retries reused a JSON-RPC id: {ids}")
    outcome = {"result": text, "rounds": rounds_summary(), "state_lengths": [len(s) for s in states]}
    if TRANSPORT["name"] == "http":
        exchanges = TRACE.http()
        expect(len(exchanges) == 3, f"expected 3 tools/call POSTs, got {exchanges}")
        expect(all(e["mcp_name"] == "two_questions" and e["protocol_version"] == "2026-07-28" for e in exchanges),
               f"request headers {exchanges}")
        expect(all((e["status"], e["content_type"]) == (200, "application/json") for e in exchanges),
               f"responses {exchanges}")
        outcome["http"] = [(e["status"], e["content_type"]) for e in exchanges]
    return outcome


async def _group(client: Client, tool: str, expected: str, questions: list[str], keys: list[str]) -> Any:
    text = completed_text(await client.call_tool(tool, {}), tool)
    expect(text == expected, f"unexpected result {text!r}")
    calls = TRACE.sent_calls()
    expect(len(calls) == 2, f"expected one retry (2 tools/call), got {rounds_summary()}")
    expect(calls[1]["response_keys"] == sorted(keys), f"retry answered {calls[1]['response_keys']}, expected {keys}")
    # Both questions reached the callback between the first call and the retry.
    order = [
        ("send" if e["kind"] == "send" else e["kind"], e.get("message") or e.get("key"))
        for e in TRACE.events
        if (e["kind"] == "send" and e.get("method") == "tools/call") or e["kind"] == "elicit"
    ]
    expect(
        [kind for kind, _ in order] == ["send", "elicit", "elicit", "send"],
        f"callback calls not all inside the one round: {order}",
    )
    seen = sorted(message for kind, message in order if kind == "elicit")
    expect(seen == sorted(questions), f"callback saw {seen}")
    keys_seen = sorted(e["key"] for e in TRACE.callbacks())
    return {"result": text, "order": order, "callback_keys": keys_seen}


@scenario("auto_group_tuple")
async def auto_group_tuple(client: Client) -> Any:
    return await _group(
        client, "group_tuple", "name=Grace age=36",
        ["Group: your name?", "Group: your age?"], ["elicit-1", "elicit-2"],
    )


@scenario("auto_group_dict")
async def auto_group_dict(client: Client) -> Any:
    return await _group(client, "group_dict", "city=Paris days=3", ["Which city?", "How many days?"], ["city", "days"])


@scenario("auto_step_stable")
async def auto_step_stable(client: Client) -> Any:
    label = uuid.uuid4().hex
    text = completed_text(await client.call_tool("step_backed", {"label": label}), "step_backed")
    asked = [e["message"] for e in TRACE.callbacks()]
    expect(len(asked) == 2, f"expected two questions, callback saw {asked}")
    ids = [re.match(r"^Run ([0-9a-f]{12}):", m).group(1) for m in asked]  # type: ignore[union-attr]
    found = re.match(r"^run=([0-9a-f]{12}) size=M ok=True step_runs=(\d+)$", text)
    expect(found is not None, f"unexpected result {text!r}")
    assert found is not None
    expect(ids[0] == ids[1] == found.group(1), f"the Step value changed: questions {ids}, result {found.group(1)}")
    expect(found.group(2) == "1", f"the Step function ran {found.group(2)} times")
    expect(len(TRACE.sent_calls()) == 3, f"expected 3 tools/call, got {rounds_summary()}")
    return {"result": text, "run_ids": ids}


@scenario("auto_decline")
async def auto_decline(client: Client) -> Any:
    text = completed_text(await client.call_tool("dangerous", {"target": "decline-me"}), "dangerous")
    expect(text == "declined: decline-me kept", f"unexpected result {text!r}")
    expect(len(TRACE.sent_calls()) == 2, f"expected one retry, got {rounds_summary()}")
    retry = TRACE.sent_calls()[1]["params"]["inputResponses"]
    return {"result": text, "sent": retry}


@scenario("auto_cancel")
async def auto_cancel(client: Client) -> Any:
    text = completed_text(await client.call_tool("dangerous", {"target": "cancel-me"}), "dangerous")
    expect(text == "cancelled: cancel-me kept", f"unexpected result {text!r}")
    expect(len(TRACE.sent_calls()) == 2, f"expected one retry, got {rounds_summary()}")
    return {"result": text}


@scenario("auto_progress")
async def auto_progress(client: Client) -> Any:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    text = completed_text(
        await client.call_tool("progress_then_ask", {}, progress_callback=on_progress), "progress_then_ask"
    )
    expect(text == "progress go=True", f"unexpected result {text!r}")
    calls = TRACE.sent_calls()
    tokens = [(c["params"].get("_meta") or {}).get("progressToken") for c in calls]
    raw = [e["params"] for e in TRACE.events if e["kind"] == "recv_progress"]
    # Round 1 reports "preparing"; round 2 re-runs the handler, stays quiet while it replays
    # what round 1 ran, and reports the rest: each value once, only forward.
    expect(len(calls) == 2, f"expected one retry, got {rounds_summary()}")
    expect(all(t is not None for t in tokens), f"a round carried no progressToken: {tokens}")
    # On the wire, in order and under each round's own token.
    wire = [(p.get("progressToken"), p.get("progress"), p.get("message")) for p in raw]
    expect(wire == [(tokens[0], 1, "preparing"), (tokens[1], 2, "answered"), (tokens[1], 3, "done")],
           f"progress notifications on the wire: {raw}")
    # The SDK runs progress callbacks as separate tasks: wait for them, and ignore their order.
    with anyio.move_on_after(2):
        while len(seen) < 3:
            await anyio.sleep(0.01)
    expected = [(1, 3, "preparing"), (2, 3, "answered"), (3, 3, "done")]
    expect(sorted(seen, key=repr) == sorted(expected, key=repr), f"progress callback saw {seen}")
    outcome: dict[str, Any] = {"result": text, "callback": seen, "tokens": tokens}
    if TRANSPORT["name"] == "http":
        # docs/server.md: the first notification turns the response into an SSE stream.
        kinds = [(e["status"], e["content_type"]) for e in TRACE.http()]
        expect(kinds == [(200, "text/event-stream")] * 2, f"tools/call responses were {kinds}")
        outcome["http"] = kinds
    return outcome


@scenario("auto_sampling")
async def auto_sampling(client: Client) -> Any:
    text = completed_text(await client.call_tool("ask_sampling", {}), "ask_sampling")
    expect(text == f"model={SAMPLED_MODEL} said={SAMPLED_TEXT} role=assistant", f"unexpected result {text!r}")
    samples = [e for e in TRACE.callbacks() if e["kind"] == "sample"]
    expect(len(samples) == 1, f"sampling callback calls: {samples}")
    expect(samples[0]["texts"] == ["What is the capital of France?"], f"sampling saw {samples[0]}")
    expect(samples[0]["max_tokens"] == 50 and samples[0]["system_prompt"] == "Answer in one word.",
           f"sampling params {samples[0]}")
    return {"result": text, "sampling": samples[0]}


@scenario("auto_roots")
async def auto_roots(client: Client) -> Any:
    text = completed_text(await client.call_tool("ask_roots", {}), "ask_roots")
    expect(text == f"roots={ROOT_URI}|{ROOT_NAME}", f"unexpected result {text!r}")
    expect([e["kind"] for e in TRACE.callbacks()] == ["roots"], f"callbacks {TRACE.callbacks()}")
    return {"result": text}


@scenario("auto_mixed_group")
async def auto_mixed_group(client: Client) -> Any:
    text = completed_text(await client.call_tool("mixed_group", {}), "mixed_group")
    expect(text == f"name=Grace said={SAMPLED_TEXT} roots=1", f"unexpected result {text!r}")
    calls = TRACE.sent_calls()
    expect(len(calls) == 2, f"expected one retry, got {rounds_summary()}")
    expect(calls[1]["response_keys"] == ["elicit-1", "roots-3", "sample-2"], f"retry answered {calls[1]['response_keys']}")
    return {"result": text, "callbacks": sorted(e["kind"] for e in TRACE.callbacks())}


@scenario("auto_invalid_answer")
async def auto_invalid_answer(client: Client) -> Any:
    # A malformed answer is a -32602 error, never a silent re-ask; the auto loop must surface it.
    outcome = await expect_invalid_params(client.call_tool("confirm", {"item": "bad-answer"}), '"ok"')
    expect(len(TRACE.sent_calls()) == 2, f"expected the loop to stop after one retry, got {rounds_summary()}")
    return outcome


# -- scenarios through the manual loop ----------------------------------------------------


async def _first_round(client: Client, item: str, tool: str = "confirm") -> types.InputRequiredResult:
    first = await client.session.call_tool(tool, {"item": item}, allow_input_required=True)
    expect(isinstance(first, types.InputRequiredResult), f"expected InputRequiredResult, got {_short(first)}")
    assert isinstance(first, types.InputRequiredResult)
    requests = first.input_requests or {}
    expect(list(requests) == ["elicit-1"], f"inputRequests keys {list(requests)}")
    expect(requests["elicit-1"].method == "elicitation/create", f"request {requests['elicit-1']!r}")
    expect(isinstance(first.request_state, str) and first.request_state, "no requestState")
    return first


def _retry(client: Client, tool: str, item: str, responses: Any, state: str | None) -> Awaitable[Any]:
    return client.session.call_tool(
        tool, {"item": item}, input_responses=responses, request_state=state, allow_input_required=True
    )


@scenario("manual_complete")
async def manual_complete(client: Client) -> Any:
    first = await _first_round(client, "alpha")
    result = await _retry(client, "confirm", "alpha", {"elicit-1": accept(ok=True)}, first.request_state)
    text = completed_text(result, "retry")
    expect(text == "confirmed alpha: True", f"unexpected result {text!r}")
    results = [e for e in TRACE.events if e["kind"] == "recv_result"]
    return {"result": text, "wire_results": results, "state_length": len(first.request_state or "")}


@scenario("manual_replay_token")
async def manual_replay_token(client: Client) -> Any:
    # docs/security.md: a token is not single-use; every presentation within the TTL replays.
    first = await _first_round(client, "beta")
    answers = {"elicit-1": accept(ok=True)}
    once = completed_text(await _retry(client, "confirm", "beta", answers, first.request_state), "first use")
    again = completed_text(await _retry(client, "confirm", "beta", answers, first.request_state), "second use")
    expect(once == again == "confirmed beta: True", f"results {once!r} / {again!r}")
    return {"first": once, "replayed": again}


def _tamper(token: str) -> str:
    middle = len(token) // 2
    replacement = "A" if token[middle] != "A" else "B"
    return token[:middle] + replacement + token[middle + 1:]


@scenario("manual_tampered_state")
async def manual_tampered_state(client: Client) -> Any:
    first = await _first_round(client, "gamma")
    assert first.request_state is not None
    tampered = _tamper(first.request_state)
    expect(tampered != first.request_state and len(tampered) == len(first.request_state), "tampering failed")
    return await expect_invalid_params(
        _retry(client, "confirm", "gamma", {"elicit-1": accept(ok=True)}, tampered), "requestState"
    )


@scenario("manual_different_arguments")
async def manual_different_arguments(client: Client) -> Any:
    first = await _first_round(client, "delta")
    return await expect_invalid_params(
        _retry(client, "confirm", "other-item", {"elicit-1": accept(ok=True)}, first.request_state),
        "different arguments",
    )


@scenario("manual_different_target")
async def manual_different_target(client: Client) -> Any:
    first = await _first_round(client, "epsilon")
    return await expect_invalid_params(
        _retry(client, "confirm_other", "epsilon", {"elicit-1": accept(ok=True)}, first.request_state),
        "different target",
    )


@scenario("manual_unknown_key")
async def manual_unknown_key(client: Client) -> Any:
    first = await _first_round(client, "zeta")
    return await expect_invalid_params(
        _retry(client, "confirm", "zeta", {"not-issued": accept(ok=True)}, first.request_state),
        "Unknown inputResponses key",
    )


@scenario("manual_responses_without_state")
async def manual_responses_without_state(client: Client) -> Any:
    await _first_round(client, "eta")
    return await expect_invalid_params(
        _retry(client, "confirm", "eta", {"elicit-1": accept(ok=True)}, None), "without requestState"
    )


@scenario("manual_invalid_answer")
async def manual_invalid_answer(client: Client) -> Any:
    first = await _first_round(client, "theta")
    return await expect_invalid_params(
        _retry(client, "confirm", "theta", {"elicit-1": accept(ok="not a boolean")}, first.request_state),
        '"ok"',
    )


@scenario("manual_decline")
async def manual_decline(client: Client) -> Any:
    first = await _first_round(client, "iota")
    result = await _retry(client, "confirm", "iota", {"elicit-1": types.ElicitResult(action="decline")},
                          first.request_state)
    text = completed_text(result, "retry")
    expect(text == "not confirmed iota", f"unexpected result {text!r}")
    return {"result": text, "sent": TRACE.sent_calls()[-1]["params"].get("inputResponses")}


# -- running ---------------------------------------------------------------------------------


def transport_for(args: argparse.Namespace) -> tuple[str, Any]:
    if args.url:
        return "http", tapped_http(args.url)
    params = StdioServerParameters(
        command=args.mrtr,
        args=["serve", "--stdio", SERVER_SPEC],
        cwd=str(REPO_ROOT),
    )
    return "stdio", tapped(stdio_client(params, errlog=sys.stderr))


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record, default=repr), flush=True)


async def main(args: argparse.Namespace) -> None:
    transport_name, transport = transport_for(args)
    TRANSPORT["name"] = transport_name
    selected = args.scenario or list(SCENARIOS)
    unknown = [name for name in selected if name not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenarios: {unknown}; known: {list(SCENARIOS)}")
    async with Client(
        transport,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        list_roots_callback=on_roots,
        read_timeout_seconds=args.timeout,
        cache=None,
    ) as client:
        emit({
            "transport": transport_name, "scenario": "_connect", "ok": client.protocol_version == "2026-07-28",
            "detail": {"protocol_version": client.protocol_version,
                       "server_info": _dump(client.server_info) if client.server_info else None},
        })
        for name in selected:
            TRACE.reset()
            started = time.monotonic()
            try:
                with anyio.fail_after(args.timeout):
                    detail = await SCENARIOS[name](client)
                ok = True
            except CheckFailed as failure:
                ok, detail = False, {"failure": str(failure), "trace": TRACE.events}
            except Exception as error:  # noqa: BLE001 - report it, then go on with the next scenario
                detail = {
                    "exception": f"{type(error).__name__}: {error}",
                    "traceback": traceback.format_exc(),
                    "trace": TRACE.events,
                }
                if isinstance(error, MCPError):
                    detail["error"] = error_detail(error)
                ok = False
            emit({
                "transport": transport_name, "scenario": name, "ok": ok,
                "seconds": round(time.monotonic() - started, 3), "detail": detail,
            })


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--url", help="the server's Streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp")
    where.add_argument("--stdio", action="store_true", help="start the fixture server with `mrtr serve --stdio`")
    parser.add_argument("--mrtr", default=str(REPO_ROOT / ".venv" / "bin" / "mrtr"),
                        help="the mrtr command used with --stdio (default: the project's .venv)")
    parser.add_argument("--scenario", action="append", help="run only this scenario (repeatable)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds allowed per scenario")
    parser.add_argument("--list", action="store_true", help="print the scenario names and exit")
    arguments = parser.parse_args(argv)
    if not arguments.list and not (arguments.url or arguments.stdio):
        parser.error("one of --url or --stdio is required")
    return arguments


if __name__ == "__main__":
    arguments = parse_args()
    if arguments.list:
        print("\n".join(SCENARIOS))
    else:
        anyio.run(main, arguments)
