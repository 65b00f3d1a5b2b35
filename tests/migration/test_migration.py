"""The migration guide's two tools, run: FastMCP's ``await ctx.elicit`` version and the mrtr generator.

``docs/examples/fastmcp_expenses.py`` runs under FastMCP (pinned in ``requirements.txt``)
in its own virtualenv, ``.cache/fastmcp-venv``, created on the first run and reused, so
its dependencies never mix with ours; FastMCP's own client answers its questions.
``docs/examples/mrtr_expenses.py`` runs behind a real ``mrtr serve`` process, answered by
``mrtr.Client``. Both must give the same answers to the same answers, each reading the
category table once per conversation (the mrtr version because the read is a Step).
docs/handlers.md includes both files as they are. Under ``CI=true`` a failed install fails;
elsewhere it skips, saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mrtr
from mrtr.testing import TEST_SECRET, accept, decline, run

from ..conftest import clean_env, pinned_venv, until
from ..tasks.redis_server import free_port

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
EXAMPLES = ROOT / "docs" / "examples"
VENV = ROOT / ".cache" / "fastmcp-venv"
FASTMCP_VERSION = "4.2.3"


@pytest.fixture(scope="session")
def fastmcp_python() -> Path:
    """The python of ``.cache/fastmcp-venv`` with FastMCP installed (created once, then reused)."""
    return pinned_venv(VENV, HERE / "requirements.txt", "fastmcp", FASTMCP_VERSION)


@pytest.fixture(scope="module")
def fastmcp_runs(fastmcp_python: Path) -> dict[str, dict[str, Any]]:
    done = subprocess.run([str(fastmcp_python), str(HERE / "run_fastmcp.py")], capture_output=True, text=True,
                          env=clean_env(), timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {record["scenario"]: record for record in records}


SCENARIOS = {"accepted": ("accept", True), "declined": ("decline", True), "not_confirmed": ("accept", False)}


def test_the_fastmcp_tool_runs_under_fastmcp(fastmcp_runs):
    assert set(fastmcp_runs) == set(SCENARIOS)
    assert fastmcp_runs["accepted"]["text"] == "Filed 'taxi': 23.50 EUR under meals"
    assert fastmcp_runs["accepted"]["asked"] == ["Category for 'taxi'?", "File 23.50 EUR under meals?"]
    assert all(record["reads"] == 1 for record in fastmcp_runs.values())


async def test_the_mrtr_tool_behind_mrtr_serve_answers_as_the_fastmcp_one_does(fastmcp_runs, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {**os.environ, "MRTR_SECRET": TEST_SECRET}
    with (tmp_path / "stderr.log").open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "mrtr", "serve", "mrtr_expenses:server", "--port",
                                    str(port)], cwd=EXAMPLES, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        async def up() -> bool:
            try:
                async with mrtr.Client(url) as client:
                    await client.discover()
                return True
            except (mrtr.ClientError, OSError):
                return process.poll() is not None

        await until(up, timeout=30, every=0.1)
        assert process.poll() is None, (tmp_path / "stderr.log").read_text()
        for name, (action, ok) in SCENARIOS.items():
            asked: list[str] = []

            def answer(request: Any, action: str = action, ok: bool = ok) -> Any:
                asked.append(request.message)
                if request.message.startswith("Category"):
                    return accept(category="meals") if action == "accept" else decline()
                return accept(ok=ok)

            async with mrtr.Client(url, on_elicit=answer) as client:
                result = await client.call_tool("file_expense", {"description": "taxi", "amount": 23.5})
            assert result.text == fastmcp_runs[name]["text"], name
            assert asked == fastmcp_runs[name]["asked"], name
    finally:
        process.terminate()
        process.wait(timeout=15)


def test_in_mrtr_the_step_keeps_the_read_to_one_per_conversation(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import mrtr_expenses

    mrtr_expenses.reads.clear()
    outcome = run(mrtr_expenses.file_expense, {"description": "taxi", "amount": 23.5},
                  answers={"Category for 'taxi'?": accept(category="meals"),
                           "File 23.50 EUR under meals?": accept(ok=True)})
    assert outcome.result == "Filed 'taxi': 23.50 EUR under meals"
    assert outcome.executions == 3 and mrtr_expenses.reads == ["categories"]
    # Without the Step, the read is code before a question: it runs again every round.
    mrtr_expenses.reads.clear()

    def without_step(description: str, amount: float):
        categories = mrtr_expenses.load_categories()
        category = yield mrtr.Elicit(f"Category for {description!r}?", mrtr.Form().choice("category", categories))
        confirm = yield mrtr.Elicit("Sure?", mrtr_expenses.Confirm)
        return category.content["category"] if confirm.value.ok else None

    run(without_step, {"description": "taxi", "amount": 1.0}, answers=[accept(category="meals"), accept(ok=True)])
    assert mrtr_expenses.reads == ["categories"] * 3


def test_the_guide_shows_both_files_as_they_are():
    guide = (ROOT / "docs" / "handlers.md").read_text()
    for name in ("fastmcp_expenses.py", "mrtr_expenses.py"):
        assert (EXAMPLES / name).is_file()
        include = f'```python\n--8<-- "docs/examples/{name}"\n```'
        assert include in guide, f"docs/handlers.md does not include docs/examples/{name}"
