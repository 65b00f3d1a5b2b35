"""A server restarted without ``MRTR_SECRET`` mid-conversation: the client says why, and ``mrtr call`` offers to start over.

``mrtr serve`` without a fixed secret makes a new key at each start, so a ``requestState``
issued before a restart no longer opens ("failed authentication"). The conversation
cannot go on; what matters is that the person learns the likely cause and can begin again.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

import mrtr
from mrtr.client.errors import StateLost

from ..conftest import stop
from .test_terminal import MRTR, REPO, Terminal, _env, piped

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)


class Restartable:
    """``mrtr serve tests.client.restart_app:server`` on one port, without MRTR_SECRET, that a test can restart."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {k: v for k, v in _env().items() if k != "MRTR_SECRET"}
        self.process = subprocess.Popen([*MRTR, "serve", "tests.client.restart_app:server", "--port", str(self.port),
                                         "--log-level", "warning"], cwd=REPO, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.url, timeout=1)
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                assert self.process.poll() is None and time.monotonic() < deadline, "mrtr serve did not start"
                time.sleep(0.05)

    def restart(self) -> None:
        assert self.process is not None
        stop(self.process)
        self.start()


@pytest.fixture
def server() -> Iterator[Restartable]:
    made = Restartable()
    made.start()
    yield made
    if made.process is not None:
        stop(made.process)


async def test_the_error_names_the_likely_cause(server):
    def answer(request: Any) -> dict[str, Any]:
        if "name" in request.requested_schema["properties"]:
            server.restart()  # between the first answer and the retry that carries it
            return mrtr.accept(name="Ada")
        return mrtr.accept(colour="red") if "colour" in request.requested_schema["properties"] else mrtr.accept(age=3)

    async with mrtr.Client(server.url, on_elicit=answer) as client:
        with pytest.raises(StateLost) as lost:
            await client.call_tool("interview", {"topic": "t"})
    assert lost.value.code == -32602 and "MRTR_SECRET" in lost.value.message
    assert "must start again" in lost.value.message


def test_mrtr_call_piped_explains_and_stops(server):
    env = _env()
    process = subprocess.Popen([*MRTR, "call", server.url, "interview", "topic=t"], cwd=REPO, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stderr is not None
    seen = b""
    while b"name>" not in seen:
        chunk = os.read(process.stderr.fileno(), 4096)
        assert chunk, seen
        seen += chunk
    server.restart()
    out, err = process.communicate(b"Ada\n", timeout=60)
    assert process.returncode == 1
    assert b"restarted without a fixed MRTR_SECRET" in err and b"must start again" in err


def test_mrtr_call_in_a_terminal_offers_to_start_again(server):
    term = Terminal("call", server.url, "interview", "topic=tty")
    term.expect("name>")
    server.restart()
    term.type("Ada")
    term.expect("Start again? [y/N]")
    term.type("y")
    term.expect("name>")
    term.type("Ada")
    term.expect("colour>")
    term.type("1")
    term.expect("age>")
    term.type("36")
    term.expect("Ada/red/36/tty")
    assert term.finish() == 0
    assert piped("list", server.url).returncode == 0
