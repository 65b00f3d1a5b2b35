"""A real browser host: mrtr's example interface in a sandboxed frame, its own call asking a question.

``host/host.mjs`` is a small host built as the extension's web hosts are: the official
TypeScript client talks to ``mrtr serve mrtr.examples.apps:server`` over Streamable HTTP, and
the ``AppBridge`` of ``@modelcontextprotocol/ext-apps`` (both pinned in ``package.json``,
bundled here with the pinned esbuild) talks to the interface, which runs in an
``allow-scripts`` sandbox under the Content-Security-Policy built from its ``_meta.ui``.
Debian's Chromium loads it headless through Playwright (``tests/browser.py``). The host calls
``onboard``, whose questions appear as forms the test fills in; the workspace page shows the
result; the test clicks **Invite a teammate**, the page's own ``tools/call`` reaches the server
through the bridge, the server asks whom to invite, the test answers, and the page shows the
final result. Once in the 2026-07-28 era (the server's log shows the page's call as rounds)
and once in a 2025 session (one call, the question asked live). One server, one page server
and one browser serve the module.
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from ..browser import Page, chromium_context, expect, page_of
from ..conftest import clean_env
from ..interop.test_interop import served
from . import APPS, HERE, beside_the_packages

pytestmark = pytest.mark.slow  # starts a server and a browser (tests/conftest.py: the tiers)

HOST = HERE / "host"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("apps-browser")


@pytest.fixture(scope="module")
def site(folder: Path) -> Iterator[str]:
    """The host page, its script bundled with esbuild, served on a loopback port of its own."""
    build = beside_the_packages(folder / "build", HOST / "host.mjs")
    pages = folder / "site"
    pages.mkdir()
    bundled = subprocess.run(
        [str(APPS.node), str(APPS.modules / "esbuild" / "bin" / "esbuild"), "host.mjs", "--bundle", "--format=esm",
         "--platform=browser", "--log-level=warning", f"--outfile={pages / 'host.js'}"],
        cwd=build, capture_output=True, text=True, env=clean_env(), timeout=120, check=False)
    assert bundled.returncode == 0, bundled.stderr
    shutil.copy(HOST / "host.html", pages / "host.html")
    handler = functools.partial(_Quiet, directory=str(pages))
    pages_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=pages_server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{pages_server.server_address[1]}"
    finally:
        pages_server.shutdown()
        pages_server.server_close()
        thread.join()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class names it
        pass


@pytest.fixture(scope="module")
def server(folder: Path) -> Iterator[tuple[str, Path]]:
    """``mrtr serve mrtr.examples.apps:server`` over HTTP (both eras), and its log of one line per request."""
    log = folder / "server.log"
    with served("mrtr.examples.apps:server", log) as url:
        yield url, log


@pytest.fixture(scope="module")
def browser(folder: Path) -> Iterator[Any]:
    with chromium_context(folder / "chromium-profile", viewport={"width": 1000, "height": 1000}) as context:
        yield context


def question(page: Page, text: str) -> Any:
    """The form the host shows for the question ``text``."""
    form = page.locator("form", has=page.get_by_role("heading", name=text, exact=True))
    expect(form).to_be_visible()
    return form


def onboard(page: Page) -> None:
    """Answer the wizard's four rounds as the host shows them (the third asks two questions at once)."""
    admin = question(page, "Who is the admin of Acme's workspace?")
    admin.locator('[name="name"]').fill("Ada Lovelace")
    admin.locator('[name="email"]').fill("ada@example.com")
    admin.get_by_role("button", name="Submit").click()
    plan = question(page, "Which plan?")
    plan.locator('select[name="plan"]').select_option("team")
    plan.get_by_role("button", name="Submit").click()
    region = question(page, "Where should your data live?")
    reach = question(page, "How should we reach you?")
    region.locator('select[name="region"]').select_option("eu")
    reach.locator('input[name="channels"][value="email"]').check()
    region.get_by_role("button", name="Submit").click()
    reach.get_by_role("button", name="Submit").click()


def invite_through_the_page(page: Page) -> None:
    """The workspace page shows the summary; its own call asks whom to invite; the page shows the result."""
    expect(page.locator("#status")).to_have_text("tool result sent to the interface")
    app = page.frame_locator("#app")
    expect(app.locator("#company")).to_have_text("Acme")
    expect(app.locator("#admin")).to_have_text("Ada Lovelace <ada@example.com>")
    expect(app.locator("#plan")).to_have_text("team")
    app.get_by_role("button", name="Invite a teammate").click()
    who = question(page, "Who should join Acme's workspace?")
    who.locator('[name="email"]').fill("grace@example.com")
    who.get_by_role("button", name="Submit").click()
    expect(app.locator("#invited")).to_have_text("Invited grace@example.com to Acme.")
    expect(app.locator("#members")).to_contain_text("grace@example.com")
    expect(page.locator("form")).to_have_count(0)


def lines_since(log: Path, start: int) -> list[str]:
    return log.read_text(errors="replace")[start:].splitlines()


def open_host(page: Page, site: str, url: str, era: str) -> None:
    page.goto(f"{site}/host.html?" + urlencode({"server": url, "era": era, "tool": "onboard",
                                                  "arguments": json.dumps({"company": "Acme"})}))


def test_in_the_2026_era_the_pages_own_call_asks_in_rounds(site: str, server: tuple[str, Path], browser: Any) -> None:
    url, log = server
    start = len(log.read_text(errors="replace"))
    with page_of(browser, "apps-host-2026") as page:
        open_host(page, site, url, "modern")
        expect(page.locator("#status")).not_to_have_text("starting")
        onboard(page)
        invite_through_the_page(page)
        assert "connected: MCP 2026-07-28" in page.locator("#log").inner_text()
    lines = lines_since(log, start)
    invites = [line.split('"invite" ')[1].split()[0] for line in lines if 'tools/call "invite"' in line]
    assert invites == ["input_required", "complete"], lines  # the page's call: a round, then its result
    assert not any(" initialize " in line for line in lines), lines


def test_in_a_2025_session_the_pages_own_call_asks_live(site: str, server: tuple[str, Path], browser: Any) -> None:
    url, log = server
    start = len(log.read_text(errors="replace"))
    with page_of(browser, "apps-host-2025") as page:
        open_host(page, site, url, "legacy")
        expect(page.locator("#status")).not_to_have_text("starting")
        onboard(page)
        invite_through_the_page(page)
        assert "connected: MCP 2025-11-25" in page.locator("#log").inner_text()
    lines = lines_since(log, start)
    assert any(" initialize " in line for line in lines), lines
    invites = [index for index, line in enumerate(lines) if 'tools/call "invite"' in line]
    assert len(invites) == 1 and "input_required" not in lines[invites[0]], lines  # one call, no rounds
    # The question went out on the call's stream; the answer, a POST of its own, came back before the result.
    assert "POST /mcp - accepted 202" in lines[invites[0] - 1], lines
