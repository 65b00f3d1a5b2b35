"""The MCP Inspector CLI (``@modelcontextprotocol/inspector`` 2.12.0) in its default mode against ``mrtr serve``.

Given a URL, the inspector's CLI speaks the 2025 era (its ``--protocol-era`` defaults to
``legacy`` for an ad-hoc URL): ``initialize``, ``notifications/initialized``,
``logging/setLevel``, the method asked, a ``GET`` stream, all over a real session.
It is installed with the Node it needs, pinned exactly in ``tests/legacy/inspector/package.json``,
into ``.cache/inspector`` on the first run (``inspector_install.py``). With ``--protocol-era
modern`` it speaks 2026-07-28 (``server/discover``, no session, a question refused at once as a
missing capability). Its CLI declares no client
capabilities, so a tool that asks a question must fail as a missing capability does,
at once, never a hang. Every result it prints is checked against the 2025-11-25 schema.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conftest import clean_env
from ..interop.test_interop import _tail, served
from ..legacy_schema import RESULT_DEFS, validate_server_message
from .inspector_install import NODE, install_inspector

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)


APP = "tests.legacy.app:server"


@pytest.fixture(scope="module")
def inspector() -> list[str]:
    """The command line of the pinned inspector's CLI, installed on first use."""
    return [*install_inspector(), "--cli"]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(APP, tmp_path_factory.mktemp("inspector") / "server.log") as endpoint:
        yield endpoint


def run(inspector: list[str], url: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**clean_env(), "HOME": str(home), "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([*inspector, url, *args], capture_output=True, text=True, env=env, cwd=home, timeout=60,
                          check=False)


def result_of(completed: subprocess.CompletedProcess[str], method: str) -> dict[str, Any]:
    """The result the inspector printed, after checking it as the 2025-11-25 result of ``method``."""
    result = json.loads(completed.stdout)
    validate_server_message({"jsonrpc": "2.0", "id": 1, "result": result}, RESULT_DEFS[method])
    return result  # type: ignore[no-any-return]


def test_the_inspector_lists_the_tools(inspector: list[str], url: str, tmp_path: Path) -> None:
    completed = run(inspector, url, tmp_path, "--method", "tools/list")
    assert completed.returncode == 0, _tail(completed.stderr)
    tools = {tool["name"]: tool for tool in result_of(completed, "tools/list")["tools"]}
    assert {"onboard", "profile", "chatty", "polite"} <= set(tools)
    assert tools["onboard"]["inputSchema"]["required"] == ["company"]
    assert "resultType" not in completed.stdout and "ttlMs" not in completed.stdout  # nothing of 2026


def test_the_inspector_calls_a_tool_with_structured_output(inspector: list[str], url: str, tmp_path: Path) -> None:
    completed = run(inspector, url, tmp_path, "--method", "tools/call", "--tool-name", "profile")
    assert completed.returncode == 0, _tail(completed.stderr)
    result = result_of(completed, "tools/call")
    assert result["structuredContent"] == {"name": "Ada", "languages": ["en", "fr"]}
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_the_inspector_calls_a_tool_that_logs_and_gets_its_result_off_the_stream(inspector: list[str], url: str,
                                                                                 tmp_path: Path) -> None:
    completed = run(inspector, url, tmp_path, "--method", "tools/call", "--tool-name", "chatty")
    assert completed.returncode == 0, _tail(completed.stderr)
    assert result_of(completed, "tools/call")["content"] == [{"type": "text", "text": "logged"}]


def test_a_question_to_the_inspector_fails_as_a_missing_capability(inspector: list[str], url: str,
                                                                    tmp_path: Path) -> None:
    completed = run(inspector, url, tmp_path, "--method", "tools/call", "--tool-name", "onboard",
                    "--tool-arg", "company=Acme")
    result = result_of(completed, "tools/call")
    assert result["isError"] is True
    assert "elicitation capability" in result["content"][0]["text"]
    assert completed.returncode != 0 and "isError" in completed.stderr  # the inspector reports the tool error


def test_the_inspector_reads_a_prompt_list_and_a_resource(inspector: list[str], url: str, tmp_path: Path) -> None:
    prompts = run(inspector, url, tmp_path, "--method", "prompts/list")
    assert prompts.returncode == 0, _tail(prompts.stderr)
    assert "interview" in {prompt["name"] for prompt in result_of(prompts, "prompts/list")["prompts"]}
    read = run(inspector, url, tmp_path, "--method", "resources/read", "--uri", "test://static")
    assert read.returncode == 0, _tail(read.stderr)
    assert result_of(read, "resources/read")["contents"][0]["uri"] == "test://static"


# -- the 2026-07-28 era: --protocol-era modern -----------------------------------------------------


def modern_result_of(completed: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The result the inspector printed in the modern era.

    It prints its own view of a result (a listing without its ``cacheScope`` and ``ttlMs``),
    so what it printed is not a wire message to check against the schema; the server's
    messages in this era are checked in ``tests/test_wire.py`` and the interop tests.
    """
    return json.loads(completed.stdout)  # type: ignore[no-any-return]


def test_the_inspector_in_the_modern_era_lists_and_calls(inspector: list[str], url: str, tmp_path: Path) -> None:
    listed = run(inspector, url, tmp_path, "--protocol-era", "modern", "--method", "tools/list")
    assert listed.returncode == 0, _tail(listed.stderr)
    assert {"onboard", "profile", "numbers"} <= {tool["name"] for tool in modern_result_of(listed)["tools"]}
    called = run(inspector, url, tmp_path, "--protocol-era", "modern", "--method", "tools/call",
                 "--tool-name", "numbers")
    assert called.returncode == 0, _tail(called.stderr)
    result = modern_result_of(called)
    assert result["resultType"] == "complete" and result["structuredContent"] == [1, 2, 3]  # 2026 allows a list
    templates = run(inspector, url, tmp_path, "--protocol-era", "modern", "--method", "resources/templates/list")
    assert templates.returncode == 0, _tail(templates.stderr)
    assert [t["uriTemplate"] for t in json.loads(templates.stdout)["resourceTemplates"]] == ["test://notes/{id}"]
    read = run(inspector, url, tmp_path, "--protocol-era", "modern", "--method", "resources/read",
               "--uri", "test://static")
    assert read.returncode == 0, _tail(read.stderr)
    assert modern_result_of(read)["contents"][0]["uri"] == "test://static"


def test_a_question_to_the_modern_inspector_is_a_missing_capability_at_once(inspector: list[str], url: str,
                                                                              tmp_path: Path) -> None:
    asked = run(inspector, url, tmp_path, "--protocol-era", "modern", "--method", "tools/call",
                "--tool-name", "onboard", "--tool-arg", "company=Acme")
    assert asked.returncode == 1
    assert "did not declare the elicitation capability" in json.loads(asked.stdout or asked.stderr)["error"]["message"]
