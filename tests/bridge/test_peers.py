"""The proxy between peers nobody here wrote, pinned exactly, in the two directions that cross eras.

- the official Python SDK 1.x client (``mcp`` 1.30.0, a 2025 session) through ``mrtr proxy``
  to an official SDK 2.x server (``mcp`` 2.3.0, 2026-07-28, questions as
  ``InputRequiredResult`` rounds: ``Resolve``/``Elicit``);
- ``mrtr.Client`` in the 2026-07-28 era through the proxy to an official SDK 1.x server that
  asks live (``ctx.elicit``).

Each over HTTP and over stdio on the downstream side; each a two-question conversation, a
decline, a cancel and progress. The peers run in their own virtualenvs
(``tests.conftest.pinned_venv``); the servers are started once per module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mrtr
from mrtr.core.eras import MODERN

from ..client.conftest import Checked
from ..conftest import clean_env, free_port, http_server, pinned_venv

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MRTR = [sys.executable, "-m", "mrtr"]


@pytest.fixture(scope="module")
def sdk1_python() -> Path:
    return pinned_venv(REPO / ".cache" / "legacy-venv", REPO / "tests" / "legacy" / "requirements.txt", "mcp",
                       "1.30.0")


@pytest.fixture(scope="module")
def sdk2_python() -> Path:
    return pinned_venv(REPO / ".cache" / "interop-venv", REPO / "tests" / "interop" / "requirements.txt", "mcp",
                       "2.3.0")


@pytest.fixture(scope="module")
def sdk2_url(sdk2_python: Path) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server([str(sdk2_python), str(HERE / "sdk2_server.py"), str(port)], url, env=clean_env()):
        yield url


@pytest.fixture(scope="module")
def proxy_of_sdk2(sdk2_url: str) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server([*MRTR, "proxy", sdk2_url, "--port", str(port), "--log-level", "warning"], url,
                     env=clean_env(), cwd=REPO):
        yield url


@pytest.fixture(scope="module")
def sdk1_url(sdk1_python: Path) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server([str(sdk1_python), str(REPO / "tests" / "interop" / "sdk1_server.py"), "http", str(port)], url,
                     env=clean_env()):
        yield url


@pytest.fixture(scope="module")
def proxy_of_sdk1(sdk1_url: str) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server([*MRTR, "proxy", sdk1_url, "--port", str(port), "--log-level", "warning"], url,
                     env=clean_env(), cwd=REPO):
        yield url


def _checks(python: Path, *where: str) -> dict[str, dict[str, Any]]:
    completed = subprocess.run([str(python), str(HERE / "sdk1_client.py"), *where], cwd=REPO, env=clean_env(),
                               capture_output=True, text=True, timeout=120)
    found = {}
    for line in completed.stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        found[record["check"]] = record
    assert completed.returncode == 0, completed.stderr[-3000:]
    return found


@pytest.mark.parametrize("downstream", ["http", "stdio"])
def test_the_sdk1_client_through_the_proxy_to_an_sdk2_server(downstream, sdk1_python, sdk2_url, request):
    if downstream == "http":
        checks = _checks(sdk1_python, "--url", request.getfixturevalue("proxy_of_sdk2"))
    else:
        checks = _checks(sdk1_python, "--stdio", *MRTR, "proxy", "--stdio", "--log-level", "warning", sdk2_url)
    assert checks["two_questions"] == {"check": "two_questions", "text": "Ada/red",
                                       "asked": ["Your name?", "Favourite colour, Ada?"]}
    assert checks["decline"]["text"] == "Bo/no colour (decline)"
    assert checks["cancel"]["text"] == "action=cancel"
    assert checks["progress"] == {"check": "progress", "text": "counted 3", "progress": [1, 2, 3]}
    assert checks["after_cancel"]["text"] == "counted 1"


def _answers(*values: Any) -> Any:
    queue = list(values)
    return lambda request: queue.pop(0)


@pytest.mark.parametrize("downstream", ["http", "stdio"])
async def test_the_modern_mrtr_client_through_the_proxy_to_an_sdk1_server(downstream, sdk1_url, request):
    if downstream == "http":
        client = mrtr.Client(request.getfixturevalue("proxy_of_sdk1"), era="modern")
    else:
        client = mrtr.Client.stdio([*MRTR, "proxy", "--stdio", "--log-level", "warning", sdk1_url], cwd=str(REPO),
                                   env=clean_env(), stderr=subprocess.DEVNULL, era="modern")
    client.target = Checked(client.target)
    progress: list[float] = []
    client.on_progress = lambda p, t, m: progress.append(p)
    async with client:
        client.on_elicit = _answers(mrtr.accept(name="Ada"), mrtr.accept(colour="red"))
        both = await client.call_tool("interview", {"topic": "bridges"})
        client.on_elicit = _answers(mrtr.accept(name="Bo"), mrtr.decline())
        declined = await client.call_tool("interview", {"topic": "bridges"})
        client.on_elicit = _answers(mrtr.cancel())
        cancelled = await client.call_tool("confirm")
        counted = await client.call_tool("count", {"steps": 3})
        assert client.era == MODERN
    assert both.text == "Ada/red/bridges"
    assert declined.text == "Bo/no colour (decline)"
    assert cancelled.text == "action=cancel"
    assert counted.text == "counted 3"
    assert progress[-3:] == [1, 2, 3]
    rounds = [message["params"] for message, _ in client.target.calls("tools/call")]
    assert sum(1 for params in rounds if "requestState" in params) >= 3  # modern rounds, each with the proxy's token
