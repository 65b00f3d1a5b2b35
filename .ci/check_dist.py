"""Checks of the built release files, run by .ci/package.sh (and their failures by tests/test_package.py).

``python .ci/check_dist.py SDIST WHEEL WHEEL_FROM_SDIST`` exits non-zero, saying why, when:

- the wheel built from the unpacked sdist differs from the wheel built from the checkout
  (another file list, or any member with other bytes: the sdist lacks something the build
  reads, or the build depends on the checkout);
- a file of the package in the source tree is missing from the wheel: every file under
  ``mrtr/`` that git tracks, ``.py`` or not (``py.typed``, any data file), is needed at run
  time, so each must be in the wheel at the same path;
- the sdist lacks a tracked file of the package, or the license, README or pyproject.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "mrtr"
SDIST_MUST_HOLD = ("pyproject.toml", "README.md", "LICENSE")


def source_files(root: Path = ROOT) -> list[str]:
    """The package's files in the source tree, as paths relative to ``root``: what git tracks
    under ``mrtr/``, or, outside a git checkout, every file there but bytecode."""
    tracked = subprocess.run(["git", "ls-files", "-z", "--", PACKAGE], cwd=root, capture_output=True, check=False)
    if tracked.returncode == 0 and tracked.stdout:
        return sorted(name for name in tracked.stdout.decode().split("\0") if name)
    return sorted(str(path.relative_to(root)) for path in (root / PACKAGE).rglob("*")
                  if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc")


def wheel_members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist() if not name.endswith("/")}


def sdist_names(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as archive:
        # Every member sits under one top directory, mrtr-VERSION/.
        return {member.name.split("/", 1)[1] for member in archive.getmembers()
                if member.isfile() and "/" in member.name}


def compare_wheels(first: Path, second: Path) -> list[str]:
    """What differs between two wheels, member by member (their zip timestamps aside)."""
    a, b = wheel_members(first), wheel_members(second)
    problems = [f"only in {first.name} from the checkout: {name}" for name in sorted(a.keys() - b.keys())]
    problems += [f"only in the wheel built from the sdist: {name}" for name in sorted(b.keys() - a.keys())]
    problems += [f"{name} differs between the two wheels" for name in sorted(a.keys() & b.keys()) if a[name] != b[name]]
    return problems


def missing_from_wheel(wheel: Path, files: list[str]) -> list[str]:
    """Which package files of the source tree the wheel lacks."""
    members = wheel_members(wheel)
    return [name for name in files if name not in members]


def missing_from_sdist(sdist: Path, files: list[str]) -> list[str]:
    names = sdist_names(sdist)
    return [name for name in [*SDIST_MUST_HOLD, *files] if name not in names]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    sdist, wheel, rebuilt = (Path(arg) for arg in argv)
    files = source_files()
    if not any(not name.endswith(".py") for name in files):
        print(f"no non-.py file found under {PACKAGE}/: py.typed at least should be there", file=sys.stderr)
        return 1
    problems = [f"the wheel lacks {name}" for name in missing_from_wheel(wheel, files)]
    problems += [f"the sdist lacks {name}" for name in missing_from_sdist(sdist, files)]
    problems += compare_wheels(wheel, rebuilt)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    data = [name for name in files if not name.endswith(".py")]
    print(f"wheel: {len(files)} package files present ({', '.join(data)} among them); "
          f"the sdist builds the same wheel ({len(wheel_members(wheel))} members, byte for byte)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
