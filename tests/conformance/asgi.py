"""The conformance fixture servers as ASGI applications, for hypercorn's trio worker.

    hypercorn --worker-class trio --bind 127.0.0.1:3001 'tests.conformance.asgi:app'
    hypercorn --worker-class trio --bind 127.0.0.1:3001 'tests.conformance.asgi:lenient_app'

The MCP endpoint is ``/mcp``, as with ``mrtr serve``.
"""

from __future__ import annotations

from mrtr.transports.http import asgi_app

from .server import lenient_server, server

__all__ = ["app", "lenient_app"]

POLL_AFTER = 0.5
"""Seconds a 2025-11-25 stream's connection lasts before it is closed for polling (as ``--sse-poll-after``)."""

app = asgi_app(server, sse_poll_after=POLL_AFTER)
"""The fixture server under the strict answer policy."""

lenient_app = asgi_app(lenient_server, sse_poll_after=POLL_AFTER)
"""The fixture server under the lenient answer policy."""
