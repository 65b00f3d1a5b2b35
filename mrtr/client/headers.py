"""The Streamable HTTP request headers a client derives from the JSON-RPC body (SEP-2243).

``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` come from the message itself;
``Mcp-Param-{Name}`` headers mirror the tool arguments whose ``inputSchema`` property
carries ``"x-mcp-header": "{Name}"``. A value that is not plain visible ASCII travels in
the ``=?base64?...?=`` form. This module does no I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from ..core.wire import META_PROTOCOL_VERSION, PROTOCOL_VERSION

__all__ = ["InvalidHeaderSchema", "header_value", "mirrored_parameters", "request_headers"]

_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_MAX_SAFE_INTEGER = 2**53 - 1
_NAME_MEMBER = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class InvalidHeaderSchema(ValueError):
    """A tool's ``x-mcp-header`` annotations break the rules; clients must not call it over HTTP."""


def header_value(value: Any) -> str:
    """A value as an MCP header value: decimal integers, ``true``/``false``, else text or Base64."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    plain = bool(text) and text == text.strip() and all(0x20 <= ord(ch) <= 0x7E for ch in text)
    if not plain or (text.startswith("=?base64?") and text.endswith("?=")):
        return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="
    return text


def _walk(schema: Any, path: tuple[str, ...], found: dict[str, tuple[str, ...]], seen: set[str]) -> None:
    # Only chains of ``properties`` reach a mirrored parameter; items, combinators and
    # $ref do not, so they are not searched.
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return
    for name, prop in properties.items():
        if not isinstance(prop, Mapping):
            continue
        here = (*path, name)
        if "x-mcp-header" in prop:
            header = prop["x-mcp-header"]
            if not isinstance(header, str) or not header or not set(header) <= _TCHAR:
                raise InvalidHeaderSchema(f"property {'.'.join(here)!r}: x-mcp-header {header!r} is not a header token")
            kind = prop.get("type")
            if kind not in ("string", "integer", "boolean"):
                raise InvalidHeaderSchema(
                    f"property {'.'.join(here)!r}: x-mcp-header is allowed on string, integer and boolean "
                    f"properties only, not {kind!r}")
            if header.lower() in seen:
                raise InvalidHeaderSchema(f"x-mcp-header {header!r} is used twice (names are case-insensitive)")
            seen.add(header.lower())
            found[header] = here
        _walk(prop, here, found, seen)


def mirrored_parameters(tool: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """For a ``Tool`` definition, each ``Mcp-Param-*`` name mapped to its argument path.

    Raises :class:`InvalidHeaderSchema` when an annotation is not a valid header token,
    sits on a property that is not a string, integer or boolean, or repeats a name.
    """
    found: dict[str, tuple[str, ...]] = {}
    _walk(tool.get("inputSchema"), (), found, set())
    return found


def _lookup(arguments: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(arguments, Mapping):
            return None
        arguments = arguments.get(part)
    return arguments


def request_headers(message: Mapping[str, Any], parameters: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, str]:
    """The MCP headers for a request ``message``; ``parameters`` from :func:`mirrored_parameters`."""
    params = message.get("params") or {}
    meta = params.get("_meta") or {}
    method = message["method"]
    headers = {
        "MCP-Protocol-Version": header_value(meta.get(META_PROTOCOL_VERSION, PROTOCOL_VERSION)),
        "Mcp-Method": header_value(method),
    }
    member = _NAME_MEMBER.get(method)
    if member is not None and isinstance(params.get(member), str):
        headers["Mcp-Name"] = header_value(params[member])
    if method == "tools/call" and parameters:
        arguments = params.get("arguments") or {}
        for header, path in parameters.items():
            value = _lookup(arguments, path)
            if value is None:
                continue
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _MAX_SAFE_INTEGER:
                raise InvalidHeaderSchema(f"argument {'.'.join(path)!r} = {value} is too large for a header")
            headers["Mcp-Param-" + header] = header_value(value)
    return headers
