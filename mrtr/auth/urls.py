"""Canonical resource URLs and the RFC 9728 well-known location derived from them.

The MCP spec names the server by the canonical URI of its endpoint: lowercase scheme
and host, no fragment, no trailing slash. Audience checks compare in that form so an
authorization server that writes ``HTTPS://MCP.example.com/mcp`` is still understood,
and the metadata's ``resource`` is exactly the configured URL, never the ``Host``
header of the request at hand.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["WELL_KNOWN", "audience_key", "canonical_url", "metadata_path", "metadata_url"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
WELL_KNOWN = "/.well-known/oauth-protected-resource"


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
    """The absolute URL of the metadata document for ``resource``."""
    parts = urlsplit(canonical_url(resource))
    return urlunsplit((parts.scheme, parts.netloc, metadata_path(resource), "", ""))


def audience_key(value: str) -> str:
    """An audience as it is compared: the canonical URL, or the value itself when it is not a
    URL (some providers use client ids or URNs), compared exactly."""
    try:
        return canonical_url(value)
    except ValueError:
        return value
