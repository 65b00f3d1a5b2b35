"""Two ``mrtr serve`` nodes behind haproxy, configured with the lines ``docs/eras.md`` gives.

Across hosts nothing is forwarded: a load balancer must send every request of a 2025
session to the node that opened it. The backend below is the documentation's, as
written but for its server lines; SDK 1.x clients (``tests/legacy/sdk_load.py``, a new
connection for every request) hold sessions through it, each checking that its answer
reached its own call. The same load through a backend that only spreads requests
(round robin, no stickiness) must fail, or the first test would prove nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from ..conftest import clean_env, stop
from ..interop.test_interop import _free_port, _tail, served
from .test_sdk_client import APP, LOAD, REPO_ROOT, legacy_python  # noqa: F401  (a fixture)

ERAS = REPO_ROOT / "docs" / "eras.md"

# Starts processes (tests/conftest.py: the tiers).
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("haproxy") is None, reason="haproxy is not installed")]


def documented_backend() -> list[str]:
    """The haproxy backend of docs/eras.md, its lines as written."""
    blocks = re.findall(r"```\n(backend mcp\n.*?)```", ERAS.read_text(), re.S)
    assert len(blocks) == 1, "docs/eras.md should show one haproxy backend"
    return blocks[0].rstrip("\n").split("\n")


@contextmanager
def balanced(backend: list[str], nodes: list[str], tmp_path: Path) -> Iterator[str]:
    """haproxy in front of ``nodes`` (their MCP URLs) with ``backend``'s rules; the URL to use."""
    port = _free_port()
    servers = [f"    server node{number} {url.split('/')[2]}" for number, url in enumerate(nodes)]
    rules = [line for line in backend if not line.strip().startswith("server ")]
    config = tmp_path / "haproxy.cfg"
    config.write_text("\n".join([
        "defaults", "    mode http", "    timeout connect 5s", "    timeout client 60s", "    timeout server 60s",
        "frontend mcp_in", f"    bind 127.0.0.1:{port}", "    default_backend mcp",
        *rules, *servers, ""]))
    checked = subprocess.run(["haproxy", "-c", "-f", str(config)], capture_output=True, text=True, timeout=30,
                             check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    process = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process, timeout=10)
        if process.stderr is not None:
            process.stderr.close()


def load(legacy_python: Path, url: str, sessions: int, timeout: float = 60) -> dict[str, Any]:
    completed = subprocess.run([str(legacy_python), str(LOAD), "--url", url, "--sessions", str(sessions),
                                "--concurrency", "8", "--timeout", str(timeout)], cwd=REPO_ROOT, capture_output=True, text=True,
                               env=clean_env(), timeout=300, check=False)
    assert completed.returncode == 0, _tail(completed.stderr, 40)
    return json.loads(completed.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[str]]:
    with ExitStack() as stack:
        # The proxy passes the Host the client sent (its own address), which a node must accept.
        yield [stack.enter_context(served(APP, tmp_path / f"node{number}.log", "--allowed-host", "127.0.0.1"))
               for number in range(2)]


def accepted_calls(log: Path) -> int:
    return sum(1 for line in log.read_text(errors="replace").splitlines() if '"secret_code" complete' in line)


def test_the_documented_haproxy_lines_keep_each_session_on_its_node(legacy_python: Path, nodes: list[str],
                                                                     tmp_path: Path) -> None:
    with balanced(documented_backend(), nodes, tmp_path) as url:
        report = load(legacy_python, url, 60)
    assert (report["ok"], report["errors"], report["misrouted"]) == (60, 0, 0), report["problems"]
    calls = [accepted_calls(tmp_path / f"node{number}.log") for number in range(2)]
    assert sum(calls) == 60 and min(calls) > 0, calls  # both nodes served sessions


def test_without_stickiness_sessions_break(legacy_python: Path, nodes: list[str], tmp_path: Path) -> None:
    spread = ["backend mcp", "    balance roundrobin"]
    with balanced(spread, nodes, tmp_path) as url:
        # A client whose answer reached the other node waits for its result: only its deadline ends it.
        report = load(legacy_python, url, 16, timeout=5)
    assert report["errors"] > 0 and report["misrouted"] == 0, report
    unknown = sum(" 404 " in line for number in range(2)
                  for line in (tmp_path / f"node{number}.log").read_text(errors="replace").splitlines())
    assert unknown > 0  # requests that reached the node without their session
