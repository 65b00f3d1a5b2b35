"""Malformed answers from real hostile servers: a ClientError naming what was wrong, never a traceback.

The servers are real: raw HTTP/1.1 on a loopback port and a scripted stdio subprocess
(tests/client/hostile.py). ``mrtr list`` and ``mrtr call`` run as real processes and
must exit 1 with one line on stderr.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

import mrtr
from mrtr.client import ClientError

from ..conftest import StaticDispatcher

from .hostile import DISCOVER, STDIO, listing, result, scripted, send_json, serve_http

REPO = Path(__file__).resolve().parents[2]
GUARD = 30  # seconds: the bound for a hang, not the behaviour under test

STRING_SCHEMA = {"tools/list": [{"result": listing("tools", [
    {"name": "fine", "inputSchema": {"type": "object"}},
    {"name": "weird", "inputSchema": "an object, honestly"}])}]}
NAMELESS_PROMPT = {"prompts/list": [{"result": listing("prompts", [{"description": "who am I"}])}],
                   "tools/list": [{"result": listing("tools", [])}]}


async def mrtr_command(*args: str) -> subprocess.CompletedProcess[bytes]:
    """Run the ``mrtr`` command as a real process, its output captured."""
    with trio.fail_after(GUARD):
        return await trio.run_process([sys.executable, "-m", "mrtr", *args], capture_stdout=True,
                                      capture_stderr=True, check=False, cwd=str(REPO), stdin=b"")


def one_line_failure(done: subprocess.CompletedProcess[bytes]) -> str:
    """The single stderr line of a command that failed cleanly (exit 1, no traceback)."""
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert "Traceback" not in stderr, stderr
    assert stderr.strip() and "\n" not in stderr.strip(), stderr
    return stderr


async def test_an_error_with_another_id_is_not_taken_as_the_answer(nursery: trio.Nursery) -> None:
    """An error response carrying some other request's id was raised as this call's error."""
    url = await serve_http(nursery, scripted({"tools/call": [
        {"id": 999, "error": {"code": -32000, "message": "someone else's failure"}}]}))
    async with mrtr.Client(url) as client:
        with pytest.raises(ClientError, match="id 999 does not match") as caught:
            await client.request("tools/call", {"name": "t"})
    assert caught.value.message != "someone else's failure"


async def test_an_error_without_an_id_is_the_requests_error(nursery: trio.Nursery) -> None:
    """A server that could not read the request answers with a null id: that is this request's error."""
    url = await serve_http(nursery, scripted({"tools/call": [
        {"id": None, "error": {"code": -32700, "message": "could not parse"}}]}))
    async with mrtr.Client(url) as client:
        with pytest.raises(ClientError, match="could not parse") as caught:
            await client.request("tools/call", {"name": "t"})
    assert caught.value.code == -32700


async def test_a_result_with_another_id_is_refused_in_process() -> None:
    class WrongId(StaticDispatcher):
        def serves(self, method: str) -> bool:
            return True

        def header_parameters(self, tool_name: str) -> dict[str, str]:
            return {}

        async def handle(self, message: Any, **_: Any) -> dict[str, Any]:
            return {"jsonrpc": "2.0", "id": "other", "error": {"code": 1, "message": "not yours"}}

    async with mrtr.Client(WrongId()) as client:
        with pytest.raises(ClientError, match="does not match"):
            await client.request("tools/call", {"name": "t"})


async def test_a_tool_whose_input_schema_is_a_string(nursery: trio.Nursery) -> None:
    url = await serve_http(nursery, scripted(STRING_SCHEMA))
    async with mrtr.Client(url) as client:
        with pytest.raises(ClientError, match=r"tools\[1\] \('weird'\).*inputSchema") as caught:
            await client.list_tools()
    assert caught.value.code == -32600


async def test_a_prompt_without_a_name(nursery: trio.Nursery) -> None:
    url = await serve_http(nursery, scripted(NAMELESS_PROMPT))
    async with mrtr.Client(url) as client:
        with pytest.raises(ClientError, match=r"prompts\[0\].*name"):
            await client.list_prompts()


@pytest.mark.slow
@pytest.mark.parametrize("replies", [STRING_SCHEMA, NAMELESS_PROMPT], ids=["string-input-schema", "nameless-prompt"])
async def test_mrtr_list_says_what_was_malformed_in_one_line(nursery: trio.Nursery, replies: Any) -> None:
    url = await serve_http(nursery, scripted(replies))
    line = one_line_failure(await mrtr_command("list", url))
    assert "Invalid" in line and ("inputSchema" in line or "name" in line)


@pytest.mark.slow
async def test_mrtr_call_says_what_was_malformed_in_one_line(nursery: trio.Nursery, tmp_path: Path) -> None:
    url = await serve_http(nursery, scripted(STRING_SCHEMA))
    line = one_line_failure(await mrtr_command("call", url, "fine"))
    assert "inputSchema" in line
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(STRING_SCHEMA))
    line = one_line_failure(await mrtr_command("call", "--stdio", f"{STDIO[0]} {STDIO[1]} {replies}", "weird"))
    assert "inputSchema" in line


@pytest.mark.slow
async def test_mrtr_call_with_a_wrong_id_error_exits_with_one_line(nursery: trio.Nursery) -> None:
    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        if message["method"] == "tools/list":
            await send_json(stream, result(message, listing("tools", [{"name": "t", "inputSchema": {}}])))
        elif message["method"] == "server/discover":
            await send_json(stream, result(message, DISCOVER))
        else:
            await send_json(stream, {"jsonrpc": "2.0", "id": 12345, "error": {"code": -1, "message": "decoy"}})

    url = await serve_http(nursery, respond)
    line = one_line_failure(await mrtr_command("call", url, "t"))
    assert "does not match" in line and "decoy" not in line


@pytest.mark.slow
async def test_a_default_or_choice_no_answer_can_carry_is_asked_again(tmp_path: Path) -> None:
    """A `default: null` or an enum value that is an object was sent back as the answer: the client's own
    answer check then raised TypeError out of `mrtr call` (a traceback)."""
    question = {"resultType": "input_required", "inputRequests": {"q": {"method": "elicitation/create", "params": {
        "message": "Pick", "requestedSchema": {"type": "object", "required": ["pick"], "properties": {
            "pick": {"type": "string", "enum": [{"no": 1}, "ok"], "default": None}}}}}}, "requestState": "s"}
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"tools/list": [{"result": listing("tools", [{"name": "t", "inputSchema": {}}])}],
                                   "tools/call": [{"result": question}, {"result": {
                                       "resultType": "complete", "content": [{"type": "text", "text": "done"}]}}]}))
    with trio.fail_after(GUARD):
        done = await trio.run_process([sys.executable, "-m", "mrtr", "call", "--stdio",
                                       f"{STDIO[0]} {STDIO[1]} {replies}", "t"], stdin=b"\n1\n2\n",
                                      capture_stdout=True, capture_stderr=True, check=False, cwd=str(REPO))
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "an answer is required" in stderr and "no answer can carry" in stderr
    assert done.stdout == b"done\n"
