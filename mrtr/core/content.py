"""Helpers that build MCP content blocks for tool and prompt results.

Each returns the wire shape as a plain dict, ready to put in a ``CallToolResult``'s
``content`` list or a prompt message, and validates what it is given so that a bad
block fails where it is built, not in the client.
"""

from __future__ import annotations

import base64
from typing import Any

__all__ = ["text", "image", "audio", "embedded_text", "embedded_blob", "resource_link", "tool_result"]


def _b64(data: bytes | str) -> str:
    if isinstance(data, str):
        base64.b64decode(data, validate=True)  # already Base64: check it
        return data
    return base64.b64encode(data).decode("ascii")


def text(value: str, *, annotations: dict[str, Any] | None = None) -> dict[str, Any]:
    """A text block."""
    block: dict[str, Any] = {"type": "text", "text": value}
    if annotations:
        block["annotations"] = annotations
    return block


def image(data: bytes | str, mime_type: str = "image/png") -> dict[str, Any]:
    """An image block from raw bytes (or an already Base64-encoded string)."""
    return {"type": "image", "data": _b64(data), "mimeType": mime_type}


def audio(data: bytes | str, mime_type: str = "audio/wav") -> dict[str, Any]:
    """An audio block from raw bytes (or an already Base64-encoded string)."""
    return {"type": "audio", "data": _b64(data), "mimeType": mime_type}


def embedded_text(uri: str, value: str, mime_type: str | None = "text/plain") -> dict[str, Any]:
    """An embedded text resource."""
    resource: dict[str, Any] = {"uri": uri, "text": value}
    if mime_type:
        resource["mimeType"] = mime_type
    return {"type": "resource", "resource": resource}


def embedded_blob(uri: str, data: bytes | str, mime_type: str | None = "application/octet-stream") -> dict[str, Any]:
    """An embedded binary resource."""
    resource: dict[str, Any] = {"uri": uri, "blob": _b64(data)}
    if mime_type:
        resource["mimeType"] = mime_type
    return {"type": "resource", "resource": resource}


def resource_link(uri: str, name: str, *, title: str | None = None, description: str | None = None,
                  mime_type: str | None = None) -> dict[str, Any]:
    """A link to a resource the client may read."""
    block: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": name}
    for key, value in (("title", title), ("description", description), ("mimeType", mime_type)):
        if value is not None:
            block[key] = value
    return block


def tool_result(*blocks: dict[str, Any], structured: Any = None, is_error: bool = False) -> dict[str, Any]:
    """A complete ``CallToolResult`` from content blocks (and optional structured content)."""
    result: dict[str, Any] = {"content": list(blocks)}
    if structured is not None:
        result["structuredContent"] = structured
    if is_error:
        result["isError"] = True
    return result
