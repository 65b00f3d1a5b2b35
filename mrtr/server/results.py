"""Result shaping: what handlers return, turned into MCP results.

Handlers return plain values; these functions give them the wire shape. A tool may
return text, content blocks, a ``CallToolResult``, or any msgspec-encodable value or
pydantic model (sent as text and, when it is an object, as ``structuredContent``); a prompt returns text,
messages or a ``GetPromptResult``; a resource returns text, bytes, contents or a
``ReadResourceResult``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import msgspec

from ..core import models, wire
from ..core.errors import HandlerError
from ..core.jsonrpc import encode

__all__ = ["shape_prompt_result", "shape_resource_result", "shape_tool_result"]


def _shaped(shape: Callable[..., dict[str, Any]], what: str, value: Any, *args: Any) -> dict[str, Any]:
    # What a handler returned decides its result alone: a value that cannot be one is the handler's
    # failure (a tool's error result, a prompt's or resource's -32603), and a round that runs once
    # records it like any other, so a retry does not run the handler again.
    try:
        return shape(value, *args)
    except (TypeError, ValueError, msgspec.EncodeError) as exc:
        raise HandlerError(f"the handler returned {type(value).__name__}, which cannot be sent as {what} ({exc})"
                           ) from None


def shape_tool_result(value: Any, structured: bool) -> dict[str, Any]:
    """A ``CallToolResult`` for what a tool returned; ``structured`` when it declares an ``outputSchema``.

    Raises :class:`~mrtr.core.errors.HandlerError` for a value that cannot be one.
    """
    return _shaped(_tool_result, "a tool result", value, structured)


def _tool_result(value: Any, structured: bool) -> dict[str, Any]:
    if isinstance(value, wire.CallToolResult):
        result = msgspec.to_builtins(value)
    elif isinstance(value, dict) and "content" in value and isinstance(value["content"], list) and not structured:
        result = dict(value)
    elif value is None:
        result = {"content": []}
    elif isinstance(value, str):
        result = {"content": [{"type": "text", "text": value}]}
    elif isinstance(value, list) and value and all(isinstance(item, dict) and "type" in item for item in value):
        result = {"content": list(value)}
    else:
        data = msgspec.to_builtins(value, enc_hook=models.enc_hook)  # a pydantic model as its JSON form
        result = {"content": [{"type": "text", "text": encode(data).decode()}]}
        if isinstance(data, dict):
            result["structuredContent"] = data
    result["resultType"] = "complete"
    return result


def _prompt_message(item: Any) -> dict[str, Any]:
    if isinstance(item, str):
        return {"role": "user", "content": {"type": "text", "text": item}}
    if isinstance(item, msgspec.Struct):
        return msgspec.to_builtins(item)
    if isinstance(item, dict) and "role" in item:
        return item
    raise TypeError(f"a prompt message must be a str, a PromptMessage or a {{role, content}} dict, got {item!r}")


def shape_prompt_result(value: Any, description: str | None) -> dict[str, Any]:
    """A ``GetPromptResult`` for what a prompt returned, with the prompt's description by default.

    Raises :class:`~mrtr.core.errors.HandlerError` for a value that cannot be one.
    """
    return _shaped(_prompt_result, "prompt messages", value, description)


def _prompt_result(value: Any, description: str | None) -> dict[str, Any]:
    if isinstance(value, wire.GetPromptResult):
        result = msgspec.to_builtins(value)
    elif isinstance(value, dict) and "messages" in value:
        result = dict(value)
    elif isinstance(value, (list, tuple)):
        result = {"messages": [_prompt_message(item) for item in value]}
    else:
        result = {"messages": [_prompt_message(value)]}
    if description and "description" not in result:
        result["description"] = description
    result["resultType"] = "complete"
    return result


def _resource_contents(item: Any, uri: str, mime_type: str | None) -> dict[str, Any]:
    if isinstance(item, str):
        contents: dict[str, Any] = {"uri": uri, "text": item}
    elif isinstance(item, (bytes, bytearray)):
        contents = {"uri": uri, "blob": base64.b64encode(bytes(item)).decode("ascii")}
    elif isinstance(item, msgspec.Struct):
        return msgspec.to_builtins(item)
    elif isinstance(item, dict) and ("text" in item or "blob" in item):
        return {"uri": uri, **item}
    else:
        raise TypeError(f"a resource handler must return str, bytes or resource contents, got {type(item).__name__}")
    if mime_type:
        contents["mimeType"] = mime_type
    return contents


def shape_resource_result(value: Any, uri: str, mime_type: str | None) -> dict[str, Any]:
    """A ``ReadResourceResult`` for what a resource handler returned for ``uri``.

    Raises :class:`~mrtr.core.errors.HandlerError` for a value that cannot be one.
    """
    return _shaped(_resource_result, "resource contents", value, uri, mime_type)


def _resource_result(value: Any, uri: str, mime_type: str | None) -> dict[str, Any]:
    if isinstance(value, wire.ReadResourceResult):
        return msgspec.to_builtins(value)
    if isinstance(value, dict) and "contents" in value:
        return dict(value)
    if isinstance(value, (list, tuple)):
        return {"contents": [_resource_contents(item, uri, mime_type) for item in value]}
    return {"contents": [_resource_contents(value, uri, mime_type)]}
