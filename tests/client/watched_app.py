"""A server whose resources change on request, for the resource subscription tests.

Served in process, on loopback HTTP, and as ``tests.client.watched_app:server``
(``mrtr serve ... --stdio``). ``touch`` tells the subscribers of a uri that it changed.
"""

from __future__ import annotations

from mrtr import Server

server = Server("watched", "1.0.0", secret=b"w" * 32)

NOTES = {"notes://a": "first", "notes://b": "second"}


@server.resource("notes://a", mime_type="text/plain")
def note_a() -> str:
    """A note that changes."""
    return NOTES["notes://a"]


@server.resource("notes://b", mime_type="text/plain")
def note_b() -> str:
    """Another note that changes."""
    return NOTES["notes://b"]


@server.tool
def touch(uri: str, text: str = "changed") -> str:
    """Change a note and tell its subscribers."""
    NOTES[uri] = text
    server.notify_resource_updated(uri)
    return f"touched {uri}"


@server.tool
def crash() -> str:
    """End this process at once, as a crashing stdio server does."""
    import os

    os._exit(3)
