"""The server the transport-rules tests serve over native HTTP, ASGI and stdio alike (``tests.rules_app:server``)."""

from __future__ import annotations

from typing import Any

from mrtr import Context, ProtocolError
from mrtr.server import Server

server = Server("rules", "1.0.0", secret=b"r" * 32)


class Busy(ProtocolError):
    """A server-defined error that travels with its own HTTP status."""

    code = -32000
    status_hint = 429


@server.tool
def unloggable(ctx: Context) -> str:
    """Logs a line JSON can hold, then one it cannot, then answers."""
    ctx.log("info", "before")
    ctx.log("info", object())
    return "answered"


@server.tool
def unencodable() -> Any:
    """Returns content JSON cannot hold."""
    return {"content": [{"type": "text", "text": object()}]}


@server.tool
def busy() -> str:
    """Refuses with an error whose status hint is 429."""
    raise Busy("Too many requests: try again later")
