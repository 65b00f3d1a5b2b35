"""The JSON/JSONC editor under ``mrtr install``: one member changes, every other byte stays."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr.cli.jsonc import JSONSyntaxError, parse, remove_member, set_member, to_python

from ..conftest import examples

COMMENTED = """{
  // the user's own servers
  "servers": {
    "other": {"command": "node", "args": ["x.js"]}, // keep this one
    /* and this */ "third": {"url": "https://example.com/mcp"},
  },
  "inputs": [],
}
"""


def test_a_new_member_goes_last_and_every_comment_stays():
    entry = {"type": "stdio", "command": "/venv/bin/mrtr", "args": ["serve", "app:server", "--stdio"]}
    changed = set_member(COMMENTED, ("servers",), "mine", entry, comments=True)
    assert to_python(parse(changed, comments=True)) == {
        "servers": {"other": {"command": "node", "args": ["x.js"]}, "third": {"url": "https://example.com/mcp"},
                    "mine": entry},
        "inputs": []}
    for kept in ("// the user's own servers", "// keep this one", "/* and this */", '"inputs": [],'):
        assert kept in changed
    assert changed.startswith(COMMENTED[:COMMENTED.index('"third"')])  # the text before the new member is as it was
    assert remove_member(changed, ("servers",), "mine", comments=True) == COMMENTED


def test_an_existing_member_is_replaced_where_it_stands():
    changed = set_member(COMMENTED, ("servers",), "other", {"command": "/bin/true"}, comments=True)
    data = to_python(parse(changed, comments=True))
    assert list(data["servers"]) == ["other", "third"] and data["servers"]["other"] == {"command": "/bin/true"}
    assert "// keep this one" in changed


def test_missing_objects_are_created_and_an_empty_file_is_written_whole():
    assert json.loads(set_member('{"theme": "dark"}', ("mcpServers",), "a", {"command": "x"})) == {
        "theme": "dark", "mcpServers": {"a": {"command": "x"}}}
    assert json.loads(set_member("", ("context_servers",), "a", {"command": "x"})) == {
        "context_servers": {"a": {"command": "x"}}}
    assert json.loads(set_member('{\n  "mcpServers": {}\n}\n', ("mcpServers",), "a", {"command": "x"})) == {
        "mcpServers": {"a": {"command": "x"}}}


@pytest.mark.parametrize("text", ['{"servers": {"a": 1,}}', '{"servers": {"a": 1, /* x */}}',
                                  '{"servers": {\n  "a": 1, // x\n}}', '{"servers": {"a": 1 /* x */}}'])
def test_a_trailing_comma_or_comment_after_the_last_member_stays_valid(text):
    changed = set_member(text, ("servers",), "b", 2, comments=True)
    assert to_python(parse(changed, comments=True)) == {"servers": {"a": 1, "b": 2}}
    assert remove_member(changed, ("servers",), "b", comments=True).replace(" ", "") == text.replace(" ", "")


def test_the_file_s_indentation_is_followed():
    text = '{\n    "mcpServers": {\n        "old": 1\n    }\n}\n'
    changed = set_member(text, ("mcpServers",), "new", {"command": "x"})
    assert '\n        "new": {\n            "command": "x"\n        }\n' in changed


@pytest.mark.parametrize(("text", "line", "column", "reason"), [
    ('{\n  // a comment\n  "a": 1\n}', 2, 3, "comment"),
    ('{\n  "a": 1,\n}', 2, 9, "trailing comma"),
    ('{\n  "a": 1\n  "b": 2\n}', 3, 3, "expected ','"),
    ('{"a": tru}', 1, 7, "unexpected character"),
    ('{"a": "unclosed}', 1, 7, "never closed"),
    ('{"a": 1} extra', 1, 10, "more text"),
])
def test_a_strict_json_file_with_a_fault_is_refused_at_its_line_and_column(text, line, column, reason):
    with pytest.raises(JSONSyntaxError) as raised:
        parse(text)
    assert (raised.value.line, raised.value.column) == (line, column) and reason in raised.value.reason


def test_jsonc_reads_comments_and_trailing_commas_but_not_other_faults():
    assert to_python(parse('{"a": [1, 2,], /* x */ "b": {},}', comments=True)) == {"a": [1, 2], "b": {}}
    with pytest.raises(JSONSyntaxError):
        parse('{"a": /* never closed', comments=True)


def test_a_servers_key_that_is_not_an_object_is_refused():
    with pytest.raises(ValueError, match="not an object"):
        set_member('{"mcpServers": []}', ("mcpServers",), "a", {})
    with pytest.raises(KeyError):
        remove_member('{"mcpServers": {"b": 1}}', ("mcpServers",), "a")


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
                      max_leaves=8)


@settings(max_examples=examples(200))
@given(st.dictionaries(names, values, max_size=4), st.dictionaries(names, values, max_size=4), names, values,
       st.sampled_from([0, 2, 4]))
def test_set_then_remove_reads_back_as_the_data_says(top, servers, name, value, indent):
    document = {**top, "mcpServers": servers}
    text = json.dumps(document, indent=indent or None)
    changed = set_member(text, ("mcpServers",), name, value)
    assert json.loads(changed) == {**top, "mcpServers": {**servers, name: value}}
    removed = remove_member(changed, ("mcpServers",), name)
    expected = {**servers}
    expected.pop(name, None)
    assert json.loads(removed) == {**top, "mcpServers": expected}


def commented(text: str, comment_every: list[bool], trailing: bool) -> str:
    """``text`` (indented JSON) with ``// n`` comments at chosen line ends and, if asked, trailing commas."""
    lines = text.splitlines()
    out = []
    for index, line in enumerate(lines):
        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        if trailing and following[:1] in ("}", "]") and line.rstrip()[-1:] not in ("{", "[", ","):
            line += ","
        if comment_every[index % len(comment_every)]:
            line += f" // note {index}"
        out.append(line)
    return "/* head */\n" + "\n".join(out) + "\n"


@settings(max_examples=examples(200))
@given(st.dictionaries(names, values, max_size=3), st.dictionaries(names, values, max_size=3), names, values,
       st.lists(st.booleans(), min_size=1, max_size=5), st.booleans())
def test_jsonc_edits_keep_every_comment(top, servers, name, value, comment_every, trailing):
    text = commented(json.dumps({**top, "servers": servers}, indent=2), comment_every, trailing)
    before = to_python(parse(text, comments=True))
    changed = set_member(text, ("servers",), name, value, comments=True)
    assert to_python(parse(changed, comments=True)) == {**before, "servers": {**before["servers"], name: value}}
    notes = re.findall(r"/\* head \*/|// note \d+", text)
    if name not in before["servers"]:  # an entry replaced goes whole, comments inside it included
        assert re.findall(r"/\* head \*/|// note \d+", changed) == notes
    removed = remove_member(changed, ("servers",), name, comments=True)
    expected = {**before["servers"]}
    expected.pop(name, None)
    assert to_python(parse(removed, comments=True)) == {**before, "servers": expected}
    assert re.findall(r"/\* head \*/|// note \d+", removed) == notes or name in before["servers"]
