"""Operability through real servers: the key warning once, access lines, JSON logs, error masking."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from typing import Any

import pytest
import trio

from .test_stdio import REPO, StdioProcess, call, request, text_of
from .wire_schema import validate_message

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)


async def run_stdio(app: str, messages: list[dict[str, Any]], *extra: str,
                    env: dict[str, str] | None = None) -> tuple[list[dict[str, Any]], str]:
    """Serve ``app`` with ``mrtr serve --stdio``, send ``messages`` one by one, return the answers and stderr."""
    environment = {key: value for key, value in os.environ.items() if key != "MRTR_SECRET"}
    environment.update(env or {})
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "mrtr", "serve", "--stdio", app, *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=environment)
    client = StdioProcess(process)
    answers = []
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.collect_stderr)
            for message in messages:
                answers.append(await client.ask(message))
            assert await client.finish() == 0
    return answers, client.stderr.decode()


def json_lines(stderr: str) -> list[dict[str, Any]]:
    records = []
    for line in stderr.splitlines():
        records.append(json.loads(line))  # --log-format json: every stderr line is one JSON object
    return records


async def test_stdio_json_logs_access_lines_and_the_key_warning_once() -> None:
    greet = call(1, "greet")
    answers, stderr = await run_stdio("tests.ops_app:server", [
        greet,
        request(2, "tools/list"),
        call(3, "explode"),
        request(4, "prompts/get", {"name": "briefing", "arguments": {"topic": "boom"}}),
    ], "--log-format", "json")
    first = answers[0]["result"]
    assert first["resultType"] == "input_required"
    key = next(iter(first["inputRequests"]))

    records = json_lines(stderr)
    warnings = [r for r in records if "MRTR_SECRET" in r["message"]]
    assert len(warnings) == 1, warnings
    assert "\n" not in warnings[0]["message"] and "base64" in warnings[0]["message"]  # it says what to do
    # One client, one process: a restart is all a throwaway key costs here, no "other instances".
    assert warnings[0]["level"] == "info" and "restarts" in warnings[0]["message"]
    assert "instances" not in warnings[0]["message"]
    # the start-up listing, as one record
    (listing,) = [r for r in records if "tools" in r and "prompts" in r]
    assert listing["tools"] == ["greet", "explode"]
    assert listing["prompts"] == ["briefing"] and listing["resources"] == ["config://app"]

    access = [r for r in records if r["logger"] == "mrtr.access"]
    assert [(r["method"], r["target"], r["result"]) for r in access] == [
        ("tools/call", "greet", "input_required"),
        ("tools/list", None, "complete"),
        ("tools/call", "explode", "tool_error"),
        ("prompts/get", "briefing", "error"),
    ]
    assert access[0]["round"] == 1 and access[3]["code"] == -32603
    assert all(r["transport"] == "stdio" and r["duration_ms"] >= 0 for r in access)
    # never the token, never what the client sent as arguments or answers
    assert first["requestState"] not in stderr and key in first["inputRequests"]

    # A tool that raises: traceback in the log, the message (by default) to the client.
    assert answers[2]["result"]["isError"] is True
    assert "disk on fire" in text_of(answers[2])
    (failure,) = [r for r in records if r["level"] == "error" and "explode" in r["message"]]
    assert "Traceback" in failure["traceback"] and "ValueError: disk on fire" in failure["traceback"]
    assert "secret-internal-detail" in answers[3]["error"]["message"]
    validate_message(answers[2], result_def="CallToolResult")


async def test_a_masked_error_names_the_target_and_a_reference_the_log_prints_beside_the_traceback() -> None:
    answers, stderr = await run_stdio("tests.ops_app:masked", [
        call(1, "explode"),
        request(2, "prompts/get", {"name": "briefing", "arguments": {"topic": "boom"}}),
    ])
    assert answers[0]["result"]["isError"] is True
    assert "disk on fire" not in json.dumps(answers[0])
    tool = re.fullmatch(r"tool explode failed with an internal error \(reference ([0-9a-f]{8}); the server's log "
                        r"has the details\)", text_of(answers[0]))
    assert tool, text_of(answers[0])
    assert answers[1]["error"]["code"] == -32603 and "secret-internal-detail" not in answers[1]["error"]["message"]
    prompt = re.fullmatch(r"Internal error: prompt briefing failed with an internal error \(reference ([0-9a-f]{8}); "
                          r"the server's log has the details\)", answers[1]["error"]["message"])
    assert prompt, answers[1]["error"]
    validate_message(answers[0], result_def="CallToolResult")
    validate_message(answers[1])
    # Each reference is on the log line that carries that failure's traceback.
    for reference, detail in ((tool.group(1), "ValueError: disk on fire"),
                              (prompt.group(1), "RuntimeError: prompt broke: secret-internal-detail")):
        block = stderr[stderr.index(f"[reference {reference}]"):]
        assert detail in block.split("\n\n")[0] or detail in block[:4000]
    assert tool.group(1) != prompt.group(1)
    assert "MRTR_SECRET" not in stderr  # this server has its key


async def test_text_access_lines_and_listing() -> None:
    _, stderr = await run_stdio("tests.ops_app:server", [call(7, "explode", {"detail": "x"})])
    assert len([row for row in stderr.splitlines() if "MRTR_SECRET" in row]) == 1
    assert "tools (2): greet, explode" in stderr and "prompts (1): briefing" in stderr
    assert "resources (1): config://app" in stderr
    (line,) = [row for row in stderr.splitlines() if " mrtr.access: " in row]
    assert 'tools/call "explode" tool_error' in line and "ms" in line
