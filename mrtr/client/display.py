"""What of a server's text may reach a terminal: the characters, never the controls.

A server chooses the words of its questions, tool names, descriptions, results and
errors. Printed raw, an escape sequence among them would drive the terminal: set the
window title (OSC 0), write the clipboard (OSC 52), clear the screen, move the cursor to
overwrite a question, or, through a carriage return, rewrite the line it is on.
:func:`printable` removes every character that controls instead of showing; the
terminal client (``mrtr.client.terminal``) passes all it prints through it, and prints
the result as plain text, so what looks like rich markup or an emoji code is shown as
it was sent. This module does no I/O and needs no extra.
"""

from __future__ import annotations

__all__ = ["CONTROLS", "printable", "printable_json"]

_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]

CONTROLS = frozenset([*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI])
"""Code points never shown: C0 (tab and newline excepted where they belong), DEL, C1, and
the bidirectional embeddings, overrides and isolates, which reorder what follows them."""

_MULTILINE = {code: None for code in CONTROLS if code not in (0x09, 0x0A)}
_ONE_LINE = {**_MULTILINE, 0x09: " ", 0x0A: " "}
_JSON = {code: f"\\u{code:04x}" for code in CONTROLS if code != 0x0A}  # newlines are json.dumps's indentation


def printable(text: str, *, multiline: bool = True) -> str:
    """``text`` without control characters: safe to write to a terminal.

    With ``multiline`` (messages, descriptions, results) newlines and tabs stay; without
    (names, titles, choices, a progress line) they become spaces, so the text keeps to
    its line. A carriage return always goes: it would let the text overwrite its line.
    """
    return text.translate(_MULTILINE if multiline else _ONE_LINE)


def printable_json(text: str) -> str:
    """JSON text (from ``json.dumps``) with every control character written as a ``\\uXXXX`` escape.

    ``json.dumps`` escapes C0 but leaves DEL, C1 and the bidi controls raw. Outside
    strings its output has only ASCII punctuation, spaces and the newlines of its
    indentation (kept), so this escapes inside strings only and the text stays the same
    JSON: shown faithfully, and inert.
    """
    return text.translate(_JSON)
