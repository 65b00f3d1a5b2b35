"""Interoperability with the official Python SDK client (``mcp`` 2.3.0).

The ``mcp`` package lives in its own virtualenv, ``.cache/interop-venv``, created on the
first run from ``tests/interop/requirements.txt`` (this needs the package registry) and
reused afterwards, so its dependencies never mix with ours. ``client_checks.py`` runs in
that virtualenv against ``tests.interop.fixture_server:server``, served by ``mrtr serve``
over Streamable HTTP and over stdio, and prints one JSON line per scenario; each test
below asserts one of those lines.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ..conftest import clean_env, meta, stop

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

REPO_ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
CLIENT_CHECKS = HERE / "client_checks.py"
VENV = REPO_ROOT / ".cache" / "interop-venv"
VENV_PYTHON = VENV / "bin" / "python"
MCP_VERSION = "2.3.0"
SERVER_SPEC = "tests.interop.fixture_server:server"

TRANSPORTS = ["http", "stdio"]
SCENARIOS = [
    "_connect",
    "auto_plain",
    "auto_multi_round",
    "auto_group_tuple",
    "auto_group_dict",
    "auto_step_stable",
    "auto_decline",
    "auto_cancel",
    "auto_progress",
    "auto_sampling",
    "auto_roots",
    "auto_mixed_group",
    "auto_invalid_answer",
    "manual_complete",
    "manual_replay_token",
    "manual_tampered_state",
    "manual_different_arguments",
    "manual_different_target",
    "manual_unknown_key",
    "manual_responses_without_state",
    "manual_invalid_answer",
    "manual_decline",
]

CLIENT_TIMEOUT = 120
SERVER_START_TIMEOUT = 20


def _clean_env() -> dict[str, str]:
    """The environment for interop processes, without anything pointing at our virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _mrtr_command() -> str:
    candidate = Path(sys.executable).with_name("mrtr")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("mrtr")
    if found is None:
        pytest.fail("the `mrtr` command is not installed next to this python nor on PATH (pip install -e .)")
    return found


def _has_mcp() -> bool:
    if not VENV_PYTHON.exists():
        return False
    probe = subprocess.run(
        [str(VENV_PYTHON), "-c", f"import importlib.metadata as m, mcp; assert m.version('mcp') == {MCP_VERSION!r}"],
        capture_output=True, env=_clean_env(), timeout=60, check=False,
    )
    return probe.returncode == 0


def _decoded(output: str | bytes | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def _tail(text: str | bytes, lines: int = 30) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:])


