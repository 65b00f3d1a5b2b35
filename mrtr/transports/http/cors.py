"""Origins and CORS: which ``Origin`` may talk to the endpoint, and what the browser is told.

Pure functions and one small value type, no I/O: the exchange asks
:meth:`OriginPolicy.allows` for rule 2, adds :func:`cors_headers` to every answer to an
allowed origin, and answers a preflight with :func:`preflight_headers`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .headers import RawHeader

__all__ = ["SESSION_REQUEST_HEADERS", "OriginPolicy", "cors_headers", "preflight_headers", "split_request_headers"]

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
# The request headers a browser client may send (lowercase), besides Mcp-Param-*.
_CORS_REQUEST_HEADERS = frozenset({
    "content-type", "accept", "authorization", "mcp-protocol-version", "mcp-method", "mcp-name",
})
# What a 2025-era client also sends, where the server serves that era's sessions.
SESSION_REQUEST_HEADERS = frozenset({"mcp-session-id", "last-event-id"})
_CORS_PARAM_PREFIX = "mcp-param-"
_CORS_MAX_AGE = b"600"  # seconds a browser may cache a preflight (Chromium caps it at 7200)
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9a-z-]+$")  # an RFC 9110 field name, lowercased


def origin_key(origin: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an http(s) origin, or ``None`` when it is not one."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return scheme, host.lower(), port if port is not None else _DEFAULT_PORTS[scheme]


@dataclass(frozen=True)
class OriginPolicy:
    """The normalised ``allowed_origins``: the one place their entries are parsed.

    Localhost origins are always allowed. An entry is a full origin
    (``"https://app.example.com"``, port optional), a bare host (any scheme and port)
    or ``"*"`` (every origin).
    """

    entries: tuple[str, ...]
    any_origin: bool
    origins: frozenset[tuple[str, str, int]]
    hosts: frozenset[str]

    @classmethod
    def parse(cls, allowed: str | Iterable[str] | None) -> OriginPolicy:
        """Normalise an ``allowed_origins`` value (one string or several); ``ValueError`` names a bad entry."""
        if allowed is None:
            entries: tuple[str, ...] = ()
        elif isinstance(allowed, str):
            entries = (allowed,)
        else:
            entries = tuple(allowed)
        exact: set[tuple[str, str, int]] = set()
        hosts: set[str] = set()
        any_origin = False
        for entry in entries:
            if not isinstance(entry, str) or not entry.strip():
                raise ValueError(f"allowed_origins entries must be non-empty strings, got {entry!r}")
            entry = entry.strip()
            if entry == "*":
                any_origin = True
            elif "://" in entry:
                key = origin_key(entry)
                if key is None:
                    raise ValueError(f"allowed_origins: {entry!r} is not an http(s) origin")
                exact.add(key)
            else:
                hosts.add(entry.lower().strip("[]"))
        return cls(entries, any_origin, frozenset(exact), frozenset(hosts))

    def allows(self, origin: str) -> bool:
        """Whether a request carrying ``Origin: origin`` may proceed."""
        if self.any_origin:
            return True
        key = origin_key(origin)
        if key is None:
            return False
        _, host, _ = key
        return host in _LOCAL_HOSTS or host in self.hosts or key in self.origins


def cors_headers(origin: str) -> list[RawHeader]:
    """The headers every response to an allowed ``Origin`` carries: the origin itself, never ``*``."""
    return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]


def split_request_headers(requested: str | None, also: frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    """``Access-Control-Request-Headers`` split into the names a client may send and the rest.

    Both lists are lowercased, deduplicated and in the order requested. Allowed: the
    MCP request headers, ``Authorization``, ``Mcp-Param-{Name}`` for any token name, and
    ``also`` (:data:`SESSION_REQUEST_HEADERS` where 2025-era sessions are served).
    """
    allowed: list[str] = []
    refused: list[str] = []
    for item in (requested or "").split(","):
        name = item.strip(" \t").lower()
        if not name or name in allowed or name in refused:
            continue
        permitted = name in _CORS_REQUEST_HEADERS or name in also or (
            name.startswith(_CORS_PARAM_PREFIX) and len(name) > len(_CORS_PARAM_PREFIX) and bool(_TOKEN.match(name)))
        (allowed if permitted else refused).append(name)
    return allowed, refused


def preflight_headers(allowed: list[str], methods: bytes = b"POST") -> list[RawHeader]:
    """The headers of a ``204`` preflight answer that lets ``allowed`` request headers through.

    ``Access-Control-Allow-Headers`` is omitted when none is left; the browser then
    refuses the actual request itself, naming the header. ``methods`` are the ones the
    endpoint takes (``GET`` and ``DELETE`` too where 2025-era sessions are served).
    """
    answer: list[RawHeader] = [(b"access-control-allow-methods", methods)]
    if allowed:
        answer.append((b"access-control-allow-headers", ", ".join(allowed).encode("ascii")))
    answer.append((b"access-control-max-age", _CORS_MAX_AGE))
    return answer
