"""Debian's Chromium, driven headless through Playwright for Python, for the tests that need a browser.

No browser is downloaded: Playwright launches the system's ``chromium`` through
``executable_path`` (``.ci/run`` installs the package). Without it, or without Playwright
(the ``test`` extra pins it), a browser test is skipped, saying so, except under ``CI=true``,
where it fails. A page opened with :func:`page_of` leaves, when its block fails, a screenshot
and the page's text in ``.cache/screenshots/`` of the checkout (CI keeps its clone when a run
fails, and says where). Importing this module from a test module skips the whole module when
Playwright is missing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import CHECKOUT

try:
    from playwright.sync_api import Page, expect, sync_playwright
except ImportError:  # the test extra pins it; without it the browser tests cannot run
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("playwright is not installed (pip install -e '.[test]')", allow_module_level=True)

__all__ = ["CHROMIUM_FLAGS", "SCREENSHOTS", "WAIT", "Page", "chromium", "chromium_context", "expect", "page_of"]

SCREENSHOTS = CHECKOUT / ".cache" / "screenshots"
"""Where a failed page leaves its screenshot and text."""

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
"""How the suite starts Chromium: in a container without a user namespace, offline, quiet."""

WAIT = 30_000
"""Milliseconds a step of a page gets."""


def chromium() -> str:
    """Debian's Chromium, or a skip (a failure under ``CI=true``, where ``.ci/run`` installs it)."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if found is None:
        reason = "chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@contextlib.contextmanager
def chromium_context(profile: Path, **options: Any) -> Iterator[Any]:
    """Headless Chromium with a fresh profile in ``profile``: a Playwright browser context (one per module).

    ``options`` go to ``launch_persistent_context`` (a ``viewport``, say).
    """
    executable = chromium()
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=executable, headless=True, args=CHROMIUM_FLAGS, **options)
        try:
            yield context
        finally:
            context.close()


@contextlib.contextmanager
def page_of(browser: Any, name: str) -> Iterator[Page]:
    """A new tab; when the block fails, its screenshot and text go to ``.cache/screenshots/NAME.*``."""
    page = browser.new_page()
    page.set_default_timeout(WAIT)
    try:
        yield page
    except BaseException:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(Exception):
            page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
            (SCREENSHOTS / f"{name}.txt").write_text(page.locator("body").inner_text())
        print(f"screenshot of the failure: {SCREENSHOTS / name}.png", file=sys.stderr)
        raise
    finally:
        page.close()
