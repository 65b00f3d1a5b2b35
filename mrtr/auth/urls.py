"""Canonical resource URLs and the RFC 9728 well-known location derived from them.

The MCP spec names the server by the canonical URI of its endpoint: lowercase scheme
and host, no fragment, no trailing slash. Audience checks compare in that form so an
authorization server that writes ``HTTPS://MCP.example.com/mcp`` is still understood,
and the metadata's ``resource`` is exactly the configured URL, never the ``Host``
header of the request at hand. The rule itself is :mod:`mrtr.core.resource_urls`'s,
which the client shares.
"""

from __future__ import annotations

from ..core.resource_urls import WELL_KNOWN, canonical_url, metadata_path, metadata_url

__all__ = ["WELL_KNOWN", "audience_key", "canonical_url", "metadata_path", "metadata_url"]


def audience_key(value: str) -> str:
    """An audience as it is compared: the canonical URL, or the value itself when it is not a
    URL (some providers use client ids or URNs), compared exactly."""
    try:
        return canonical_url(value)
    except ValueError:
        return value
