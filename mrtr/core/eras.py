"""The two eras of MCP and the rule that tells their messages apart.

*Modern* protocol versions (2026-07-28 and later) carry the version, the client's
identity and its capabilities in every request's ``_meta``; *legacy* versions
(2025-11-25 and earlier) open a session with ``initialize`` and let the server send
requests of its own. A dual-era peer decides which era it faces from what it receives:

- a **request** is modern when its ``_meta`` claims a protocol version
  (:func:`modern_claim`): the ``io.modelcontextprotocol/`` prefix is reserved, so no
  legacy message carries that key (a bare ``_meta`` proves nothing: legacy requests put
  ``progressToken`` there);
- an **error** answering a client's request is modern evidence only when it is one
  the modern protocol defines for a request it could not serve as sent
  (:func:`is_modern_error`): header mismatch, a missing capability, an unsupported
  version, or an unknown method other than the two every modern server serves or
  refuses by era (``server/discover``, ``initialize``). Anything else a server answers
  before a session (legacy servers use ``-32601``, ``-32602``, ``-32600``, or nothing)
  says legacy; the rule never keys on one specific code.

It also holds the legacy handshake's result type, checked the way :mod:`mrtr.core.wire`
checks modern results. This module does no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from .errors import HEADER_MISMATCH, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION
from .wire import META_PROTOCOL_VERSION, PROTOCOL_VERSION, Implementation

__all__ = [
    "Era",
    "InitializeResult",
    "LATEST_LEGACY_VERSION",
    "LEGACY_VERSIONS",
    "MODERN_ERRORS",
    "MODERN_VERSIONS",
    "is_modern_error",
    "modern_claim",
]

MODERN_VERSIONS: Final = (PROTOCOL_VERSION,)
"""The modern versions this package speaks, newest first."""

LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
"""The handshake versions this package speaks, newest first."""

LATEST_LEGACY_VERSION: Final = LEGACY_VERSIONS[0]
"""What a legacy ``initialize`` asks for."""

MODERN_ERRORS: Final = frozenset({HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION})
"""Codes only a modern server answers with: the request reached a modern server that wants it sent otherwise."""

_ERA_METHODS = frozenset({"server/discover", "initialize"})


class Era(str, enum.Enum):
    """Which era a server speaks (the value is what logs and errors show)."""

    MODERN = "modern"
    LEGACY = "legacy"


def modern_claim(message: Mapping[str, Any]) -> str | None:
    """The protocol version a request's ``_meta`` claims, or ``None`` for a legacy (claim-less) request.

    A claim that is not a string is returned as ``None`` too: it is no modern request either.
    """
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    claim = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, Mapping) else None
    return claim if isinstance(claim, str) else None


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
    """A legacy server's answer to ``initialize`` (2025-11-25 ``InitializeResult``)."""

    protocol_version: str
    capabilities: dict[str, Any]
    server_info: Implementation
    instructions: str | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")
