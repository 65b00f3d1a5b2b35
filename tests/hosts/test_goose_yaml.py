"""Goose's config.yaml edited as lines: read back by a real YAML parser, every other line kept."""

from __future__ import annotations

import difflib
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr.cli.goose_yaml import GooseConfigRefused, extension_names, remove_extension, set_extension

from ..conftest import examples

CONFIG = """# Goose settings
GOOSE_PROVIDER: openai
GOOSE_MODEL: gpt-4o   # the model
extensions:
  developer:
    bundled: true
    enabled: true
    name: developer
    timeout: 300
    type: builtin
  # a server of mine
  github:
    args: []
    cmd: github-mcp
    enabled: true
    envs: {}
    name: github
    type: stdio

GOOSE_MODE: smart_approve
"""

ENTRY = {"enabled": True, "name": "mine", "type": "stdio", "cmd": "/venv/bin/mrtr",
         "args": ["serve", "app:server", "--stdio"], "envs": {"PYTHONPATH": "/srv/app", "TOKEN": 'a"b\\c'},
         "timeout": 300, "description": "mine (mrtr)"}


def test_a_new_extension_reads_back_and_the_rest_is_kept_line_for_line():
    changed = set_extension(CONFIG, "mine", ENTRY)
    data = yaml.safe_load(changed)
    assert data["extensions"]["mine"] == ENTRY
    assert data["extensions"]["github"]["cmd"] == "github-mcp" and data["GOOSE_MODE"] == "smart_approve"
    steps = difflib.SequenceMatcher(None, CONFIG.splitlines(), changed.splitlines(), autojunk=False).get_opcodes()
    assert {tag for tag, *_ in steps} == {"equal", "insert"}  # nothing lost, nothing moved
    inserted = [(start, end) for tag, _, _, start, end in steps if tag == "insert"]
    assert inserted == [(18, 27)]  # its 9 lines after github's last line, before the blank line and GOOSE_MODE
    assert extension_names(changed) == ["developer", "github", "mine"]
    assert remove_extension(changed, "mine") == CONFIG


def test_an_existing_extension_is_replaced_whole_in_place():
    changed = set_extension(CONFIG, "github", ENTRY)
    data = yaml.safe_load(changed)
    assert list(data["extensions"]) == ["developer", "github"] and data["extensions"]["github"] == ENTRY
    assert "# a server of mine" in changed and "GOOSE_MODEL: gpt-4o   # the model" in changed


def test_a_file_without_extensions_gets_the_block_at_its_end():
    changed = set_extension("GOOSE_PROVIDER: openai", "mine", ENTRY)
    assert yaml.safe_load(changed) == {"GOOSE_PROVIDER": "openai", "extensions": {"mine": ENTRY}}
    assert yaml.safe_load(set_extension("", "mine", ENTRY)) == {"extensions": {"mine": ENTRY}}
    assert yaml.safe_load(set_extension("extensions: {}\nx: 1\n", "mine", ENTRY)) == {
        "extensions": {"mine": ENTRY}, "x": 1}


def test_awkward_names_are_quoted():
    for name in ("yes", "with space", "nö", "a:b"):
        assert yaml.safe_load(set_extension(CONFIG, name, ENTRY))["extensions"][name] == ENTRY


@pytest.mark.parametrize(("text", "line"), [
    ("extensions:\n\tmine:\n\t\tcmd: x\n", 2),
    ("extensions: {developer: {enabled: true}}\n", 1),
    ('"extensions":\n  a: 1\n', 1),
    ("a: 1\n---\nb: 2\n", 2),
    ("extensions:\n    a:\n      cmd: x\n  b: 1\n", 4),
    ("extensions:\n  - a\n", 2),
    ("extensions:\n  a: 1\nextensions:\n  b: 1\n", 3),
    ("extensions:\n  a: 1\nextensions :\n  b: 1\n", 3),
    ("extensions:\n- a\n", 2),
])
def test_what_cannot_be_edited_line_by_line_is_refused_at_its_line(text, line):
    with pytest.raises(GooseConfigRefused) as raised:
        set_extension(text, "mine", ENTRY)
    assert raised.value.line == line


def test_lists_as_serde_yaml_writes_them_are_read():
    text = "GOOSE_LIST:\n- a\n- b\nextensions:\n  mine:\n    args:\n    - x\n  other:\n  - y\nz: 1\n"
    changed = set_extension(text, "mine", ENTRY)
    assert yaml.safe_load(changed) == {"GOOSE_LIST": ["a", "b"], "extensions": {"mine": ENTRY, "other": ["y"]}, "z": 1}
    assert yaml.safe_load(remove_extension(text, "other"))["extensions"] == {"mine": {"args": ["x"]}}


def test_removing_an_absent_extension_says_so():
    with pytest.raises(KeyError):
        remove_extension(CONFIG, "nope")


def test_comment_lines_inside_a_replaced_or_removed_entry_are_kept():
    # Found by the property below: a comment between an entry's lines went with the entry.
    text = "GOOSE_A: 0\nextensions:\n  '0':\n# note 0\n    cmd: 0\n    # note 1\n    args: []\n"
    changed = set_extension(text, "0", ENTRY)
    assert yaml.safe_load(changed) == {"GOOSE_A": 0, "extensions": {"0": ENTRY}}
    assert re.findall(r"# note \d", changed) == ["# note 0", "# note 1"]
    removed = remove_extension(text, "0")
    assert re.findall(r"# note \d", removed) == ["# note 0", "# note 1"]
    assert yaml.safe_load(removed) == {"GOOSE_A": 0, "extensions": None}


simple = st.one_of(st.integers(-5, 5), st.booleans(), st.text("abc xyz-", max_size=6),
                   st.lists(st.text("abc", max_size=3), max_size=2))
ids = st.text("abcdefghij0123456789-_ .:", min_size=1, max_size=10).filter(lambda name: name.strip() == name)


@settings(max_examples=examples(200))
@given(st.dictionaries(st.from_regex(r"GOOSE_[A-Z]{1,5}", fullmatch=True), simple, max_size=3),
       st.dictionaries(ids, st.dictionaries(st.sampled_from(["cmd", "enabled", "args", "timeout"]), simple,
                                            min_size=1), max_size=3),
       ids, st.lists(st.integers(0, 30), max_size=4))
def test_goose_edits_read_back_and_keep_every_comment(top, extensions, name, comment_lines):
    document = {**top, "extensions": extensions} if extensions else dict(top)
    lines = yaml.safe_dump(document, default_flow_style=False, sort_keys=False).splitlines()
    for number, at in enumerate(sorted(set(comment_lines), reverse=True)):
        lines.insert(min(at, len(lines)), f"# note {number}")
    text = "\n".join(lines) + "\n"
    notes = sorted(re.findall(r"# note \d+", text))
    changed = set_extension(text, name, ENTRY)
    assert yaml.safe_load(changed) == {**top, "extensions": {**extensions, name: ENTRY}}
    assert sorted(re.findall(r"# note \d+", changed)) == notes
    removed = remove_extension(changed, name)
    left = {key: value for key, value in extensions.items() if key != name}
    assert (yaml.safe_load(removed) or {}).get("extensions") in (left, None if not left else left)
    assert sorted(re.findall(r"# note \d+", removed)) == notes
