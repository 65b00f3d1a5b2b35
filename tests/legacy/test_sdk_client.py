"""The official Python SDK 1.x client (``mcp==1.30.0``) against ``mrtr serve``, and the same handlers modern.

``mcp`` 1.x lives in its own virtualenv, ``.cache/legacy-venv``, created on the first run
from ``tests/legacy/requirements.txt`` (this needs the package registry) and reused
afterwards (``tests.conftest.pinned_venv``). Without the registry the tests are skipped,
except under ``CI=true``, where they fail. ``sdk_checks.py`` runs in that virtualenv and prints one JSON line per
scenario; each test below asserts one. It runs twice: over stdio (``mrtr serve --stdio``,
``stdio_client``) and over Streamable HTTP (``mrtr serve --port``,
``streamable_http_client``). Everything the server sent the SDK is kept and validated
against the 2025-11-25 schema. The same handlers then run through the modern path
(``mrtr.Client`` over stdio, 2026-07-28) with the same answers, and must give the same
results: one handler serves both eras.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import mrtr
from mrtr.core.answers import roots, sampled

from ..conftest import clean_env, pinned_venv
from ..interop.test_interop import _mrtr_command, _tail, served
from ..legacy_schema import validate_server_message

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)


REPO_ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
CHECKS = HERE / "sdk_checks.py"
VENV = REPO_ROOT / ".cache" / "legacy-venv"
MCP_VERSION = "1.30.0"
APP = "tests.legacy.app:server"

SCENARIOS = ["_connect", "conversation", "sampling", "roots", "progress", "cancellation", "decline",
             "url_elicitation", "logging", "results", "prompt_and_resource", "missing_capability"]


@pytest.fixture(scope="session")
def legacy_python() -> Path:
    """The python of ``.cache/legacy-venv``, with ``mcp==1.30.0`` (created once, then reused)."""
    return pinned_venv(VENV, REQUIREMENTS, "mcp", MCP_VERSION)


class Run:
    """One run of ``sdk_checks.py``: its scenarios, what it printed, and the server's stdout copies."""

    def __init__(self, completed: subprocess.CompletedProcess[str], out: Path) -> None:
        self.returncode = completed.returncode
        self.stderr = completed.stderr
        self.out = out
        self.records: dict[str, dict[str, Any]] = {}
        for line in completed.stdout.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "scenario" in record:
                self.records[record["scenario"]] = record

    def explain(self) -> str:
        return f"sdk_checks.py exited with {self.returncode}\n--- stderr (tail) ---\n{_tail(self.stderr, 40)}"


def _run_checks(legacy_python: Path, out: Path, *extra: str) -> Run:
    try:
        completed = subprocess.run([str(legacy_python), str(CHECKS), "--mrtr", _mrtr_command(), "--out", str(out),
                                    *extra], cwd=REPO_ROOT, capture_output=True, text=True, env=clean_env(),
                                   timeout=300, check=False)
    except subprocess.TimeoutExpired as exc:
        completed = subprocess.CompletedProcess(exc.cmd, -1, stdout=str(exc.stdout or ""),
                                                stderr=f"timed out\n{exc.stderr or ''}")
    return Run(completed, out)


