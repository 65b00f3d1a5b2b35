"""``mrtr call`` on mrtr's own task tools, in a real pseudo-terminal, against ``mrtr serve`` in a subprocess.

The task's progress shows as a bar, its question mid-task is asked like any other, its id
is printed so that a later ``mrtr call URL --task ID`` picks it up, and Ctrl-C asks
before it cancels the task on the server.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import mrtr

from ..conftest import free_port, http_server
from .test_terminal import MRTR, REPO, TIMEOUT, Terminal, _env, piped

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

TASK_ID = re.compile(r"task ([A-Za-z0-9_-]{16,}) \(resume with: ")


class ControllingTerminal(Terminal):
    """A :class:`Terminal` that is the process's controlling terminal, so typing Ctrl-C sends SIGINT."""

    def __init__(self, *args: str) -> None:
        self.master, slave = pty.openpty()

        def take_the_terminal() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.process = subprocess.Popen([*MRTR, *args], stdin=slave, stdout=slave, stderr=slave, cwd=REPO,
                                        env=_env(TERM="xterm-256color", COLUMNS="200"), close_fds=True,
                                        start_new_session=True, preexec_fn=take_the_terminal)
        os.close(slave)
        self.raw = b""
        self.seen = 0

    def task_id(self) -> str:
        self.expect("(resume with: ")
        found = TASK_ID.findall(self.text)
        assert found, self.text
        return found[-1]


@pytest.fixture(scope="module")
def task_server() -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = _env(MRTR_SECRET="Y2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2M=")
    with http_server([*MRTR, "serve", "tests.client.tasks_app:server", "--port", str(port), "--tasks", "memory:",
                      "--log-level", "warning"], url, env=env, cwd=REPO):
        yield url


def _interrupt_once_started(term: ControllingTerminal, gate: Path) -> None:
    """Wait until the task's first Step ran on the server, then type Ctrl-C."""
    deadline = time.monotonic() + TIMEOUT
    while not Path(f"{gate}.started").exists():
        assert time.monotonic() < deadline, term.text
        time.sleep(0.02)
    os.write(term.master, b"\x03")  # Ctrl-C, through the terminal's line discipline


def _status(url: str, task_id: str) -> str:
    async def get() -> str:
        async with mrtr.Client(url) as client:
            return (await client.task(task_id).get()).status

    return trio.run(get)


def test_a_task_with_progress_and_a_question_mid_task(task_server):
    term = ControllingTerminal("call", task_server, "export", "dataset=owls")
    term.expect("Which format?")
    term.expect("format>")
    term.type("1")
    task_id = term.task_id()
    term.expect("Write 40 rows as csv?")
    term.expect("ok>")
    term.type("yes")
    term.expect("wrote 40 rows of owls as csv")
    assert term.finish() == 0
    assert "counted" in term.text  # the task's status message, drawn as the bar's description
    assert _status(task_server, task_id) == "completed"


def test_ctrl_c_asks_and_a_kept_task_is_picked_up_by_id(task_server, tmp_path: Path):
    gate = tmp_path / "gate"
    term = ControllingTerminal("call", task_server, "slow", f"path={gate}")
    task_id = term.task_id()
    _interrupt_once_started(term, gate)
    term.expect(f"Cancel task {task_id} on the server? [y/N]")
    term.type("n")
    term.expect(f"--task={task_id}")
    assert term.finish() == 130
    assert _status(task_server, task_id) == "working"
    gate.write_text("opened")
    resumed = piped("call", task_server, f"--task={task_id}")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "found opened"


def test_ctrl_c_cancels_the_task_when_told_to(task_server, tmp_path: Path):
    gate = tmp_path / "gate"
    term = ControllingTerminal("call", task_server, "slow", f"path={gate}")
    task_id = term.task_id()
    _interrupt_once_started(term, gate)
    term.expect("Cancel task")
    term.type("y")
    term.expect(f"task {task_id} cancelled")
    assert term.finish() == 130
    assert _status(task_server, task_id) == "cancelled"
    again = piped("call", task_server, f"--task={task_id}")
    assert again.returncode == 1 and "cancelled" in again.stderr
    assert sys.executable  # the suite's python ran every command


def test_mrtr_list_shows_task_support_and_annotations(task_server):
    listed = piped("list", task_server)
    assert listed.returncode == 0, listed.stderr
    assert "export [may run as a task, title: Export a dataset, read-only]" in listed.stdout
    assert "slow [runs as a task]" in listed.stdout
    assert "  plain - Not a task tool." in listed.stdout
