"""JSON and JSONC (JSON with comments and trailing commas) read with positions, and edited in place.

A host's configuration file is the user's: ``mrtr install`` changes one member of one
object in it and leaves every other byte as it was, comments, key order and layout
included. :func:`parse` reads the text into :class:`Node` values that know where they
are; :func:`set_member` and :func:`remove_member` return the new text, written as the
smallest edit. A text that does not parse raises :class:`JSONSyntaxError` with its line
and column. With ``comments=False`` (a host that reads strict JSON) a comment or a
trailing comma is such an error; with ``comments=True`` (VS Code, Zed, Gemini CLI)
they are read, and kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JSONSyntaxError", "Node", "parse", "remove_member", "set_member", "to_python"]


class JSONSyntaxError(ValueError):
    """A text that is not JSON (or JSONC), with the 1-based line and column of the first fault."""

    def __init__(self, message: str, text: str, offset: int) -> None:
        self.line = text.count("\n", 0, offset) + 1
        self.column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        self.reason = message
        super().__init__(f"line {self.line} column {self.column}: {message}")


@dataclass
class Node:
    """A JSON value at ``start:end`` of the text; an object's ``members`` are (key, key start, value)."""

    kind: str  # "object", "array", "string", "number", "true", "false", "null"
    start: int
    end: int
    value: Any = None  # a scalar's Python value
    members: list[tuple[str, int, Node]] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)

    def member(self, key: str) -> Node | None:
        """The value of ``key`` in this object (the last one, as JSON readers take it), or ``None``."""
        found = None
        for name, _, value in self.members:
            if name == key:
                found = value
        return found


def to_python(node: Node) -> Any:
    """The plain Python value of ``node`` (dicts, lists, scalars)."""
    if node.kind == "object":
        return {key: to_python(value) for key, _, value in node.members}
    if node.kind == "array":
        return [to_python(item) for item in node.items]
    return node.value


class _Reader:
    def __init__(self, text: str, comments: bool) -> None:
        self.text = text
        self.at = 0
        self.comments = comments

    def fail(self, message: str, offset: int | None = None) -> JSONSyntaxError:
        return JSONSyntaxError(message, self.text, self.at if offset is None else offset)

    def skip(self) -> None:
        text = self.text
        while self.at < len(text):
            char = text[self.at]
            if char in " \t\r\n\ufeff":
                self.at += 1
            elif char == "/" and text.startswith("//", self.at) or text.startswith("/*", self.at):
                if not self.comments:
                    raise self.fail("a comment, which this host's file cannot have (it reads strict JSON)")
                if text.startswith("//", self.at):
                    newline = text.find("\n", self.at)
                    self.at = len(text) if newline < 0 else newline
                else:
                    close = text.find("*/", self.at + 2)
                    if close < 0:
                        raise self.fail("a /* comment that is never closed")
                    self.at = close + 2
            else:
                return

    def value(self, depth: int = 0) -> Node:
        if depth > 200:
            raise self.fail("nested too deeply")
        self.skip()
        if self.at >= len(self.text):
            raise self.fail("the text ends where a value was expected")
        char = self.text[self.at]
        if char == "{":
            return self.container(depth, "object", "}")
        if char == "[":
            return self.container(depth, "array", "]")
        if char == '"':
            start = self.at
            decoded = self.string()
            return Node("string", start, self.at, decoded)
        for word, value in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.at):
                start = self.at
                self.at += len(word)
                return Node(word, start, self.at, value)
        return self.number()

    def string(self) -> str:
        start = self.at
        at = start + 1
        text = self.text
        while True:
            if at >= len(text):
                raise self.fail("a string that is never closed", start)
            char = text[at]
            if char == '"':
                break
            if char == "\\":
                at += 2
                continue
            if char < " ":
                raise self.fail("a control character inside a string", at)
            at += 1
        try:
            decoded = json.loads(text[start:at + 1])
        except ValueError as exc:
            raise self.fail(f"a string with a bad escape ({exc.args[0].split(':')[0]})", start) from None
        self.at = at + 1
        return str(decoded)

    def number(self) -> Node:
        start = self.at
        text = self.text
        at = start
        while at < len(text) and text[at] in "+-0123456789.eE":
            at += 1
        if at == start:
            raise self.fail(f"unexpected character {text[start]!r}")
        try:
            value = json.loads(text[start:at])
        except ValueError:
            raise self.fail(f"a malformed number {text[start:at]!r}", start) from None
        self.at = at
        return Node("number", start, at, value)

    def container(self, depth: int, kind: str, close: str) -> Node:
        node = Node(kind, self.at, self.at)
        self.at += 1
        comma_at: int | None = None  # the comma after the element read last, if any
        while True:
            self.skip()
            if self.at >= len(self.text):
                raise self.fail(f"the text ends inside the {kind} opened at line "
                                f"{self.text.count(chr(10), 0, node.start) + 1}")
            if self.text[self.at] == close:
                if comma_at is not None and not self.comments:
                    raise self.fail("a trailing comma, which this host's file cannot have (it reads strict JSON)",
                                    comma_at)
                self.at += 1
                node.end = self.at
                return node
            if (node.members or node.items) and comma_at is None:
                raise self.fail(f"expected ',' or '{close}'")
            if kind == "object":
                if self.text[self.at] != '"':
                    raise self.fail("expected a member name in double quotes")
                key_start = self.at
                key = self.string()
                self.skip()
                if self.at >= len(self.text) or self.text[self.at] != ":":
                    raise self.fail("expected ':' after a member name")
                self.at += 1
                node.members.append((key, key_start, self.value(depth + 1)))
            else:
                node.items.append(self.value(depth + 1))
            self.skip()
            comma_at = None
            if self.at < len(self.text) and self.text[self.at] == ",":
                comma_at = self.at
                self.at += 1


