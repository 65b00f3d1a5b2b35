"""Hostile input to the legacy era: whatever arrives, a typed error or a result, valid for 2025-11-25.

Hypothesis sends ``initialize`` with any params, every session method with any params,
and any JSON as the client's answer to a question a handler waits on. Nothing may crash,
hang, leak a waiting handler or answer with an unexpected ``-32603``.
"""

from __future__ import annotations

from typing import Any

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..conftest import examples
from ..legacy_schema import RESULT_DEFS, validate_server_message
from .app import server as app
from .conftest import Wire

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**53, max_value=2**53) | st.floats(allow_nan=False, width=32)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
PARAMS = st.dictionaries(
    st.sampled_from(["name", "arguments", "uri", "cursor", "level", "ref", "argument", "_meta", "protocolVersion",
                     "capabilities", "clientInfo", "context"]) | st.text(max_size=8),
    JSON, max_size=5)
METHODS = st.sampled_from(sorted(RESULT_DEFS) + ["no/such", "tasks/get", "server/discover", "subscriptions/listen"])
EXPECTED_CODES = {-32600, -32601, -32602, -32002, -32603}

fuzzed = app  # every handler of the fixture; its default bounds make room for each example's session


async def opened() -> str:
    """A fresh session of the fixture server, for a client that can answer forms."""
    assert fuzzed.legacy is not None
    _, session_id = await fuzzed.legacy.initialize(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}}},
        outlet=lambda *args: None)
    assert session_id is not None
    return session_id


def check(message: dict[str, Any], method: Any) -> None:
    validate_server_message(message, RESULT_DEFS.get(method) if "result" in message and isinstance(method, str)
                            else None)
    if "error" in message:
        assert message["error"]["code"] in EXPECTED_CODES, message
        if message["error"]["code"] == -32603:
            assert message["error"]["message"] != "Internal error", message  # never an unexpected failure


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PARAMS)
def test_any_initialize_opens_a_session_or_is_invalid_params(params):
    async def main() -> None:
        assert fuzzed.legacy is not None
        response, session_id = await fuzzed.legacy.initialize(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, outlet=lambda *args: None)
        validate_server_message(response.message, "InitializeResult" if session_id else None)
        if session_id is None:
            assert response.message["error"]["code"] == -32602
        else:
            assert response.message["result"]["protocolVersion"] in ("2025-11-25", "2025-06-18", "2025-03-26")

    trio.run(main)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(METHODS, st.one_of(st.none(), PARAMS))
def test_any_request_of_a_session_is_a_result_or_a_typed_error(method, params):
    async def main() -> None:
        assert fuzzed.legacy is not None
        session_id = await opened()
        wire = Wire()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method}
        if params is not None:
            message["params"] = params
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                async def decline_everything() -> None:
                    while True:
                        await wire.arrived.wait()
                        wire.arrived = trio.Event()
                        for request in wire.requests:
                            wire.answer(request, {"action": "decline"})

                nursery.start_soon(decline_everything)
                response = await fuzzed.legacy.respond(session_id, message, peer=wire.pending.peer(),
                                                       notify=lambda *args: None)
                nursery.cancel_scope.cancel()
        assert response.status == 200
        check(response.message, method)
        assert fuzzed.legacy.sessions.suspended == 0

    trio.run(main)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_any_answer_to_a_question_ends_the_call_cleanly(answer):
    async def main() -> None:
        assert fuzzed.legacy is not None
        session_id = await opened()
        wire = Wire()
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                async def answer_once() -> None:
                    [asked] = await wire.wait_requests(1)
                    wire.answer(asked, answer)

                nursery.start_soon(answer_once)
                response = await fuzzed.legacy.respond(
                    session_id, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                 "params": {"name": "polite", "arguments": {}}},
                    peer=wire.pending.peer(), notify=lambda *args: None)
        check(response.message, "tools/call")
        if "error" in response.message:
            assert response.message["error"]["code"] == -32602  # an answer that is no elicitation result
        else:
            assert response.message["result"]["content"][0]["text"]
        assert wire.pending.waiting == 0 and fuzzed.legacy.sessions.suspended == 0

    trio.run(main)
