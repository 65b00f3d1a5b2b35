"""What a person is shown of an address a server asks them to open (URL-mode elicitation).

A server chooses the URL, so it can choose one that deceives: ``javascript:`` or
``data:`` that runs code, ``file:`` that opens a local file,
``https://accounts.example.com@evil.example/`` whose host is ``evil.example``,
``https://аррӏе.com/`` written in Cyrillic letters that look Latin, ``goo<U+200B>gle``
with a character nobody sees. :func:`inspect_address` says what a client should do
with one:

- **refused** when :func:`mrtr.core.web_urls.web_url_problem` refuses it: anything but
  ``https``, and plain ``http`` except to this machine; the same rule the server applies
  to :class:`mrtr.ElicitURL`, so a well-behaved server never meets it;
- otherwise shown in full, with the **host on its own**: in Unicode, with its ASCII
  (punycode) form beside it when the two differ, which is the name the browser looks up;
- with **warnings** for a user name before ``@``, invisible characters anywhere (each
  written as ``<U+200B>`` so it shows), a name that mixes scripts (Latin with Cyrillic,
  say), and a name made of look-alikes of an ASCII one (``аррӏе`` for ``apple``).

The terminal client (``mrtr call``) prints exactly this; an ``on_elicit`` answerer of
:class:`mrtr.Client` can use it the same way. No I/O.
"""

from __future__ import annotations

import encodings.idna
import unicodedata
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..core.web_urls import web_url_problem

__all__ = ["Address", "inspect_address"]

# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt): characters that draw nothing.
_INVISIBLE_RANGES = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
                     (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
                     (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0x1BCA0, 0x1BCA3),
                     (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))

# Letters of other scripts (and of Latin beyond ASCII) that look like an ASCII letter in a host name.
_LOOKALIKES = {
    # Cyrillic
    "а": "a", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "і": "i", "ј": "j", "ӏ": "l", "о": "o", "р": "p", "ԛ": "q",
    "ѕ": "s", "у": "y", "ү": "y", "х": "x", "ԝ": "w", "ѵ": "v", "ь": "b",
    # Greek
    "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ϲ": "c",
    "ϳ": "j",
    # Armenian
    "օ": "o", "ս": "u", "ց": "g", "հ": "h", "ո": "n", "զ": "q",
    # Latin beyond ASCII
    "ı": "i", "ɑ": "a", "ɡ": "g", "ɩ": "i", "ɪ": "i", "ʟ": "l", "ɴ": "n", "ᴏ": "o", "ʀ": "r", "ꜱ": "s", "ᴜ": "u",
}

# Scripts that share one name legitimately (UTS #39, "highly restrictive"): Japanese, Korean, Chinese, each with Latin.
_SCRIPT_FAMILIES = ({"LATIN", "CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA"}, {"LATIN", "CJK", "HANGUL"},
                    {"LATIN", "CJK", "BOPOMOFO"})


@dataclass(frozen=True)
class Address:
    """An address a server asked the user to open, as :func:`inspect_address` read it."""

    url: str
    """The URL as the server sent it."""
    refused: str | None
    """Why it is not offered at all ("uses the javascript: scheme, not https"), or ``None``."""
    shown: str = ""
    """The URL to show in full, each invisible character written as ``<U+XXXX>``."""
    host: str = ""
    """The host as a person reads it (Unicode; invisible characters written out)."""
    ascii_host: str = ""
    """The host as the browser looks it up (punycode for an international name)."""
    warnings: tuple[str, ...] = field(default=())
    """What may deceive in it, one sentence each."""

    @property
    def host_line(self) -> str:
        """The host, with its ASCII form beside it when the two differ."""
        return self.host if self.ascii_host in ("", self.host) else f"{self.host} ({self.ascii_host})"


def _invisible(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _INVISIBLE_RANGES)


def _visible(text: str) -> str:
    return "".join(f"<U+{ord(char):04X}>" if _invisible(char) else char for char in text)


def _script(char: str) -> str | None:
    """The script of a letter, as the first word of its Unicode name (``None`` for digits, hyphens, marks)."""
    if not unicodedata.category(char).startswith("L"):
        return None
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0] if name else "UNKNOWN"


def _label_warnings(label: str) -> list[str]:
    """What deceives in one label of a host (already in Unicode, normalized as IDNA does)."""
    if label.isascii():
        return []
    scripts = {script for script in map(_script, label) if script is not None}
    lookalike = "".join(_LOOKALIKES.get(char, char) for char in label)
    if lookalike.isascii():
        written = " and ".join(sorted(script.title() for script in scripts))
        return [f"the name '{_visible(label)}' is written with {written} letters that look like the ASCII "
                f"'{lookalike}': a look-alike of another site?"]
    if len(scripts) > 1 and not any(scripts <= family for family in _SCRIPT_FAMILIES):
        written = ", ".join(sorted(script.title() for script in scripts))
        return [f"the name '{_visible(label)}' mixes letters of several scripts ({written}): a look-alike of "
                "another site?"]
    return []


def _host_forms(host: str) -> tuple[str, str, list[str]]:
    """``(unicode, ascii, warnings)`` of a host name, label by label as IDNA reads it."""
    unicode_labels: list[str] = []
    ascii_labels: list[str] = []
    warnings: list[str] = []
    international = False
    for label in host.split("."):
        if not label:
            unicode_labels.append(label)
            ascii_labels.append(label)
            continue
        try:
            ascii_label = encodings.idna.ToASCII(label).decode("ascii")
            unicode_label = encodings.idna.ToUnicode(ascii_label)
        except UnicodeError:
            warnings.append(f"the name '{_visible(label)}' is not a valid host name")
            unicode_labels.append(_visible(label))
            ascii_labels.append(_visible(label))
            continue
        if ascii_label.lower().startswith("xn--") or not label.isascii():
            international = True
        warnings += _label_warnings(unicode_label)
        unicode_labels.append(_visible(label) if any(map(_invisible, label)) else unicode_label)
        ascii_labels.append(ascii_label)
    if international:
        warnings.insert(0, "the host is an international name: the browser looks up its ASCII form, shown "
                           "beside it")
    return ".".join(unicode_labels), ".".join(ascii_labels), warnings


def inspect_address(url: str) -> Address:
    """Read ``url`` as a person is about to open it: refused, or shown with its host and warnings."""
    problem = web_url_problem(url)
    if problem is not None:
        return Address(url, problem)
    parts = urlsplit(url)
    hostname = parts.hostname or ""
    host_warnings: list[str] = []
    if ":" in hostname:  # an IPv6 address
        host = ascii_host = f"[{hostname}]"
    else:
        host, ascii_host, host_warnings = _host_forms(hostname)
    address = Address(url, None, shown=_visible(url), host=host, ascii_host=ascii_host)
    warnings: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        warnings.append(f"'{_visible(userinfo)}@' before the host is a user name, not the site: this address "
                        f"opens {address.host_line}")
    invisible = sorted({char for char in url if _invisible(char)})
    if invisible:
        names = ", ".join(f"U+{ord(char):04X} {unicodedata.name(char, 'UNNAMED')}" for char in invisible)
        warnings.append(f"the address holds invisible characters ({names}), written out here as <U+...>: what "
                        "you see is not all there is")
    return Address(url, None, shown=address.shown, host=host, ascii_host=ascii_host,
                   warnings=tuple(warnings + host_warnings))
