"""What a server sends never drives the terminal: the bytes `mrtr call` and `mrtr list` write.

A hostile stdio server (tests/client/hostile_stdio.py) puts escape sequences everywhere it
can: in the tool names and descriptions of ``tools/list``, in a question, its field names,
titles, descriptions and choices, in progress messages, in results and in error bodies:
a window title (OSC 0), a clipboard write (OSC 52), clear screen and cursor home, an 8-bit
CSI (U+009B), a carriage return that would overwrite a line, a bidi override, the bell.
Server text may also look like rich markup or emoji codes: it must be shown literally.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from mrtr.client.display import printable

from .hostile import STDIO
from .test_terminal import Terminal, piped

TITLE = "\x1b]0;PWNED-TITLE\x07"
CLIPBOARD = "\x1b]52;c;ZXZpbA==\x07"
CLEAR = "\x1b[2J\x1b[H"
CSI8 = "\x9b31m"
BIDI = "\u202e"
EVIL = f"{TITLE}{CLIPBOARD}{CLEAR}{CSI8}{BIDI}\a\rOVERWRITE"
MARKUP = "[bold]markup[/bold] [link=https://evil.example]click[/link] :warning:"

QUESTION = {"resultType": "input_required", "requestState": "s", "inputRequests": {"q": {
    "method": "elicitation/create", "params": {"message": f"Question{EVIL} {MARKUP}", "requestedSchema": {
        "type": "object", "required": ["pick"], "properties": {
            f"who{CLEAR}": {"type": "string", "title": f"Name{TITLE}", "description": f"desc{EVIL} {MARKUP}",
                            "format": f"email{CLEAR}"},
            "pick": {"type": "string", "oneOf": [{"const": "a", "title": f"A{CSI8}{TITLE}"},
                                                 {"const": "b", "title": "B"}]}}}}}}}
DONE = {"resultType": "complete", "content": [{"type": "text", "text": f"done{EVIL} {MARKUP}"}],
        "structuredContent": {"k": f"v{CSI8}{BIDI}\x7f", "m": MARKUP}}
TOOLS = {"resultType": "complete", "ttlMs": 0, "cacheScope": "public", "tools": [
    {"name": "ok", "description": f"fine{EVIL} {MARKUP}", "inputSchema": {"type": "object", "properties": {
        f"arg{TITLE}": {"type": "string", "description": f"about{EVIL}", "enum": [f"x{CLEAR}", "y"]}}}},
    {"name": f"evil{TITLE}", "inputSchema": {}}]}
DISCOVER = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "ttlMs": 0, "cacheScope": "public",
            "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": f"srv{TITLE}", "version": f"1{CLEAR}"}}}
LISTS = {"server/discover": [{"result": DISCOVER}], "tools/list": [{"result": TOOLS}],
         "prompts/list": [{"result": {"resultType": "complete", "ttlMs": 0, "cacheScope": "public", "prompts": [
             {"name": f"p{TITLE}", "description": f"d{EVIL}", "arguments": [{"name": f"a{CLEAR}",
                                                                           "description": f"e{EVIL}"}]}]}}],
         "resources/list": [{"result": {"resultType": "complete", "ttlMs": 0, "cacheScope": "public", "resources": [
             {"uri": f"notes://x{TITLE}", "name": "x", "description": f"r{EVIL}"}]}}],
         "resources/templates/list": [{"result": {"resultType": "complete", "ttlMs": 0, "cacheScope": "public",
                                                  "resourceTemplates": [{"uriTemplate": f"t://{{id}}{CLEAR}",
                                                                         "name": "t"}]}}]}
CALL = {**LISTS, "tools/call": [{"result": QUESTION, "notes": [{"progress": 1, "message": f"step{EVIL}"}]},
                                {"result": DONE}]}
FAIL = {**LISTS, "tools/call": [{"error": {"code": -32000, "message": f"bad{EVIL} {MARKUP}",
                                           "data": {"why": f"w{CSI8}{BIDI}", "m": MARKUP}}}]}

# What rich itself writes on a terminal: colours and styles, hiding the cursor, and the
# progress bar's return, line erase and cursor-up. Nothing else may reach it.
RICH = re.compile(rb"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[2K|\x1b\[1A|\r(?=\x1b\[(?:2K|1A))")


def server(tmp_path: Path, replies: dict[str, Any]) -> str:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(replies))
    return f"{STDIO[0]} {STDIO[1]} {path}"


def assert_inert(written: bytes) -> None:
    """No byte of ``written`` is a control the server could have chosen."""
    rest = RICH.sub(b"", written)
    for bad in (b"\x1b", b"\x07", b"\xc2\x9b", BIDI.encode(), b"\x7f", b"\r"):
        assert bad not in rest, f"{bad!r} reached the terminal: ...{rest[max(0, rest.find(bad) - 60):][:120]!r}"


def assert_literal(text: str) -> None:
    """Server text that looks like markup or emoji codes is shown as it was sent."""
    assert "[bold]markup[/bold] [link=https://evil.example]click[/link] :warning:" in text
    assert "PWNED-TITLE" in text and "OVERWRITE" in text  # what is left of the sequences, visible


@pytest.mark.slow
def test_piped_call_writes_no_server_controls(tmp_path: Path) -> None:
    done = piped("call", "--stdio", server(tmp_path, CALL), "ok", stdin="Ada\n1\n")
    assert done.returncode == 0, done.stderr
    assert_inert((done.stdout + done.stderr).encode())
    assert_literal(done.stderr)  # the question
    assert_literal(done.stdout)  # the result
    assert '"k": "v\\u009b31m\\u202e\\u007f"' in done.stdout  # JSON keeps them, escaped


@pytest.mark.slow
def test_piped_error_and_listing_write_no_server_controls(tmp_path: Path) -> None:
    failed = piped("call", "--stdio", server(tmp_path, FAIL), "ok")
    assert failed.returncode == 1
    assert_inert((failed.stdout + failed.stderr).encode())
    assert_literal(failed.stderr)
    listed = piped("list", "--stdio", server(tmp_path, LISTS))
    assert listed.returncode == 0, listed.stderr
    assert_inert((listed.stdout + listed.stderr).encode())
    assert "  evil]0;PWNED-TITLE" in listed.stdout and "  ok - fine" in listed.stdout
    unknown = piped("call", "--stdio", server(tmp_path, LISTS), "nosuch")
    assert unknown.returncode == 2 and "evil]0;PWNED-TITLE" in unknown.stderr
    assert_inert((unknown.stdout + unknown.stderr).encode())


@pytest.mark.slow
def test_a_terminal_gets_only_richs_own_sequences(tmp_path: Path) -> None:
    term = Terminal("call", "--stdio", server(tmp_path, CALL), "ok")
    term.expect("who[2J[H>")  # the field's name, its sequence left as text
    term.type("Ada")
    term.expect("pick>")
    term.type("1")
    term.expect("done")
    assert term.finish() == 0
    assert_inert(term.raw.replace(b"\r\n", b"\n"))  # the pty's own line ends
    assert_literal(term.text)
    assert "step]0;PWNED-TITLE" in term.text  # the progress message was drawn, without its controls
    assert RICH.search(term.raw)  # and the terminal did get colour: the check above is not vacuous
    failed = Terminal("call", "--stdio", server(tmp_path, FAIL), "ok")
    assert failed.finish() == 1
    assert_inert(failed.raw.replace(b"\r\n", b"\n"))
    assert_literal(failed.text)


@pytest.mark.parametrize(("text", "multiline", "shown"), [
    ("a\x1b]0;t\x07b", True, "a]0;tb"),
    ("one\r\ntwo\tthree\x00\x7f\x85\x9b", True, "one\ntwo\tthree"),
    ("one\ntwo\tthree", False, "one two three"),
    ("\u202eevil\u2066x\u2069", True, "evilx"),
    ("plain, ünïcödé, 表, emoji 🎉", True, "plain, ünïcödé, 表, emoji 🎉"),
])
def test_printable(text: str, multiline: bool, shown: str) -> None:
    assert printable(text, multiline=multiline) == shown


def test_every_print_of_the_terminal_client_goes_through_one_function() -> None:
    """A new print cannot forget the rule: in mrtr/client/terminal.py only _say and _ask touch the console."""
    source = Path(__import__("mrtr.client.terminal", fromlist=["x"]).__file__).read_text()
    tree = ast.parse(source)
    allowed = {"_say", "_ask"}
    output = {"print", "input", "log", "out", "rule", "write", "print_json", "print_exception", "status"}
    offenders = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or function.name in allowed:
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Call):
                called = node.func
                if isinstance(called, ast.Attribute) and called.attr in output:
                    offenders.append(f"{function.name}: .{called.attr}() at line {node.lineno}")
                if isinstance(called, ast.Name) and called.id == "print":
                    offenders.append(f"{function.name}: print() at line {node.lineno}")
                if isinstance(called, ast.Name) and called.id == "TextColumn" and not any(
                        keyword.arg == "markup" and isinstance(keyword.value, ast.Constant)
                        and keyword.value.value is False for keyword in node.keywords):
                    offenders.append(f"{function.name}: TextColumn without markup=False at line {node.lineno}")
    assert not offenders, offenders
