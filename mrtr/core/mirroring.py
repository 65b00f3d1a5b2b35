"""Body values mirrored in HTTP headers (SEP-2243): how they travel and which may travel.

Streamable HTTP repeats parts of a request's body in headers so intermediaries can
route without parsing JSON: ``Mcp-Name`` mirrors a method's target (:data:`NAME_MEMBERS`),
and ``Mcp-Param-{Name}`` a tool argument whose ``inputSchema`` property carries
``"x-mcp-header": "{Name}"``. This module holds those rules once, for every side:

- the value encoding a client applies (:func:`encode_value`: decimal integers,
  ``true``/``false``, text as is unless it is not plain visible ASCII, has leading or
  trailing whitespace or looks like the marker, then ``=?base64?{UTF-8 in Base64}?=``);
- the decoding and comparison a server applies (:func:`decode_value`, :func:`matches`);
- the ``x-mcp-header`` constraints (:func:`mirrored_parameters`, :func:`is_token`), which
  a client checks on every listed tool and the server on every tool it publishes.

The server's header checks live in :mod:`mrtr.transports.http.headers`, the client's
header derivation in :mod:`mrtr.client.headers`. This module does no I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from .errors import HeaderMismatch

__all__ = [
    "MAX_SAFE_INTEGER",
    "MIRRORED_TYPES",
    "NAME_MEMBERS",
    "InvalidHeaderSchema",
    "as_text",
    "decode_value",
    "encode_value",
    "is_token",
    "matches",
    "mirrored_parameters",
    "param_header",
]

NAME_MEMBERS: Mapping[str, str] = {
    "tools/call": "name", "prompts/get": "name", "resources/read": "uri",
    # the tasks extension's routing headers
    "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
}
"""The methods whose target travels in ``Mcp-Name``, and the ``params`` member it mirrors."""

MIRRORED_TYPES = frozenset({"string", "integer", "boolean"})
"""The JSON Schema types an ``x-mcp-header`` property may have (not ``number``)."""

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer a mirrored argument may hold, in absolute value (JavaScript's safe range)."""

_PREFIX = "=?base64?"
_SUFFIX = "?="
# RFC 9110 tchar; fullmatch, so a trailing newline is not taken for the end of the name.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# A field value as it arrives: visible ASCII at both ends, spaces and tabs only inside.
_VISIBLE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?")
_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,4})?")
# Keywords whose values are instance data, not schemas: an "x-mcp-header" in them is data.
_DATA_KEYWORDS = frozenset({"const", "default", "enum", "examples"})


class InvalidHeaderSchema(ValueError):
    """A tool's ``x-mcp-header`` annotations break the rules; clients must not call it over HTTP."""


def is_token(name: Any) -> bool:
    """Whether ``name`` is an RFC 9110 token (``1*tchar``): what an ``x-mcp-header`` value must be."""
    return isinstance(name, str) and _TOKEN.fullmatch(name) is not None


def param_header(name: str) -> str:
    """The header an ``x-mcp-header`` name travels in: ``Mcp-Param-{name}``."""
    return "Mcp-Param-" + name