@pytest.fixture(scope="session", params=["stdio", "http"])
def sdk_run(request: pytest.FixtureRequest, legacy_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp(f"sdk-{request.param}")
    if request.param == "stdio":
        return _run_checks(legacy_python, out)
    (out / "markers").mkdir()
    with served(APP, out / "server.log", env={"MRTR_TEST_MARKERS": str(out / "markers")}) as url:
        return _run_checks(legacy_python, out, "--url", url)


def test_the_scenario_list_matches(legacy_python: Path) -> None:
    listed = subprocess.run([str(legacy_python), str(CHECKS), "--list"], capture_output=True, text=True,
                            env=clean_env(), timeout=60, check=True)
    assert listed.stdout.split() == SCENARIOS


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_sdk_client(sdk_run: Run, scenario: str) -> None:
    record = sdk_run.records.get(scenario)
    if record is None:
        pytest.fail(f"scenario {scenario} never reported\n{sdk_run.explain()}")
    assert record["ok"], f"scenario {scenario} failed:\n{record['detail']}"


def test_every_message_the_server_sent_validates_against_the_2025_schema(sdk_run: Run) -> None:
    files = sorted(sdk_run.out.glob("stdout-*.jsonl"))
    assert len(files) == 2, sdk_run.explain()
    seen: set[str] = set()
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            message = json.loads(line)
            validate_server_message(message, "InitializeResult" if message.get("id") == 0 and "result" in message
                                    else None)
            seen.add(message.get("method") or ("error" if "error" in message else "result"))
    assert {"elicitation/create", "sampling/createMessage", "roots/list", "notifications/progress",
            "notifications/message", "notifications/cancelled", "notifications/elicitation/complete",
            "result", "error"} <= seen, seen


# -- one handler, both eras -------------------------------------------------------------------------

ELICIT: dict[str, Any] = {
    "Welcome to acme! Your name?": mrtr.accept(name="Ada"),
    "Which plan?": mrtr.accept(plan="enterprise"),
    "How do we reach you?": mrtr.accept(email="ada@example.com", newsletter=True),
    "Shall we start?": mrtr.accept(go=True),
    "Signed in. Display name?": mrtr.accept(name="Grace"),
    "Seniority for the engineer interview?": mrtr.accept(level="junior"),
    "Show note 42?": mrtr.accept(show=True),
    "Delete expense 42?": mrtr.accept(sure=True),
}


def modern_answer(answers: dict[str, Any]) -> Callable[[Any], Any]:
    def answer(request: Any) -> Any:
        if request.mode == "url":
            return {"action": "accept"}
        return answers[request.message]
    return answer


async def test_one_handler_serves_both_eras(sdk_run: Run) -> None:
    """The handlers the SDK 1.x client just drove live, replayed through the modern path with the same answers."""
    legacy = {name: record["detail"] for name, record in sdk_run.records.items() if record["ok"]}
    assert {"conversation", "sampling", "roots", "decline", "prompt_and_resource", "url_elicitation",
            "results"} <= set(legacy)
    argv = [_mrtr_command(), "serve", APP, "--stdio"]
    async with mrtr.Client.stdio(argv, cwd=str(REPO_ROOT), stderr=subprocess.DEVNULL,
                                 on_elicit=modern_answer(ELICIT), elicitation_modes=("form", "url"),
                                 on_sample=lambda request: sampled("tea is calm", model="legacy-model"),
                                 on_roots=lambda request: roots({"uri": "file:///work/project", "name": "project"})
                                 ) as client:
        onboard = await client.call_tool("onboard", {"company": "acme"})
        assert onboard.text == legacy["conversation"]["result"]
        assert (await client.call_tool("ask_model", {"topic": "tea"})).text == legacy["sampling"]
        assert (await client.call_tool("where", {})).text == legacy["roots"]
        assert (await client.call_tool("sign_in", {})).text == "signed in as Grace"
        refused = await client.call_tool("refuse", {"expense": 42})
        assert refused.is_error and refused.text == legacy["results"]["refused"] == "No expense 42 in your account"
        prompt = await client.get_prompt("interview", {"role": "engineer"})
        assert prompt.text == legacy["prompt_and_resource"]["prompt"]
        read = await client.read_resource("test://notes/42")
        assert read.text == legacy["prompt_and_resource"]["resource"]
    for action, expected in zip(("decline", "cancel"), legacy["decline"]):
        async with mrtr.Client.stdio(argv, cwd=str(REPO_ROOT), stderr=subprocess.DEVNULL,
                                     on_elicit=lambda request, action=action: {"action": action}) as client:
            assert (await client.call_tool("polite", {})).text == expected


# -- many sessions on two workers --------------------------------------------------------------------

LOAD = HERE / "sdk_load.py"


def test_300_sdk_sessions_on_two_workers_each_get_their_own_answers(legacy_python: Path, tmp_path: Path) -> None:
    """300 SDK sessions at concurrency 16 on ``--workers 2``, every request on a connection of its own.

    Each session's question names its nonce and its result must carry the code answered
    for that nonce, so an answer delivered to another session's generator is counted as
    misrouted. The kernel spreads the connections over both workers; the access log must
    show requests (the answers among them) forwarded to the worker that owns the session.
    """
    log = tmp_path / "server.log"
    with served(APP, log, "--workers", "2") as url:
        completed = subprocess.run([str(legacy_python), str(LOAD), "--url", url, "--sessions", "300",
                                    "--concurrency", "16"], cwd=REPO_ROOT, capture_output=True, text=True,
                                   env=clean_env(), timeout=600, check=False)
    assert completed.returncode == 0, _tail(completed.stderr, 40)
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert (report["ok"], report["errors"], report["misrouted"]) == (300, 0, 0), report["problems"]
    assert set(report["owners"]) == {"1", "2"}, report["owners"]
    access = log.read_text(errors="replace")
    assert "Traceback" not in access, _tail(access, 40)
    forwarded = [line for line in access.splitlines() if "mrtr.access" in line and " forwarded " in line]
    assert any(line.split("mrtr.access: ")[1].startswith("POST") and " 202 " in line for line in forwarded), \
        _tail(access, 20)


# -- the README's 2025 client -----------------------------------------------------------------------

README = REPO_ROOT / "README.md"


def test_the_readmes_sdk_client_talks_to_the_example_server(legacy_python: Path, tmp_path: Path) -> None:
    """The README's SDK 1.x snippet, as written but for the port, against ``mrtr serve`` (the example server)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    snippet = next(block for block in blocks if "streamable_http_client" in block)
    assert "http://127.0.0.1:8000/mcp" in snippet
    with served("mrtr.examples.server:server", tmp_path / "server.log") as url:
        script = tmp_path / "readme_client.py"
        script.write_text(snippet.replace("http://127.0.0.1:8000/mcp", url))
        completed = subprocess.run([str(legacy_python), str(script)], cwd=tmp_path, capture_output=True, text=True,
                                   env=clean_env(), timeout=120, check=False)
    assert completed.returncode == 0, _tail(completed.stderr, 30)
    assert ast.literal_eval(completed.stdout.strip()) == {
        "company": "Acme", "admin": "Ada Lovelace", "email": "ada@example.com", "plan": "team", "region": "eu",
        "channels": ["email"]}
