"""The package type-checks: its annotations are part of the public API (it ships py.typed).

Both tests look at the package the suite imports, so against an installed wheel
(.ci/package.sh) they check the files users get.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mrtr

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(mrtr.__file__).parent


def test_mypy_finds_no_errors_in_the_package():
    result = subprocess.run(
        # -p checks the package Python imports: the checkout's from the repository, the
        # installed one (found through its py.typed) from a directory without mrtr/.
        [sys.executable, "-m", "mypy", "--no-incremental", "-p", "mrtr"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_package_ships_py_typed():
    assert (PACKAGE / "py.typed").exists()
