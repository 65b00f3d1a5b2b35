"""The Streamable HTTP request headers a client derives from the JSON-RPC body (SEP-2243).

``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` come from the message itself;
``Mcp-Param-{Name}`` headers mirror the tool arguments whose ``inputSchema`` property
carries ``"x-mcp-header": "{Name}"``. The value encoding and the annotation rules are
:mod:`mrtr.core.mirroring`'s, shared with the server. This module does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.mirroring import MAX_SAFE_INTEGER, NAME_MEMBERS, InvalidHeaderSchema, encode_value, param_header
from ..core.wire import META_PROTOCOL_VERSION, PROTOCOL_VERSION

__all__ = ["request_headers"]


def _lookup(arguments: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(arguments, Mapping):
            return None
        arguments = arguments.get(part)
    return arguments


def request_headers(message: Mapping[str, Any], parameters: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, str]:
    """The MCP headers for a request ``message``.

    ``parameters`` maps ``x-mcp-header`` names to argument paths, as
    :func:`mrtr.core.mirroring.mirrored_parameters` finds them in the tool's definition.
    Raises :class:`~mrtr.core.mirroring.InvalidHeaderSchema` for an integer argument
    outside the safe range.
    """
    params = message.get("params") or {}
    meta = params.get("_meta") or {}
    method = message["method"]
    headers = {
        "MCP-Protocol-Version": encode_value(meta.get(META_PROTOCOL_VERSION, PROTOCOL_VERSION)),
        "Mcp-Method": encode_value(method),
    }
    member = NAME_MEMBERS.get(method)
    if member is not None and isinstance(params.get(member), str):
        headers["Mcp-Name"] = encode_value(params[member])
    if method == "tools/call" and parameters:
        arguments = params.get("arguments") or {}
        for header, path in parameters.items():
            value = _lookup(arguments, path)
            if value is None:
                continue
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
                raise InvalidHeaderSchema(f"argument {'.'.join(path)!r} = {value} is too large for a header")
            headers[param_header(header)] = encode_value(value)
    return headers
