"""Docstrings as the plain text a client shows: reStructuredText inline markup removed.

A tool's, prompt's or resource's description defaults to its docstring's first
paragraph, and Python docstrings are written in reStructuredText: ````company````,
``:class:`Invoice```, ``*emphasis*``. Clients show descriptions as they are, and models
read them, so markup that only a documentation builder understands is noise in both.
The server publishes the plain text (:func:`plain_text`), and the terminal client shows
any server's descriptions through the same function, so a server that sends markup is
shown cleanly too. Markdown's inline code and emphasis read the same way and lose only
their delimiters. This module does no I/O.
"""

from __future__ import annotations

import re

__all__ = ["plain_text", "first_paragraph"]

# :role:`text`, :py:func:`~module.name`, :ref:`Title <target>`
_ROLE = re.compile(r":(?:[A-Za-z][\w+.-]*:)+`([^`]+)`")
# ``literal``
_LITERAL = re.compile(r"``(?=\S)(.+?)(?<=\S)``")
# `text <https://...>`_ and `text <https://...>`__
_LINK = re.compile(r"`([^`<]+?)\s*<([^`>]+)>`__?")
# `reference`_ and `interpreted text`
_INTERPRETED = re.compile(r"(?<![\w`])`(?=\S)([^`]+?)(?<=\S)`(?:__?)?(?![\w`])")
# **strong** and *emphasis*, bounded the way reStructuredText bounds them, so that
# `*args` or `2 * 3` stay as they are.
_STRONG = re.compile(r"(?<![\w*\\])\*\*(?=\S)(.+?)(?<=\S)\*\*(?![\w*])")
_EMPHASIS = re.compile(r"(?<![\w*\\])\*(?=[^\s*])(.+?)(?<=[^\s*\\])\*(?![\w*])")
_ESCAPE = re.compile(r"\\([\\*`_|])")


def _role(match: re.Match[str]) -> str:
    text = match.group(1)
    titled = re.fullmatch(r"(.+?)\s*<[^<>]+>", text)
    if titled:
        return titled.group(1)
    if text.startswith("~"):
        return text[1:].rsplit(".", 1)[-1]
    return text.lstrip("!")


def plain_text(text: str) -> str:
    """``text`` without reStructuredText inline markup: roles, literals, links, strong and emphasis.

    ``"Look up ``company`` in :class:`~app.Registry`"`` becomes ``"Look up company in
    Registry"``. A paragraph's closing ``::`` (which introduces a literal block) becomes
    ``:``. Text without markup comes back unchanged.
    """
    if not any(mark in text for mark in "`*:\\"):
        return text
    text = _ROLE.sub(_role, text)
    text = _LITERAL.sub(r"\1", text)
    text = _LINK.sub(r"\1 (\2)", text)
    text = _INTERPRETED.sub(r"\1", text)
    text = _STRONG.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    text = re.sub(r"(?<=\S)::(?=\s*$)", ":", text, flags=re.MULTILINE)
    text = re.sub(r"\s+::(?=\s*$)", "", text, flags=re.MULTILINE)
    return _ESCAPE.sub(r"\1", text)


def first_paragraph(doc: str | None) -> str | None:
    """A docstring's first paragraph on one line, as plain text; ``None`` for no docstring."""
    if not doc:
        return None
    import inspect

    paragraph = inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ").strip()
    return plain_text(paragraph) or None