def as_text(value: Any) -> str:
    """A body value as header text, before any encoding: booleans ``true``/``false``, numbers in decimal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def encode_value(value: Any) -> str:
    """A body value as it goes in ``Mcp-Name`` or ``Mcp-Param-*``: plain, or the ``=?base64?...?=`` form.

    Text is sent as is when it is non-empty visible ASCII (spaces allowed inside) and does
    not itself look like the marker; anything else is Base64 of its UTF-8.
    """
    text = as_text(value)
    plain = bool(text) and text == text.strip() and all(0x20 <= ord(ch) <= 0x7E for ch in text)
    if not plain or (text.startswith(_PREFIX) and text.endswith(_SUFFIX)):
        return _PREFIX + base64.b64encode(text.encode("utf-8")).decode("ascii") + _SUFFIX
    return text


def decode_value(value: str, display: str) -> str:
    """A header value as the body would hold it: the ``=?base64?...?=`` form decoded.

    Raises ``HeaderMismatch`` (naming the header as ``display``) for characters outside
    visible ASCII, which must travel Base64-encoded, and for a marked value whose
    payload is not strict Base64 of UTF-8.
    """
    known = _DECODED.get(value)
    if known is not None:
        return known
    if _VISIBLE.fullmatch(value) is None:
        raise HeaderMismatch(
            f"Header mismatch: {display} header value has invalid characters; "
            "values that are not visible ASCII must be sent as =?base64?...?="
        )
    if value.startswith(_PREFIX) and value.endswith(_SUFFIX) and len(value) >= len(_PREFIX) + len(_SUFFIX):
        payload = value[len(_PREFIX):-len(_SUFFIX)]
        try:
            # strict: the alphabet only, and the padding the encoding calls for (SEP-2243's test table)
            decoded = base64.b64decode(payload, validate=True).decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise HeaderMismatch(
                f"Header mismatch: {display} header value is not valid =?base64?...?= encoding") from None
    else:
        decoded = value
    if len(value) <= _DECODED_LENGTH:  # a longer one is read each time, never kept
        if len(_DECODED) >= _DECODED_LIMIT:
            _DECODED.clear()
        _DECODED[value] = decoded
    return decoded


# Header values already read (a client repeats its Mcp-Name on every call), and what they say;
# bounded, since they are client input. Only values that passed the rules are kept.
_DECODED: dict[str, str] = {}
_DECODED_LIMIT = 512
_DECODED_LENGTH = 256


def matches(header: str, body: Any) -> bool:
    """Whether a decoded header value mirrors a body value: text exactly, numbers numerically."""
    if isinstance(body, bool):
        return header == as_text(body)
    if isinstance(body, (int, float)):
        if _NUMBER.fullmatch(header) is None:
            return False
        try:
            return Decimal(header) == Decimal(body)
        except (InvalidOperation, ValueError, OverflowError):
            return False
    return header == body


def mirrored_parameters(tool: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """For a ``Tool`` definition, each ``x-mcp-header`` name mapped to the path of its argument.

    Raises :class:`InvalidHeaderSchema` when an annotation is not a header token, sits
    on a property that is not a string, integer or boolean, repeats a name (names are
    case-insensitive), or is anywhere but on a property reached from the schema's root
    through ``properties`` alone (not ``items``, combinators, conditionals or ``$ref``).
    """
    found: dict[str, tuple[str, ...]] = {}
    _walk(tool.get("inputSchema"), (), True, found, set())
    return found


def _walk(schema: Any, path: tuple[str, ...], reachable: bool, found: dict[str, tuple[str, ...]],
          seen: set[str]) -> None:
    if isinstance(schema, list):
        for item in schema:
            _walk(item, path, False, found, seen)
        return
    if not isinstance(schema, Mapping):
        return
    where = f"property {'.'.join(path)!r}" if path else "the schema root"
    if "x-mcp-header" in schema:
        header = schema["x-mcp-header"]
        if not reachable or not path:
            raise InvalidHeaderSchema(
                f"{where}: x-mcp-header {header!r} is not on a property reached through properties alone")
        if not is_token(header):
            raise InvalidHeaderSchema(f"{where}: x-mcp-header {header!r} is not a header token")
        kind = schema.get("type")
        if not isinstance(kind, str) or kind not in MIRRORED_TYPES:
            raise InvalidHeaderSchema(
                f"{where}: x-mcp-header is allowed on string, integer and boolean properties only, not {kind!r}")
        if header.lower() in seen:
            raise InvalidHeaderSchema(f"x-mcp-header {header!r} is used twice (names are case-insensitive)")
        seen.add(header.lower())
        found[header] = path
    for keyword, value in schema.items():
        if keyword in _DATA_KEYWORDS:
            continue
        if keyword == "properties" and isinstance(value, Mapping):
            for name, prop in value.items():
                _walk(prop, (*path, str(name)), reachable, found, seen)
        else:
            _walk(value, path, False, found, seen)
