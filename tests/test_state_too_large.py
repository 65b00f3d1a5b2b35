"""State that outgrows the token: a clear error from a real server, never a truncated token.

The server seals each round's ledger into ``requestState``; a codec built with
``max_token_length`` refuses to mint a longer token (``StateTooLarge``). These tests drive
that through ``Server.handle`` and through both HTTP front ends on loopback, and validate
every message against the official schema.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

from mrtr import Elicit, Form, Step
from mrtr.server import Server
from mrtr.core.codec import RequestStateCodec
from mrtr.testing import accept

from .conftest import meta
from .http.conftest import Endpoint, start_front_end
from .wire_schema import validate_message

LIMIT = 1024
"""The token length limit of the test server, in characters."""

META = meta({"elicitation": {}})


def fetch(size: int) -> str:
    """What a Step might load: a value of ``size`` characters."""
    return "x" * size


def build() -> Server:
    server = Server("state-limits", codec=RequestStateCodec([b"k" * 32], max_token_length=LIMIT), mask_errors=False)

    @server.tool
    def hoard(size: int) -> str:
        """Records a Step value of ``size`` characters, then asks a question."""
        blob = yield Step(fetch, size)
        answer = yield Elicit("Keep it?", Form().boolean("keep"))
        return f"{len(blob)}:{answer.content['keep']}"

    @server.tool
    def note():
        """Asks for a note, then for a confirmation: the note travels in the second token."""
        text = yield Elicit("Note?", Form().string("text"))
        sure = yield Elicit("Sure?", Form().boolean("ok"))
        return f"{len(text.content['text'])}:{sure.content['ok']}"

    @server.prompt
    def hoarding_prompt(size: str):
        blob = yield Step(fetch, int(size))
        yield Elicit("Keep it?", Form().boolean("keep"))
        return blob[:3]

    return server


def too_large(text: str) -> None:
    assert text.startswith("requestState would be "), text
    assert f"more than the limit of {LIMIT}" in text and "keep Step values and answers small" in text


async def call(server: Server, method: str, params: dict[str, Any], result_def: str | None = None) -> dict[str, Any]:
    message = await server.handle({"jsonrpc": "2.0", "id": 1, "method": method,
                                   "params": {**params, "_meta": META}})
    validate_message(message, result_def=result_def)
    return message


# -- in process ------------------------------------------------------------------------------


async def test_a_step_value_that_fits_completes_and_one_that_does_not_is_a_tool_error():
    server = build()
    first = (await call(server, "tools/call", {"name": "hoard", "arguments": {"size": 100}},
                        "InputRequiredResult"))["result"]
    assert len(first["requestState"]) <= LIMIT
    done = (await call(server, "tools/call", {"name": "hoard", "arguments": {"size": 100},
                                               "requestState": first["requestState"],
                                               "inputResponses": {"elicit-2": accept(keep=True)}},
                       "CallToolResult"))["result"]
    assert done["content"][0]["text"] == "100:True"

    refused = (await call(server, "tools/call", {"name": "hoard", "arguments": {"size": 2 * LIMIT}},
                          "CallToolResult"))["result"]
    assert refused["isError"] is True and "requestState" not in refused
    too_large(refused["content"][0]["text"])


async def test_an_answer_that_makes_the_next_token_too_large_is_a_tool_error():
    server = build()
    first = (await call(server, "tools/call", {"name": "note"}, "InputRequiredResult"))["result"]
    refused = (await call(server, "tools/call", {"name": "note", "requestState": first["requestState"],
                                                  "inputResponses": {"elicit-1": accept(text="n" * 2 * LIMIT)}},
                          "CallToolResult"))["result"]
    assert refused["isError"] is True
    too_large(refused["content"][0]["text"])


async def test_a_prompt_whose_state_is_too_large_is_an_internal_error_that_says_why():
    error = (await call(build(), "prompts/get", {"name": "hoarding_prompt", "arguments": {"size": str(2 * LIMIT)}}))
    assert error["error"]["code"] == -32603
    assert error["error"]["message"].startswith("Internal error: ")
    too_large(error["error"]["message"][len("Internal error: "):])


# -- over loopback HTTP, both front ends -------------------------------------------------------


@pytest.fixture(params=["native", "asgi"])
async def endpoint(request, nursery):
    port = await start_front_end(request.param, nursery, build())
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
        del client.headers["accept"]
        yield Endpoint(request.param, port, client)


async def test_over_http_a_step_value_too_large_for_the_token_is_a_tool_error(endpoint):
    with trio.fail_after(10):
        fits = await endpoint.call("tools/call", {"name": "hoard", "arguments": {"size": 100}})
        assert fits.status == 200 and fits.result["resultType"] == "input_required"
        refused = await endpoint.call("tools/call", {"name": "hoard", "arguments": {"size": 2 * LIMIT}})
    assert refused.status == 200
    assert refused.result["isError"] is True and refused.result["resultType"] == "complete"
    too_large(refused.result["content"][0]["text"])
