"""The MCP request-header rules, pure: no I/O, no trio.

:class:`RequestHeaders` is the case-insensitive view of a request's header fields;
:func:`check_headers` enforces that ``MCP-Protocol-Version``, ``Mcp-Method``,
``Mcp-Name`` and ``Mcp-Param-*`` are present and mirror the JSON-RPC body (SEP-2243),
answering ``HeaderMismatch`` (-32020) otherwise, with the value rules of
:mod:`mrtr.core.mirroring`; the ``Accept``/``Content-Type`` helpers decide rule 4 of
the exchange.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from ...core.errors import HeaderMismatch
from ...core.jsonrpc import Dispatcher
from ...core.mirroring import NAME_MEMBERS, as_text, decode_value, matches, param_header
from ...core.wire import META_PROTOCOL_VERSION

__all__ = ["RawHeader", "RequestHeaders", "accepts", "accepts_json_and_sse", "check_headers", "identity_encoded",
           "is_json", "media_types"]

RawHeader = tuple[bytes, bytes]
"""One header field as it travels: ``(name, value)`` bytes (not :class:`mrtr.Header`, the handler annotation)."""

_NAMES: dict[bytes, str] = {}  # a parsed header name's key, made once per name met (bounded: names are client input)
_NAMES_LIMIT = 512
_NAME_LENGTH = 64  # field names longer than any registered one are lowered each time, never kept


def _key(name: bytes | str) -> str:
    if name.__class__ is not bytes:
        # only parsed (bytes) names are kept: a table mixing bytes and str keys would compare them,
        # which ``python -bb`` turns into an error
        return str(name).lower()
    key = _NAMES.get(name)  # type: ignore[call-overload]
    if key is None:
        key = name.decode("latin-1").lower()  # type: ignore[union-attr]
        if len(_NAMES) < _NAMES_LIMIT and len(name) <= _NAME_LENGTH:
            _NAMES[name] = key  # type: ignore[index]
    return key


class RequestHeaders(dict[str, str]):
    """The request headers by lowercase name; repeated fields are kept apart.

    As a mapping (what the server's principal source sees) a repeated field reads as
    its values joined with ``", "``; the view is passed as is, never copied. It is a
    ``dict`` so that reading a field is a C lookup on every request; treat it as read-only.
    """

    __slots__ = ("_repeated",)

    def __init__(self, raw: Iterable[RawHeader]) -> None:
        self._repeated: dict[str, list[str]] | None = None  # every value of a field that came more than once
        names = _NAMES
        for name, value in raw:
            key = names.get(name) if name.__class__ is bytes else None  # a parsed name met before
            if key is None:
                key = _key(name)
            try:
                text = value.decode("latin-1").strip(" \t")
            except AttributeError:  # a str value
                text = str(value).strip(" \t")
            if key not in self:
                self[key] = text
            else:
                self._repeat(key, text)

    def _repeat(self, key: str, text: str) -> None:
        repeated = self._repeated
        if repeated is None:
            repeated = self._repeated = {}
        values = repeated.get(key)
        if values is None:
            values = repeated[key] = [self[key]]
        values.append(text)
        self[key] = ", ".join(values)

    def __repr__(self) -> str:
        # Names only: values carry credentials (Authorization, cookies) and a repr ends up in logs.
        return f"RequestHeaders({sorted(self)!r})"

    def all(self, name: str) -> list[str]:
        """Every value of a field, one per occurrence (for fields that must not repeat)."""
        if self._repeated is not None and name in self._repeated:
            return list(self._repeated[name])
        value = self.get(name)
        return [] if value is None else [value]

    def mcp(self, name: str, display: str) -> str | None:
        """One MCP header's value; a repeated MCP header is malformed (-32020)."""
        if self._repeated is not None and name in self._repeated:
            raise HeaderMismatch(f"Header mismatch: {display} header appears more than once")
        return self.get(name)

    def as_mapping(self) -> dict[str, str]:
        """Every field by lowercase name, repeated ones joined with ``", "`` (a copy)."""
        return dict(self)


def media_types(value: str) -> list[tuple[str, float]]:
    """The media ranges of an ``Accept``-style list, lowercased, each with its q value."""
    ranges = []
    for item in value.split(","):
        kind, *parameters = item.split(";")
        kind = kind.strip().lower()
        if not kind:
            continue
        quality = 1.0
        for parameter in parameters:
            key, _, raw = parameter.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(raw.strip())
                except ValueError:
                    quality = 0.0
        ranges.append((kind, quality))
    return ranges


def accepts(ranges: list[tuple[str, float]], media: str) -> bool:
    """Whether the ranges of :func:`media_types` accept ``media``."""
    major = media.split("/", 1)[0]
    return any(q > 0 and kind in (media, f"{major}/*", "*/*") for kind, q in ranges)


@functools.lru_cache(maxsize=64)
def accepts_json_and_sse(accept: str) -> bool:
    """Whether an ``Accept`` value lists both JSON and SSE; cached by the raw value (clients repeat theirs)."""
    ranges = media_types(accept)
    return accepts(ranges, "application/json") and accepts(ranges, "text/event-stream")


@functools.lru_cache(maxsize=64)
def is_json(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` value names ``application/json`` (parameters aside)."""
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def identity_encoded(content_encodings: list[str]) -> bool:
    """Whether every ``Content-Encoding`` value (all occurrences) names only ``identity``.

    No header at all is identity. Anything else (``gzip``, ``br``, an unknown coding)
    means the body is not the JSON it claims to be; it is never read as JSON.
    """
    for value in content_encodings:
        for coding in value.split(","):
            coding = coding.strip(" \t").lower()
            if coding and coding != "identity":
                return False
    return True


def _quote(text: str) -> str:
    if len(text) > 120:
        text = text[:117] + "..."
    return "'" + text + "'"


def _param_display(header: str) -> str:
    # header names arrive lowercased; errors show them as a client would have spelled them
    return param_header("-".join(part[:1].upper() + part[1:] for part in header.split("-")))


def check_headers(server: Dispatcher, message: Mapping[str, Any], headers: RequestHeaders) -> None:
    """Raise ``HeaderMismatch`` unless the MCP request headers are present and mirror the body.

    Methods the server does not implement skip the checks: they are answered 404 with
    -32601 whatever they carry, like the core answers them whatever their params.
    """
    method = message["method"]
    if not server.serves(method):
        return
    params = message.get("params") or {}

    version = headers.mcp("mcp-protocol-version", "MCP-Protocol-Version")
    if version is None:
        raise HeaderMismatch("Header mismatch: missing required MCP-Protocol-Version header")
    meta = params.get("_meta")
    body_version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    if isinstance(body_version, str) and version != body_version:
        raise HeaderMismatch(
            f"Header mismatch: MCP-Protocol-Version header value {_quote(version)} "
            f"does not match body value {_quote(body_version)}"
        )

    method_header = headers.mcp("mcp-method", "Mcp-Method")
    if method_header is None:
        raise HeaderMismatch("Header mismatch: missing required Mcp-Method header")
    if method_header != method:
        raise HeaderMismatch(
            f"Header mismatch: Mcp-Method header value {_quote(method_header)} "
            f"does not match body value {_quote(method)}"
        )

    member = NAME_MEMBERS.get(method)
    if member is None:
        return
    target = params.get(member)
    name_header = headers.mcp("mcp-name", "Mcp-Name")
    if isinstance(target, str):
        if name_header is None:
            raise HeaderMismatch(f"Header mismatch: missing required Mcp-Name header for {method}")
        decoded = decode_value(name_header, "Mcp-Name")
        if decoded != target:
            raise HeaderMismatch(
                f"Header mismatch: Mcp-Name header value {_quote(decoded)} does not match body value {_quote(target)}"
            )
    if method != "tools/call" or not isinstance(target, str):
        return
    mirrored = server.header_parameters(target)
    if not mirrored:
        return
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        return  # the server answers -32602 for arguments that are not an object
    arguments = arguments or {}
    for header, parameter in mirrored.items():
        display = _param_display(header)
        raw = headers.mcp("mcp-param-" + header, display)
        value = arguments.get(parameter)
        if value is None:
            if raw is not None:
                raise HeaderMismatch(
                    f"Header mismatch: {display} header is present but argument {parameter!r} is absent from the body"
                )
            continue
        if not isinstance(value, (str, int, float, bool)):
            continue  # not a mirrorable value: argument validation answers -32602
        if raw is None:
            raise HeaderMismatch(f"Header mismatch: missing required {display} header for argument {parameter!r}")
        decoded = decode_value(raw, display)
        if not matches(decoded, value):
            raise HeaderMismatch(
                f"Header mismatch: {display} header value {_quote(decoded)} "
                f"does not match body value {_quote(as_text(value))}"
            )
