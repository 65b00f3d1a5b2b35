"""The official schemas the suite validates against are the repository's own copies, unchanged.

``tests/schemas/`` holds them (its README names each file's source and revision);
``SHA256SUMS`` there lists every file. A file edited by hand, added without a sum or
missing fails here, and so does a project file that reaches for a copy outside the
checkout, which a user's clone does not have.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from .conftest import CHECKOUT
from .wire_schema import SCHEMAS_DIR

SUMS = SCHEMAS_DIR / "SHA256SUMS"


def listed() -> dict[str, str]:
    sums = {}
    for line in SUMS.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name] = digest
    return sums


def test_every_copied_file_is_listed_with_its_sum_and_unchanged():
    sums = listed()
    present = {str(path.relative_to(SCHEMAS_DIR)) for path in SCHEMAS_DIR.glob("mcp-*/**/*") if path.is_file()}
    assert present == set(sums), (sorted(present - set(sums)), sorted(set(sums) - present))
    changed = [name for name, digest in sums.items()
               if hashlib.sha256((SCHEMAS_DIR / name).read_bytes()).hexdigest() != digest]
    assert not changed, f"these copies differ from the official files: {changed}"


@pytest.mark.parametrize("folder", ["mcp-2026-07-28", "mcp-2025-11-25", "mcp-ext-tasks"])
def test_each_schema_is_named_with_its_revision_and_sum_in_the_readme(folder: str):
    readme = (SCHEMAS_DIR / "README.md").read_text()
    row = next((line for line in readme.splitlines() if line.startswith(f"| `{folder}/schema.json`")), None)
    assert row is not None, f"README.md has no row for {folder}/schema.json"
    assert re.search(r"`[0-9a-f]{40}`", row), row
    assert listed()[f"{folder}/schema.json"] in row
    json.loads((SCHEMAS_DIR / folder / "schema.json").read_text())  # a JSON Schema, whole


def test_the_ext_apps_schema_is_named_with_the_package_version_the_suite_pins():
    readme = (SCHEMAS_DIR / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `mcp-ext-apps/schema.json`"))
    pinned = json.loads((CHECKOUT / "tests" / "apps" / "package.json").read_text())["dependencies"]
    assert f"`@modelcontextprotocol/ext-apps@{pinned['@modelcontextprotocol/ext-apps']}`" in row
    assert listed()["mcp-ext-apps/schema.json"] in row
    json.loads((SCHEMAS_DIR / "mcp-ext-apps" / "schema.json").read_text())


def test_the_licenses_of_the_copies_are_kept_beside_them():
    for name in ("LICENSE-modelcontextprotocol", "LICENSE-ext-tasks", "LICENSE-ext-apps"):
        assert "Apache License" in (SCHEMAS_DIR / name).read_text()


def test_no_project_file_reads_outside_the_checkout():
    # Spelled in two pieces so this file does not name what it looks for.
    outside = re.compile(r"\.\./" + "shared|MRTR_" + "SHARED_DIR")
    roots = [CHECKOUT / name for name in ("mrtr", "tests", "benchmarks", "docs", ".ci")]
    found = [str(path.relative_to(CHECKOUT)) for root in roots if root.exists() for path in root.rglob("*")
             if path.is_file() and path.suffix in {".py", ".sh", ".md", ".toml", ".yml", ".json", ""}
             and "__pycache__" not in path.parts and outside.search(path.read_text(errors="replace"))]
    assert not found, f"these files reach outside the checkout: {found}"
