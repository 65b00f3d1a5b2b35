"""``mrtr serve --reload``: a changed source file restarts the server."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

import httpx
import pytest
import trio

from mrtr.cli import main

from .conftest import mrtr_process, until
from .test_stdio import REPO, call

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "version"}

APP = '''
from mrtr.server import Server

server = Server("reloading", secret=b"r" * 32)


@server.tool
def version() -> str:
    return "{version}"
'''


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def answer(client: httpx.AsyncClient, url: str) -> str | None:
    try:
        response = await client.post(url, json=call(1, "version"), headers=HEADERS)
    except httpx.TransportError:
        return None
    return response.json()["result"]["content"][0]["text"]


@pytest.mark.slow
async def test_a_changed_module_is_served_after_a_restart(tmp_path: Path) -> None:
    pytest.importorskip("watchfiles")
    module = tmp_path / "reload_app.py"
    module.write_text(APP.format(version="v1"))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = ["serve", "reload_app:server", "--port", str(port), "--reload"]
    async with mrtr_process(args, cwd=tmp_path, env=env) as (process, stderr):
        async with httpx.AsyncClient(timeout=5.0) as client:

            async def serves(version: str) -> None:
                await until(lambda: answer(client, url), lambda served: served == version, timeout=20, every=0.05)

            with trio.fail_after(20):
                await serves("v1")
                module.write_text(APP.format(version="v2"))
                await serves("v2")
                # a module that fails to import: reported, and served again once fixed
                module.write_text("this is not python(")
                await until(lambda: b"error while importing" in stderr, timeout=20, every=0.05)
                module.write_text(APP.format(version="v3"))
                await serves("v3")
        process.send_signal(signal.SIGINT)
        with trio.fail_after(15):
            assert await process.wait() == 0
    text = stderr.decode()
    assert "change in reload_app.py; restarting" in text
    with socket.socket() as probe:  # the served child is gone with the reloader
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_reload_without_the_dev_extra_names_it(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "watchfiles", None)  # as if it were not installed
    assert main(["serve", "tests.stdio_server:server", "--reload"]) == 1
    assert "pip install 'mrtr[dev]'" in capsys.readouterr().err


def test_reload_refuses_stdio_and_workers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--stdio", "--reload"]) == 2
    assert main(["serve", "--workers", "2", "--reload"]) == 2
    assert "--reload" in capsys.readouterr().err
