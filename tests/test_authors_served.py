"""What a client of a real ``mrtr serve`` process learns when a handler fails, and what the log keeps.

``tests.authors_app:server`` keeps the defaults, so these are the rules a production
server applies: a PublicError's message reaches the client, any other exception a
generic sentence with a reference the log prints beside the traceback, a replay
mismatch its typed error and contract without the handler's files; a failed task's
error follows the same rules. ``mrtr serve --reload`` shows the client everything.
The default task store is named at start, and ``mrtr list`` shows docstrings as text.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import mrtr
from mrtr.testing import TEST_SECRET

from .authors_app import server
from .conftest import stop, until
from .tasks.redis_server import free_port
from .tasks.test_processes import post as post_to_port
from .wire_schema import validate_message

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

ROOT = Path(__file__).resolve().parents[1]
APP = "tests.authors_app:server"


@contextmanager
def serving(cwd: Path, *options: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, Path]]:
    """``mrtr serve`` of the authors app from ``cwd``: its URL and the file its stderr goes to."""
    port = free_port()
    log = cwd / "stderr.log"
    environment = {**os.environ, "MRTR_SECRET": TEST_SECRET, "PYTHONPATH": str(ROOT), **(env or {})}
    environment.pop("MRTR_DEBUG", None)
    environment.pop("MRTR_TASKS", None)
    environment.pop("MRTR_STORE", None)
    with log.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "mrtr", "serve", APP, "--port", str(port), *options],
                                   cwd=cwd, env=environment, stdout=subprocess.DEVNULL, stderr=sink,
                                   start_new_session=True)
    try:
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        if process.poll() is None:
            # --reload runs the server as a child of its own: end the whole group.
            os.killpg(process.pid, signal.SIGTERM)
            stop(process)


async def answering(url: str, log: Path) -> None:
    async def up() -> bool:
        try:
            async with mrtr.Client(url) as client:
                await client.discover()
            return True
        except (mrtr.ClientError, httpx.TransportError, OSError):
            return False

    await until(up, timeout=30, every=0.1)


def post(url: str, method: str, params: dict[str, Any]) -> Any:
    """One JSON-RPC request to the served app declaring the tasks extension (the tasks tests' helper)."""
    return post_to_port(int(url.rsplit(":", 1)[1].split("/", 1)[0]), method, params)


def accept_everything(request: Any) -> Any:
    return mrtr.accept(reply="yes")


async def test_a_default_server_tells_the_client_what_the_author_meant_and_a_reference_for_the_rest(tmp_path):
    with serving(tmp_path) as (url, log):
        await answering(url, log)
        async with mrtr.Client(url, on_elicit=accept_everything) as client:
            exploded = await client.call_tool("explode")
            refused = await client.call_tool("refuse", {"expense": 42})
            with pytest.raises(mrtr.ClientError) as mismatch:
                await client.call_tool("drifting")
        stderr = log.read_text()

    assert exploded.is_error and refused.is_error
    shown = re.fullmatch(r"tool explode failed with an internal error \(reference ([0-9a-f]{8}); the server's log "
                         r"has the details\)", exploded.text)
    assert shown, exploded.text
    assert "hunter2" not in exploded.text and "postgres" not in exploded.text
    # The log line with that reference carries the message and the traceback the client did not get.
    line = next(row for row in stderr.splitlines() if f"[reference {shown.group(1)}]" in row)
    assert "hunter2" in line and "authors_app.py" in line
    assert "Traceback" in stderr[stderr.index(line):]

    assert refused.text == "No expense 42 in your account"

    error = mismatch.value
    assert error.code == -32602 and error.status == 400
    assert error.message.startswith('MRTR replay mismatch at ordinal #1 (key "elicit-1")')
    assert "changed: message" in error.message and "idempotency contract" in error.message
    assert error.data == {"ordinal": 1, "key": "elicit-1", "changed": ["message"]}
    for private in ("authors_app.py", "why:", "Question number", "fingerprint"):
        assert private not in error.message
    # The whole diagnostic is the operator's.
    assert "authors_app.py" in stderr and "why: the question's text differs" in stderr


async def test_a_failed_task_shows_the_client_no_more_than_a_failed_call(tmp_path):
    with serving(tmp_path) as (url, log):
        await answering(url, log)
        created = await post(url, "tools/call", {"name": "background", "arguments": {}})
        task_id = created["result"]["taskId"]
        done = await until(lambda: post(url, "tasks/get", {"taskId": task_id}),
                           lambda reply: reply["result"]["status"] in ("completed", "failed"))
        stderr = log.read_text()
    result = done["result"]["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    reference = re.fullmatch(r"tool background failed with an internal error \(reference ([0-9a-f]{8}); the "
                             r"server's log has the details\)", text)
    assert reference, text
    assert "/srv/secrets" not in json.dumps(done)
    assert f"[reference {reference.group(1)}]" in stderr and "/srv/secrets/expenses.key" in stderr
    validate_message(done)


async def test_the_default_task_store_is_the_servers_own_file_in_the_state_folder_named_at_start(tmp_path):
    state = tmp_path / "state"
    with serving(tmp_path, env={"XDG_STATE_HOME": str(state)}) as (url, log):
        await answering(url, log)
        stderr = log.read_text()
    store = state / "mrtr" / "stores" / f"{server.name}.sqlite3"
    lines = [row for row in stderr.splitlines() if "task store:" in row]
    assert len(lines) == 1 and str(store) in lines[0] and "MRTR_STORE" in lines[0] and "--store" in lines[0]
    assert store.exists() and stat.S_IMODE((state / "mrtr" / "stores").stat().st_mode) == 0o700
    # The working directory gets nothing but the log this test put there.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["state", "stderr.log"]


async def test_a_chosen_task_store_is_named_without_a_default(tmp_path):
    state = tmp_path / "state"
    with serving(tmp_path, "--tasks", "memory:", env={"XDG_STATE_HOME": str(state)}) as (url, log):
        await answering(url, log)
        stderr = log.read_text()
    assert [row.strip() for row in stderr.splitlines() if "task store:" in row] == ["task store: memory:"]
    assert not state.exists()


async def test_mrtr_serve_reload_shows_the_client_everything(tmp_path):
    with serving(tmp_path, "--reload") as (url, log):
        await answering(url, log)
        async with mrtr.Client(url, on_elicit=lambda request: mrtr.decline()) as client:
            exploded = await client.call_tool("explode")
            declined = await client.call_tool("confirm", {"description": "taxi"})
    assert exploded.text == ("ValueError: could not connect to "
                             "postgres://expenses:hunter2@db.internal:5432/expenses")
    # Development shows the author's mistake in full, at the line that made it.
    assert declined.is_error
    assert declined.text.startswith("handler confirm used `.content` of the answer to Elicit(\"File 'taxi'?\", ...) "
                                    '(key "elicit-1"), which the user declined, at ')
    assert "authors_app.py" in declined.text and "check `answer.accepted` first" in declined.text


async def test_mrtr_list_shows_docstrings_as_plain_text(tmp_path):
    with serving(tmp_path) as (url, log):
        await answering(url, log)
        listing = await trio.run_process([sys.executable, "-m", "mrtr", "list", url], capture_stdout=True,
                                         capture_stderr=True, check=False)
    out = listing.stdout.decode()
    assert listing.returncode == 0, listing.stderr.decode()
    assert "confirm - Files description after a confirmation, reading the answer's content unchecked." in out
    assert "``" not in out and ":attr:" not in out
