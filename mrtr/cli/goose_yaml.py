"""Goose's ``config.yaml``: one entry of its ``extensions`` mapping added, replaced or removed as text.

mrtr has no YAML library among its dependencies, and a round trip through one would
drop the user's comments and reorder their keys anyway. So the file is edited as lines:
the top-level ``extensions:`` block mapping is found, and the lines of one entry in it
are replaced or removed, or new ones added after its last entry; every other line is
kept byte for byte, and so are the comment lines inside the entry replaced or removed.
What mrtr writes is YAML whose values are JSON scalars and flow collections (JSON is
YAML), so it reads back the same in any YAML reader.

Only what can be edited this way without doubt is edited. A file that uses tabs for
indentation, several documents, directives, a top-level line that is neither a plain
``key:`` nor an item of the list above it (a quoted, complex or flow-style key),
``extensions`` written in flow style or as a list, or an ``extensions`` block whose lines do
not line up, is refused with :class:`GooseConfigRefused` naming the line, and left as it is.
Lists written without indentation under their key, as Goose's own writer (serde_yaml) writes
them, are read.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["GooseConfigRefused", "extension_names", "remove_extension", "set_extension"]

# A mapping key on one line: a plain scalar (YAML's rules: no indicator first unless "-?:" before a
# non-space, no ": " or " #" inside), or a double- or single-quoted one; then ":" and a space or the end.
_PLAIN_KEY = r"""(?:[^\s\-?:,\[\]{}#&*!|>'"%@`]|[\-?:][^\s,\[\]{}])(?:[^:#\s]|:(?=[^\s,\[\]{}])|(?<=\S)#|[ \t]+(?=[^\s#]))*"""
_KEY = re.compile(rf"""^(?P<key>{_PLAIN_KEY}|"(?:[^"\\]|\\.)*"|'(?:[^']|'')*')[ \t]*:(?:[ \t]|$)""")
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


class GooseConfigRefused(ValueError):
    """A Goose configuration this editor does not change, with the 1-based line that made it refuse."""

    def __init__(self, line: int, reason: str) -> None:
        self.line = line
        super().__init__(f"line {line}: {reason}")


def _key_text(match: re.Match[str]) -> str:
    raw = match.group("key")
    if raw.startswith('"'):
        return str(json.loads(raw))
    if raw.startswith("'"):
        return raw[1:-1].replace("''", "'")
    return raw.rstrip()


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


class _Layout:
    """Where the ``extensions`` block and its entries are in the file's lines."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.key_line: int | None = None  # the index of the "extensions:" line
        self.inline_empty = False
        self.body_end = len(self.lines)  # one past the block's last line
        self.indent = 0
        self.entries: dict[str, tuple[int, int]] = {}  # key -> (first line, one past its last content line)
        self.last_content: int | None = None
        self.empty_document: int | None = None
        self._read()

    def _read(self) -> None:
        lines = self.lines
        for number, line in enumerate(lines, 1):
            leading = line[: len(line) - len(line.lstrip(" \t"))]
            if "\t" in leading and _content(line):
                raise GooseConfigRefused(number, "indented with a tab")
            if line.startswith("%") or (line.startswith("---") and number > 1) or line.startswith("..."):
                raise GooseConfigRefused(number, "a YAML directive or a second document")
        content = [index for index, line in enumerate(lines) if _content(line) and line.strip() != "---"]
        if len(content) == 1 and lines[content[0]].split(" #", 1)[0].strip() in ("{}", "null", "~"):
            self.empty_document = content[0]  # a file holding an empty mapping: it becomes the block
            return
        previous: str | None = None  # the top-level key read last
        for index, line in enumerate(lines):
            if not _content(line) or _indent(line) > 0 or (index == 0 and line.strip() == "---"):
                continue
            if re.match(r"-(\s|$)", line):  # an indentless sequence: the value of the key above (as serde_yaml writes)
                if previous is None or previous == "extensions":
                    raise GooseConfigRefused(index + 1, "a list where a mapping was expected"
                                             + (" ('extensions' must be a mapping)" if previous else ""))
                continue
            match = _KEY.match(line)
            if match is None or match.group("key")[0] in "\"'":
                raise GooseConfigRefused(index + 1, f"a top-level line that is not a plain 'key:' ({line.strip()[:40]})")
            previous = _key_text(match)
            if previous != "extensions":
                if self.key_line is not None and self.body_end == len(lines):
                    self.body_end = index
                continue
            if self.key_line is not None:
                raise GooseConfigRefused(index + 1, "a second 'extensions:' key")
            self.key_line = index
            value = line[match.end():].split(" #", 1)[0].strip()
            if value in ("{}", "null", "~"):
                self.inline_empty = True
            elif value:
                raise GooseConfigRefused(index + 1, "'extensions' is not written as a block mapping (one entry a line)")
        if self.key_line is None:
            return
        body = range(self.key_line + 1, self.body_end)
        content = [index for index in body if _content(lines[index])]
        if self.inline_empty and content:
            raise GooseConfigRefused(self.key_line + 1, "'extensions' has a value on its line and lines below it")
        if not content:
            return
        self.indent = _indent(lines[content[0]])
        self.last_content = content[-1]
        current: str | None = None
        for index in content:
            line = lines[index]
            indent = _indent(line)
            if indent < self.indent:
                raise GooseConfigRefused(index + 1, "a line of 'extensions' less indented than its entries")
            if indent == self.indent and current is not None and re.match(r"-(\s|$)", line[indent:]):
                self.entries[current] = (self.entries[current][0], index + 1)  # the entry's indentless list
            elif indent == self.indent:
                match = _KEY.match(line[indent:])
                if match is None:
                    raise GooseConfigRefused(index + 1, "an 'extensions' line that is not an 'id:' entry")
                current = _key_text(match)
                if current in self.entries:
                    raise GooseConfigRefused(index + 1, f"the extension {current!r} appears twice")
                self.entries[current] = (index, index + 1)
            elif current is not None:
                self.entries[current] = (self.entries[current][0], index + 1)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=True)  # a JSON string, number, list or object is YAML as it is


def _key(key: str) -> str:
    return key if _PLAIN.match(key) and key.lower() not in _RESERVED else json.dumps(key, ensure_ascii=True)


def _render(key: str, entry: dict[str, Any], indent: int, newline: str) -> list[str]:
    pad = " " * indent
    lines = [f"{pad}{_key(key)}:{newline}"]
    lines += [f"{pad}  {_key(name)}: {_scalar(value)}{newline}" for name, value in entry.items()]
    return lines


def extension_names(text: str) -> list[str]:
    """The ids in the file's ``extensions``, in file order."""
    return list(_Layout(text).entries)


def set_extension(text: str, key: str, entry: dict[str, Any]) -> str:
    """``text`` with ``extensions[key]`` set to ``entry`` (replaced whole if it was there)."""
    layout = _Layout(text)
    lines = list(layout.lines)
    newline = layout.newline
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += newline
    if layout.empty_document is not None:
        lines[layout.empty_document:layout.empty_document + 1] = [f"extensions:{newline}",
                                                                  *_render(key, entry, 2, newline)]
        return "".join(lines)
    if layout.key_line is None:
        return "".join(lines) + f"extensions:{newline}" + "".join(_render(key, entry, 2, newline))
    if layout.inline_empty:
        lines[layout.key_line] = f"extensions:{newline}"
    if key in layout.entries:
        start, end = layout.entries[key]
        # The user's comment lines inside the old entry stay, above the new one.
        lines[start:end] = [*_comments(lines[start:end]), *_render(key, entry, layout.indent, newline)]
        return "".join(lines)
    if layout.last_content is None:
        at = layout.key_line + 1
        lines[at:at] = _render(key, entry, 2, newline)
        return "".join(lines)
    at = layout.last_content + 1
    lines[at:at] = _render(key, entry, layout.indent, newline)
    return "".join(lines)


def remove_extension(text: str, key: str) -> str:
    """``text`` without ``extensions[key]``; :class:`KeyError` if there is none."""
    layout = _Layout(text)
    if key not in layout.entries:
        raise KeyError(key)
    start, end = layout.entries[key]
    lines = list(layout.lines)
    lines[start:end] = _comments(lines[start:end])  # the user's comment lines inside it stay where they were
    return "".join(lines)


def _comments(lines: list[str]) -> list[str]:
    """The whole-line comments among ``lines``, as they are."""
    return [line for line in lines if line.strip().startswith("#")]
