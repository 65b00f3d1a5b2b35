"""The package's annotations are part of its public API: it ships py.typed.

mypy itself runs as a step of its own in ``.ci/run`` (``python -m mypy``), not as a test. This
test looks at the package the suite imports, so against an installed wheel (.ci/package.sh)
it checks the files users get.
"""

from __future__ import annotations

from pathlib import Path

import mrtr

PACKAGE = Path(mrtr.__file__).parent


def test_the_package_ships_py_typed():
    assert (PACKAGE / "py.typed").exists()
