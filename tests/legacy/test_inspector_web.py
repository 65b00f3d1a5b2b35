"""The MCP Inspector's web interface as a real host, driven in headless Chromium, and ``mrtr dev``.

The pinned Inspector (``inspector_install.py``) serves its web interface on loopback with
three servers in its catalog: ``mrtr serve`` over HTTP in the 2025 era (its default), the
same server in the 2026-07-28 era (``"protocolEra": "modern"``), and over stdio, the last
one being exactly the entry ``mrtr install json`` prints. A person's steps are taken in
Debian's Chromium through Playwright for Python (``executable_path``: no browser is
downloaded): connect, open the Tools tab, run ``greet``, answer its first question with a
name and decline the second. One server, one Inspector and one browser serve the module.

A failing test leaves a screenshot and the page's text in ``.cache/screenshots/`` of the
checkout (``tests/browser.py``, which the MCP Apps host test shares).
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..browser import Page, chromium_context, expect, page_of
from ..conftest import clean_env, free_port, http_server, stop
from ..hosts.fixtures import project
from ..interop.test_interop import served
from .inspector_install import install_inspector, pinned_version

pytestmark = pytest.mark.slow  # starts processes and a browser (tests/conftest.py: the tiers)

MRTR = str(Path(sys.executable).parent / "mrtr")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inspector-web")


@pytest.fixture(scope="module")
def app(folder: Path) -> Path:
    """The user's project: ``hostapp:server``, whose ``greet`` asks two questions."""
    return project(folder / "project")


@pytest.fixture(scope="module")
def server(app: Path, folder: Path) -> Iterator[tuple[str, Path]]:
    """``mrtr serve hostapp:server`` over HTTP (both eras), and its log of one line per request."""
    log = folder / "server.log"
    with served("hostapp:server", log, env={"PYTHONPATH": str(app)}) as url:
        yield url, log


@pytest.fixture(scope="module")
def inspector(folder: Path) -> list[str]:
    return install_inspector()


def quiet_inspector_env(folder: Path, ui: int) -> dict[str, str]:
    """The Inspector on loopback, on ports of its own, keeping nothing outside ``folder``, opening no browser."""
    return {**clean_env(), "HOME": str(folder), "HOST": "127.0.0.1", "CLIENT_PORT": str(ui),
            "MCP_SANDBOX_PORT": str(free_port()), "MCP_APP_ORIGIN_PORT": str(free_port()),
            "MCP_STORAGE_DIR": str(folder / "storage"), "MCP_AUTO_OPEN_ENABLED": "false",
            "MCP_INSPECTOR_SECRET_STORE": "memory"}


@pytest.fixture(scope="module")
def ui(inspector: list[str], server: tuple[str, Path], app: Path, folder: Path) -> Iterator[str]:
    """The Inspector's web interface with three servers in its catalog: legacy, modern and stdio."""
    printed = subprocess.run([MRTR, "install", "json", "hostapp:server", "--no-check"], cwd=app, env=clean_env(),
                             capture_output=True, text=True, timeout=60, check=True)
    entry = json.loads(printed.stdout)["mcpServers"]["hostapp"]
    url = server[0]
    catalog = folder / "catalog.json"
    catalog.write_text(json.dumps({"mcpServers": {
        "legacy": {"type": "streamable-http", "url": url},
        "modern": {"type": "streamable-http", "url": url, "protocolEra": "modern"},
        "stdio": {"type": "stdio", "command": entry["command"], "args": entry["args"], "env": entry["env"]},
    }}))
    port = free_port()
    env = {**quiet_inspector_env(folder, port), "DANGEROUSLY_OMIT_AUTH": "true", "MCP_CATALOG_PATH": str(catalog)}
    with http_server([*inspector, "--web"], f"http://127.0.0.1:{port}/", env=env, cwd=folder, timeout=60):
        yield f"http://127.0.0.1:{port}/"


@pytest.fixture(scope="module")
def browser(folder: Path) -> Iterator[Any]:
    """Headless Chromium with a fresh profile, one for the module."""
    with chromium_context(folder / "chromium-profile", viewport={"width": 1400, "height": 900}) as context:
        yield context


def connect(page: Page, server: str) -> None:
    switch = page.get_by_role("switch", name=f'Connect or disconnect "{server}"')
    switch.click(force=True)  # Mantine's switch input is drawn over by its track
    expect(switch).to_be_checked()
    expect(page.locator("header").get_by_text("host-app")).to_be_visible()  # the server's name, from its answer


def converse(page: Page, *, modern: bool) -> None:
    """Run ``greet``: a name for the first question, a decline for the second; check what the page says."""
    page.locator("header label", has_text="Tools").click()
    page.get_by_role("button", name="greet").click()
    page.get_by_role("button", name="Execute Tool").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Your name?")
    badge = dialog.get_by_text(re.compile("input_required", re.IGNORECASE))
    if modern:
        expect(badge.first).to_be_visible()  # a 2026-07-28 question is an InputRequiredResult, answered by retrying
    else:
        expect(badge).to_have_count(0)
    dialog.get_by_role("textbox", name="name").fill("Ada")
    dialog.get_by_role("button", name="Submit").click()
    expect(dialog).to_contain_text("Subscribe to the newsletter, Ada?")
    dialog.get_by_role("button", name="Decline").click()
    expect(page.get_by_text("hello Ada, no newsletter (decline)")).to_be_visible()
    expect(page.get_by_role("dialog")).to_have_count(0)


