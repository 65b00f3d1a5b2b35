"""The official TypeScript client reads mrtr's MCP Apps as a host does, over HTTP and stdio, in both eras.

``typescript_checks.mjs`` runs with ``@modelcontextprotocol/client`` 2.4.0 and the extension's
``schema.json`` from ``@modelcontextprotocol/ext-apps`` 2.0.4 (both pinned in
``package.json``): it connects to ``mrtr serve tests.apps.app:server`` in the 2025 era
(``initialize``) and pinned to 2026-07-28, over Streamable HTTP and over stdio, declaring the
extension or not; lists the tools and resources, reads the interface, calls the linked tool
and the app-only tool that asks a question, and checks every ``_meta.ui`` against the
schema. One Node process runs the eight combinations; each test reads its line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conftest import CHECKOUT, clean_env
from ..interop.test_interop import served
from . import APPS, HERE, beside_the_packages

pytestmark = pytest.mark.slow  # starts a server, Node and stdio servers (tests/conftest.py: the tiers)

APP = "tests.apps.app:server"
RUNS = [(transport, era, ui) for transport in ("http", "stdio") for era in ("legacy", "modern")
        for ui in (True, False)]


def name_of(transport: str, era: str, ui: bool) -> str:
    return f"{transport}-{era}-{'ui' if ui else 'no-ui'}"


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("apps-typescript")
    scripts = beside_the_packages(folder / "scripts", HERE / "typescript_checks.mjs")
    with served(APP, folder / "server.log") as url:
        runs = [{"name": name_of(transport, era, ui), "transport": transport, "era": era, "ui": ui, "url": url,
                 "command": sys.executable, "args": ["-m", "mrtr", "serve", APP, "--stdio", "--log-level", "warning"],
                 "cwd": str(CHECKOUT)} for transport, era, ui in RUNS]
        done = subprocess.run([str(APPS.node), str(scripts / "typescript_checks.mjs"), json.dumps(runs)],
                              cwd=scripts, capture_output=True, text=True, env=clean_env(), timeout=300, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(lines) != len(RUNS):
        pytest.fail(f"the checks stopped after {len(lines)} of {len(RUNS)} runs:\n{done.stdout[-3000:]}\n"
                    f"{done.stderr[-3000:]}")
    yield {line["name"]: line for line in lines}


@pytest.mark.parametrize("transport, era, ui", RUNS, ids=[name_of(*run) for run in RUNS])
def test_the_typescript_client_reads_every_field_as_the_extension_defines_it(
        outcomes: dict[str, dict[str, Any]], transport: str, era: str, ui: bool) -> None:
    outcome = outcomes[name_of(transport, era, ui)]
    assert outcome["problems"] == [], outcome
    saw = outcome["saw"]
    assert saw["version"] == ("2026-07-28" if era == "modern" else "2025-11-25")
    assert saw["tools"]["dashboard"] == {"ui": {"resourceUri": "ui://tests-apps/dashboard.html"},
                                         "flat": "ui://tests-apps/dashboard.html"}
    assert saw["tools"]["refresh"] == {"ui": {"visibility": ["app"]}, "flat": None}
    assert saw["tools"]["plain"] == {"ui": None, "flat": None}
    assert saw["resourceMeta"] == {
        "csp": {"connectDomains": ["https://api.example.com", "wss://live.example.com"],
                "resourceDomains": ["https://*.cdn.example.com"], "frameDomains": ["https://player.example.com"],
                "baseUriDomains": ["https://example.com"]},
        "permissions": {"camera": {}, "microphone": {}, "geolocation": {}, "clipboardWrite": {}},
        "domain": "a1b2c3d4.example-content.com", "prefersBorder": False}
    assert saw["text"] == f"Sales in eu: 42 (interface rendered: {ui})"  # the fallback, whoever calls
    assert saw["questions"] == ["Refresh eu now?"] and saw["appOnly"] == "refreshed eu"
