"""The package type-checks: its annotations are part of the public API (it ships py.typed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_errors_in_the_package():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "mrtr"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_package_ships_py_typed():
    assert (ROOT / "mrtr" / "py.typed").exists()