def log_lines(log: Path, start: int) -> list[str]:
    return log.read_text(errors="replace")[start:].splitlines()


def test_a_conversation_in_the_2025_era_over_http(ui: str, browser: Any, server: tuple[str, Path]) -> None:
    log = server[1]
    start = len(log.read_text(errors="replace"))
    with page_of(browser, "inspector-2025-http") as page:
        page.goto(ui)
        connect(page, "legacy")
        expect(page.get_by_text("MCP 2025-11-25")).to_have_count(1)
        converse(page, modern=False)
    lines = log_lines(log, start)
    assert any("initialize" in line for line in lines), lines
    assert not any('tools/call "greet" input_required' in line for line in lines), lines  # a live session, no rounds


def test_a_conversation_in_the_2026_era_over_http(ui: str, browser: Any, server: tuple[str, Path]) -> None:
    log = server[1]
    start = len(log.read_text(errors="replace"))
    with page_of(browser, "inspector-2026-http") as page:
        page.goto(ui)
        connect(page, "modern")
        expect(page.get_by_text("MCP 2026-07-28")).to_have_count(1)
        converse(page, modern=True)
    lines = log_lines(log, start)
    rounds = [line for line in lines if 'tools/call "greet"' in line]
    assert len(rounds) == 3, lines  # two questions: two input_required rounds, then the result
    assert [line.split('"greet" ')[1].split()[0] for line in rounds] == ["input_required", "input_required",
                                                                           "complete"], rounds
    assert not any(" initialize " in line for line in lines), lines


def test_a_conversation_over_stdio_with_the_entry_mrtr_install_writes(ui: str, browser: Any) -> None:
    with page_of(browser, "inspector-stdio") as page:
        page.goto(ui)
        connect(page, "stdio")
        converse(page, modern=False)


# -- mrtr dev -----------------------------------------------------------------------------------------


class Lines:
    """A process's stderr gathered line by line as it comes, to wait for what it says."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.process = process
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if found := re.search(pattern, line):
                    return found
            if self.process.poll() is not None and not self.reader.is_alive():
                break
            self.reader.join(0.05)
        raise AssertionError(f"{pattern!r} never came; the process said:\n{''.join(self.lines)[-3000:]}")


def dev(args: list[str], app: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([MRTR, "dev", "hostapp:server", "--no-browser", *args], cwd=app, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def refused(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def test_mrtr_dev_serves_and_opens_the_inspector_connected(inspector: list[str], app: Path, folder: Path,
                                                           browser: Any) -> None:
    port, ui_port = free_port(), free_port()
    env = {**quiet_inspector_env(folder / "dev", ui_port), "PYTHONPATH": str(app)}
    # Through a shell that does not pass signals on, as npx (npm exec) starts the Inspector: stopping mrtr dev
    # must stop the Inspector under it too.
    wrapped = shlex.join(["sh", "-c", '"$0" "$@"; exit $?', *inspector])
    process = dev(["--port", str(port), "--inspector-port", str(ui_port), "--inspector", wrapped], app, env)
    said = Lines(process)
    try:
        link = said.wait_for(r"the MCP Inspector, connected to it: (\S+)").group(1)
        said.wait_for(rf"serving hostapp:server at http://127\.0\.0\.1:{port}/mcp")
        assert f"autoConnect=" in link and f"127.0.0.1%3A{port}%2Fmcp" in link
        said.wait_for("MCP Inspector Web is up and running")
        with page_of(browser, "mrtr-dev") as page:
            page.goto(link)
            expect(page.get_by_role("switch", name='Connect or disconnect "deep-link"')).to_be_checked()
            expect(page.locator("header").get_by_text("host-app")).to_be_visible()
            converse(page, modern=False)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert refused(port) and refused(ui_port)  # both children stopped with it
    finally:
        stop(process)


def test_mrtr_dev_without_npx_prints_the_command_and_serves(app: Path, folder: Path) -> None:
    port = free_port()
    env = {**clean_env(), "PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(app)}
    process = dev(["--port", str(port)], app, env)
    said = Lines(process)
    try:
        said.wait_for("needs Node.js >= 22.19 with npx, which was not found")
        command = said.wait_for(r"^\s+(npx -y .*)$").group(1)
        assert command == (f"npx -y @modelcontextprotocol/inspector@{pinned_version()} --web --transport http "
                           f"--server-url http://127.0.0.1:{port}/mcp")
        said.wait_for(rf"serving hostapp:server at http://127\.0\.0\.1:{port}/mcp")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        stop(process)


def test_an_inspector_that_stops_stops_mrtr_dev_saying_so(app: Path) -> None:
    port = free_port()
    process = dev(["--port", str(port), "--inspector-port", str(free_port()), "--inspector", "false"], app,
                  {**clean_env(), "PYTHONPATH": str(app)})
    said = Lines(process)
    try:
        said.wait_for("the MCP Inspector exited with code 1; stopping")
        assert process.wait(timeout=30) == 1
        assert refused(port)
    finally:
        stop(process)
