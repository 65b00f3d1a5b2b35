"""Which URLs a person may be sent to, or a client may fetch: https, and plain http only to this machine.

A URL another party chose (a handler's URL-mode elicitation, an authorization server's
endpoints, the issuer a client credential belongs to) is opened in a browser or fetched
with credentials. Over plain http anyone on the path reads and rewrites it, so only
``https`` is accepted, and ``http`` only to a loopback host (development servers, the
OAuth loopback redirect), where nobody is on the path. ``javascript:``, ``data:``,
``file:`` and every other scheme are refused, and so is a URL a browser would read
differently from this module: one with spaces or control characters (browsers drop tabs
and newlines, so ``goo\\ngle.com`` opens ``google.com``), a backslash (browsers read it as
``/``, so ``https://evil.example\\@good.example/`` opens ``evil.example``) or a
percent-encoded host. :class:`mrtr.core.effects.ElicitURL`, the OAuth client and the
terminal client apply this one rule. No I/O.
"""

from __future__ import annotations

import ipaddress
import unicodedata
from urllib.parse import urlsplit

__all__ = ["is_loopback_host", "web_url_problem"]


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` names this machine: ``localhost`` (and ``*.localhost``), ``127.0.0.0/8``, ``::1``."""
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def web_url_problem(url: object) -> str | None:
    """Why ``url`` may not be opened or fetched, as words that follow it ("is not https"); ``None`` when it may.

    Accepted: an absolute ``https`` URL with a host, or ``http`` to a loopback host
    (:func:`is_loopback_host`), made only of characters a browser reads as this module does.
    """
    if not isinstance(url, str):
        return "is not a string"
    if any(char.isspace() or unicodedata.category(char) == "Cc" for char in url):
        return "contains spaces or control characters, which browsers drop or read differently"
    if "\\" in url:
        return "contains a backslash, which browsers read as '/'"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises for a port that is no number)
    except ValueError:
        return "is not a well-formed URL"
    scheme = parts.scheme.lower()
    if not scheme:
        return "is not an absolute URL"
    if scheme not in ("http", "https"):
        return f"uses the {scheme}: scheme, not https"
    if not url[len(scheme):].startswith("://"):
        return "is not an absolute URL (no '//' before its host)"
    host = parts.hostname
    if not host:
        return "names no host"
    if "%" in host:
        return "has a percent-encoded host, which browsers decode into another one"
    if scheme == "http" and not is_loopback_host(host):
        return "is plain http to another machine (only https, or plain http to this machine)"
    return None
