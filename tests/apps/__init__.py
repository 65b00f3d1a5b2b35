"""MCP Apps as hosts use them: the official TypeScript client and a browser host built on ``AppBridge``.

Both drive packages pinned in ``package.json`` here, installed into ``.cache/apps`` on first
use (``tests/npm.py``) and run with the Node pinned with them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..npm import Pinned

HERE = Path(__file__).resolve().parent
APPS = Pinned(HERE / "package.json", "apps")
"""The pinned set: ext-apps, the TypeScript client and server packages, zod, esbuild, ajv and Node."""


def beside_the_packages(folder: Path, *scripts: Path) -> Path:
    """``folder`` holding copies of ``scripts`` and a link to the installed ``node_modules``.

    Node resolves a module's imports from where the module is; the scripts live in the
    checkout, the packages in ``.cache/apps``, and a test writes only in its temporary folder.
    """
    APPS.install()
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "node_modules"
    if not link.exists():
        link.symlink_to(APPS.modules, target_is_directory=True)
    for script in scripts:
        shutil.copy(script, folder / script.name)
    return folder