def parse(text: str, *, comments: bool = False) -> Node:
    """The value of ``text`` with positions; an empty text (or only comments) reads as ``{}``.

    Raises :class:`JSONSyntaxError` naming the line and column of the first fault.
    """
    reader = _Reader(text, comments)
    reader.skip()
    if reader.at >= len(text):
        return Node("object", -1, -1)  # nothing yet: an object to be written whole
    node = reader.value()
    reader.skip()
    if reader.at < len(text):
        raise reader.fail("more text after the value")
    return node


# -- editing -------------------------------------------------------------------------------------


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _indent_of(text: str, offset: int) -> str:
    start = _line_start(text, offset)
    prefix = text[start:offset]
    return prefix if prefix.strip() == "" else prefix[: len(prefix) - len(prefix.lstrip())]


def _unit(text: str, root: Node) -> str:
    """The file's indentation step, read from the root object's first member (two spaces if none)."""
    for _, key_start, _ in root.members:
        indent = _indent_of(text, key_start)
        if indent:
            return indent
    return "  "


def _render(value: Any, indent: str, unit: str) -> str:
    rendered = json.dumps(value, indent=len(unit) if unit.strip(" ") == "" else unit, ensure_ascii=False)
    return rendered.replace("\n", "\n" + indent)


def _insert_member(text: str, container: Node, key: str, value: Any, unit: str) -> str:
    """``text`` with ``"key": value`` added as the last member of ``container``."""
    if container.members:
        last_key_start = container.members[-1][1]
        indent = _indent_of(text, last_key_start)
        last = container.members[-1][2]
        member = f"{json.dumps(key, ensure_ascii=False)}: {_render(value, indent, unit)}"
        # After the last value: past a comma and a comment on the same line, so they stay with it.
        at = last.end
        comma = False
        while at < len(text) and text[at] in " \t":
            at += 1
        if at < len(text) and text[at] == ",":
            comma = True
            at += 1
        line_end = text.find("\n", at)
        rest = text[at: line_end if line_end >= 0 else len(text)]
        if "\n" in text[last.end:container.end] and (rest.strip() == "" or rest.strip().startswith("//")) \
                and line_end >= 0 and line_end < container.end:
            head = text[:last.end] + ("" if comma else ",") + text[last.end:line_end]
            return head + "\n" + indent + member + ("," if comma else "") + text[line_end:]
        return text[:last.end] + ", " + member + text[last.end:]  # a trailing comma now trails the new member
    # An empty object, perhaps holding comments: the member goes first, on its own line.
    outer = _indent_of(text, container.start)
    indent = outer + unit
    member = f"{json.dumps(key, ensure_ascii=False)}: {_render(value, indent, unit)}"
    inside = text[container.start + 1: container.end - 1]
    tail = inside if inside.strip() else ""
    closing = "\n" + outer if not tail or "\n" not in tail else ""
    return text[:container.start + 1] + "\n" + indent + member + tail.rstrip(" \t") + closing + text[container.end - 1:]


