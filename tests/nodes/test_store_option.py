"""One setting for the store: ``--store`` (``--tasks``), ``MRTR_STORE`` (``MRTR_TASKS``) and ``store_url=``
(``tasks_url=``), a password never on the command line, and a key prefix that keeps servers apart."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mrtr import Server
from mrtr.cli import main

from ..tasks.redis_server import redis_cli, redis_server
from .cluster import ROOT

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)


@pytest.mark.parametrize("flag", ["--store", "--tasks"])
def test_a_store_url_with_a_password_is_refused_on_the_command_line_without_echoing_it(
        flag: str, capsys: pytest.CaptureFixture[str]):
    assert main(["serve", "tests.nodes.app:server", flag, "redis://:hunter2-pw@127.0.0.1:6379/0"]) == 2
    error = capsys.readouterr().err
    assert "MRTR_REDIS_PASSWORD" in error and "MRTR_STORE" in error and "hunter2" not in error
    assert main(["check-tasks", "tests.nodes.app:server", flag, "redis://127.0.0.1:6379/0?password=hunter2-pw"]) == 2
    assert "hunter2" not in capsys.readouterr().err


def test_the_constructor_takes_store_url_and_its_older_name():
    assert Server("a", secret=b"s" * 32, store_url="memory:").store_url == "memory:"
    older = Server("b", secret=b"s" * 32, tasks_url="memory:")
    assert older.store_url == older.tasks_url == "memory:"
    with pytest.raises(ValueError, match="older name"):
        Server("c", secret=b"s" * 32, store_url="memory:", tasks_url="sqlite:///other.sqlite3")


def test_a_process_takes_its_password_from_the_environment_and_keeps_its_keys_under_its_prefix():
    """``mrtr check-tasks`` (a real process) reads a store through ``--store`` with the password in the
    environment; a server's keys under ``?prefix=`` are its alone."""
    with redis_server(password="env-only-pw") as (url, _process):
        bare = url.replace(":env-only-pw@", "")
        script = (
            "import trio, time\n"
            "from mrtr.carriers.tasks import open_store\n"
            "from tests.tasks.test_store import make_record\n"
            "async def main():\n"
            f"    async with open_store({bare + '?prefix=tenant-a:'!r}) as store:\n"
            "        await store.create(make_record(status='working'))\n"
            "trio.run(main)\n"
        )
        environment = {"MRTR_REDIS_PASSWORD": "env-only-pw", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=environment, check=True, timeout=60)
        assert redis_cli(url, "--scan", "--pattern", "tenant-a:task:*")
        assert not redis_cli(url, "--scan", "--pattern", "mrtr:*")
        listed = subprocess.run(
            [sys.executable, "-m", "mrtr", "check-tasks", "tests.tasks.app:server", "--store", bare + "?prefix=tenant-a:"],
            cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60)
        other = subprocess.run(
            [sys.executable, "-m", "mrtr", "check-tasks", "tests.tasks.app:server", "--store", bare + "?prefix=tenant-b:"],
            cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60)
        wrong = subprocess.run(
            [sys.executable, "-m", "mrtr", "check-tasks", "tests.tasks.app:server", "--store", bare],
            cwd=ROOT, env={**environment, "MRTR_REDIS_PASSWORD": "not-it"}, capture_output=True, text=True, timeout=60)
    # Its tool "t" is not in that app, so the check says it would fail (exit 1): it was found.
    assert listed.returncode == 1 and "1 task in flight" in listed.stdout, listed.stdout + listed.stderr
    assert other.returncode == 0 and "0 tasks in flight" in other.stdout, other.stdout + other.stderr
    assert wrong.returncode == 3 and "not-it" not in wrong.stdout + wrong.stderr, wrong.stdout + wrong.stderr
