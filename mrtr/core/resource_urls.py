"""Canonical resource URLs and the RFC 9728 well-known location derived from them.

The MCP spec names a server by the canonical URI of its endpoint: lowercase scheme and
host, no default port, no fragment, no trailing slash. The resource server compares
audiences in that form (:mod:`mrtr.auth.urls`), and the client compares the ``resource``
a protected resource metadata document names with the URL it was given, the same way,
so one rule serves both. This module does no I/O.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["WELL_KNOWN", "canonical_url", "metadata_path", "metadata_url", "root_metadata_url"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
WELL_KNOWN = "/.well-known/oauth-protected-resource"
"""The well-known suffix of protected resource metadata (RFC 9728 §3)."""


def canonical_url(url: str) -> str:
    """``url`` with scheme and host lowercased, default port, fragment and trailing slash removed.

    Raises ``ValueError`` for anything that is not an absolute http(s) URL.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"not an absolute http(s) URL: {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError("a resource URL carries no credentials")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def metadata_path(resource: str) -> str:
    """The path of the path-inserted metadata document for ``resource`` (RFC 9728 §3.1).

    ``https://mcp.example.com/mcp`` gives ``/.well-known/oauth-protected-resource/mcp``.
    """
    return WELL_KNOWN + urlsplit(canonical_url(resource)).path


def metadata_url(resource: str) -> str:
    """The absolute URL of the path-inserted metadata document for ``resource``."""
    parts = urlsplit(canonical_url(resource))
    return urlunsplit((parts.scheme, parts.netloc, metadata_path(resource), "", ""))


def root_metadata_url(resource: str) -> str:
    """The metadata document at the root of ``resource``'s origin: where a client looks second."""
    parts = urlsplit(canonical_url(resource))
    return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN, "", ""))