def set_member(text: str, path: tuple[str, ...], key: str, value: Any, *, comments: bool = False) -> str:
    """``text`` with ``root[path...][key] = value``, every other byte kept.

    Objects named in ``path`` that do not exist are created; one that exists but is not
    an object is refused with a :class:`ValueError`. An existing ``key`` has its value
    replaced where it stands; a new one goes last.
    """
    root = parse(text, comments=comments)
    if root.start < 0:  # an empty file: written whole
        data: dict[str, Any] = {}
        target = data
        for name in path:
            target = target.setdefault(name, {})
        target[key] = value
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if root.kind != "object":
        raise ValueError("the file holds a JSON " + root.kind + ", not an object")
    unit = _unit(text, root)
    container = root
    for depth, name in enumerate(path):
        child = container.member(name)
        if child is None:
            nested: Any = {key: value}
            for outer_name in reversed(path[depth + 1:]):
                nested = {outer_name: nested}
            return _insert_member(text, container, name, nested, unit)
        if child.kind != "object":
            raise ValueError(f'"{".".join(path[:depth + 1])}" is a JSON {child.kind}, not an object of servers')
        container = child
    existing = container.member(key)
    if existing is None:
        return _insert_member(text, container, key, value, unit)
    indent = _indent_of(text, next(start for name, start, node in container.members if node is existing))
    return text[:existing.start] + _render(value, indent, unit) + text[existing.end:]


def remove_member(text: str, path: tuple[str, ...], key: str, *, comments: bool = False) -> str:
    """``text`` without ``root[path...][key]``; :class:`KeyError` if there is no such member."""
    root = parse(text, comments=comments)
    container: Node | None = root if root.kind == "object" else None
    for name in path:
        container = container.member(name) if container is not None else None
        if container is not None and container.kind != "object":
            container = None
    if container is None:
        raise KeyError(key)
    positions = [index for index, (name, _, _) in enumerate(container.members) if name == key]
    if not positions:
        raise KeyError(key)
    for index in reversed(positions):  # the last first, so the earlier offsets stay true
        text = _remove_at(text, container, index)
        container = _reparse_container(text, path, comments)
    return text


def _reparse_container(text: str, path: tuple[str, ...], comments: bool) -> Node:
    node = parse(text, comments=comments)
    for name in path:
        child = node.member(name)
        assert child is not None
        node = child
    return node


def _remove_at(text: str, container: Node, index: int) -> str:
    _, key_start, value = container.members[index]
    end = value.end
    # Its comma: the one after it, or for the last member the one before it (unless a trailing one follows);
    # a comma before it is removed alone, so a comment between the two members stays.
    comma_before: int | None = None
    at = end
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    if at < len(text) and text[at] == ",":
        end = at + 1
    elif index > 0:
        previous_end = container.members[index - 1][2].end
        comma = text.find(",", previous_end, key_start)
        if comma >= 0:
            comma_before = comma
    # A member alone on its lines takes its lines with it.
    line_start = _line_start(text, key_start)
    line_end = text.find("\n", end)
    after = text[end: line_end if line_end >= 0 else len(text)]
    if text[line_start:key_start].strip() == "" and after.strip() == "" and line_end >= 0:
        text = text[:line_start] + text[line_end + 1:]
    else:
        text = text[:key_start] + text[end:]
    if comma_before is not None:
        text = text[:comma_before] + text[comma_before + 1:]
    return text