@pytest.fixture(scope="session")
def interop_python() -> Path:
    """The python of ``.cache/interop-venv``, with ``mcp`` installed (created once, then reused)."""
    if _has_mcp():
        return VENV_PYTHON
    if not VENV_PYTHON.exists():
        base = shutil.which("python3") or sys.executable
        created = subprocess.run([base, "-m", "venv", str(VENV)], capture_output=True, timeout=300, check=False)
        if created.returncode != 0:
            pytest.fail(f"could not create the interop virtualenv {VENV}:\n{_tail(created.stderr)}")
    installed = subprocess.run(
        [str(VENV_PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "-q", "-r", str(REQUIREMENTS)],
        capture_output=True, env=_clean_env(), timeout=900, check=False,
    )
    if installed.returncode != 0 or not _has_mcp():
        pytest.fail(
            f"could not install {REQUIREMENTS.relative_to(REPO_ROOT)} into {VENV} "
            f"(is the package registry reachable?); pip exited with {installed.returncode}:\n"
            f"{_tail(installed.stdout)}\n{_tail(installed.stderr)}"
        )
    return VENV_PYTHON


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(url: str) -> bool:
    body = json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": meta()},
    }).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "server/discover",
    })
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status == 200 and b'"supportedVersions"' in response.read()
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def served(app: str, log_path: Path, *args: str, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """The MCP endpoint of ``mrtr serve app --port P *args``, running until the block ends.

    It waits until the server answers ``server/discover``; the log file gets the
    server's stdout and stderr (its access lines, one per request).
    """
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    environment = {**clean_env(), **(env or {})}
    with log_path.open("wb") as log:
        process = subprocess.Popen([_mrtr_command(), "serve", app, "--port", str(port), *args],
                                   cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   env=environment)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while not _answers(url):
            if process.poll() is not None:
                pytest.fail(f"`mrtr serve` exited with {process.returncode} before answering:\n"
                            f"{_tail(log_path.read_text(errors='replace'))}")
            if time.monotonic() > deadline:
                pytest.fail(f"`mrtr serve` did not answer server/discover at {url} within "
                            f"{SERVER_START_TIMEOUT} s:\n{_tail(log_path.read_text(errors='replace'))}")
            time.sleep(0.1)
        yield url
    finally:
        stop(process, timeout=15)


@pytest.fixture(scope="session")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Serve the fixture server with ``mrtr serve --port`` for the whole session."""
    with served(SERVER_SPEC, tmp_path_factory.mktemp("interop") / "server.log") as url:
        yield url


class ClientRun:
    """One run of ``client_checks.py``: the reported scenarios and what the script printed."""

    def __init__(self, completed: subprocess.CompletedProcess[str]) -> None:
        self.returncode = completed.returncode
        self.stderr = completed.stderr
        self.records: dict[str, dict[str, Any]] = {}
        self.noise: list[str] = []
        for line in completed.stdout.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                self.noise.append(line)
                continue
            if isinstance(record, dict) and "scenario" in record:
                self.records[record["scenario"]] = record
            else:
                self.noise.append(line)

    def explain(self) -> str:
        return (f"client_checks.py exited with {self.returncode}\n--- stderr (tail) ---\n{_tail(self.stderr, 40)}"
                + (f"\n--- unparsed stdout ---\n{_tail(chr(10).join(self.noise))}" if self.noise else ""))


@pytest.fixture(scope="session")
def client_run(interop_python: Path, request: pytest.FixtureRequest) -> Callable[[str], ClientRun]:
    """Run ``client_checks.py`` once per transport (lazily) and cache its output."""
    runs: dict[str, ClientRun] = {}

    def get(transport: str) -> ClientRun:
        if transport not in runs:
            if transport == "http":
                where = ["--url", request.getfixturevalue("http_url")]
            else:
                where = ["--stdio", "--mrtr", _mrtr_command()]
            try:
                completed = subprocess.run(
                    [str(interop_python), str(CLIENT_CHECKS), *where],
                    cwd=REPO_ROOT, capture_output=True, text=True, env=_clean_env(), timeout=CLIENT_TIMEOUT, check=False,
                )
            except subprocess.TimeoutExpired as exc:
                completed = subprocess.CompletedProcess(
                    exc.cmd, -1, stdout=_decoded(exc.stdout),
                    stderr=f"timed out after {CLIENT_TIMEOUT} s\n{_decoded(exc.stderr)}",
                )
            runs[transport] = ClientRun(completed)
        return runs[transport]

    return get


def test_scenario_list_matches(interop_python: Path) -> None:
    """Every scenario client_checks.py knows is asserted here, and none is missing there."""
    listed = subprocess.run(
        [str(interop_python), str(CLIENT_CHECKS), "--list"],
        capture_output=True, text=True, env=_clean_env(), timeout=60, check=True,
    )
    assert ["_connect", *listed.stdout.split()] == SCENARIOS


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_interop(client_run: Callable[[str], ClientRun], transport: str, scenario: str) -> None:
    run = client_run(transport)
    record = run.records.get(scenario)
    if record is None:
        pytest.fail(f"scenario {scenario} over {transport} never reported\n{run.explain()}")
    detail = json.dumps(record.get("detail"), indent=2, default=str)
    if len(detail) > 8000:
        detail = detail[:8000] + "\n... (truncated)"
    assert record["ok"], f"scenario {scenario} over {transport} failed:\n{detail}"
