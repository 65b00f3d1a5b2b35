"""2025 calls that survive their worker's death: ``mrtr serve --workers 2`` on one SQLite file.

A session lives in the worker that opened it (ADR 14); with its calls recorded in the
SQLite store (and a copy of the session), the worker the supervisor starts in place of a
killed one serves that session, and adopts its calls at once (it took its predecessor's
slot, so their lease is over). The client is raw HTTP resuming its stream as the spec says;
connections reach either worker, as the kernel spreads them. The server's answer timeout is
6 s, so a client that does not come back in time finds its call ended by it.
"""

from __future__ import annotations

import base64
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio

from ..conftest import stop
from ..tasks.redis_server import free_port
from .conversation import Conversation
from .test_adoption import lines_of

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 6.0


class Workers:
    """The server: its URL, supervisor and log."""

    def __init__(self, url: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.url = url
        self.process = process
        self.log = log


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    folder = tmp_path_factory.mktemp("workers")
    port = free_port()
    log = folder / "server.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MRTR_SECRET": base64.b64encode(os.urandom(32)).decode(),
           "NODES_ANSWER_TIMEOUT": str(TIMEOUT)}
    with open(log, "wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "mrtr", "serve", "tests.nodes.app:server", "--port", str(port), "--workers", "2",
             "--store", f"sqlite:///{folder / 'store.sqlite3'}", "--task-lease", "1", "--log-level", "info",
             "--no-access-log"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log.read_text(errors="replace")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)
        yield Workers(f"http://127.0.0.1:{port}/mcp", process, log)
    finally:
        stop(process)


async def owner_pid(talk: Conversation) -> int:
    """The pid of the worker holding the session (a resource read in it is served there)."""
    response = await talk.post({"jsonrpc": "2.0", "id": next(talk.ids), "method": "resources/read",
                                "params": {"uri": "node://pid"}})
    assert response.status_code == 200, response.text
    return int(response.json()["result"]["contents"][0]["text"])


async def kill(pid: int) -> None:
    """SIGKILL a worker and wait until it is dead (its supervisor reaps it and starts another in its place)."""
    from ..conftest import until

    os.kill(pid, signal.SIGKILL)

    def dead() -> bool:
        # A zombie whose last thread is gone: its sockets are closed (a leader that died first leaves them open
        # until the worker threads of its store are gone too).
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:  # gone (reaped) while we looked
            return True
        return "State:\tZ" in status and "Threads:\t1\n" in status

    await until(dead)


async def test_a_call_survives_its_worker_killed_at_each_question(workers: Workers, tmp_path: Path) -> None:
    journal = tmp_path / "journal.txt"
    nonce = secrets.token_hex(4)
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as http:
        talk = await Conversation(http, workers.url).open()
        question = await talk.start("interview", {"nonce": nonce, "path": str(journal)})
        first = await owner_pid(talk)
        await kill(first)
        await talk.answer(question, {"name": "ada"})  # waits for the worker's replacement, which adopts the call
        second = await talk.next()
        assert "your city" in second["params"]["message"], second
        replacement = await owner_pid(talk)
        assert replacement != first
        await kill(replacement)
        await talk.answer(second, {"city": "lima"})
        final = await talk.next()
        assert final["result"]["content"][0]["text"] == f"{nonce}:ada:lima", workers.log.read_text()[-3000:]
        assert lines_of(journal, nonce) == ["first", "second"]
        assert len(talk.questions()) == 2 and talk.resumptions >= 2


async def test_a_client_that_does_not_come_back_in_time_finds_its_call_ended_by_the_answer_timeout(
        workers: Workers, tmp_path: Path) -> None:
    """Nothing of a call runs while no process holds it; the first thing that reaches it after its answer
    timeout (here, the client resuming) ends it, as that timeout ends a call whose process lives."""
    journal = tmp_path / "journal.txt"
    nonce = secrets.token_hex(4)
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as http:
        talk = await Conversation(http, workers.url).open()
        question = await talk.start("held_open", {"nonce": nonce, "path": str(journal)})
        asked = trio.current_time()
        await kill(await owner_pid(talk))
        await talk.close_stream()
        await trio.sleep_until(asked + TIMEOUT + 0.5)  # the condition is the time itself: the timeout passing
        assert [line.split()[1] for line in journal.read_text().splitlines()] == ["start"]  # nothing ran meanwhile
        final = await talk.next()
        while "method" in final:  # the question withdrawn, then the call's end
            assert final["method"] == "notifications/cancelled" and final["params"]["requestId"] == question["id"]
            final = await talk.next()
        assert final["result"]["isError"] is True and "did not answer" in final["result"]["content"][0]["text"]
        lines = journal.read_text().splitlines()
        assert [line.split()[1] for line in lines] == ["start", "start", "finally"]  # replayed, then ended there
        late = await talk.post({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept",
                                                                                  "content": {"go": True}}})
        assert late.status_code == 202  # too late: accepted and dropped, as on one process
