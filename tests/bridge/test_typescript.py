"""The official TypeScript SDK 1.x client and the MCP Inspector's CLI through ``mrtr proxy``.

The upstream is a 2025-era stdio server nobody here wrote (the official Python SDK 1.x's
``tests/interop/sdk1_server.py stdio``), started by the proxy. The TypeScript client
(``@modelcontextprotocol/sdk`` 1.32.2, pinned in ``package.json`` with its Node, installed
into ``.cache/bridge`` on first use) talks to the proxy over stdio (``mrtr proxy --stdio``)
and over HTTP: a two-question conversation, a decline, a cancel, progress, and a call it
cancels itself. The Inspector's CLI (pinned in ``tests/legacy/inspector``) lists and calls
through the proxy over HTTP and over stdio (it starts the proxy), in both eras; it declares no capabilities, so a question fails
at once as a missing capability, never a hang.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conftest import clean_env, free_port, http_server, pinned_venv
from ..legacy.inspector_install import NODE as INSPECTOR_NODE
from ..legacy.inspector_install import install_inspector
from ..npm import Pinned

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PACKAGES = Pinned(HERE / "package.json", "bridge")


@pytest.fixture(scope="module")
def sdk1_python() -> Path:
    return pinned_venv(REPO / ".cache" / "legacy-venv", REPO / "tests" / "legacy" / "requirements.txt", "mcp",
                       "1.30.0")


def proxy_args(sdk1_python: Path, *options: str) -> list[str]:
    return ["-m", "mrtr", "proxy", "--log-level", "warning", *options, "--", str(sdk1_python),
            str(REPO / "tests" / "interop" / "sdk1_server.py"), "stdio"]


@pytest.fixture(scope="module")
def proxy_url(sdk1_python: Path) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server([sys.executable, *proxy_args(sdk1_python, "--port", str(port))], url, env=clean_env(),
                     cwd=REPO):
        yield url


def _typescript(tmp_path: Path, run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    PACKAGES.install()
    (tmp_path / "node_modules").symlink_to(PACKAGES.modules, target_is_directory=True)
    shutil.copy(HERE / "typescript_checks.mjs", tmp_path / "typescript_checks.mjs")
    done = subprocess.run([str(PACKAGES.node), "typescript_checks.mjs", json.dumps(run)], cwd=tmp_path,
                          capture_output=True, text=True, env=clean_env(), timeout=120, check=False)
    checks = {record["check"]: record for record in
              (json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))}
    assert "failed" not in checks, checks["failed"]["error"]
    assert done.returncode == 0, done.stderr[-3000:]
    return checks


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_typescript_client_through_the_proxy(transport, sdk1_python, tmp_path, request):
    if transport == "stdio":
        run = {"transport": "stdio", "command": sys.executable, "args": proxy_args(sdk1_python, "--stdio"),
               "cwd": str(REPO)}
    else:
        run = {"transport": "http", "url": request.getfixturevalue("proxy_url")}
    checks = _typescript(tmp_path, run)
    assert checks["version"]["version"] == "mrtr-proxy"
    assert checks["two_questions"]["text"] == "Ada/red/ts"
    assert checks["two_questions"]["asked"] == ["Your name, for ts?", "Favourite colour, Ada?"]
    assert checks["decline"]["text"] == "Bo/no colour (decline)"
    assert checks["cancel"]["text"] == "action=cancel"
    # The proxy writes all three before the result; the client hands to its callback only those it
    # read in an earlier chunk than the result (typescript_checks.mjs), so the callback's list is a
    # prefix, however short, of what reached its transport.
    assert checks["progress"]["text"] == "counted 3"
    assert checks["progress"]["wire"] == [1, 2, 3, "result"]
    seen = checks["progress"]["progress"]
    assert seen == [1, 2, 3][:len(seen)]
    assert checks["after_cancel"]["cancelled"] != "not cancelled"
    assert checks["after_cancel"]["text"] == "Cy/blue/again"


def _inspector(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**clean_env(), "HOME": str(home),
           "PATH": f"{INSPECTOR_NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([*install_inspector(), "--cli", *args], capture_output=True, text=True, env=env, cwd=home,
                          timeout=90, check=False)


def _printed(completed: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    start = completed.stdout.find("{")
    assert start >= 0, f"no JSON from the inspector: {completed.stdout[-2000:]}\n{completed.stderr[-2000:]}"
    return json.loads(completed.stdout[start:])  # type: ignore[no-any-return]


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_inspector_through_the_proxy(transport, era, sdk1_python, tmp_path, request):
    options = ["--protocol-era", era]
    if transport == "http":
        where = [request.getfixturevalue("proxy_url")]
    else:  # the inspector starts the proxy, which starts the server
        where = []
        options += ["--", sys.executable, *proxy_args(sdk1_python, "--stdio")]

    def inspect(*args: str) -> subprocess.CompletedProcess[str]:
        return _inspector(tmp_path, *where, *args, *options)

    listed = _printed(inspect("--method", "tools/list"))
    assert {"interview", "confirm", "count"} <= {tool["name"] for tool in listed["tools"]}
    counted = _printed(inspect("--method", "tools/call", "--tool-name", "count", "--tool-arg", "steps=2"))
    assert counted["content"][0]["text"] == "counted 2"
    asked = inspect("--method", "tools/call", "--tool-name", "confirm")
    shown = asked.stdout + asked.stderr
    assert "elicitation" in shown, shown[-2000:]  # named as the missing capability, at once
