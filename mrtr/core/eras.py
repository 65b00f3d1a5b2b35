"""Protocol eras: how a message says which era it speaks, and what differs between them.

MCP has two eras. The **modern** era (2026-07-28) is stateless: every request carries
its protocol version, the client's capabilities and its identity in
``params._meta``, and a handler that needs input answers with an
``InputRequiredResult``. The **legacy** era (2025-11-25, 2025-06-18, 2025-03-26) opens
a session with ``initialize``, negotiates a version and capabilities once, and lets
the server send requests to the client (``elicitation/create``,
``sampling/createMessage``, ``roots/list``) while a call runs.

This module holds the rules both sides of the wire share, once:

- :func:`era_of` tells a message's era. The modern claim is
  ``params._meta["io.modelcontextprotocol/protocolVersion"]``; the
  ``io.modelcontextprotocol/`` prefix is reserved, so a legacy message never carries
  it. A bare ``_meta`` proves nothing: legacy requests carry ``_meta.progressToken``.
- :func:`negotiate` answers an ``initialize``'s ``protocolVersion`` the way the 2025
  lifecycle says a server does: the same version when it is supported, else the latest
  legacy one. A modern version is never put in an ``InitializeResult``.
- :func:`session_capabilities` reads a client's ``initialize`` capabilities as the
  negotiated version defines them (2025-03-26 has no elicitation, 2025-06-18 no URL
  mode and no sampling tools), so the capability gate of the replay core refuses what
  that version cannot carry, with the error it raises on either era.
- :func:`legacy_request` renders what a handler yields as the server-to-client request
  of a negotiated version, downgrading an elicitation form to that version's
  vocabulary or refusing what it cannot express.
- :func:`is_modern_error` is the client's half: whether an error answering its probe
  proves the server modern (only errors the modern era defines do; the rule never keys
  on one code a legacy server might also send), and :class:`InitializeResult` the
  legacy handshake's answer as the client checks it.

This module does no I/O.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec

from .effects import Elicit, ElicitURL, ListRoots, Request, Sample
from .errors import (HEADER_MISMATCH, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY,
                     UNSUPPORTED_PROTOCOL_VERSION, MissingRequiredClientCapability)
from .wire import META_PROTOCOL_VERSION, PROTOCOL_VERSION, Implementation

__all__ = [
    "MODERN",
    "LEGACY",
    "Era",
    "MODERN_VERSIONS",
    "LEGACY_VERSIONS",
    "LATEST_LEGACY_VERSION",
    "era_of",
    "has_modern_claim",
    "negotiate",
    "session_capabilities",
    "legacy_request",
    "Unexpressible",
    "MODERN_ERRORS",
    "is_modern_error",
    "InitializeResult",
]

Era = Literal["modern", "legacy"]
"""The two eras a message can speak."""

MODERN: Final = "modern"
"""The stateless era: per-request ``_meta``, no ``initialize``."""

LEGACY: Final = "legacy"
"""The session era: ``initialize`` and server-to-client requests."""

MODERN_VERSIONS: tuple[str, ...] = (PROTOCOL_VERSION,)
"""The modern protocol versions this package speaks, newest first."""

LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")
"""The legacy protocol versions a session may negotiate, newest first."""

LATEST_LEGACY_VERSION: Final = LEGACY_VERSIONS[0]
"""What ``initialize`` answers a version it does not support with."""


def has_modern_claim(params: Any) -> bool:
    """Whether request ``params`` carry the modern claim (a string protocol version in ``_meta``)."""
    # Parsed messages hold dicts: the exact type check first, because the abstract one
    # costs a call into ABCMeta on every request of both eras.
    if params.__class__ is not dict and not isinstance(params, Mapping):
        return False
    meta = params.get("_meta")
    return (meta.__class__ is dict or isinstance(meta, Mapping)) and isinstance(meta.get(META_PROTOCOL_VERSION), str)


def era_of(message: Mapping[str, Any], transport_version: str | None = None) -> Era:
    """The era a parsed JSON-RPC message speaks: the one rule every transport and the dispatch read.

    The first rule that matches wins: a response is legacy (only a legacy client answers
    a server's request); a request or notification whose ``params._meta`` holds the
    modern protocol version is modern; ``initialize`` without that claim is legacy;
    anything else is modern when the transport names a modern version beside the body
    (``transport_version``: HTTP's ``MCP-Protocol-Version``), else legacy (stdio names none).
    """
    if "method" not in message:
        return LEGACY
    if has_modern_claim(message.get("params")):
        return MODERN
    if message["method"] == "initialize":
        return LEGACY
    return MODERN if transport_version in MODERN_VERSIONS else LEGACY


def negotiate(requested: Any) -> str:
    """The version an ``initialize`` asking for ``requested`` is answered with.

    A supported legacy version is answered with itself; anything else (an older or
    newer revision, a modern version, an unknown string) with the latest legacy version,
    and the client decides whether it can go on. The caller refuses a missing or
    non-string version before asking.
    """
    return requested if requested in LEGACY_VERSIONS else LATEST_LEGACY_VERSION


def session_capabilities(capabilities: Mapping[str, Any], version: str) -> dict[str, Any]:
    """The client capabilities of an ``initialize``, as far as the negotiated ``version`` defines them.

    2025-03-26 has no elicitation; 2025-06-18 has form elicitation only (``{}``) and
    sampling without tools. Whatever the version does not define is left out, so asking
    for it fails the capability gate as a capability the client did not declare.
    """
    kept = {name: value for name, value in capabilities.items() if isinstance(name, str)}
    if version == "2025-03-26":
        kept.pop("elicitation", None)
        kept.pop("tasks", None)
        sampling = kept.get("sampling")
        if isinstance(sampling, dict):
            kept["sampling"] = {}
    elif version == "2025-06-18":
        if isinstance(kept.get("elicitation"), dict):
            kept["elicitation"] = {"form": {}}
        sampling = kept.get("sampling")
        if isinstance(sampling, dict):
            kept["sampling"] = {}
        kept.pop("tasks", None)
    return kept


# -- requests, per version ---------------------------------------------------------------------


class Unexpressible(MissingRequiredClientCapability):
    """A request the negotiated legacy version cannot carry: the same refusal as a capability the client lacks."""


def _unexpressible(version: str, what: str, mode: str) -> Unexpressible:
    return Unexpressible(
        f"The negotiated protocol version {version} cannot carry {what}; a client that negotiates "
        f"{LATEST_LEGACY_VERSION} can be asked it",
        {"elicitation": {mode: {}}},
    )


def _form_for(schema: dict[str, Any], version: str) -> dict[str, Any]:
    """A ``requestedSchema`` in the vocabulary of ``version`` (2025-06-18 is the older one)."""
    if version != "2025-06-18":
        return schema
    downgraded = copy.deepcopy(schema)
    for name, prop in downgraded.get("properties", {}).items():
        if prop.get("type") == "array":
            raise _unexpressible(version, f"the multi-select field {name!r}", "form")
        if "oneOf" in prop:
            options = prop.pop("oneOf")
            prop["enum"] = [option["const"] for option in options]
            prop["enumNames"] = [option.get("title", option["const"]) for option in options]
        if prop.get("type") != "boolean":
            prop.pop("default", None)  # 2025-06-18 gives defaults to booleans only
    return downgraded


def legacy_request(request: Request, version: str) -> tuple[str, dict[str, Any]]:
    """``(method, params)`` of the server-to-client request asking ``request`` on a ``version`` session.

    A form is downgraded to the vocabulary of ``version`` (titled choices become
    ``enum`` with ``enumNames``, defaults other than a boolean's are dropped on
    2025-06-18), and ``mode`` is sent only where the version defines it. A URL
    elicitation gets a fresh ``elicitationId`` (the handler-facing request has none).
    Raises :class:`~mrtr.core.errors.MissingRequiredClientCapability` for what the
    version cannot express (a multi-select field on 2025-06-18), before anything is sent.
    """
    if isinstance(request, Elicit):
        params: dict[str, Any] = {"message": request.message,
                                  "requestedSchema": _form_for(request.requested.schema, version)}
        if version == LATEST_LEGACY_VERSION:
            params = {"mode": "form", **params}
        return request.method, params
    if isinstance(request, ElicitURL):
        if version != LATEST_LEGACY_VERSION:
            raise _unexpressible(version, "URL-mode elicitation", "url")
        return request.method, {"mode": "url", "message": request.message, "url": request.url,
                                "elicitationId": str(uuid.uuid4())}
    if isinstance(request, (Sample, ListRoots)):
        return request.method, request.params()
    raise TypeError(f"no legacy form for {type(request).__name__}")


# -- the client's half: telling a server's era from its answers --------------------------------

MODERN_ERRORS: Final = frozenset({HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION})
"""Codes only a modern server answers with: the request reached a modern server that wants it sent otherwise."""

_ERA_METHODS = frozenset({"server/discover", "initialize"})


def is_modern_error(code: Any, method: str) -> bool:
    """Whether an error with ``code`` answering a request for ``method`` proves the server modern.

    ``-32601`` counts for any method but ``server/discover`` (every modern server serves
    it, so refusing it is the mark of a legacy one) and ``initialize`` (a modern server
    refuses it by era).
    """
    if code in MODERN_ERRORS:
        return True
    return code == METHOD_NOT_FOUND and method not in _ERA_METHODS


class InitializeResult(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    """A legacy server's answer to ``initialize`` (2025-11-25 ``InitializeResult``), as the client checks it."""

    protocol_version: str
    capabilities: dict[str, Any]
    server_info: Implementation
    instructions: str | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")
