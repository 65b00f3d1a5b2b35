"""The release checks of .ci/package.sh can fail, and the suite knows which copy of mrtr it tests.

.ci/package.sh runs this whole suite against the wheel installed in a fresh virtualenv, from
a copy of the repository without ``mrtr/`` and with ``MRTR_INSTALLED_COPY=1``; everywhere
else the suite runs against the checkout.
"""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

import mrtr

from .conftest import module_from_file

ROOT = Path(__file__).resolve().parents[1]


def _check_dist():
    return module_from_file(ROOT / ".ci" / "check_dist.py")


def test_the_suite_imports_the_copy_it_was_pointed_at():
    package = Path(mrtr.__file__).resolve().parent
    if os.environ.get("MRTR_INSTALLED_COPY") == "1":
        assert package.parent.name == "site-packages", package
        assert not (ROOT / "mrtr").exists(), "the copy of the tests must not hold the package"
    else:
        assert package == ROOT / "mrtr"


def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


@pytest.mark.slow
def test_a_wheel_without_a_package_file_fails(tmp_path: Path):
    check = _check_dist()
    # The package's files as the source tree holds them: the checkout's, or the installed copy's.
    root = ROOT if (ROOT / "mrtr").is_dir() else Path(mrtr.__file__).resolve().parents[1]
    files = check.source_files(root)
    assert "mrtr/py.typed" in files and "mrtr/__init__.py" in files
    complete = {name: b"" for name in files}
    assert check.missing_from_wheel(_wheel(tmp_path / "full.whl", complete), files) == []
    lacking = {name: data for name, data in complete.items() if name != "mrtr/py.typed"}
    assert check.missing_from_wheel(_wheel(tmp_path / "lacking.whl", lacking), files) == ["mrtr/py.typed"]


def test_two_wheels_must_match_name_for_name_and_byte_for_byte(tmp_path: Path):
    check = _check_dist()
    first = _wheel(tmp_path / "a.whl", {"mrtr/__init__.py": b"x = 1\n", "mrtr/py.typed": b""})
    assert check.compare_wheels(first, _wheel(tmp_path / "b.whl", {"mrtr/py.typed": b"", "mrtr/__init__.py": b"x = 1\n"})) == []
    other = _wheel(tmp_path / "c.whl", {"mrtr/__init__.py": b"x = 2\n", "mrtr/extra.json": b"{}"})
    assert check.compare_wheels(first, other) == [
        "only in a.whl from the checkout: mrtr/py.typed",
        "only in the wheel built from the sdist: mrtr/extra.json",
        "mrtr/__init__.py differs between the two wheels",
    ]


def test_an_sdist_without_the_license_fails(tmp_path: Path):
    check = _check_dist()
    sdist = tmp_path / "mrtr-0.sdist.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name in ("pyproject.toml", "README.md", "mrtr/__init__.py"):
            info = tarfile.TarInfo(f"mrtr-0/{name}")
            archive.addfile(info, io.BytesIO(b""))
    assert check.missing_from_sdist(sdist, ["mrtr/__init__.py", "mrtr/py.typed"]) == ["LICENSE", "mrtr/py.typed"]
